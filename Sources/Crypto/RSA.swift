import COpenSSL

// RS256 (RSASSA-PKCS1-v1_5 with SHA-256, RFC 7518 3.3): what Google's OAuth 2.0 service-account assertions and
// Pub/Sub push tokens are signed with. `signSHA256` and `verifySHA256` already do PKCS#1 v1.5 for an RSA key (it is
// OpenSSL's default padding); this file adds the RSA checks, keys from a JWK's `n` and `e`, and test keys.

extension PrivateKey {
    /// True for an RSA key (PKCS#1 v1.5 or PSS use); Google's service-account keys are RSA-2048.
    public var isRSA: Bool { EVP_PKEY_get_base_id(pkey) == EVP_PKEY_RSA }

    /// The key's size in bits.
    public var bits: Int { Int(EVP_PKEY_get_bits(pkey)) }

    /// A fresh RSA key of `bits` bits, exponent 65537 (tests; Google makes the service-account keys).
    public static func generateRSA(bits: Int = 2048) throws(CryptoError) -> PrivateKey {
        guard let ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_RSA, nil) else { throw .library("EVP_PKEY_CTX_new_id") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(ctx) == 1 else { throw .library(CryptoError.opensslMessage()) }
        // EVP_PKEY_CTX_set_rsa_keygen_bits is in rsa.h, which the shim's OPENSSL_NO_DEPRECATED keeps out: the
        // "bits" parameter is what it sets.
        var size = bits
        let set = "bits".withCString { name in
            withUnsafeMutablePointer(to: &size) { p in
                var params = [OSSL_PARAM_construct_size_t(name, p), OSSL_PARAM_construct_end()]
                return EVP_PKEY_CTX_set_params(ctx, &params)
            }
        }
        guard set == 1, EVP_PKEY_keygen(ctx, &key) == 1, let key else { throw .library(CryptoError.opensslMessage()) }
        return PrivateKey(owning: key)
    }

    /// A JOSE RS256 signature over `message`: PKCS#1 v1.5 with SHA-256, as many bytes as the modulus.
    public func signRS256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard isRSA else { throw .malformed("RS256 needs an RSA key") }
        return try signSHA256(message)
    }
}

extension PublicKey {
    /// True for an RSA key.
    public var isRSA: Bool { EVP_PKEY_get_base_id(pkey) == EVP_PKEY_RSA }

    /// The key's size in bits.
    public var bits: Int { Int(EVP_PKEY_get_bits(pkey)) }

    /// The RSA public key of a JWK (RFC 7518 6.3.1): `n` and `e`, unsigned big-endian, base64url.
    public static func rsa(jwkModulus n: String, exponent e: String) throws(CryptoError) -> PublicKey {
        guard let modulus = base64URLDecode(n), let exponent = base64URLDecode(e) else { throw .malformed("JWK n or e is not base64url") }
        return try rsa(modulus: modulus, exponent: exponent)
    }

    /// The RSA public key with this modulus and exponent (unsigned big-endian bytes).
    public static func rsa(modulus: [UInt8], exponent: [UInt8]) throws(CryptoError) -> PublicKey {
        let n = Array(modulus.drop { $0 == 0 })
        let e = Array(exponent.drop { $0 == 0 })
        guard n.count >= 64, n.count <= 2048, !e.isEmpty, e.count <= 8 else { throw .malformed("RSA modulus or exponent size") }
        // SubjectPublicKeyInfo { AlgorithmIdentifier { rsaEncryption, NULL }, BIT STRING { RSAPublicKey { n, e } } }.
        let rsaPublicKey = DER.sequence(DER.unsignedInteger(n) + DER.unsignedInteger(e))
        let algorithm = DER.sequence([0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01, 0x05, 0x00])
        let spki = DER.sequence(algorithm + DER.element(0x03, [0x00] + rsaPublicKey))
        let key: OpaquePointer? = spki.withUnsafeBufferPointer { buf in
            var p: UnsafePointer<UInt8>? = buf.baseAddress
            return d2i_PUBKEY(nil, &p, buf.count)
        }
        guard let key else {
            ERR_clear_error()
            throw .malformed("not an RSA public key")
        }
        return PublicKey(owning: key)
    }

    /// Verifies a JOSE RS256 signature over `message`: an RSA key of at least 2048 bits and a signature of
    /// exactly the modulus's size.
    public func verifyRS256(signature: [UInt8], message: [UInt8]) -> Bool {
        guard isRSA, bits >= 2048, signature.count == Int(EVP_PKEY_get_size(pkey)) else { return false }
        return message.withUnsafeBytes { verifySHA256(signatureDER: signature, message: $0) }
    }

    /// SubjectPublicKeyInfo PEM (`-----BEGIN PUBLIC KEY-----`), for tools such as `openssl dgst -verify`.
    public func pem() -> String {
        let bio = BIO_new(BIO_s_mem())!
        defer { BIO_free(bio) }
        PEM_write_bio_PUBKEY(bio, pkey)
        return PrivateKey.drain(bio)
    }

    /// Unpadded or padded base64url (or standard base64), as JWK members come.
    static func base64URLDecode(_ s: String) -> [UInt8]? {
        var text = Array(s.utf8).map { $0 == UInt8(ascii: "-") ? UInt8(ascii: "+") : ($0 == UInt8(ascii: "_") ? UInt8(ascii: "/") : $0) }
        while text.last == UInt8(ascii: "=") { text.removeLast() }
        guard !text.isEmpty, text.allSatisfy({ $0 < 128 }) else { return nil }
        while text.count % 4 != 0 { text.append(UInt8(ascii: "=")) }
        var out = [UInt8](repeating: 0, count: text.count / 4 * 3)
        let n = text.withUnsafeBufferPointer { EVP_DecodeBlock(&out, $0.baseAddress, Int32($0.count)) }
        guard n >= 0 else { return nil }
        let padding = text.suffix(2).filter { $0 == UInt8(ascii: "=") }.count
        return Array(out.prefix(Int(n) - padding))
    }
}

/// The few DER encodings an RSA SubjectPublicKeyInfo needs.
enum DER {
    static func element(_ tag: UInt8, _ body: [UInt8]) -> [UInt8] {
        var length: [UInt8]
        if body.count < 128 {
            length = [UInt8(body.count)]
        } else {
            var n = body.count
            length = []
            while n > 0 {
                length.insert(UInt8(n & 0xFF), at: 0)
                n >>= 8
            }
            length.insert(0x80 | UInt8(length.count), at: 0)
        }
        return [tag] + length + body
    }

    static func sequence(_ body: [UInt8]) -> [UInt8] { element(0x30, body) }

    /// A non-negative INTEGER from unsigned big-endian bytes (a 0 byte first when the top bit is set).
    static func unsignedInteger(_ bytes: [UInt8]) -> [UInt8] {
        element(0x02, (bytes.first ?? 0x80) & 0x80 != 0 ? [0] + bytes : bytes)
    }
}
