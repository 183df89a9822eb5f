import COpenSSL

/// Configured root certificates, and chain checks against them at a chosen time.
///
/// Never trusts a root carried in the data: chains are built from the leaf and
/// the given intermediates up to one of these roots only.
public final class TrustAnchors: @unchecked Sendable {
    // Sendable: the X509_STORE is filled in init and only read afterwards; OpenSSL locks
    // its internal lookups. Per-call state (time, chain) lives in a fresh X509_STORE_CTX.
    public let roots: [Certificate]
    private let store: OpaquePointer

    public init(roots: [Certificate]) {
        self.roots = roots
        store = TrustAnchors.makeStore(roots)
    }

    deinit { X509_STORE_free(store) }

    static func makeStore(_ roots: [Certificate]) -> OpaquePointer {
        let store = X509_STORE_new()!
        for root in roots { X509_STORE_add_cert(store, root.x509) }
        return store
    }

    /// Builds and verifies `leaf` <- `intermediates` <- a configured root, valid at `time`
    /// (seconds since 1970). Returns the chain, leaf first, root last.
    public func verify(leaf: Certificate, intermediates: [Certificate], at time: Int64) -> Result<[Certificate], CryptoError> {
        guard !roots.isEmpty else { return .failure(.untrusted("no trust roots configured")) }
        guard let ctx = X509_STORE_CTX_new() else { return .failure(.library("X509_STORE_CTX_new")) }
        defer { X509_STORE_CTX_free(ctx) }
        let untrusted = copenssl_sk_x509_new()
        defer { copenssl_sk_x509_free(untrusted) }
        for c in intermediates { _ = copenssl_sk_x509_push(untrusted, c.x509) }
        guard X509_STORE_CTX_init(ctx, store, leaf.x509, untrusted) == 1 else {
            return .failure(.library(CryptoError.opensslMessage()))
        }
        X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(ctx), time_t(time))
        guard X509_verify_cert(ctx) == 1 else {
            let err = X509_STORE_CTX_get_error(ctx)
            ERR_clear_error()
            return .failure(.untrusted(String(cString: X509_verify_cert_error_string(Int(err)))))
        }
        var chain: [Certificate] = []
        if let stack = X509_STORE_CTX_get0_chain(ctx) {
            for i in 0..<copenssl_sk_x509_num(stack) {
                if let x = copenssl_sk_x509_value(stack, i) {
                    X509_up_ref(x)
                    chain.append(Certificate(owning: x))
                }
            }
        }
        return .success(chain)
    }
}
