/// Order ids: time-ordered (version 7, RFC 9562) UUIDs in lowercase canonical form.
///
/// Version 7 rather than 4: the first 48 bits are the creation time in milliseconds, so new orders land
/// at the right edge of the primary-key B-tree instead of on random pages: at a million orders a batch of
/// inserts touches a few pages, not one per order. The other 74 bits come from the system's secure random
/// source, so ids stay unguessable. Any UUID is a valid StoreKit appAccountToken.
public enum OrderID {
    private static let hex = Array("0123456789abcdef".utf8)

    /// A fresh UUID v7: `milliseconds` (default: now) then 74 secure random bits.
    public static func make(milliseconds: Int64 = SystemClock().nowMilliseconds()) -> String {
        var rng = SystemRandomNumberGenerator()
        var bytes = [UInt8](repeating: 0, count: 16)
        let a = rng.next() as UInt64, b = rng.next() as UInt64
        let ms = UInt64(max(0, milliseconds))
        for i in 0..<6 { bytes[i] = UInt8(truncatingIfNeeded: ms >> (8 * UInt64(5 - i))) }
        bytes[6] = UInt8(truncatingIfNeeded: a)
        bytes[7] = UInt8(truncatingIfNeeded: a >> 8)
        for i in 0..<8 { bytes[8 + i] = UInt8(truncatingIfNeeded: b >> (8 * UInt64(i))) }
        bytes[6] = (bytes[6] & 0x0F) | 0x70  // version 7
        bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 9562 variant
        return format(bytes)
    }

    static func format(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity(36)
        for (i, b) in bytes.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 { out.append(UInt8(ascii: "-")) }
            out.append(hex[Int(b >> 4)])
            out.append(hex[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The canonical lowercase form of any UUID written 8-4-4-4-12 in either case, or nil.
    public static func canonical(_ text: String) -> String? {
        // One pass over the contiguous bytes (an UnsafeBufferPointer: iterating `text.utf8` cost ~100
        // instructions a byte, its Span ~40); an id that is canonical already (as minted) comes back as the
        // same String, without a copy.
        guard text.utf8.count == 36 else { return nil }
        var copy = text
        let upper = copy.withUTF8 { b -> Bool? in
            var upper = false
            for i in 0..<36 {
                let c = b[i]
                if i == 8 || i == 13 || i == 18 || i == 23 {
                    if c != UInt8(ascii: "-") { return nil }
                    continue
                }
                if c &- 0x30 < 10 { continue }  // 0-9
                guard (c | 0x20) &- 0x61 < 6 else { return nil }  // a-f or A-F
                if c < 0x61 { upper = true }
            }
            return upper
        }
        guard let upper else { return nil }
        if !upper { return text }
        return String(decoding: text.utf8.map { (0x41...0x46).contains($0) ? $0 + 0x20 : $0 }, as: UTF8.self)
    }
}
