import CZlib

/// gzip for request bodies (Connect's `content-encoding: gzip`, gRPC-Web's compressed messages), bounded:
/// inflating stops with an error as soon as the output would pass `limit` (no zip bomb gets memory).
public enum Gzip {
    public enum Failure: Error, Equatable, Sendable {
        /// The data is not gzip (or zlib), or it is cut short.
        case malformed
        /// The inflated data would pass the limit.
        case tooLarge(limit: Int)
    }

    /// The inflated bytes of `data` (gzip or zlib framing), at most `limit` of them.
    public static func inflate(_ data: [UInt8], limit: Int) throws(Failure) -> [UInt8] {
        var stream = z_stream()
        guard czlib_inflate_init_gzip(&stream) == Z_OK else { throw .malformed }
        defer { inflateEnd(&stream) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        var input = data
        let status: Int32 = input.withUnsafeMutableBufferPointer { inputBuffer in
            stream.next_in = inputBuffer.baseAddress
            stream.avail_in = uInt(inputBuffer.count)
            while true {
                let rc: Int32 = chunk.withUnsafeMutableBufferPointer { c in
                    stream.next_out = c.baseAddress
                    stream.avail_out = uInt(c.count)
                    return CZlib.inflate(&stream, Z_NO_FLUSH)
                }
                let produced = chunk.count - Int(stream.avail_out)
                if out.count + produced > limit { return -100 }
                out.append(contentsOf: chunk[..<produced])
                if rc == Z_STREAM_END { return Z_STREAM_END }
                if rc != Z_OK { return rc }
                if stream.avail_in == 0 && produced == 0 { return Z_BUF_ERROR }
            }
        }
        if status == -100 { throw .tooLarge(limit: limit) }
        guard status == Z_STREAM_END else { throw .malformed }
        return out
    }
}
