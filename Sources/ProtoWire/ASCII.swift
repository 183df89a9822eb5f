/// ASCII checks over raw bytes, eight at a time.
public enum ASCII {
    /// Whether every byte of `buffer` is ASCII (below 0x80): such bytes are valid UTF-8 as they stand, so a
    /// String can be made from them without the general validation (a metadata lookup and a scan per call).
    @inlinable
    public static func isASCII(_ buffer: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = buffer.baseAddress else { return true }
        let raw = UnsafeRawPointer(base)
        var i = 0
        var any: UInt64 = 0
        while i + 8 <= buffer.count {
            any |= raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            i += 8
        }
        while i < buffer.count {
            any |= UInt64(base[i])
            i += 1
        }
        return any & 0x8080_8080_8080_8080 == 0
    }
}
