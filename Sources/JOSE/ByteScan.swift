/// Word-at-a-time scans over bytes for the hot parsing paths (notification bodies and JWS payloads are
/// 5-10 KiB of plain characters): eight bytes per step, then byte by byte from the word that may hold a hit.
package enum ByteScan {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highs: UInt64 = 0x8080_8080_8080_8080

    /// Non-zero when some byte of `w` may be `"`, `\` or a control character (< 0x20). No false negatives;
    /// a false positive only sends the caller to its byte-by-byte loop for that word.
    @inline(__always)
    private static func mayHoldSpecial(_ w: UInt64) -> Bool {
        let quote = w ^ (0x22 &* ones), backslash = w ^ (0x5C &* ones)
        let zeroQuote = (quote &- ones) & ~quote & highs
        let zeroBackslash = (backslash &- ones) & ~backslash & highs
        let control = (w &- (0x20 &* ones)) & ~w & highs
        return (zeroQuote | zeroBackslash | control) != 0
    }

    /// The index of the first `"`, `\` or control byte at or after `start`, or `buffer.count`.
    package static func firstSpecial(_ buffer: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        var i = start
        if let base = buffer.baseAddress {
            let raw = UnsafeRawPointer(base)
            while i + 8 <= buffer.count, !mayHoldSpecial(raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) { i += 8 }
        }
        while i < buffer.count {
            let c = buffer[i]
            if c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") || c < 0x20 { return i }
            i += 1
        }
        return i
    }
}
