import COpenSSL
import Glibc

/// A private key (the local test store's, an App Store Connect `.p8` key); owns its `EVP_PKEY`.
public final class PrivateKey: @unchecked Sendable {
    // Sendable: the key is immutable; each signature uses its own EVP_MD_CTX, or an EVP_PKEY_CTX taken from
    // `signContexts` under its lock, so no context is used by two threads at once.
    let pkey: OpaquePointer
    /// Sign-initialised EVP_PKEY_CTXs for EC keys, reused: OpenSSL 3 fetches the digest and signature
    /// algorithms on every `EVP_DigestSignInit`, which a reused context skips (as `PublicKey` does for verifies).
    private let signContexts = ContextPool { EVP_PKEY_CTX_free($0) }

    init(owning pkey: OpaquePointer) { self.pkey = pkey }
    deinit { EVP_PKEY_free(pkey) }

    /// True for an EC key on P-256 (prime256v1), the only key ES256 and Apple's In-App Purchase keys use.
    public var isP256: Bool {
        guard EVP_PKEY_get_base_id(pkey) == EVP_PKEY_EC else { return false }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(pkey, &name, name.count, &length) == 1 else {
            ERR_clear_error()
            return false
        }
        return String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) == "prime256v1"
    }

    /// The public half, for checking this key's signatures.
    public var publicKey: PublicKey {
        EVP_PKEY_up_ref(pkey)
        return PublicKey(owning: pkey)
    }

    /// A fresh EC P-256 key.
    public static func generateP256() throws(CryptoError) -> PrivateKey {
        guard let ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nil) else { throw .library("EVP_PKEY_CTX_new_id") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_CTX_set_ec_paramgen_curve_nid(ctx, NID_X9_62_prime256v1) == 1,
            EVP_PKEY_keygen(ctx, &key) == 1, let key
        else {
            throw .library(CryptoError.opensslMessage())
        }
        return PrivateKey(owning: key)
    }

    /// Reads a PEM private key (PKCS#8 or traditional).
    public static func parsePEM(_ pem: [UInt8]) throws(CryptoError) -> PrivateKey {
        let key: OpaquePointer? = pem.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let key else {
            ERR_clear_error()
            throw .malformed("not a PEM private key")
        }
        return PrivateKey(owning: key)
    }

    /// PKCS#8 PEM.
    public func pem() -> String {
        let bio = BIO_new(BIO_s_mem())!
        defer { BIO_free(bio) }
        PEM_write_bio_PrivateKey(bio, pkey, nil, nil, 0, nil, nil)
        return Self.drain(bio)
    }

    static func drain(_ bio: OpaquePointer) -> String {
        var p: UnsafeMutablePointer<CChar>?
        let n = copenssl_bio_mem_data(bio, &p)
        guard n > 0, let p else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: p, count: n), as: UTF8.self)
    }

    /// A DER signature over `message` with SHA-256.
    public func signSHA256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        if EVP_PKEY_get_base_id(pkey) == EVP_PKEY_EC { return try signDigestECDSA(Digest.sha256(message)) }
        guard let ctx = EVP_MD_CTX_new() else { throw .library("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, pkey) == 1 else { throw .library(CryptoError.opensslMessage()) }
        var length = 0
        guard message.withUnsafeBufferPointer({ EVP_DigestSign(ctx, nil, &length, $0.baseAddress, $0.count) }) == 1 else {
            throw .library(CryptoError.opensslMessage())
        }
        var sig = [UInt8](repeating: 0, count: length)
        guard message.withUnsafeBufferPointer({ EVP_DigestSign(ctx, &sig, &length, $0.baseAddress, $0.count) }) == 1 else {
            throw .library(CryptoError.opensslMessage())
        }
        return Array(sig[0..<length])
    }

    /// ECDSA over a digest already made, with a pooled context: the DER signature.
    private func signDigestECDSA(_ digest: [UInt8]) throws(CryptoError) -> [UInt8] {
        var ctx = signContexts.take()
        if ctx == nil {
            guard let fresh = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else { throw .library(CryptoError.opensslMessage()) }
            guard EVP_PKEY_sign_init(fresh) == 1 else {
                EVP_PKEY_CTX_free(fresh)
                throw .library(CryptoError.opensslMessage())
            }
            ctx = fresh
        }
        // The largest DER ECDSA-Sig-Value for this key; the signature is cut to what was written.
        var length = Int(EVP_PKEY_get_size(pkey))
        var sig = [UInt8](repeating: 0, count: max(length, 1))
        let rc = EVP_PKEY_sign(ctx, &sig, &length, digest, digest.count)
        guard rc == 1 else {
            EVP_PKEY_CTX_free(ctx)
            throw .library(CryptoError.opensslMessage())
        }
        if let ctx { signContexts.give(ctx) }
        return Array(sig[0..<length])
    }

    /// A JOSE ES256 signature: r||s, 64 bytes.
    public func signES256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let raw = ECDSASignature.raw(fromDER: try signSHA256(message)) else { throw .library("bad ECDSA signature") }
        return raw
    }
}

