import COpenSSL
import Glibc

/// An X.509 certificate; owns its `X509`.
public final class Certificate: @unchecked Sendable {
    // Sendable: the X509 is never mutated after parsing; OpenSSL's reads of it are thread-safe.
    let x509: OpaquePointer
    /// The DER bytes it was parsed from (or encodes to).
    public let der: [UInt8]

    /// Parses one DER certificate; trailing bytes are refused.
    public init(der: [UInt8]) throws(CryptoError) {
        guard !der.isEmpty, der.count < 1 << 20 else { throw .malformed("certificate size \(der.count)") }
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buf in
            var p: UnsafePointer<UInt8>? = buf.baseAddress
            let x = d2i_X509(nil, &p, buf.count)
            if let x, let p, p != buf.baseAddress! + buf.count {
                X509_free(x)
                return nil
            }
            return x
        }
        guard let parsed else {
            ERR_clear_error()
            throw .malformed("not a DER certificate")
        }
        x509 = parsed
        self.der = der
    }

    /// Takes ownership of an `X509` (its reference count already counts this owner).
    init(owning x: OpaquePointer) {
        x509 = x
        var out: UnsafeMutablePointer<UInt8>?
        let n = i2d_X509(x, &out)
        if n > 0, let out {
            der = Array(UnsafeBufferPointer(start: out, count: Int(n)))
            CRYPTO_free(out, nil, 0)
        } else {
            der = []
        }
    }

    deinit { X509_free(x509) }

    /// Reads a certificate file, DER or PEM.
    public static func load(path: String) throws(CryptoError) -> Certificate {
        guard let f = fopen(path, "rb") else { throw .malformed("cannot open \(path)") }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&chunk, 1, chunk.count, f)
            if n <= 0 { break }
            bytes.append(contentsOf: chunk[0..<n])
            if bytes.count > 1 << 20 { break }
        }
        fclose(f)
        return try parse(bytes)
    }

    /// DER, or the first PEM `CERTIFICATE` block.
    public static func parse(_ bytes: [UInt8]) throws(CryptoError) -> Certificate {
        if bytes.starts(with: Array("-----BEGIN".utf8)) || bytes.prefix(64).contains(UInt8(ascii: "-")) {
            let x: OpaquePointer? = bytes.withUnsafeBytes { raw in
                guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
                defer { BIO_free(bio) }
                return PEM_read_bio_X509(bio, nil, nil, nil)
            }
            if let x { return Certificate(owning: x) }
            ERR_clear_error()
        }
        return try Certificate(der: bytes)
    }

    /// Whether the certificate carries an extension with this dotted OID.
    public func hasExtension(oid: String) -> Bool {
        guard let obj = OBJ_txt2obj(oid, 1) else { return false }
        defer { ASN1_OBJECT_free(obj) }
        return X509_get_ext_by_OBJ(x509, obj, -1) >= 0
    }

    /// Validity start, seconds since 1970.
    public var notBefore: Int64 { Self.seconds(X509_get0_notBefore(x509)) }
    /// Validity end, seconds since 1970.
    public var notAfter: Int64 { Self.seconds(X509_get0_notAfter(x509)) }

    static func seconds(_ t: UnsafePointer<ASN1_TIME>?) -> Int64 {
        var tm = tm()
        guard let t, ASN1_TIME_to_tm(t, &tm) == 1 else { return 0 }
        return Int64(timegm(&tm))
    }

    /// The subject in OpenSSL's one-line form.
    public var subject: String {
        guard let name = X509_get_subject_name(x509), let line = X509_NAME_oneline(name, nil, 0) else { return "" }
        defer { CRYPTO_free(line, nil, 0) }
        return String(cString: line)
    }

    /// SHA-256 of the DER encoding (cache keys).
    public var fingerprint: [UInt8] { Digest.sha256(der) }

    /// The public key, for signature checks.
    public var publicKey: PublicKey? {
        guard let key = X509_get_pubkey(x509) else { return nil }
        return PublicKey(owning: key)
    }
}

