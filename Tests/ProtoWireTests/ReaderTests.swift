import BillingAPI
import ProtoWire
import Testing
import TestSupport

@Suite("Wire reader limits and malformed input")
struct ReaderTests {
    @Test("inputs cut inside a field throw; cut between fields decode", arguments: 1..<40)
    func truncated(_ cut: Int) {
        var r = CreateOrderRequest()
        r.accountID = "acct-42"; r.productID = "com.example.premium"; r.quantity = 3
        let bytes = r.encoded()
        guard cut < bytes.count else { return }
        // Field ends: account_id (2 + 7), product_id (2 + 19), quantity (2).
        let boundaries: Set<Int> = [9, 30]
        if boundaries.contains(cut) {
            #expect(throws: Never.self) { try CreateOrderRequest(decoding: Array(bytes[..<cut])) }
        } else {
            #expect(throws: WireError.self) { try CreateOrderRequest(decoding: Array(bytes[..<cut])) }
        }
    }

    @Test("a length beyond the input is refused before allocating")
    func hugeLength() {
        // field 1, length-delimited, length 2^62.
        let bytes: [UInt8] = [0x0A, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40]
        #expect(throws: WireError.lengthTooLarge(1 << 62)) { try CreateOrderRequest(decoding: bytes) }
    }

    @Test("the per-field limit applies")
    func fieldLimit() {
        var r = CreateOrderRequest()
        r.accountID = String(repeating: "x", count: 100)
        #expect(throws: WireError.lengthTooLarge(100)) {
            try CreateOrderRequest(decoding: r.encoded(), limits: DecodingLimits(maxDepth: 8, maxFieldBytes: 99))
        }
    }

    @Test("an eleven-byte varint is malformed")
    func longVarint() {
        let bytes: [UInt8] = [0x20] + Array(repeating: 0xFF, count: 10) + [0x01]
        #expect(throws: WireError.malformedVarint) { try CreateOrderRequest(decoding: bytes) }
    }

    @Test("field number 0 and groups are refused")
    func badTags() {
        #expect(throws: WireError.invalidFieldNumber(0)) { try CreateOrderRequest(decoding: [0x00, 0x01]) }
        #expect(throws: WireError.invalidWireType(3)) { try CreateOrderRequest(decoding: [0x0B]) }
        #expect(throws: WireError.invalidWireType(7)) { try CreateOrderRequest(decoding: [0x0F]) }
    }

    @Test("a known field with the wrong wire type is refused")
    func wrongWireType() {
        #expect(throws: WireError.wrongWireType(field: 1)) { try CreateOrderRequest(decoding: [0x08, 0x01]) }
    }

    @Test("strings must be UTF-8")
    func invalidUTF8() throws {
        #expect(throws: WireError.invalidUTF8(field: 1)) { try CreateOrderRequest(decoding: [0x0A, 0x02, 0xC3, 0x28]) }
        // A bad byte after 8 ASCII bytes (past the word-at-a-time ASCII check's first word), and a lone high byte at the end.
        #expect(throws: WireError.invalidUTF8(field: 1)) { try CreateOrderRequest(decoding: [0x0A, 0x09] + Array("abcdefgh".utf8) + [0xFF]) }
        #expect(throws: WireError.invalidUTF8(field: 1)) { try CreateOrderRequest(decoding: [0x0A, 0x01, 0x80]) }
        // ASCII and valid multi-byte text both come back as sent.
        let text = "acct-é-中-🙂"
        let encoded = Array(text.utf8)
        #expect(try CreateOrderRequest(decoding: [0x0A, UInt8(encoded.count)] + encoded).accountID == text)
        #expect(try CreateOrderRequest(decoding: [0x0A, 0x0B] + Array("plain-ascii".utf8)).accountID == "plain-ascii")
    }

    @Test("int32 values outside 32 bits are refused")
    func int32Range() {
        // quantity = 2^40
        let bytes: [UInt8] = [0x20, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20]
        #expect(throws: WireError.valueOutOfRange(field: 4)) { try CreateOrderRequest(decoding: bytes) }
    }

    @Test("nesting deeper than the limit is refused")
    func depth() {
        // Inner messages nested through field 16 of WireAll are one level; Status > Any is two.
        var all = WireAll()
        all.inner = Inner(name: "x")
        #expect(throws: WireError.tooDeep) { try WireAll(decoding: all.encoded(), limits: DecodingLimits(maxDepth: 0)) }
        #expect(throws: Never.self) { try WireAll(decoding: all.encoded(), limits: DecodingLimits(maxDepth: 1)) }
    }

    @Test("packed and unpacked repeated varints both decode")
    func packedOrNot() throws {
        // field 17 unpacked: 1, then 2; then packed [3, 4].
        let bytes: [UInt8] = [0x88, 0x01, 0x01, 0x88, 0x01, 0x02, 0x8A, 0x01, 0x02, 0x03, 0x04]
        #expect(try WireAll(decoding: bytes).packed == [1, 2, 3, 4])
    }

    @Test("encodedSize is exact for random messages", arguments: 0..<50)
    func sizes(_ seed: Int) {
        var rng = SplitMix(seed: UInt64(seed) &+ 0x9E37_79B9_7F4A_7C15)
        var all = WireAll()
        all.i64 = Int64(bitPattern: rng.next())
        all.s64 = Int64(bitPattern: rng.next())
        all.u64 = rng.next() >> (rng.next() % 64)
        all.s = String(repeating: "é", count: Int(rng.next() % 200))
        all.packed = (0..<Int(rng.next() % 20)).map { _ in Int32(truncatingIfNeeded: rng.next()) }
        all.labels = Dictionary(uniqueKeysWithValues: (0..<Int(rng.next() % 5)).map { ("k\($0)", "v\($0)") })
        let bytes = all.encoded()
        #expect(bytes.count == all.encodedSize)
        #expect((try? WireAll(decoding: bytes)) == all)
    }
}
