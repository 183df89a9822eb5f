import COpenSSL

/// A CMS / PKCS#7 SignedData message (DER or BER); owns its `CMS_ContentInfo`.
public final class SignedMessage {
    private let cms: OpaquePointer

    /// Parses DER or BER (indefinite lengths, constructed OCTET STRINGs).
    public init(der: [UInt8]) throws(CryptoError) {
        guard !der.isEmpty, der.count < 16 << 20 else { throw .malformed("CMS size \(der.count)") }
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buf in
            var p: UnsafePointer<UInt8>? = buf.baseAddress
            return d2i_CMS_ContentInfo(nil, &p, buf.count)
        }
        guard let parsed else {
            ERR_clear_error()
            throw .malformed("not a PKCS#7 / CMS structure")
        }
        guard let type = CMS_get0_type(parsed), OBJ_obj2nid(type) == NID_pkcs7_signed else {
            CMS_ContentInfo_free(parsed)
            throw .malformed("not PKCS#7 SignedData")
        }
        cms = parsed
    }

    deinit { CMS_ContentInfo_free(cms) }

    /// The signed content (the receipt payload), or nil when detached or absent.
    public var content: [UInt8]? {
        guard let pp = CMS_get0_content(cms), let octets = pp.pointee else { return nil }
        let n = Int(ASN1_STRING_length(octets))
        guard n > 0, let data = ASN1_STRING_get0_data(octets) else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: n))
    }

    /// The certificates embedded in the message.
    public var certificates: [Certificate] {
        guard let stack = CMS_get1_certs(cms) else { return [] }
        defer { copenssl_sk_x509_free(stack) }
        var out: [Certificate] = []
        for i in 0..<copenssl_sk_x509_num(stack) {
            if let x = copenssl_sk_x509_value(stack, i) { out.append(Certificate(owning: x)) }
        }
        return out
    }

    /// Checks the signature and the signer's chain to `anchors` at `time` (seconds);
    /// answers the signing certificate.
    public func verify(anchors: TrustAnchors, at time: Int64) -> Result<Certificate, CryptoError> {
        guard !anchors.roots.isEmpty else { return .failure(.untrusted("no trust roots configured")) }
        // A store per call: CMS_verify reads the time from the store's own parameters.
        let store = TrustAnchors.makeStore(anchors.roots)
        defer { X509_STORE_free(store) }
        let param = X509_STORE_get0_param(store)
        X509_VERIFY_PARAM_set_time(param, time_t(time))
        X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_ANY)
        let out = BIO_new(BIO_s_mem())
        defer { BIO_free(out) }
        guard CMS_verify(cms, nil, store, nil, out, UInt32(CMS_BINARY)) == 1 else {
            let message = CryptoError.opensslMessage()
            return .failure(.untrusted(message))
        }
        guard let signers = CMS_get0_signers(cms), copenssl_sk_x509_num(signers) >= 1,
            let signer = copenssl_sk_x509_value(signers, 0)
        else {
            return .failure(.untrusted("no signer certificate"))
        }
        defer { copenssl_sk_x509_free(signers) }
        X509_up_ref(signer)
        return .success(Certificate(owning: signer))
    }
}
