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
    public var isCancelled: Bool { flag.load(ordering: .acquiring) }
    public func cancel() { flag.store(true, ordering: .releasing) }
    /// Adds a fact for the log line (`order_id`, `account_id`); never secrets.
    public func note(_ key: String, _ value: String) {
        guard keepsNotes else { return }
        notes.withLock { $0.append((key, value)) }
    }
    public var noted: [(String, String)] { notes.withLock { $0 } }
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

    public init(method: String, metadata: [(name: String, value: String)] = [], deadline: ContinuousClock.Instant? = nil,
                peer: String = "", requestID: RequestID = RequestID(prefix: "local", number: 0),
                cancellation: Cancellation = Cancellation(), peerSubject: String? = nil) {
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

    /// Answers OK with `message`, framed in one allocation.
    public func succeed(_ message: some ProtoMessage) {
        let size = message.encodedSize
        var writer = ProtoWriter(capacity: MessageFraming.prefixSize + size)
        writer.writeRaw([0, UInt8(truncatingIfNeeded: size >> 24), UInt8(truncatingIfNeeded: size >> 16),
                         UInt8(truncatingIfNeeded: size >> 8), UInt8(truncatingIfNeeded: size)])
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

    public func send(_ message: some ProtoMessage) {
        guard !isDone else { return }
        var writer = ProtoWriter(capacity: MessageFraming.prefixSize + message.encodedSize)
        let size = message.encodedSize
        writer.writeRaw([0, UInt8(truncatingIfNeeded: size >> 24), UInt8(truncatingIfNeeded: size >> 16),
                         UInt8(truncatingIfNeeded: size >> 8), UInt8(truncatingIfNeeded: size)])
        message.encode(to: &writer)
        buffered.add(MessageFraming.prefixSize + size, ordering: .relaxed)
        deliver(.message(writer.finish()))
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

/// Maps full method paths to handlers. Built once before serving, then read-only.
public struct Router: Sendable {
    private var handlers: [String: (method: String, handler: UnaryHandler)] = [:]
    private var streaming: [String: (method: String, handler: ServerStreamingHandler)] = [:]
    private var bidi: [String: (method: String, handler: BidiStreamingHandler)] = [:]
    private var authenticator: (@Sendable (CallContext) -> RPCError?)?

    public init() {}

    /// Registers a handler for `/package.Service/Method`.
    public mutating func register(_ method: String, _ handler: @escaping UnaryHandler) {
        handlers["/" + method] = (method, handler)
    }

    /// Registers a typed handler: decoding failures answer INVALID_ARGUMENT before it runs.
    public mutating func register<Request: ProtoMessage>(
        _ method: String, _ type: Request.Type,
        _ handler: @escaping @Sendable (CallContext, Request, Responder) -> Void
    ) {
        register(method) { context, bytes, responder in
            let request: Request
            do throws(WireError) {
                request = try Request(decoding: bytes)
            } catch {
                responder.fail(.undecodable(error.description))
                return
            }
            handler(context, request, responder)
        }
    }

    /// The handler for an HTTP/2 `:path`, or nil.
    public func handler(forPath path: String) -> UnaryHandler? { handlers[path]?.handler }

    /// Registers a server-streaming handler; decoding failures answer INVALID_ARGUMENT before it runs.
    public mutating func registerServerStreaming<Request: ProtoMessage>(
        _ method: String, _ type: Request.Type,
        _ handler: @escaping @Sendable (CallContext, Request, StreamWriter) -> Void
    ) {
        streaming["/" + method] = (method, { @Sendable context, bytes, writer in
            let request: Request
            do throws(WireError) {
                request = try Request(decoding: bytes)
            } catch {
                writer.finish(.undecodable(error.description))
                return
            }
            handler(context, request, writer)
        })
    }

    /// Registers a bidirectional-streaming handler.
    public mutating func registerBidiStreaming(_ method: String, _ handler: @escaping BidiStreamingHandler) {
        bidi["/" + method] = (method, handler)
    }

    /// The method name and bidirectional handler for an HTTP/2 `:path`, or nil.
    public func bidiRoute(forPath path: String) -> (method: String, handler: BidiStreamingHandler)? { bidi[path] }

    /// The method name and server-streaming handler for an HTTP/2 `:path`, or nil.
    public func streamingRoute(forPath path: String) -> (method: String, handler: ServerStreamingHandler)? { streaming[path] }

    /// Sets the check the transport applies to every call, registered or not, before anything per
    /// method (routing, limits, decoding): a non-nil answer refuses the call (authentication).
    ///
    /// It sees unknown methods too, so an unauthenticated peer learns nothing about which methods exist.
    public mutating func authenticate(_ check: @escaping @Sendable (CallContext) -> RPCError?) {
        authenticator = check
    }

    /// The refusal of the router's `authenticate` check for a call, or nil when it may go on.
    public func refusal(for context: CallContext) -> RPCError? { authenticator?(context) }

    /// Whether an `authenticate` check is set.
    public var authenticates: Bool { authenticator != nil }

    /// Whether `path` names a registered method (unknown methods share one metric label).
    public func knows(path: String) -> Bool { handlers[path] != nil || streaming[path] != nil || bidi[path] != nil }

    /// What a `:path` is routed to: the method name and its handler, of one of the three kinds.
    public enum Route: Sendable {
        case unary(method: String, handler: UnaryHandler)
        case serverStreaming(method: String, handler: ServerStreamingHandler)
        case bidi(method: String, handler: BidiStreamingHandler)
    }

    /// The route of an HTTP/2 `:path` (bidirectional, then server-streaming, then unary), or nil.
    /// A transport may keep the answer for a path: the router is read-only once serving.
    public func resolve(path: String) -> Route? {
        if let (method, handler) = bidi[path] { return .bidi(method: method, handler: handler) }
        if let (method, handler) = streaming[path] { return .serverStreaming(method: method, handler: handler) }
        if let (method, handler) = handlers[path] { return .unary(method: method, handler: handler) }
        return nil
    }

    /// The method name and handler for an HTTP/2 `:path`, or nil.
    public func route(forPath path: String) -> (method: String, handler: UnaryHandler)? { handlers[path] }

    /// The registered method names, sorted.
    public var methods: [String] {
        (Array(handlers.keys) + Array(streaming.keys) + Array(bidi.keys)).map { String($0.dropFirst()) }.sorted()
    }
}
