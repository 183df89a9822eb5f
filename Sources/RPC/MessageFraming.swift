/// gRPC's length-prefixed message framing: 1 byte compressed flag, 4 bytes
/// big-endian length, then the message.
public enum MessageFraming {
    /// Size of the prefix before each message.
    public static let prefixSize = 5

    /// Frames an encoded message in one allocation.
    public static func frame(_ message: [UInt8]) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(prefixSize + message.count)
        appendPrefix(length: message.count, to: &out)
        out.append(contentsOf: message)
        return out
    }

    /// Appends an uncompressed prefix for a message of `length` bytes.
    public static func appendPrefix(length: Int, to out: inout [UInt8]) {
        out.append(0)
        let n = UInt32(length)
        out.append(UInt8(truncatingIfNeeded: n >> 24))
        out.append(UInt8(truncatingIfNeeded: n >> 16))
        out.append(UInt8(truncatingIfNeeded: n >> 8))
        out.append(UInt8(truncatingIfNeeded: n))
    }
}

/// Collects one unary request message from DATA chunks of any size.
///
/// The state machine checks the prefix as soon as its five bytes are in,
/// so an oversize message is refused before its body is buffered.
public struct MessageDeframer: Sendable {
    /// The prefix bytes seen so far, big-endian in the low bits, and how many.
    private var prefix: UInt64 = 0
    private var prefixCount = 0
    private var body: [UInt8] = []
    private var expected = -1
    private var failed = false
    public let maxMessageBytes: Int

    public init(maxMessageBytes: Int) {
        self.maxMessageBytes = maxMessageBytes
    }

    /// Feeds bytes; returns an error as soon as the stream can be judged bad.
    public mutating func append(_ chunk: UnsafeRawBufferPointer) -> RPCError? {
        if failed { return nil }
        var index = 0
        while index < chunk.count {
            if expected < 0 {
                prefix = prefix << 8 | UInt64(chunk[index])
                prefixCount += 1
                index += 1
                if prefixCount == MessageFraming.prefixSize {
                    if let error = parseHeader() {
                        failed = true
                        return error
                    }
                }
            } else {
                let want = expected - body.count
                if want == 0 {
                    failed = true
                    return .badFraming("more than one request message in a unary call")
                }
                let take = min(want, chunk.count - index)
                body.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[index..<(index + take)]))
                index += take
            }
        }
        return nil
    }

    /// Convenience for tests and clients.
    public mutating func append(_ bytes: [UInt8]) -> RPCError? {
        bytes.withUnsafeBytes { append($0) }
    }

    private mutating func parseHeader() -> RPCError? {
        let flag = UInt8(truncatingIfNeeded: prefix >> 32)
        let length = Int(prefix & 0xFFFF_FFFF)
        if flag == 1 {
            return RPCError(code: .unimplemented, message: "compressed messages are not supported; send identity encoding")
        }
        guard flag == 0 else { return .badFraming("compressed flag \(flag) is neither 0 nor 1") }
        if length > maxMessageBytes { return .messageTooLarge(size: length, limit: maxMessageBytes) }
        expected = length
        body.reserveCapacity(length)
        return nil
    }

    /// The message once the request stream ended.
    public mutating func finish() -> Result<[UInt8], RPCError> {
        if expected < 0 {
            return .failure(prefixCount == 0 ? .badFraming("no request message") : .badFraming("truncated message prefix"))
        }
        guard body.count == expected else { return .failure(.badFraming("message shorter than its length prefix")) }
        let message = body
        body = []
        return .success(message)
    }
}
