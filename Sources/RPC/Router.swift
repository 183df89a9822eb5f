import Dispatch
public import ProtoWire

/// Where a handler runs. The transport reads a call on an event loop; a handler registered `.loop` runs
/// there (it must answer at once or hand its work to something that does not block the loop: a store's
/// group commit, a cache); `.pool` runs it on a worker pool (it may block or burn CPU: receipt
/// verification, calls to Apple). Services say which when they register, not by hopping threads themselves.
public enum Execution: Sendable {
    case loop
    case pool(WorkerPool)
}

/// A named pool of worker threads for handlers that may block (a concurrent Dispatch queue: threads are
/// made as work waits and parked when idle).
public struct WorkerPool: Sendable {
    public let name: String
    private let queue: DispatchQueue

    public init(name: String) {
        self.name = name
        self.queue = DispatchQueue(label: name, attributes: .concurrent)
    }

    /// Runs `work` on one of the pool's threads.
    public func run(_ work: @escaping @Sendable () -> Void) { queue.async(execute: work) }
}

/// Policy applied by the transport to every call, registered method or not: `accept` runs at the call's
/// headers, before routing, limits and decoding (authentication; a non-nil answer refuses the call), and
/// `finished` once its status was submitted (metrics, the per-call log line). Unknown methods pass through
/// both, so no peer can reach a method, or a metric series, around them.
public struct ServerInterceptor: Sendable {
    public var accept: (@Sendable (CallContext) -> RPCError?)?
    public var finished: (@Sendable (CallRecord) -> Void)?

    public init(accept: (@Sendable (CallContext) -> RPCError?)? = nil, finished: (@Sendable (CallRecord) -> Void)? = nil) {
        self.accept = accept
        self.finished = finished
    }
}

/// The end of one call, for logs and metrics.
///
/// A class, not a struct: the record passes through the observers' closures, and each copy of a struct of
/// eleven fields retained and released every string in it (18 reference-count operations a call). A
/// transport may reuse one for its next call (`update`) once no observer kept it.
public final class CallRecord: @unchecked Sendable {
    // @unchecked Sendable: the `var` fields are written only by `init` and by `update`, which the transport
    // calls only while it holds the sole reference (no other thread can see the object then). For the same
    // reason they are read through getters compiled here (hot-path module, no dynamic exclusivity checks): as
    // public stored `var`s, every read in an observer's module was a `swift_beginAccess` (about 75 instructions).
    public var method: String { storedMethod }
    private var storedMethod: String
    /// False for a path the router does not know: metrics label such calls `unknown`, whatever they named.
    public var knownMethod: Bool { storedKnownMethod }
    private var storedKnownMethod: Bool
    public var code: StatusCode { storedCode }
    private var storedCode: StatusCode
    public var reason: String? { storedReason }
    private var storedReason: String?
    public var durationNanoseconds: UInt64 { storedDurationNanoseconds }
    private var storedDurationNanoseconds: UInt64
    public let peer: String
    /// Formatted only when read (logging), not for every call.
    public var requestID: String { requestNumber == 0 ? "" : RequestID(prefix: requestIDPrefix, number: requestNumber).description }
    public let requestIDPrefix: String
    public var requestNumber: UInt64 { storedRequestNumber }
    private var storedRequestNumber: UInt64
    /// Facts the handler noted (`order_id`, `account_id`).
    public var notes: [(String, String)] { storedNotes }
    private var storedNotes: [(String, String)]
    /// The client certificate's subject under mutual TLS.
    public let peerSubject: String?
    /// The wire protocol the call came by: `grpc`, `connect` or `grpc-web` (a metric label: three values).
    public let wireProtocol: String

    public init(
        method: String, knownMethod: Bool, code: StatusCode, reason: String?, durationNanoseconds: UInt64, peer: String,
        requestIDPrefix: String, requestNumber: UInt64, notes: [(String, String)], peerSubject: String?,
        wireProtocol: String = "grpc"
    ) {
        self.wireProtocol = wireProtocol
        self.storedMethod = method
        self.storedKnownMethod = knownMethod
        self.storedCode = code
        self.storedReason = reason
        self.storedDurationNanoseconds = durationNanoseconds
        self.peer = peer
        self.requestIDPrefix = requestIDPrefix
        self.storedRequestNumber = requestNumber
        self.storedNotes = notes
        self.peerSubject = peerSubject
    }