/// A public key; owns its `EVP_PKEY`.
public final class PublicKey: @unchecked Sendable {
    // Sendable: EVP_PKEY is immutable here. Verification contexts are either fresh per call or taken
    // from `contexts` under its lock, so no context is used by two threads at once.
    let pkey: OpaquePointer
    /// Verify-initialised EVP_PKEY_CTXs, reused: OpenSSL 3 fetches algorithms on every init, which cost
    /// more than a fifth of an ES256 check.
    private let contexts = ContextPool { EVP_PKEY_CTX_free($0) }

    init(owning pkey: OpaquePointer) { self.pkey = pkey }
    deinit {
        EVP_PKEY_free(pkey)
    }

    /// Verifies a DER ECDSA/RSA signature over a SHA-256 digest with a pooled context.
    func verifyDigest(signatureDER: [UInt8], digest: [UInt8]) -> Bool {
        var ctx = contexts.take()
        if ctx == nil {
            guard let fresh = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else { return false }
            guard EVP_PKEY_verify_init(fresh) == 1 else {
                EVP_PKEY_CTX_free(fresh)
                ERR_clear_error()
                return false
            }
            ctx = fresh
        }
        let rc = EVP_PKEY_verify(ctx, signatureDER, signatureDER.count, digest, digest.count)
        if rc != 1 { ERR_clear_error() }
        if let ctx { contexts.give(ctx) }
        return rc == 1
    }

    /// True for an EC key on P-256 (what ES256 requires).
    public var isP256: Bool {
        EVP_PKEY_get_base_id(pkey) == EVP_PKEY_EC && EVP_PKEY_get_bits(pkey) == 256
    }

    /// Verifies a DER signature over `message` with SHA-256 (ECDSA or RSA PKCS#1 v1.5).
    public func verifySHA256(signatureDER: [UInt8], message: UnsafeRawBufferPointer) -> Bool {
        guard let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestVerifyInit(ctx, nil, EVP_sha256(), nil, pkey) == 1 else {
            ERR_clear_error()
            return false
        }
        let rc = signatureDER.withUnsafeBufferPointer { sig in
            EVP_DigestVerify(ctx, sig.baseAddress, sig.count, message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count)
        }
        if rc != 1 { ERR_clear_error() }
        return rc == 1
    }

    /// Verifies a JOSE ES256 signature: 64 bytes, r then s, over `message`.
    public func verifyES256(signature: [UInt8], message: UnsafeRawBufferPointer) -> Bool {
        guard signature.count == 64, isP256 else { return false }
        var digest = [UInt8](repeating: 0, count: 32)
        digest.withUnsafeMutableBufferPointer { Digest.sha256(message.baseAddress, message.count, into: $0.baseAddress!) }
        return verifyDigest(signatureDER: ECDSASignature.der(fromRaw: signature), digest: digest)
    }
}

/// Conversions between JOSE's fixed r||s and DER's ECDSA-Sig-Value.
public enum ECDSASignature {
    /// DER `SEQUENCE { INTEGER r, INTEGER s }` from 2n bytes of r||s.
    public static func der(fromRaw raw: [UInt8]) -> [UInt8] {
        let half = raw.count / 2
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var v = Array(bytes.drop { $0 == 0 })
            if v.isEmpty { v = [0] }
            if v[0] & 0x80 != 0 { v.insert(0, at: 0) }
            return [0x02, UInt8(v.count)] + v
        }
        let body = integer(raw[0..<half]) + integer(raw[half...])
        return [0x30, UInt8(body.count)] + body
    }

    /// r||s of `size` bytes each from a DER signature, or nil.
    public static func raw(fromDER der: [UInt8], size: Int = 32) -> [UInt8]? {
        guard der.count >= 8, der[0] == 0x30 else { return nil }
        var i = 2
        if der[1] & 0x80 != 0 { i = 2 + Int(der[1] & 0x7F) }
        var out: [UInt8] = []
        for _ in 0..<2 {
            guard i + 2 <= der.count, der[i] == 0x02 else { return nil }
            let len = Int(der[i + 1])
            guard i + 2 + len <= der.count else { return nil }
            var v = Array(der[(i + 2)..<(i + 2 + len)].drop { $0 == 0 })
            guard v.count <= size else { return nil }
            v = Array(repeating: 0, count: size - v.count) + v
            out += v
            i += 2 + len
        }
        return out
    }
}
