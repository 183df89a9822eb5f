import Synchronization

/// Which deadline a call runs under: one rule for every protocol (gRPC's and gRPC-Web's `grpc-timeout`,
/// Connect's `connect-timeout-ms`, each parsed by its codec into nanoseconds asked).
///
/// A unary call runs under the server's cap (`--max-deadline`) when the client asked nothing or asked more; a
/// streaming call has no cap (long-lived streams such as WatchEvents and Health Watch) and only the timeout asked.
public enum CallDeadline: Equatable, Sendable {
    /// None: a streaming call without a timeout, or a unary call with neither a timeout nor a cap.
    case none
    /// The server's cap, no later than what the client asked: gRPC's once-a-second sweep enforces it (no timer
    /// per call); the context carries it as the deadline.
    case cap(nanoseconds: Int64)
    /// The client's timeout (under the cap, or on a streaming call): a timer per call.
    case timer(nanoseconds: Int64)

    /// The deadline of a call that asked `asked` nanoseconds (nil: nothing asked), under `capNanoseconds` (0: none).
    @inlinable
    public static func decide(asked: Int64?, streaming: Bool, capNanoseconds: Int64) -> CallDeadline {
        if streaming && asked == nil { return .none }
        if !streaming && capNanoseconds > 0 && (asked.map { $0 >= capNanoseconds } ?? true) {
            return .cap(nanoseconds: capNanoseconds)
        }
        if let asked { return .timer(nanoseconds: asked) }
        return .none
    }
}

/// The one call pipeline of a port, shared by every transport that reaches the handlers (gRPC in the HTTP/2
/// session; Connect and gRPC-Web through their codecs): the router and its interceptors (the check at a call's
/// headers, the observer of its record), request ids (one prefix and one counter), the deadline rule, and the one
/// in-flight count. A transport asks it in this order: `nextRequestNumber` and the context, `refusal`, `resolve`,
/// `admission.enter`, the handler, then `observe` with the call's record, and `admission.leave`.
///
/// As grpc-swift 2's ServerRPCExecutor, the core owns what every call goes through; the transports only frame
/// bytes. Read-only after init; every member is safe from any thread.
public final class CallPipeline: Sendable {
    public let router: Router
    /// The port's one in-flight count and limit (`--max-in-flight`).
    public let admission: CallAdmission
    /// The prefix of every request id of this process's port (`RequestID`): 8 hex digits, random per start.
    public let requestIDPrefix: String
    private let counter = Atomic<UInt64>(0)
    /// The longest a unary call may run (`--max-deadline`); 0: no cap.
    public let maxDeadlineNanoseconds: Int64
    /// Whether calls keep their handler's notes (the per-call log line reads them).
    public let keepsNotes: Bool
    /// Whether an interceptor observes call records (else none is built).
    public let observes: Bool
    /// Whether an interceptor checks calls at their headers.
    public let authenticates: Bool
    /// The interceptors' observers as one closure, or one that does nothing. Not optional: called straight from
    /// this `let`, the closure is not copied per call.
    public let observer: @Sendable (CallRecord) -> Void

    public init(router: Router, admission: CallAdmission, maxDeadlineNanoseconds: Int64 = 60_000_000_000, keepsNotes: Bool = true) {
        self.router = router
        self.admission = admission
        self.maxDeadlineNanoseconds = maxDeadlineNanoseconds
        self.keepsNotes = keepsNotes
        observer = router.callObserver ?? { _ in }
        observes = router.callObserver != nil
        authenticates = router.authenticates
        requestIDPrefix = String(UInt32.random(in: 0...UInt32.max), radix: 16)
    }

    /// The next request number (ids are `prefix-number`, unique per process).
    @inline(__always)
    public func nextRequestNumber() -> UInt64 { counter.add(1, ordering: .relaxed).newValue }

    /// The interceptors' answer at the call's headers: nil accepts.
    public func refusal(for context: CallContext) -> RPCError? { router.refusal(for: context) }

    /// The handler of `path`, nil for an unknown method.
    public func resolve(path: String) -> Router.Route? { router.resolve(path: path) }

    /// The deadline a call runs under (`CallDeadline.decide` with this port's cap).
    @inline(__always)
    public func deadline(asked: Int64?, streaming: Bool) -> CallDeadline {
        CallDeadline.decide(asked: asked, streaming: streaming, capNanoseconds: maxDeadlineNanoseconds)
    }

    /// Hands a finished call's record to the observers (metrics, the log line).
    @inline(__always)
    public func observe(_ record: CallRecord) { observer(record) }
}
