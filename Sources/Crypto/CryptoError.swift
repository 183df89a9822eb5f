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
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBufferPointer { _ = SHA256($0.baseAddress, $0.count, &out) }
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
