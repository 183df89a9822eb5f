import COpenSSL

/// Why a cryptographic operation failed: the input (malformed, untrusted) or the library.
public enum CryptoError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bytes are not a certificate, key, signature or CMS structure.
    case malformed(String)
    /// A signature or chain did not verify.
    case untrusted(String)
    /// OpenSSL failed in a way the input does not explain.
    case library(String)

    public var description: String {
        switch self {
        case .malformed(let m): "malformed: \(m)"
        case .untrusted(let m): "untrusted: \(m)"
        case .library(let m): "openssl: \(m)"
        }
    }

    /// The newest OpenSSL error as text; the error queue is cleared.
    static func opensslMessage() -> String {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return "unknown error" }
        var buf = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buf, buf.count)
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// SHA-256 and SHA-1 digests.
public enum Digest {
    /// SHA-256, fetched once. OpenSSL 3's one-shot `SHA256()` looks the algorithm up by name in the provider
    /// store on every call: about 6,000 instructions, paid twice per App Store notification (callgrind).
    /// Sendable in practice: a fetched EVP_MD is immutable and OpenSSL allows it on any thread.
    nonisolated(unsafe) static let sha256MD: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

    /// Digest contexts kept for reuse: initialising a context that already holds SHA-256 only resets it.
    private static let contexts = ContextPool { EVP_MD_CTX_free($0) }

    /// SHA-256 of `count` bytes at `bytes` into `out` (32 bytes).
    static func sha256(_ bytes: UnsafeRawPointer?, _ count: Int, into out: UnsafeMutablePointer<UInt8>) {
        if let md = sha256MD, let ctx = contexts.take() ?? EVP_MD_CTX_new() {
            var length: UInt32 = 0
            if EVP_DigestInit_ex(ctx, md, nil) == 1, EVP_DigestUpdate(ctx, bytes, count) == 1, EVP_DigestFinal_ex(ctx, out, &length) == 1 {
                contexts.give(ctx)
                return
            }
            EVP_MD_CTX_free(ctx)
            ERR_clear_error()
        }
        _ = SHA256(bytes?.assumingMemoryBound(to: UInt8.self), count, out)  // only when OpenSSL failed above
    }

    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBufferPointer { b in out.withUnsafeMutableBufferPointer { sha256(b.baseAddress, b.count, into: $0.baseAddress!) } }
        return out
    }

    /// HMAC-SHA256 of `message` under `key` (webhook signatures).
    public static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length = 0
        let ok = key.withUnsafeBytes { k in
            message.withUnsafeBufferPointer { m in
                out.withUnsafeMutableBufferPointer { o in
                    EVP_Q_mac(nil, "HMAC", nil, "SHA256", nil, k.baseAddress, k.count, m.baseAddress, m.count, o.baseAddress, 32, &length) != nil
                }
            }
        }
        precondition(ok && length == 32, "HMAC-SHA256 failed: \(ok) \(length)")
        return out
    }

    public static func sha1(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 20)
        bytes.withUnsafeBufferPointer { _ = SHA1($0.baseAddress, $0.count, &out) }
        return out
    }

    /// Lowercase hex.
    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