    /// The next call's end on the same connection (peer, subject, prefix and protocol stay). Only by the
    /// transport that holds the sole reference (`isKnownUniquelyReferenced`).
    package func update(
        method: String, knownMethod: Bool, code: StatusCode, reason: String?, durationNanoseconds: UInt64,
        requestNumber: UInt64, notes: [(String, String)]
    ) {
        // The same String again (one method called again and again): kept, no reference count.
        if storedMethod != method { storedMethod = method }
        self.storedKnownMethod = knownMethod
        self.storedCode = code
        self.storedReason = reason
        self.storedDurationNanoseconds = durationNanoseconds
        self.storedRequestNumber = requestNumber
        if !(notes.isEmpty && storedNotes.isEmpty) { storedNotes = notes }
    }
}

/// Maps full method paths to handlers and holds the interceptors every call passes. Built once before
/// serving, then read-only.
public struct Router: Sendable {
    private var handlers: [String: Registration] = [:]
    private var streaming: [String: Registration] = [:]
    private var bidi: [String: Registration] = [:]
    /// The interceptors' checks and observers, each composed into one closure as they are added (a closure
    /// kept in an array is called through a reabstraction thunk that copies its argument).
    private var acceptor: (@Sendable (CallContext) -> RPCError?)?
    private var observer: (@Sendable (CallRecord) -> Void)?

    public init() {}

    /// Registers a handler for `/package.Service/Method` over raw request bytes; it runs on the loop.
    public mutating func register(_ method: String, _ handler: @escaping UnaryHandler) {
        handlers["/" + method] = Registration(method, unary: handler)
    }

    /// Wraps the unary handler registered for `method` (a middleware: `around` gets the handler and answers the one
    /// to call instead); no-op when none is registered. For cross-cutting work one service's handlers should not
    /// each repeat, such as the audit entry of the Admin calls that change something.
    public mutating func wrap(_ method: String, _ around: (@escaping UnaryHandler) -> UnaryHandler) {
        guard let registered = handlers["/" + method], let unary = registered.unary else { return }
        handlers["/" + method] = Registration(method, unary: around(unary))
    }

    /// Registers a typed handler: decoding failures answer INVALID_ARGUMENT before it runs; it runs where
    /// `execution` says. Inlinable (with what it calls), so that the closure it stores is specialized for
    /// `Request` in the service's module: unspecialized, every call decoded through witness tables and
    /// copied its context through value witnesses (about 600 instructions a Health/Check).
    @inlinable
    public mutating func register<Request: ProtoMessage>(
        _ method: String, _ type: Request.Type, on execution: Execution = .loop,
        _ handler: @escaping @Sendable (CallContext, Request, Responder) -> Void
    ) {
        registerTyped(method, type, choose: nil, fixed: execution, handler)
    }

    /// Registers a typed handler whose place depends on its request (a proof whose certificate chain is
    /// already verified is checked on the loop; one that needs the chain verified goes to a pool).
    @inlinable
    public mutating func register<Request: ProtoMessage>(
        _ method: String, _ type: Request.Type, on choose: @escaping @Sendable (Request) -> Execution,
        _ handler: @escaping @Sendable (CallContext, Request, Responder) -> Void
    ) {
        registerTyped(method, type, choose: choose, fixed: .loop, handler)
    }

