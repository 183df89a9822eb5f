/// Base64 (RFC 4648): encodes standard, unpadded by default; decodes standard or URL-safe, padded or not.
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    public static func encode(_ bytes: [UInt8], padded: Bool = false) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            for shift in [18, 12, 6, 0] { out.append(alphabet[Int((n >> UInt32(shift)) & 63)]) }
            i += 3
        }
        let rest = bytes.count - i
        if rest > 0 {
            var n = UInt32(bytes[i]) << 16
            if rest == 2 { n |= UInt32(bytes[i + 1]) << 8 }
            out.append(alphabet[Int((n >> 18) & 63)])
            out.append(alphabet[Int((n >> 12) & 63)])
            if rest == 2 { out.append(alphabet[Int((n >> 6) & 63)]) }
            if padded { out.append(contentsOf: Array(repeating: UInt8(ascii: "="), count: 3 - rest)) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decoding table: 0-63 for the digits of either alphabet, 64 for `=`, 255 for anything else.
    private static let table: [UInt8] = {
        var t = [UInt8](repeating: 255, count: 256)
        for (i, c) in alphabet.enumerated() { t[Int(c)] = UInt8(i) }
        t[Int(UInt8(ascii: "-"))] = 62
        t[Int(UInt8(ascii: "_"))] = 63
        t[Int(UInt8(ascii: "="))] = 64
        return t
    }()

    /// Decodes standard or URL-safe base64, with or without padding; nil when malformed.
    public static func decode(_ s: String) -> [UInt8]? {
        var s = s
        return s.withUTF8 { decode(UnsafeRawBufferPointer($0)) }
    }

    /// Decodes base64 bytes in one pass into a buffer sized up front.
    public static func decode(_ input: UnsafeRawBufferPointer) -> [UInt8]? {
        var n = input.count
        var padding = 0
        while n > 0 && input[n - 1] == UInt8(ascii: "=") && padding < 2 {
            n -= 1
            padding += 1
        }
        if n % 4 == 1 { return nil }
        if padding > 0 && (n + padding) % 4 != 0 { return nil }
        let table = Self.table
        let outCount = n / 4 * 3 + (n % 4 == 0 ? 0 : n % 4 - 1)
        var out = [UInt8](repeating: 0, count: outCount)
        let ok = table.withUnsafeBufferPointer { t -> Bool in
            out.withUnsafeMutableBufferPointer { o -> Bool in
                var i = 0, j = 0
                while i + 4 <= n {
                    let a = t[Int(input[i])], b = t[Int(input[i + 1])], c = t[Int(input[i + 2])], d = t[Int(input[i + 3])]
                    if (a | b | c | d) & 0xC0 != 0 { return false }
                    let v = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    o[j] = UInt8(truncatingIfNeeded: v >> 16)
                    o[j + 1] = UInt8(truncatingIfNeeded: v >> 8)
                    o[j + 2] = UInt8(truncatingIfNeeded: v)
                    i += 4
                    j += 3
                }
                let rest = n - i
                if rest >= 2 {
                    let a = t[Int(input[i])], b = t[Int(input[i + 1])]
                    let c = rest == 3 ? t[Int(input[i + 2])] : 0
                    if (a | b | c) & 0xC0 != 0 { return false }
                    let v = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6
                    o[j] = UInt8(truncatingIfNeeded: v >> 16)
                    if rest == 3 { o[j + 1] = UInt8(truncatingIfNeeded: v >> 8) }
                }
                return true
            }
        }
        return ok ? out : nil
    }
}
