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
/// A `MessageStreamDeframer` underneath checks each prefix as soon as its five bytes are in, so an
/// oversize message is refused before its body is buffered; a second message is a framing error.
public struct MessageDeframer: Sendable {
    private var stream: MessageStreamDeframer
    private var message: [UInt8]?
    private var failed = false
    public var maxMessageBytes: Int { stream.maxMessageBytes }

    public init(maxMessageBytes: Int) {
        stream = MessageStreamDeframer(maxMessageBytes: maxMessageBytes)
    }

    /// Request bytes held now: the unfinished message, or the finished one until it is taken.
    public var bufferedBytes: Int { stream.bufferedBytes + (message?.count ?? 0) }

    /// Feeds bytes; returns an error as soon as the stream can be judged bad.
    public mutating func append(_ chunk: UnsafeRawBufferPointer) -> RPCError? {
        if failed { return nil }
        // The usual unary request: the whole message in one chunk, nothing before it. Taken at once (the byte-wise
        // path below cost about 280 instructions for an empty message); the same checks, the same result.
        let prefixSize = MessageFraming.prefixSize
        if message == nil, stream.isAtBoundary, chunk.count >= prefixSize {
            let length = Int(chunk[1]) << 24 | Int(chunk[2]) << 16 | Int(chunk[3]) << 8 | Int(chunk[4])
            if chunk.count == prefixSize + length {
                if let error = MessageStreamDeframer.check(flag: chunk[0], length: length, limit: stream.maxMessageBytes) {
                    failed = true
                    return error
                }
                message = Array(UnsafeRawBufferPointer(rebasing: chunk[prefixSize...]))
                return nil
            }
        }
        var index = 0
        while let step = stream.next(chunk, &index) {
            switch step {
            case .failure(let error):
                failed = true
                return error
            case .message(let m):
                guard message == nil else {
                    failed = true
                    return .badFraming("more than one request message in a unary call")
                }
                message = m
            }
        }
        if message != nil && !stream.isAtBoundary {
            failed = true
            return .badFraming("more than one request message in a unary call")
        }
        return nil
    }

    /// Convenience for tests and clients.
    public mutating func append(_ bytes: [UInt8]) -> RPCError? {
        bytes.withUnsafeBytes { append($0) }
    }

    /// The message once the request stream ended.
    public mutating func finish() -> Result<[UInt8], RPCError> {
        guard let m = message else {
            return .failure(stream.isAtBoundary ? .badFraming("no request message") : .badFraming("truncated message"))
        }
        return .success(m)
    }

    /// New again (what `init` gives with the same limit), for a transport's next call: only what is set
    /// is cleared (assigning a new deframer destroyed and rebuilt every field: about 90 instructions).
    public mutating func reset() {
        if message != nil { message = nil }
        failed = false
        stream.reset()
    }
}

/// Splits a request stream into messages as they complete (client- and bidi-streaming calls).
public struct MessageStreamDeframer: Sendable {
    private var prefix: UInt64 = 0
    private var prefixCount = 0
    private var expected = -1
    private var body: [UInt8] = []
    public let maxMessageBytes: Int

    public init(maxMessageBytes: Int) { self.maxMessageBytes = maxMessageBytes }

    /// New again (what `init` gives with the same limit); an empty buffer keeps its capacity.
    public mutating func reset() {
        prefix = 0
        prefixCount = 0
        expected = -1
        if !body.isEmpty { body.removeAll(keepingCapacity: true) }
    }

    /// True between messages (a stream may end here).
    public var isAtBoundary: Bool { prefixCount == 0 && expected < 0 }

    /// Bytes of an unfinished message held now.
    public var bufferedBytes: Int { body.count }

    /// Checks a complete prefix: flag 0 (flag 1, compression, is not supported) and the size limit.
    static func check(flag: UInt8, length: Int, limit: Int) -> RPCError? {
        if flag == 1 { return RPCError(code: .unimplemented, message: "compressed messages are not supported; send identity encoding") }
        guard flag == 0 else { return .badFraming("compressed flag \(flag) is neither 0 nor 1") }
        if length > limit { return .messageTooLarge(size: length, limit: limit) }
        return nil
    }

    /// One step over `chunk` from `index`: a completed message, an error, or nil when the chunk is used up.
    public enum Step {
        case message([UInt8])
        case failure(RPCError)
    }

    public mutating func next(_ chunk: UnsafeRawBufferPointer, _ index: inout Int) -> Step? {
        while index < chunk.count {
            if expected < 0 {
                prefix = prefix << 8 | UInt64(chunk[index])
                prefixCount += 1
                index += 1
                if prefixCount == MessageFraming.prefixSize {
                    let length = Int(prefix & 0xFFFF_FFFF)
                    if let error = Self.check(flag: UInt8(truncatingIfNeeded: prefix >> 32), length: length, limit: maxMessageBytes) {
                        return .failure(error)
                    }
                    expected = length
                    // No reservation of the announced size: a prefix alone must not cost 4 MiB. The body
                    // grows as its bytes arrive (and the connection's budget counts them).
                    body = []
                }
            } else {
                let take = min(expected - body.count, chunk.count - index)
                body.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[index..<(index + take)]))
                index += take
            }
            if expected >= 0 && body.count == expected {
                let message = body
                body = []
                expected = -1
                prefix = 0
                prefixCount = 0
                return .message(message)
            }
        }
        return nil
    }

    /// Feeds bytes; calls `deliver` for each message completed, or answers the error that ends the stream.
    public mutating func append(_ chunk: UnsafeRawBufferPointer, _ deliver: ([UInt8]) -> Void) -> RPCError? {
        var index = 0
        while let step = next(chunk, &index) {
            switch step {
            case .message(let m): deliver(m)
            case .failure(let e): return e
            }
        }
        return nil
    }
}
