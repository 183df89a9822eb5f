import Glibc

/// The request pseudo-header fields, as bits of `RequestHead.pseudoFields`.
enum PseudoField {
    static let method: UInt8 = 1, scheme: UInt8 = 2, path: UInt8 = 4, authority: UInt8 = 8
    /// What every request but CONNECT carries (RFC 9113 8.3.1); gRPC never uses CONNECT.
    static let required: UInt8 = method | scheme | path
}

/// What a request field's name is, as far as the server cares: one of the few names it reads or knows
/// to pass over, or any other. Pseudo-header fields are `.path`, `.method` or `.otherPseudo`.
enum FieldName: UInt8 {
    case path, method, otherPseudo
    case contentType, grpcTimeout
    /// Sent by gRPC clients, read by nobody here: te, user-agent, grpc-accept-encoding, accept-encoding.
    /// (`te` with a value other than `trailers` is accepted, as grpc-go and the build before accept it.)
    case unread
    /// Connection-specific (RFC 9113 8.2.2): connection, keep-alive, proxy-connection, transfer-encoding, upgrade.
    case connectionSpecific
    case other

    /// Classifies `name` by its length and a few word compares (no hashing, no allocation). The names
    /// known here are lowercase tokens, so a known name needs no byte-by-byte token check.
    @inline(__always)
    static func of(_ name: UnsafeBufferPointer<UInt8>) -> FieldName {
        switch name.count {
        case 2 where ByteLiteral.equal(name, "te"): return .unread
        case 5 where ByteLiteral.equal(name, ":path"): return .path
        case 7 where ByteLiteral.equal(name, ":method"): return .method
        case 7 where ByteLiteral.equal(name, "upgrade"): return .connectionSpecific
        case 10 where ByteLiteral.equal(name, "user-agent"): return .unread
        case 10 where ByteLiteral.equal(name, "connection") || ByteLiteral.equal(name, "keep-alive"): return .connectionSpecific
        case 12 where ByteLiteral.equal(name, "content-type"): return .contentType
        case 12 where ByteLiteral.equal(name, "grpc-timeout"): return .grpcTimeout
        case 15 where ByteLiteral.equal(name, "accept-encoding"): return .unread
        case 16 where ByteLiteral.equal(name, "proxy-connection"): return .connectionSpecific
        case 17 where ByteLiteral.equal(name, "transfer-encoding"): return .connectionSpecific
        case 20 where ByteLiteral.equal(name, "grpc-accept-encoding"): return .unread
        default: return name.first == UInt8(ascii: ":") ? .otherPseudo : .other
        }
    }
}

/// Compares bytes with a literal of the same length, 8 bytes at a time (no memcmp call, no global array).
enum ByteLiteral {
    @inline(__always)
    static func equal(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        let n = literal.utf8CodeUnitCount
        guard bytes.count == n else { return false }
        guard n > 0, let base = bytes.baseAddress else { return n == 0 }
        let a = UnsafeRawPointer(base), b = UnsafeRawPointer(literal.utf8Start)
        if n >= 8 {
            var i = 0
            while i + 8 <= n {
                if a.loadUnaligned(fromByteOffset: i, as: UInt64.self) != b.loadUnaligned(fromByteOffset: i, as: UInt64.self) { return false }
                i += 8
            }
            // The last 8 bytes, overlapping what was compared.
            return i == n || a.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self) == b.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
        }
        if n >= 4 {
            return a.loadUnaligned(as: UInt32.self) == b.loadUnaligned(as: UInt32.self)
                && a.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self) == b.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self)
        }
        for i in 0..<n where base[i] != literal.utf8Start[i] { return false }
        return true
    }
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

    /// `pseudoFields` and `sawRegularField` carry what the stream's earlier fields were.
    static func check(
        name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, trailer: Bool,
        pseudoFields: inout UInt8, sawRegularField: inout Bool
    ) -> Verdict {
        check(name: name, kind: FieldName.of(name), value: value, trailer: trailer, pseudoFields: &pseudoFields, sawRegularField: &sawRegularField)
    }

    /// Runs for every field of every call: a known name costs its classification (a length switch and a
    /// word compare or two), any other a bitmap test per byte; a value one compare per 8 bytes.
    @inline(__always)
    static func check(
        name: UnsafeBufferPointer<UInt8>, kind: FieldName, value: UnsafeBufferPointer<UInt8>, trailer: Bool,
        pseudoFields: inout UInt8, sawRegularField: inout Bool
    ) -> Verdict {
        guard let first = name.first else { return .malformed }
        // A field value never holds NUL, CR or LF (8.2.1).
        if hasForbiddenValueByte(value) { return .malformed }
        if first == UInt8(ascii: ":") {
            // Pseudo-header fields: in the request's header block only, before every regular field, once each (8.3).
            guard !trailer, !sawRegularField else { return .malformed }
            let bit: UInt8
            switch kind {
            case .path:
                guard !value.isEmpty else { return .malformed }
                bit = PseudoField.path
            case .method: bit = PseudoField.method
            default:
                if ByteLiteral.equal(name, ":scheme") {
                    bit = PseudoField.scheme
                } else if ByteLiteral.equal(name, ":authority") {
                    bit = PseudoField.authority
                } else {
                    return .malformed
                }
            }
            guard pseudoFields & bit == 0 else { return .malformed }
            pseudoFields |= bit
            return .use
        }
        sawRegularField = true
        switch kind {
        case .connectionSpecific: return .skip
        case .other:
            for byte in name where !isLowercaseTokenByte(byte) { return .skip }
            return .use
        default: return .use
        }
    }

    /// Whether `value` holds NUL, LF or CR. Eight bytes at a time: a word with no byte below 0x0E (the usual
    /// case: tab is the only control character values carry) is passed with a few instructions; only a word
    /// that has one is looked at byte by byte. The last partial word is read as the value's last 8 bytes
    /// (overlapping), and a value under 8 bytes as two overlapping 4-byte words, so no byte loop runs on clean values.
    @inline(__always)
    static func hasForbiddenValueByte(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = value.baseAddress else { return false }
        let raw = UnsafeRawPointer(base)
        let n = value.count
        if n >= 8 {
            var i = 0
            while i + 8 <= n {
                if hasLowByte(raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) && anyForbidden(base, i, i + 8) { return true }
                i += 8
            }
            return i < n && hasLowByte(raw.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)) && anyForbidden(base, n - 8, n)
        }
        if n >= 4 {
            let head = UInt64(raw.loadUnaligned(as: UInt32.self)), tail = UInt64(raw.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self))
            // Both halves in one word: a byte below 0x0E in either is found by one test.
            return hasLowByte(head | tail << 32) && anyForbidden(base, 0, n)
        }
        return anyForbidden(base, 0, n)
    }

    /// Some byte of `word` is below 0x0E (exact for thresholds up to 0x80: "hasless" of Bit Twiddling Hacks).
    @inline(__always)
    private static func hasLowByte(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        return (word &- ones &* 0x0E) & ~word & (ones &* 0x80) != 0
    }

    @inline(__always)
    private static func anyForbidden(_ base: UnsafePointer<UInt8>, _ from: Int, _ to: Int) -> Bool {
        var i = from
        while i < to {
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

}