    @inlinable
    mutating func registerTyped<Request: ProtoMessage>(
        _ method: String, _ type: Request.Type, choose: (@Sendable (Request) -> Execution)?, fixed: Execution,
        _ handler: @escaping @Sendable (CallContext, Request, Responder) -> Void
    ) {
        if choose == nil, case .loop = fixed {
            // The common case, kept apart so that a call on the loop reads no `Execution` at all.
            register(method) { context, bytes, responder in
                do throws(RPCError) {
                    handler(context, try Self.decode(bytes), responder)
                } catch {
                    responder.fail(error)
                }
            }
            return
        }
        register(method) { context, bytes, responder in
            let request: Request
            do throws(RPCError) {
                request = try Self.decode(bytes)
            } catch {
                return responder.fail(error)
            }
            switch choose?(request) ?? fixed {
            case .loop: handler(context, request, responder)
            case .pool(let pool): pool.run { handler(context, request, responder) }
            }
        }
    }

    /// Registers a server-streaming handler; decoding failures answer INVALID_ARGUMENT before it runs.
    public mutating func registerServerStreaming<Request: ProtoMessage>(
        _ method: String, _ type: Request.Type, on execution: Execution = .loop,
        _ handler: @escaping @Sendable (CallContext, Request, StreamWriter) -> Void
    ) {
        streaming["/" + method] = Registration(
            method,
            serverStreaming: { @Sendable context, bytes, writer in
                let request: Request
                do throws(RPCError) {
                    request = try Self.decode(bytes)
                } catch {
                    return writer.finish(error)
                }
                switch execution {
                case .loop: handler(context, request, writer)
                case .pool(let pool): pool.run { handler(context, request, writer) }
                }
            }
        )
    }

    /// A request message, or the INVALID_ARGUMENT answer for bytes that do not decode as one.
    /// (Typed throws, not a `Result`: a `Result<Request, _>` in an unspecialized closure costs a runtime
    /// generic-metadata lookup per call.)
    @inline(__always)
    @inlinable
    static func decode<Request: ProtoMessage>(_ bytes: [UInt8]) throws(RPCError) -> Request {
        // An empty message is every field's default (proto3): no reader to set up (Health/Check's request).
        if bytes.isEmpty { return Request() }
        do throws(WireError) {
            return try Request(decoding: bytes)
        } catch {
            throw .undecodable(error.description)
        }
    }

    /// Registers a bidirectional-streaming handler (started on the loop at the call's headers; its
    /// receiver is called on the loop).
    public mutating func registerBidiStreaming(_ method: String, _ handler: @escaping BidiStreamingHandler) {
        bidi["/" + method] = Registration(method, bidi: handler)
    }

    /// Adds an interceptor; every call passes the interceptors in the order they were added.
    public mutating func intercept(_ interceptor: ServerInterceptor) {
        if let accept = interceptor.accept {
            if let earlier = acceptor {
                acceptor = { context in earlier(context) ?? accept(context) }
            } else {
                acceptor = accept
            }
        }
        if let finished = interceptor.finished {
            if let earlier = observer {
                observer = { record in
                    earlier(record)
                    finished(record)
                }
            } else {
                observer = finished
            }
        }
    }

    /// Adds an interceptor that only refuses calls (authentication).
    public mutating func authenticate(_ check: @escaping @Sendable (CallContext) -> RPCError?) {
        intercept(ServerInterceptor(accept: check))
    }

    /// The first refusal of the interceptors for a call, or nil when it may go on.
    public func refusal(for context: CallContext) -> RPCError? { acceptor?(context) }

    /// Whether any interceptor looks at calls before they are routed (the transport then builds a context
    /// for them).
    public var authenticates: Bool { acceptor != nil }

    /// The interceptors' observers as one closure that hands a call's end to each, or nil when none asked
    /// (the transport then builds no record): transports keep it.
    public var callObserver: (@Sendable (CallRecord) -> Void)? { observer }

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
        if let r = bidi[path], let handler = r.bidi { return .bidi(method: r.method, handler: handler) }
        if let r = streaming[path], let handler = r.serverStreaming { return .serverStreaming(method: r.method, handler: handler) }
        if let r = handlers[path], let handler = r.unary { return .unary(method: r.method, handler: handler) }
        return nil
    }

    /// The registered method names, sorted.
    public var methods: [String] {
        (Array(handlers.keys) + Array(streaming.keys) + Array(bidi.keys)).map { String($0.dropFirst()) }.sorted()
    }
}
