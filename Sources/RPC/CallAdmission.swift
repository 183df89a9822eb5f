import Synchronization

/// The one in-flight count of a server and its limit (`--max-in-flight`), shared by every protocol that reaches the
/// handlers: gRPC in the HTTP/2 session, Connect and gRPC-Web in their gateway. A call holds a slot from dispatch
/// until its answer (or its stream's end); `billingd_rpc_in_flight` and the drain read `count`.
public final class CallAdmission: Sendable {
    /// Calls dispatched and not yet answered; a call beyond it answers RESOURCE_EXHAUSTED OVERLOADED.
    public let limit: Int
    private let slots = Atomic<Int>(0)

    public init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Takes a slot; false (nothing taken) when `limit` calls hold one. Taken before it is checked, so that calls
    /// admitted at once on several threads never exceed the limit together.
    @inline(__always)
    public func enter() -> Bool {
        if slots.add(1, ordering: .relaxed).newValue <= limit { return true }
        slots.subtract(1, ordering: .relaxed)
        return false
    }

    /// Takes a slot whatever the count (a bidirectional call, admitted at its headers before any limit applies).
    @inline(__always)
    public func enterUnchecked() { slots.add(1, ordering: .relaxed) }

    /// Gives back a slot (exactly once per `enter` that answered true, or `enterUnchecked`).
    @inline(__always)
    public func leave() { slots.subtract(1, ordering: .relaxed) }

    /// Slots held now.
    public var count: Int { slots.load(ordering: .relaxed) }
}
