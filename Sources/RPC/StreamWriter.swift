import Synchronization
public import ProtoWire

/// The answers of a server-streaming call: any number of messages, then one status.
/// Any thread may use it; after `finish` everything is ignored.
public final class StreamWriter: Sendable {
    public enum Event: Sendable {
        /// One length-prefixed message.
        case message([UInt8])
        /// The end: OK when nil.
        case finish(RPCError?)
        /// The end now, with the messages not yet sent dropped (a peer that stopped reading).
        case abort(RPCError)
    }
    public typealias Deliver = @Sendable (Event) -> Void
    private let finished = Atomic<Bool>(false)
    private let buffered = Atomic<Int>(0)
    private let deliver: Deliver
    /// Set when the client goes away; writers stop sending then.
    public let cancellation: Cancellation

    public init(cancellation: Cancellation, _ deliver: @escaping Deliver) {
        self.cancellation = cancellation
        self.deliver = deliver
    }

    public var isDone: Bool { finished.load(ordering: .acquiring) || cancellation.isCancelled }

    /// Queues `message`; answers its framed size (0 when the call is over and nothing was queued).
    @discardableResult
    public func send(_ message: some ProtoMessage) -> Int {
        guard !isDone else { return 0 }
        var writer = ProtoWriter(capacity: MessageFraming.prefixSize + message.encodedSize)
        let size = message.encodedSize
        writer.writeMessagePrefix(size: size)
        message.encode(to: &writer)
        buffered.add(MessageFraming.prefixSize + size, ordering: .relaxed)
        deliver(.message(writer.finish()))
        return MessageFraming.prefixSize + size
    }

    /// Bytes sent through this writer that the transport has not yet handed to the connection: what a
    /// peer that reads slowly leaves queued. Producers use it to stop before memory grows without bound.
    public var bufferedBytes: Int { buffered.load(ordering: .relaxed) }

    /// The transport took `count` bytes of the queued messages.
    public func consumed(_ count: Int) { buffered.subtract(count, ordering: .relaxed) }

    public func finish(_ error: RPCError? = nil) {
        guard !finished.exchange(true, ordering: .acquiringAndReleasing) else { return }
        deliver(.finish(error))
    }

    /// Ends the call with `error` at once: what the transport has not sent yet is dropped, and the status does
    /// not wait behind it (a peer whose flow-control window stays closed still sees it).
    public func abort(_ error: RPCError) {
        guard !finished.exchange(true, ordering: .acquiringAndReleasing) else { return }
        deliver(.abort(error))
    }
}
