import Crypto
import Foundation
import ProtoWire
import Synchronization

/// Parsed JWS headers by their base64url text: every transaction from one signing leaf carries the
/// same ~3 KiB header, so its JSON is parsed once. Bounded; cleared when full.
private let headerCache = Mutex<[HeaderKey: (alg: String, x5c: [String], id: UInt64)]>([:])

/// A header's base64url text as a cache key: equal only when byte-equal, hashed on its length and last 128
/// bytes (the leaf certificate's signature, distinct per certificate) instead of all ~3 KiB of it.
private struct HeaderKey: Hashable {
    let bytes: [UInt8]
    static func == (a: HeaderKey, b: HeaderKey) -> Bool {
        a.bytes.count == b.bytes.count && a.bytes.withUnsafeBytes { x in b.bytes.withUnsafeBytes { y in memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0 } }
    }
    func hash(into hasher: inout Hasher) {
        hasher.combine(bytes.count)
        bytes.withUnsafeBytes { hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: $0[max(0, $0.count - 128)...])) }
    }
}

/// A compact JWS (`header.payload.signature`, base64url) as StoreKit 2 signs it.
public struct JWS: Sendable {
    public let algorithm: String
    /// The `x5c` chain as sent: standard base64 DER, leaf first.
    public let x5c: [String]
    public let payload: [UInt8]
    /// The bytes the signature covers: `header.payload` as sent.
    public let signingInput: [UInt8]
    public let signature: [UInt8]
    /// Identifies the header text (alg and x5c): the first 8 bytes of its SHA-256, the same for the same text in
    /// every parse (the parse cache may be cleared meanwhile: a counter re-numbered a header then, and a verifier's
    /// chain cache missed; two suites parsing at once in one process showed it). Verifiers key their chain caches on
    /// it. Equal ids for different headers would need a 64-bit collision, and could only make a JWS fail: the
    /// cached chain's leaf key must still verify its signature.
    public let headerID: UInt64

    /// The largest JWS accepted (real ones are about 3-5 KiB; notifications nest two).
    public static let maxBytes = 64 << 10

    /// The `headerID` that parsing `compact` would give, when its header is in the parse cache; nil otherwise.
    /// Reads the header text only (no base64, no JSON).
    public static func cachedHeaderID(_ compact: String) -> UInt64? {
        let utf8 = compact.utf8
        guard utf8.count <= maxBytes, let dot = utf8.firstIndex(of: UInt8(ascii: ".")) else { return nil }
        let key = HeaderKey(bytes: Array(utf8[..<dot]))
        return headerCache.withLock { $0[key]?.id }
    }

    public static func parse(_ compact: String) throws(VerificationFailure) -> JWS {
        let utf8 = Array(compact.utf8)
        guard !utf8.isEmpty else { throw .malformed("empty signed data") }
        guard utf8.count <= maxBytes else { throw .malformed("signed data larger than \(maxBytes) bytes") }
        // The dots, found with memchr (the generic split costs a witness call per byte).
        var dots: [Int] = []
        utf8.withUnsafeBytes { b in
            var from = 0
            while dots.count < 3, from < b.count, let hit = memchr(b.baseAddress! + from, Int32(UInt8(ascii: ".")), b.count - from) {
                let i = b.baseAddress!.distance(to: UnsafeRawPointer(hit))
                dots.append(i)
                from = i + 1
            }
        }
        guard dots.count == 2 else { throw .malformed("a JWS has three dot-separated parts, this has \(dots.count + 1)") }
        let parts = [utf8[0..<dots[0]], utf8[(dots[0] + 1)..<dots[1]], utf8[(dots[1] + 1)...]]
        for part in parts where part.isEmpty { throw .malformed("empty JWS part") }
        let decode = { (part: ArraySlice<UInt8>) in part.withUnsafeBytes { Base64.decode($0) } }
        guard let payload = decode(parts[1]), let signature = decode(parts[2]) else {
            throw .malformed("JWS parts are not base64url")
        }
        let headerText = HeaderKey(bytes: Array(parts[0]))
        let alg: String, x5c: [String], headerID: UInt64
        if let cached = headerCache.withLock({ $0[headerText] }) {
            (alg, x5c, headerID) = cached
        } else {
            guard let headerBytes = decode(parts[0]) else { throw .malformed("JWS parts are not base64url") }
            guard let header = (try? JSONSerialization.jsonObject(with: Data(headerBytes))) as? [String: Any] else {
                throw .malformed("JWS header is not a JSON object")
            }
            guard let a = header["alg"] as? String else { throw .malformed("JWS header has no alg") }
            guard let chain = header["x5c"] as? [Any] else { throw .malformed("JWS header has no x5c chain") }
            let strings = chain.compactMap { $0 as? String }
            guard strings.count == chain.count else { throw .malformed("x5c entries must be strings") }
            let id = Digest.sha256(Array(parts[0])).prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            (alg, x5c, headerID) = (a, strings, id)
            headerCache.withLock { cache in
                if cache.count >= 64 { cache.removeAll(keepingCapacity: true) }
                cache[headerText] = (a, strings, id)
            }
        }
        return JWS(
            algorithm: alg, x5c: x5c, payload: payload,
            signingInput: Array(utf8[0..<(parts[0].count + 1 + parts[1].count)]), signature: signature, headerID: headerID)
    }

    /// A character of a compact JWS: base64url or the dot between parts.
    @inline(__always)
    public static func isCompactCharacter(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z")) || (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z"))
            || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "-") || c == UInt8(ascii: "_")
            || c == UInt8(ascii: ".") || c == UInt8(ascii: "=")
    }

    /// Encodes bytes as unpadded base64url, in one pass over the bytes (mapping the standard encoding's
    /// Characters cost more than the ES256 signature of an offer JWS: bench/README.md).
    public static func base64URL(_ bytes: [UInt8]) -> String { Base64.encodeURL(bytes) }
}

/// Why signed data was refused; each maps to one ErrorInfo reason.
public enum VerificationFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not a JWS / not base64 PKCS#7 / cannot be decoded: RECEIPT_MALFORMED.
    case malformed(String)
    /// Signature, chain, marker OIDs or certificate dates: RECEIPT_UNTRUSTED.
    case untrusted(String)
    /// Bundle id or appAppleId not served: WRONG_APP.
    case wrongApp(String)
    /// The signed environment is not accepted: ENVIRONMENT_NOT_ALLOWED.
    case environmentNotAllowed(String)

    public var description: String {
        switch self {
        case .malformed(let m): "malformed: \(m)"
        case .untrusted(let m): "untrusted: \(m)"
        case .wrongApp(let m): "wrong app: \(m)"
        case .environmentNotAllowed(let m): "environment not allowed: \(m)"
        }
    }

    /// The metric label: `malformed`, `untrusted`, `wrong_app`, `environment`.
    public var kind: String {
        switch self {
        case .malformed: "malformed"
        case .untrusted: "untrusted"
        case .wrongApp: "wrong_app"
        case .environmentNotAllowed: "environment"
        }
    }
}
