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