/// Issues certificates for the local test store (a CA, an intermediate and a leaf with Apple's marker OIDs).
public enum CertificateIssuer {
    /// Who signs: nil for self-signed.
    public struct Issuer {
        public var certificate: Certificate
        public var key: PrivateKey
        public init(certificate: Certificate, key: PrivateKey) {
            self.certificate = certificate
            self.key = key
        }
    }

    /// A certificate for `key`'s public half, valid from `notBefore` to `notAfter` (seconds since 1970).
    public static func issue(
        commonName: String, organization: String, serial: Int, key: PrivateKey, issuer: Issuer?,
        isCA: Bool, markerOIDs: [String], notBefore: Int64, notAfter: Int64
    ) throws(CryptoError) -> Certificate {
        guard let x = X509_new() else { throw .library("X509_new") }
        var owned = true
        defer { if owned { X509_free(x) } }
        X509_set_version(x, 2)
        ASN1_INTEGER_set(X509_get_serialNumber(x), serial)
        ASN1_TIME_set(X509_getm_notBefore(x), time_t(notBefore))
        ASN1_TIME_set(X509_getm_notAfter(x), time_t(notAfter))
        X509_set_pubkey(x, key.pkey)
        let name = X509_get_subject_name(x)
        X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, organization, -1, -1, 0)
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, commonName, -1, -1, 0)
        X509_set_issuer_name(x, issuer.map { X509_get_subject_name($0.certificate.x509) } ?? name)

        var v3 = X509V3_CTX()
        X509V3_set_ctx(&v3, issuer?.certificate.x509 ?? x, x, nil, nil, 0)
        func add(_ nid: Int32, _ value: String) throws(CryptoError) {
            guard let ext = X509V3_EXT_conf_nid(nil, &v3, nid, value) else { throw .library(CryptoError.opensslMessage()) }
            X509_add_ext(x, ext, -1)
            X509_EXTENSION_free(ext)
        }
        try add(NID_basic_constraints, isCA ? "critical,CA:TRUE" : "critical,CA:FALSE")
        try add(NID_key_usage, isCA ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature")
        try add(NID_subject_key_identifier, "hash")
        if issuer != nil { try add(NID_authority_key_identifier, "keyid:always") }
        for oid in markerOIDs {
            // Apple's marker extensions hold an ASN.1 NULL.
            guard let obj = OBJ_txt2obj(oid, 1), let value = ASN1_OCTET_STRING_new() else { throw .library("OBJ_txt2obj") }
            let null: [UInt8] = [0x05, 0x00]
            ASN1_OCTET_STRING_set(value, null, 2)
            let ext = X509_EXTENSION_create_by_OBJ(nil, obj, 0, value)
            X509_add_ext(x, ext, -1)
            X509_EXTENSION_free(ext)
            ASN1_OCTET_STRING_free(value)
            ASN1_OBJECT_free(obj)
        }
        guard X509_sign(x, (issuer?.key ?? key).pkey, EVP_sha256()) > 0 else { throw .library(CryptoError.opensslMessage()) }
        owned = false
        return Certificate(owning: x)
    }

    /// PEM text of a certificate.
    public static func pem(_ certificate: Certificate) -> String {
        let bio = BIO_new(BIO_s_mem())!
        defer { BIO_free(bio) }
        PEM_write_bio_X509(bio, certificate.x509)
        return PrivateKey.drain(bio)
    }
}

/// CMS SignedData for test-store app receipts: content embedded, no signed attributes (like Apple's).
public enum ReceiptSigner {
    public static func sign(content: [UInt8], certificate: Certificate, key: PrivateKey, chain: [Certificate]) throws(CryptoError) -> [UInt8] {
        let extra = copenssl_sk_x509_new()
        defer { copenssl_sk_x509_free(extra) }
        for c in chain { _ = copenssl_sk_x509_push(extra, c.x509) }
        let signed: OpaquePointer? = content.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return CMS_sign(certificate.x509, key.pkey, extra, bio, UInt32(CMS_BINARY | CMS_NOATTR | CMS_NOSMIMECAP))
        }
        guard let signed else { throw .library(CryptoError.opensslMessage()) }
        defer { CMS_ContentInfo_free(signed) }
        var out: UnsafeMutablePointer<UInt8>?
        let n = i2d_CMS_ContentInfo(signed, &out)
        guard n > 0, let out else { throw .library("i2d_CMS_ContentInfo") }
        defer { CRYPTO_free(out, nil, 0) }
        return Array(UnsafeBufferPointer(start: out, count: Int(n)))
    }
}
