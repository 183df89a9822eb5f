/// What a handler knows about its call besides the request message: a reference to the call's `CallInfo`.
public struct CallContext: Sendable {
    public let info: CallInfo

    /// The full method name, `billing.v1.Billing/CreateOrder`.
    public var method: String { info.method }
    /// Request metadata: lower-case names, values as sent (no pseudo-headers).
    public var metadata: [(name: String, value: String)] { info.metadata }
    /// When the client stops waiting, if it said (`grpc-timeout`), or the server's cap.
    public var deadline: ContinuousClock.Instant? {
        let at = info.monotonicDeadline
        guard at != 0 else { return nil }
        return ContinuousClock.now.advanced(by: .nanoseconds(Int64(bitPattern: at &- CallClock.now())))
    }
    /// The deadline on CLOCK_MONOTONIC in nanoseconds (the clock of the server's loops), or 0: no deadline.
    /// A number, not a `ContinuousClock.Instant?`: that type is resilient (the Concurrency library's), and
    /// every copy and destruction of a value holding one went through its value witnesses.
    public var monotonicDeadline: UInt64 { info.monotonicDeadline }
    /// The remote address, `127.0.0.1:53412`.
    public var peer: String { info.peer }
    /// An id for this call that appears in logs and in INTERNAL errors.
    public var requestID: String { RequestID(prefix: info.requestIDPrefix, number: info.requestNumber).description }
    public var cancellation: Cancellation { info.cancellation }
    /// The verified client certificate's subject (mutual TLS), for authorization and logs.
    public var peerSubject: String? { info.peerSubject }

    public init(
        method: String, metadata: [(name: String, value: String)] = [], deadline: ContinuousClock.Instant? = nil,
        peer: String = "", requestID: RequestID = RequestID(prefix: "local", number: 0),
        cancellation: Cancellation = Cancellation(), peerSubject: String? = nil
    ) {
        info = CallInfo(
            method: method, metadata: metadata, monotonicDeadline: deadline.map(CallClock.monotonic) ?? 0, peer: peer,
            requestID: requestID, cancellation: cancellation, peerSubject: peerSubject)
    }

    /// The context of a call whose fields a transport keeps in `info`.
    @inlinable
    public init(_ info: CallInfo) { self.info = info }

    /// Notes a fact for this call's log line.
    public func note(_ key: String, _ value: String) { info.cancellation.note(key, value) }

    /// The first value of a metadata entry.
    public func metadata(_ name: String) -> String? {
        info.metadata.first { $0.name == name }?.value
    }

    /// True once the call is cancelled or its deadline passed: domain code checks before it writes.
    public var isExpired: Bool {
        if info.cancellation.isCancelled { return true }
        let at = info.monotonicDeadline
        return at != 0 && CallClock.now() >= at
    }
}
