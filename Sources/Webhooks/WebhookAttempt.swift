/// One delivery attempt, for the log line and the counter (`billingd_webhook_deliveries_total{result}`).
public struct WebhookAttempt: Sendable {
    /// `delivered` (2xx), `rejected` (another status), `timeout`, `failed` (no answer: connection, TLS, DNS),
    /// `skipped` (filtered out by `--webhook-events`; not an attempt on the wire).
    public enum Result: String, Sendable, CaseIterable {
        case delivered, rejected, timeout, failed, skipped
    }

    public var cursor: UInt64
    public var type: String
    public var result: Result
    /// The HTTP status (0: no answer).
    public var status: Int
    /// One line: why it failed ("" when delivered).
    public var error: String
    /// Consecutive failed attempts for this event, this one included (0 when delivered).
    public var failures: Int
    /// The wait before the next attempt (0 when delivered).
    public var retryInMilliseconds: Int64
    public var durationMilliseconds: Int64
}

/// Where delivery stands, for `billingctl webhooks status`, the gauges and the Admin RPC.
public struct WebhookStatus: Sendable, Equatable {
    public var url: String
    /// The last event delivered (or skipped); the next one sent is the first after it.
    public var position: UInt64
    /// The newest event's cursor.
    public var newest: UInt64
    /// Events after the position (cursor distance).
    public var lagEvents: UInt64 { newest > position ? newest - position : 0 }
    /// Age of the oldest event not yet delivered; 0 when none waits.
    public var oldestUndeliveredAgeMs: Int64
    public var holder: String
    public var leaseUntilMs: Int64
    public var failures: Int
    public var lastError: String
    public var lastAttemptMs: Int64
    public var lastDeliveryMs: Int64
    /// Whether this replica is the one sending.
    public var sendingHere: Bool
}
