public import ProtoWire

/// RFC 7515's compact serialization, `base64url(header).base64url(payload).base64url(signature)` without
/// padding: what StoreKit 2, Apple's API tokens, Google's push tokens and service-account assertions all are.
/// Which algorithm and key a part needs is the caller's: this type only splits, decodes and joins.
public enum CompactJWS {
    /// The three parts of a compact JWS, decoded.
    public struct Parts: Sendable {
        /// The protected header's JSON bytes.
        public let header: [UInt8]
        public let payload: [UInt8]
        public let signature: [UInt8]
        /// What the signature covers: `header.payload` as sent.
        public let signingInput: [UInt8]
    }

    /// Why `split` refused a text.
    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        case empty
        case tooLong(limit: Int)
        /// Not three dot-separated parts, or a part empty.
        case shape(parts: Int)
        case notBase64URL

        public var description: String {
            switch self {
            case .empty: "empty"
            case .tooLong(let limit): "longer than \(limit) bytes"
            case .shape(let parts): parts == 3 ? "an empty part" : "not a compact JWS (\(parts) dot-separated parts, not 3)"
            case .notBase64URL: "a part is not base64url"
            }
        }
    }

    /// Splits and decodes `text`, refused when it is longer than `maxBytes`.
    public static func split(_ text: String, maxBytes: Int) throws(Failure) -> Parts {
        let utf8 = Array(text.utf8)
        guard !utf8.isEmpty else { throw .empty }
        guard utf8.count <= maxBytes else { throw .tooLong(limit: maxBytes) }
        let pieces = utf8.split(separator: UInt8(ascii: "."), maxSplits: 3, omittingEmptySubsequences: false)
        guard pieces.count == 3 else { throw .shape(parts: pieces.count) }
        guard !pieces[0].isEmpty, !pieces[1].isEmpty, !pieces[2].isEmpty else { throw .shape(parts: 3) }
        func decode(_ part: ArraySlice<UInt8>) throws(Failure) -> [UInt8] {
            guard let bytes = part.withUnsafeBytes({ Base64.decode($0) }) else { throw .notBase64URL }
            return bytes
        }
        return Parts(
            header: try decode(pieces[0]), payload: try decode(pieces[1]), signature: try decode(pieces[2]),
            signingInput: Array(utf8[0..<(pieces[0].count + 1 + pieces[1].count)]))
    }

    /// `header.payload.signature`, each part unpadded base64url; `sign` signs the ASCII signing input.
    public static func join<E: Error>(header: [UInt8], payload: [UInt8], sign: ([UInt8]) throws(E) -> [UInt8]) throws(E) -> String {
        let input = Base64.encodeURL(header) + "." + Base64.encodeURL(payload)
        return input + "." + Base64.encodeURL(try sign(Array(input.utf8)))
    }

    /// A JWT header `{"alg":ALG,"kid":KID,"typ":"JWT"}` (sorted keys, as PyJWT writes it; no `kid` when empty).
    public static func jwtHeader(algorithm: String, keyID: String) -> [UInt8] {
        let kid = keyID.isEmpty ? "" : #""kid":"# + JSONString.quote(keyID) + ","
        return Array((#"{"alg":"# + JSONString.quote(algorithm) + "," + kid + #""typ":"JWT"}"#).utf8)
    }
}
