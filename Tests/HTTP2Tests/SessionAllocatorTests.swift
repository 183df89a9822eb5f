import CNGHTTP2
@testable import HTTP2
import Testing

/// nghttp2's allocations go through a per-session block cache (Sources/CNGHTTP2/shim.h).
@Suite("nghttp2 block cache")
struct SessionAllocatorTests {
    @Test("size classes: 64 bytes and below share class 0, each class doubles, over 2048 bytes is large")
    func classes() {
        #expect(billing_h2_class_of(0) == 0 && billing_h2_class_of(1) == 0 && billing_h2_class_of(64) == 0)
        #expect(billing_h2_class_of(65) == 1 && billing_h2_class_of(128) == 1)
        #expect(billing_h2_class_of(129) == 2 && billing_h2_class_of(256) == 2)
        #expect(billing_h2_class_of(1025) == 5 && billing_h2_class_of(2048) == 5)
        #expect(billing_h2_class_of(2049) == BILLING_H2_POOL_LARGE)
        // Every size fits its class.
        for size in 0...2048 {
            let c = billing_h2_class_of(size)
            #expect(billing_h2_class_bytes(c) >= size)
            if c > 0 { #expect(billing_h2_class_bytes(c - 1) < size) }
        }
    }

    @Test("a freed block is handed out again; contents survive realloc; calloc zeroes; large blocks are not cached")
    func reuse() throws {
        let pool = try #require(billing_h2_pool_new())
        defer { billing_h2_pool_free(pool) }
        let user = UnsafeMutableRawPointer(pool)
        // Not caching yet (no request seen): a freed block goes back to malloc.
        billing_h2_pool_release(billing_h2_pool_malloc(100, user), user)
        #expect(billing_h2_pool_cached(pool) == 0)
        pool.pointee.caching = 1
        let a = try #require(billing_h2_pool_malloc(100, user))
        #expect(Int(bitPattern: a) % 16 == 0)
        billing_h2_pool_release(a, user)
        #expect(billing_h2_pool_cached(pool) == 128)
        let b = try #require(billing_h2_pool_malloc(120, user))
        #expect(b == a)
        #expect(pool.pointee.reused == 1 && pool.pointee.fresh == 2)

        // Growing within the class keeps the block; beyond it copies.
        let bytes = b.assumingMemoryBound(to: UInt8.self)
        for i in 0..<120 { bytes[i] = UInt8(i) }
        #expect(billing_h2_pool_realloc(b, 128, user) == b)
        let grown = try #require(billing_h2_pool_realloc(b, 5000, user)).assumingMemoryBound(to: UInt8.self)
        #expect((0..<120).allSatisfy { grown[$0] == UInt8($0) })
        let large = try #require(billing_h2_pool_realloc(grown, 9000, user)).assumingMemoryBound(to: UInt8.self)
        #expect((0..<120).allSatisfy { large[$0] == UInt8($0) })
        // A large block shrinking keeps its place.
        #expect(billing_h2_pool_realloc(large, 3000, user) == UnsafeMutableRawPointer(large))
        let cachedBefore = billing_h2_pool_cached(pool)
        billing_h2_pool_release(large, user)
        #expect(billing_h2_pool_cached(pool) == cachedBefore)

        let zeroed = try #require(billing_h2_pool_calloc(10, 30, user)).assumingMemoryBound(to: UInt8.self)
        #expect((0..<300).allSatisfy { zeroed[$0] == 0 })
        billing_h2_pool_release(zeroed, user)
        #expect(billing_h2_pool_calloc(Int.max, 2, user) == nil)
        billing_h2_pool_release(nil, user)
    }

    @Test("each class caches at most 16 KiB; trim gives everything back")
    func bounded() throws {
        let pool = try #require(billing_h2_pool_new())
        defer { billing_h2_pool_free(pool) }
        pool.pointee.caching = 1
        let user = UnsafeMutableRawPointer(pool)
        let blocks = (0..<200).map { _ in billing_h2_pool_malloc(200, user) }
        for block in blocks { billing_h2_pool_release(block, user) }
        #expect(billing_h2_pool_cached(pool) == 16 * 1024)
        let small = (0..<300).map { _ in billing_h2_pool_malloc(10, user) }
        for block in small { billing_h2_pool_release(block, user) }
        #expect(billing_h2_pool_cached(pool) == 32 * 1024)
        billing_h2_pool_trim(pool)
        #expect(billing_h2_pool_cached(pool) == 0)
        // Trimmed, it caches nothing until caching is set again (the session's next request).
        billing_h2_pool_release(billing_h2_pool_malloc(10, user), user)
        #expect(billing_h2_pool_cached(pool) == 0)
    }
}
