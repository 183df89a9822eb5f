import Synchronization
public import ProtoWire

/// Per-call state shared by the transport and the handler: set once when the call is cancelled
/// (client reset, deadline, shutdown), and the facts a handler notes for the call's log line.
public final class Cancellation: Sendable {
    private let flag = Atomic<Bool>(false)
    private let notes = Mutex<[(String, String)]>([])
    private let keepsNotes: Bool
    /// `keepsNotes: false` when nothing reads the notes (no per-call log line): `note` then does nothing.
    public init(keepsNotes: Bool = true) { self.keepsNotes = keepsNotes }
    private let handler = Mutex<(@Sendable () -> Void)?>(nil)
    public var isCancelled: Bool { flag.load(ordering: .acquiring) }
    public func cancel() {
        guard !flag.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if let body = handler.withLock({ h in
            defer { h = nil }
            return h
        }) {
            body()
        }
    }

    /// Runs `body` once when the call is cancelled (client reset, connection closed, deadline), at once if it
    /// already is; on the thread that cancels it. One handler per call (a later one replaces it).
    public func onCancel(_ body: @escaping @Sendable () -> Void) {
        let now = handler.withLock { h -> Bool in
            if flag.load(ordering: .acquiring) { return true }
            h = body
            return false
        }
        if now { body() }
    }
    /// Adds a fact for the log line (`order_id`, `account_id`); never secrets.
    public func note(_ key: String, _ value: String) {
        guard keepsNotes else { return }
        notes.withLock { $0.append((key, value)) }
    }
    public var noted: [(String, String)] { notes.withLock { $0 } }

    /// New again, for the transport's next call on the same stream object; only when nothing else holds it.
    package func reset() {
        flag.store(false, ordering: .relaxed)
        handler.withLock { $0 = nil }
        notes.withLock { $0.removeAll(keepingCapacity: true) }
    }
}

/// What a handler knows about its call besides the request message.
public struct CallContext: Sendable {
    /// The full method name, `billing.v1.Billing/CreateOrder`.
    public var method: String
    /// Request metadata: lower-case names, values as sent (no pseudo-headers).
    public var metadata: [(name: String, value: String)]
    /// When the client stops waiting, if it said (`grpc-timeout`).
    public var deadline: ContinuousClock.Instant?
    /// The remote address, `127.0.0.1:53412`.
    public var peer: String
    /// An id for this call that appears in logs and in INTERNAL errors.
    public var requestID: String { requestIDValue.description }
    private var requestIDValue: RequestID
    public var cancellation: Cancellation
    /// The verified client certificate's subject (mutual TLS), for authorization and logs.
    public var peerSubject: String?

    public init(
        method: String, metadata: [(name: String, value: String)] = [], deadline: ContinuousClock.Instant? = nil,
        peer: String = "", requestID: RequestID = RequestID(prefix: "local", number: 0),
        cancellation: Cancellation = Cancellation(), peerSubject: String? = nil
    ) {
        self.method = method
        self.metadata = metadata
        self.deadline = deadline
        self.peer = peer
        self.requestIDValue = requestID
        self.cancellation = cancellation
        self.peerSubject = peerSubject
    }

    /// Notes a fact for this call's log line.
    public func note(_ key: String, _ value: String) { cancellation.note(key, value) }

    /// The first value of a metadata entry.
    public func metadata(_ name: String) -> String? {
        metadata.first { $0.name == name }?.value
    }

    /// True once the call is cancelled or its deadline passed: domain code checks before it writes.
    public var isExpired: Bool {
        if cancellation.isCancelled { return true }
        if let deadline, ContinuousClock.now >= deadline { return true }
        return false
    }
}

/// A call's id, `PREFIX-HEX`: a per-process random prefix and a counter, formatted only when read.
public struct RequestID: Sendable, CustomStringConvertible {
    public var prefix: String
    public var number: UInt64
    public init(prefix: String, number: UInt64) {
        self.prefix = prefix
        self.number = number
    }
    public var description: String { prefix + "-" + String(number, radix: 16) }
}

/// Where a transport takes the answers of its unary calls, by call id.
public protocol ResponseSink: AnyObject, Sendable {
    func deliver(id: Int32, _ result: Result<[UInt8], RPCError>)
}

/// The single answer to a unary call, handed to the transport once.
///
/// A handler may call `succeed` or `fail` from any thread; later calls are ignored.
public final class Responder: Sendable {
    public typealias Deliver = @Sendable (Result<[UInt8], RPCError>) -> Void
    private let answered = Atomic<Bool>(false)
    private let closure: Deliver?
    private let sink: (any ResponseSink)?
    private let id: Int32

    public init(_ deliver: @escaping Deliver) {
        closure = deliver
        sink = nil
        id = 0
    }

    /// Answers go to `sink` for call `id`: no closure context to allocate per call.
    public init(sink: any ResponseSink, id: Int32) {
        closure = nil
        self.sink = sink
        self.id = id
    }

    private func deliver(_ result: Result<[UInt8], RPCError>) {
        if let sink { sink.deliver(id: id, result) } else { closure?(result) }
    }

    /// Answers OK with an already length-prefixed message.
    public func succeed(framed: [UInt8]) {
        guard answered.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        deliver(.success(framed))
    }

    /// Answers OK with `message`, framed in one allocation. Inlinable so that each service's call is specialized
    /// for its message type (unspecialized, the message was copied and encoded through its witness table).
    @inlinable
    public func succeed(_ message: some ProtoMessage) {
        let size = message.encodedSize
        var writer = ProtoWriter(capacity: MessageFraming.prefixSize + size)
        writer.writeRaw([
            0, UInt8(truncatingIfNeeded: size >> 24), UInt8(truncatingIfNeeded: size >> 16),
            UInt8(truncatingIfNeeded: size >> 8), UInt8(truncatingIfNeeded: size),
        ])
        message.encode(to: &writer)
        succeed(framed: writer.finish())
    }

    public func fail(_ error: RPCError) {
        guard answered.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        deliver(.failure(error))
    }

    public var isAnswered: Bool { answered.load(ordering: .acquiring) }
}

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
        writer.writeRaw([
            0, UInt8(truncatingIfNeeded: size >> 24), UInt8(truncatingIfNeeded: size >> 16),
            UInt8(truncatingIfNeeded: size >> 8), UInt8(truncatingIfNeeded: size),
        ])
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

/// Receives the request messages of a bidirectional call, on its event loop, in order.
public struct StreamReceiver: Sendable {
    public var onMessage: @Sendable ([UInt8]) -> Void
    public var onEnd: @Sendable () -> Void

    public init(onMessage: @escaping @Sendable ([UInt8]) -> Void, onEnd: @escaping @Sendable () -> Void) {
        self.onMessage = onMessage
        self.onEnd = onEnd
    }

    public static let ignore = StreamReceiver(onMessage: { _ in }, onEnd: {})
}

/// A bidirectional method: started at the request headers; messages arrive through the receiver it
/// returns, answers leave through the writer.
public typealias BidiStreamingHandler = @Sendable (CallContext, StreamWriter) -> StreamReceiver

/// A server-streaming method: the request in, messages out through the writer until it finishes.
public typealias ServerStreamingHandler = @Sendable (CallContext, [UInt8], StreamWriter) -> Void

/// A unary method: request bytes (without the prefix) in, one answer out through the responder.
/// Handlers run on an event loop and must not block it.
public typealias UnaryHandler = @Sendable (CallContext, [UInt8], Responder) -> Void
