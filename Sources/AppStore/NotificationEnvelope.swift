import JOSE

/// The body App Store Server Notifications v2 are posted with: `{"signedPayload": "<JWS>"}`.
public enum NotificationEnvelope {
    /// The largest body accepted (CONFIG.md).
    public static let maxBytes = 64 << 10

    /// The signed payload, or nil when the body is not a JSON object with a string `signedPayload`
    /// (other fields are tolerated).
    public static func signedPayload(from body: [UInt8]) -> String? {
        guard body.count <= maxBytes else { return nil }
        // Apple's exact shape, `{"signedPayload":"<JWS>"}` with a JWS's plain characters, needs no parser.
        let prefix = Array(#"{"signedPayload":""#.utf8)
        if body.count > prefix.count + 2, body.starts(with: prefix), body[body.count - 2] == UInt8(ascii: "\""),
            body[body.count - 1] == UInt8(ascii: "}")
        {
            // Nothing to unescape: no quote, backslash or control byte inside (what else a JWS may not hold,
            // JWS.parse refuses when it decodes the parts).
            let plain = body.withUnsafeBufferPointer { b in
                ByteScan.firstSpecial(UnsafeBufferPointer(rebasing: b[..<(body.count - 2)]), from: prefix.count) == body.count - 2
            }
            if plain { return String(decoding: body[prefix.count..<(body.count - 2)], as: UTF8.self) }
        }
        guard case .object(let o)? = try? JSONReader.parse(body),
            case .string(let payload)? = o["signedPayload"]
        else { return nil }
        return payload
    }
}
