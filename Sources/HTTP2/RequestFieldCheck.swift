import Glibc

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

    static func check(
        name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, trailer: Bool,
        stream: ServerStream
    ) -> Verdict {
        var pseudo = stream.pseudoFields
        var regular = stream.sawRegularField
        let verdict = check(name: name, value: value, trailer: trailer, pseudoFields: &pseudo, sawRegularField: &regular)
        stream.pseudoFields = pseudo
        stream.sawRegularField = regular
        return verdict
    }

    /// `pseudoFields` and `sawRegularField` carry what the stream's earlier fields were. Runs for every field
    /// of every call: a few instructions a byte (a bitmap per name byte, one compare per value byte).
    static func check(
        name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, trailer: Bool,
        pseudoFields: inout UInt8, sawRegularField: inout Bool
    ) -> Verdict {
        guard let first = name.first else { return .malformed }
        // A field value never holds NUL, CR or LF (8.2.1).
        if hasForbiddenValueByte(value) { return .malformed }
        if first == UInt8(ascii: ":") {
            // Pseudo-header fields: in the request's header block only, before every regular field, once each (8.3).
            guard !trailer, !sawRegularField else { return .malformed }
            let bit: UInt8
            switch name.count {
            case 5 where same(name, ":path"):
                guard !value.isEmpty else { return .malformed }
                bit = PseudoField.path
            case 7 where same(name, ":method"): bit = PseudoField.method
            case 7 where same(name, ":scheme"): bit = PseudoField.scheme
            case 10 where same(name, ":authority"): bit = PseudoField.authority
            default: return .malformed
            }
            guard pseudoFields & bit == 0 else { return .malformed }
            pseudoFields |= bit
            return .use
        }
        sawRegularField = true
        for byte in name where !isLowercaseTokenByte(byte) { return .skip }
        switch name.count {
        case 7 where same(name, "upgrade"): return .skip
        case 10 where same(name, "connection") || same(name, "keep-alive"): return .skip
        case 16 where same(name, "proxy-connection"): return .skip
        case 17 where same(name, "transfer-encoding"): return .skip
        default: return .use
        }
    }

    /// Whether `value` holds NUL, LF or CR. Eight bytes at a time: a word with no byte below 0x0E (the usual
    /// case: tab is the only control character values carry) is passed with a few instructions; only a word
    /// that has one is looked at byte by byte.
    @inline(__always)
    static func hasForbiddenValueByte(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = value.baseAddress else { return false }
        let raw = UnsafeRawPointer(base)
        var i = 0
        let ones: UInt64 = 0x0101_0101_0101_0101
        while i + 8 <= value.count {
            let word = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            // Some byte < 0x0E (exact for thresholds up to 0x80: "hasless" of Bit Twiddling Hacks).
            if (word &- ones &* 0x0E) & ~word & (ones &* 0x80) != 0 {
                for j in i..<(i + 8) where isForbidden(base[j]) { return true }
            }
            i += 8
        }
        while i < value.count {
            if isForbidden(base[i]) { return true }
            i += 1
        }
        return false
    }

    @inline(__always)
    private static func isForbidden(_ byte: UInt8) -> Bool { byte == 0 || byte == 0x0A || byte == 0x0D }

    /// tchar (RFC 9110 5.6.2) without upper-case letters (RFC 9113 8.2.1), as two 64-bit maps.
    @inline(__always)
    static func isLowercaseTokenByte(_ b: UInt8) -> Bool {
        let low: UInt64 = 0x03FF_6CFA_0000_0000  // ! # $ % & ' * + - . 0-9
        let high: UInt64 = 0x57FF_FFFF_C000_0000  // ^ _ ` a-z | ~
        if b < 64 { return (low >> UInt64(b)) & 1 != 0 }
        if b < 128 { return (high >> UInt64(b &- 64)) & 1 != 0 }
        return false
    }

    /// Same bytes as `literal`, whose length the caller has matched.
    @inline(__always)
    private static func same(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        memcmp(bytes.baseAddress!, literal.utf8Start, bytes.count) == 0
    }
}
