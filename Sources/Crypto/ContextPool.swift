import Synchronization

/// OpenSSL contexts (EVP_PKEY_CTX, EVP_MD_CTX) kept for reuse across calls and threads: OpenSSL 3 sets up
/// provider state on every fresh context, which reusing one skips. A context is in the pool or in one
/// caller's hands, never both. Addresses are kept as integers so the pool is Sendable.
final class ContextPool: Sendable {
    private let contexts = Mutex<[UInt]>([])
    private let limit: Int
    private let free: @Sendable (OpaquePointer) -> Void

    init(limit: Int = 64, free: @escaping @Sendable (OpaquePointer) -> Void) {
        self.limit = limit
        self.free = free
    }

    deinit {
        for address in contexts.withLock({ $0 }) {
            if let ctx = OpaquePointer(bitPattern: address) { free(ctx) }
        }
    }

    /// A pooled context, or nil when none is free.
    func take() -> OpaquePointer? {
        contexts.withLock { $0.popLast() }.flatMap { OpaquePointer(bitPattern: $0) }
    }

    /// Gives `ctx` back; past the limit it is freed.
    func give(_ ctx: OpaquePointer) {
        let address = UInt(bitPattern: ctx)
        let kept = contexts.withLock { pool -> Bool in
            guard pool.count < limit else { return false }
            pool.append(address)
            return true
        }
        if !kept { free(ctx) }
    }
}
