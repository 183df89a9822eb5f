/// The request pseudo-header fields, as bits of `ServerStream.pseudoFields`.
enum PseudoField {
    static let method: UInt8 = 1, scheme: UInt8 = 2, path: UInt8 = 4, authority: UInt8 = 8
    /// What every request but CONNECT carries (RFC 9113 8.3.1); gRPC never uses CONNECT.
    static let required: UInt8 = method | scheme | path
}

/// RFC 9113 8.2-8.3 for one request field, as nghttp2's HTTP checks would apply them, with one difference
/// taken from grpc-go: connection-specific fields (`connection: keep-alive` and the like) are skipped, not
/// a reason to reset the stream. Pure: tested directly (RequestFieldCheckTests).
enum RequestFieldCheck {
    enum Verdict: Equatable {
        /// A field to read.
        case use
        /// Not an error, not read: a connection-specific field, or a name that is not a lowercase token
        /// (nghttp2 ignores those too).
        case skip
        /// The request is malformed: RST_STREAM PROTOCOL_ERROR.
        case malformed
    }

    static func check(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, trailer: Bool,
                      stream: ServerStream) -> Verdict {
        var pseudo = stream.pseudoFields
        var regular = stream.sawRegularField
        let verdict = check(name: name, value: value, trailer: trailer, pseudoFields: &pseudo, sawRegularField: &regular)
        stream.pseudoFields = pseudo
        stream.sawRegularField = regular
        return verdict
    }

    /// `pseudoFields` and `sawRegularField` carry what the stream's earlier fields were.
    static func check(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, trailer: Bool,
                      pseudoFields: inout UInt8, sawRegularField: inout Bool) -> Verdict {
        guard let first = name.first else { return .malformed }
        // A field value never holds NUL, CR or LF (8.2.1).
        for byte in value where byte == 0 || byte == 0x0A || byte == 0x0D { return .malformed }
        if first == UInt8(ascii: ":") {
            // Pseudo-header fields: in the request's header block only, before every regular field, once each (8.3).
            guard !trailer, !sawRegularField else { return .malformed }
            let bit: UInt8
            if equals(name, ":method") {
                bit = PseudoField.method
            } else if equals(name, ":scheme") {
                bit = PseudoField.scheme
            } else if equals(name, ":path") {
                guard !value.isEmpty else { return .malformed }
                bit = PseudoField.path
            } else if equals(name, ":authority") {
                bit = PseudoField.authority
            } else {
                return .malformed
            }
            guard pseudoFields & bit == 0 else { return .malformed }
            pseudoFields |= bit
            return .use
        }
        sawRegularField = true
        for byte in name where !isLowercaseTokenByte(byte) { return .skip }
        if equals(name, "connection") || equals(name, "keep-alive") || equals(name, "proxy-connection")
            || equals(name, "transfer-encoding") || equals(name, "upgrade") {
            return .skip
        }
        return .use
    }

    /// tchar (RFC 9110 5.6.2) without upper-case letters (RFC 9113 8.2.1).
    static func isLowercaseTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default: return false
        }
    }

    private static func equals(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        guard bytes.count == literal.utf8CodeUnitCount else { return false }
        let l = literal.utf8Start
        for i in 0..<bytes.count where bytes[i] != l[i] { return false }
        return true
    }
}
