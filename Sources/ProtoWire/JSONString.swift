/// JSON string literals (RFC 8259) for the JSON written by hand: log lines, App Store request bodies and
/// tokens, billingctl's output. The one escaper of the tree.
///
/// `"` and `\` are escaped, and every control byte (below 0x20): `\n`, `\r` and `\t` in their short forms,
/// the others as `\u00XX`. Everything else, multi-byte UTF-8 included, is copied as it is.
public enum JSONString {
    /// `s` as a JSON string literal, quotes included.
    public static func quote(_ s: String) -> String {
        // Most values need no escape: one pass over the bytes, then one concatenation.
        if !s.utf8.contains(where: needsEscape) { return "\"" + s + "\"" }
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count + 16)
        append(s, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `s` as a JSON string literal, quotes included.
    public static func append(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { appendEscaped($0, to: &out) }
        out.append(UInt8(ascii: "\""))
    }

    /// Appends the UTF-8 `bytes` escaped for the inside of a JSON string literal, without quotes.
    ///
    /// Runs without anything to escape (nearly every value) are appended whole: appending byte by byte cost
    /// about 11,000 instructions per call's log line.
    public static func appendEscaped(_ bytes: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        var start = 0
        for i in 0..<bytes.count {
            let b = bytes[i]
            if !needsEscape(b) { continue }
            if start < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<i])) }
            start = i + 1
            switch b {
            case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
            case 0x0A: out.append(contentsOf: #"\n"#.utf8)
            case 0x0D: out.append(contentsOf: #"\r"#.utf8)
            case 0x09: out.append(contentsOf: #"\t"#.utf8)
            default:
                let hex: StaticString = "0123456789abcdef"
                out.append(contentsOf: #"\u00"#.utf8)
                out.append(hex.utf8Start[Int(b >> 4)])
                out.append(hex.utf8Start[Int(b & 15)])
            }
        }
        if start < bytes.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...])) }
    }

    /// Whether `b` cannot stand as it is inside a JSON string: a quote, a backslash or a control byte.
    @inline(__always)
    static func needsEscape(_ b: UInt8) -> Bool {
        b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\")
    }
}
