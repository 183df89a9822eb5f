/// What a call's context says, in one object: a `CallContext` is a reference to it, so handing a context on
/// (to a handler, into a closure, to a pool) costs one reference count, not one per field. A transport may
/// keep it for its next call on the same connection (`prepare`) once nothing else holds it.
public final class CallInfo: @unchecked Sendable {
    // @unchecked Sendable: the `var` fields are written only by `init` and by `prepare`, which the owning
    // transport calls only while it holds the sole reference (no other thread can see the object then).

    /// The full method name, `billing.v1.Billing/CreateOrder`.
    public private(set) var method: String
    /// Request metadata: lower-case names, values as sent (no pseudo-headers).
    public private(set) var metadata: [(name: String, value: String)]
    /// The deadline on CLOCK_MONOTONIC in nanoseconds (the clock of the server's loops), or 0: no deadline.
    public private(set) var monotonicDeadline: UInt64
    public private(set) var requestNumber: UInt64
    /// The remote address, `127.0.0.1:53412` (a connection's calls share it).
    public let peer: String
    /// The verified client certificate's subject (mutual TLS), for authorization and logs.
    public let peerSubject: String?
    public let requestIDPrefix: String
    public private(set) var cancellation: Cancellation

    public init(
        method: String, metadata: [(name: String, value: String)], monotonicDeadline: UInt64, peer: String,
        requestID: RequestID, cancellation: Cancellation, peerSubject: String?
    ) {
        self.method = method
        self.metadata = metadata
        self.monotonicDeadline = monotonicDeadline
        self.requestNumber = requestID.number
        self.peer = peer
        self.peerSubject = peerSubject
        self.requestIDPrefix = requestID.prefix
        self.cancellation = cancellation
    }

    /// A connection's object before its first call (`prepare` gives it the call's fields).
    package init(peer: String, peerSubject: String?, requestIDPrefix: String, keepsNotes: Bool) {
        method = ""
        metadata = []
        monotonicDeadline = 0
        requestNumber = 0
        self.peer = peer
        self.peerSubject = peerSubject
        self.requestIDPrefix = requestIDPrefix
        cancellation = Cancellation(keepsNotes: keepsNotes)
    }

    /// The call's fields. Only by the transport that holds the sole reference (`isKnownUniquelyReferenced`).
    @inline(__always)
    package func prepare(method: String, metadata: [(name: String, value: String)], monotonicDeadline: UInt64, requestNumber: UInt64) {
        // The same method again (a connection calls one again and again) and no metadata twice: kept, no
        // reference count.
        if self.method != method { self.method = method }
        if !(metadata.isEmpty && self.metadata.isEmpty) { self.metadata = metadata }
        self.monotonicDeadline = monotonicDeadline
        self.requestNumber = requestNumber
    }

    /// Makes the object new for the connection's next call, if nothing but the transport holds its
    /// cancellation (a handler's closure may still); false when it cannot be reused. Only by the transport
    /// that holds the sole reference to this object.
    package func reset() -> Bool {
        guard isKnownUniquelyReferenced(&cancellation) else { return false }
        cancellation.reset()
        // Dropped now, not at the next call: the call's metadata may hold credentials.
        metadata = []
        return true
    }
}
