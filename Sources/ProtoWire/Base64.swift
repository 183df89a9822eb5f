/// Base64 (RFC 4648): encodes standard, unpadded by default; decodes standard or URL-safe, padded or not.
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let urlAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func encode(_ bytes: [UInt8], padded: Bool = false) -> String {
        encode(bytes, padded: padded, alphabet: alphabet)
    }

    /// The URL-safe alphabet (`-` and `_`), unpadded: JWS parts (RFC 7515).
    public static func encodeURL(_ bytes: [UInt8]) -> String {
        encode(bytes, padded: false, alphabet: urlAlphabet)
    }

    private static func encode(_ bytes: [UInt8], padded: Bool, alphabet: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out.append(alphabet[Int((n >> 18) & 63)])
            out.append(alphabet[Int((n >> 12) & 63)])
            out.append(alphabet[Int((n >> 6) & 63)])
            out.append(alphabet[Int(n & 63)])
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
        var ok = true
        // Eight characters per step (one 8-byte store of 6 decoded bytes: two bytes of slack at the end), then four;
        // no zero-fill of the output first.
        let out = [UInt8](unsafeUninitializedCapacity: outCount + 2) { o, initialized in
            ok = table.withUnsafeBufferPointer { t -> Bool in
                guard let inp = input.baseAddress, let dst = o.baseAddress else { return n == 0 }
                let raw = UnsafeMutableRawPointer(dst)
                var i = 0, j = 0
                while i + 8 <= n {
                    let a = t[Int(inp.load(fromByteOffset: i, as: UInt8.self))], b = t[Int(inp.load(fromByteOffset: i + 1, as: UInt8.self))]
                    let c = t[Int(inp.load(fromByteOffset: i + 2, as: UInt8.self))], d = t[Int(inp.load(fromByteOffset: i + 3, as: UInt8.self))]
                    let e = t[Int(inp.load(fromByteOffset: i + 4, as: UInt8.self))], f = t[Int(inp.load(fromByteOffset: i + 5, as: UInt8.self))]
                    let g = t[Int(inp.load(fromByteOffset: i + 6, as: UInt8.self))], h = t[Int(inp.load(fromByteOffset: i + 7, as: UInt8.self))]
                    if (a | b | c | d | e | f | g | h) & 0xC0 != 0 { return false }
                    let high = UInt64(a) << 58 | UInt64(b) << 52 | UInt64(c) << 46 | UInt64(d) << 40
                    let low = UInt64(e) << 34 | UInt64(f) << 28 | UInt64(g) << 22 | UInt64(h) << 16
                    raw.storeBytes(of: (high | low).bigEndian, toByteOffset: j, as: UInt64.self)
                    i += 8
                    j += 6
                }
                while i + 4 <= n {
                    let a = t[Int(inp.load(fromByteOffset: i, as: UInt8.self))], b = t[Int(inp.load(fromByteOffset: i + 1, as: UInt8.self))]
                    let c = t[Int(inp.load(fromByteOffset: i + 2, as: UInt8.self))], d = t[Int(inp.load(fromByteOffset: i + 3, as: UInt8.self))]
                    if (a | b | c | d) & 0xC0 != 0 { return false }
                    let v = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    dst[j] = UInt8(truncatingIfNeeded: v >> 16)
                    dst[j + 1] = UInt8(truncatingIfNeeded: v >> 8)
                    dst[j + 2] = UInt8(truncatingIfNeeded: v)
                    i += 4
                    j += 3
                }
                let rest = n - i
                if rest >= 2 {
                    let a = t[Int(inp.load(fromByteOffset: i, as: UInt8.self))], b = t[Int(inp.load(fromByteOffset: i + 1, as: UInt8.self))]
                    let c = rest == 3 ? t[Int(inp.load(fromByteOffset: i + 2, as: UInt8.self))] : 0
                    if (a | b | c) & 0xC0 != 0 { return false }
                    let v = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6
                    dst[j] = UInt8(truncatingIfNeeded: v >> 16)
                    if rest == 3 { dst[j + 1] = UInt8(truncatingIfNeeded: v >> 8) }
                }
                return true
            }
            initialized = ok ? outCount : 0
        }
        return ok ? out : nil
    }
}
