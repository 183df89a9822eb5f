/// Where webhook delivery stands, kept in the database (one row): the cursor of the last event delivered (or
/// skipped by the event filter), which replica sends, until when its lease runs, and how the last attempt went.
public struct WebhookCursor: Sendable, Equatable {
    /// Every event with a cursor at or below this was delivered (or filtered out); the next one goes after it.
    public var position: UInt64
    /// The replica that sends now ("" before the first); others wait for `leaseUntilMs` to pass.
    public var holder: String
    public var leaseUntilMs: Int64
    /// Failed attempts since the last delivery (0 after a 2xx).
    public var failures: Int
    /// The last failure's cause, one line ("HTTP 503", "timed out", ...); "" when none since the last delivery.
    public var lastError: String
    public var lastAttemptMs: Int64
    /// When the last event was delivered (0: never).
    public var lastDeliveryMs: Int64

    public init(
        position: UInt64 = 0, holder: String = "", leaseUntilMs: Int64 = 0, failures: Int = 0, lastError: String = "",
        lastAttemptMs: Int64 = 0, lastDeliveryMs: Int64 = 0
    ) {
        self.position = position
        self.holder = holder
        self.leaseUntilMs = leaseUntilMs
        self.failures = failures
        self.lastError = lastError
        self.lastAttemptMs = lastAttemptMs
        self.lastDeliveryMs = lastDeliveryMs
    }
}

/// The webhook cursor's rules over the ledger, written once for every store. Each is one write transaction; the
/// conditions sit in the UPDATE's WHERE, so two replicas deciding at once cannot both win (PostgreSQL re-checks
/// a row's WHERE after waiting for its lock; SQLite has one writer).
public enum WebhookRules {
    /// Takes or renews the lease for `holder` until `untilMs` when it is free, expired at `nowMs`, or already
    /// `holder`'s; answers the cursor when `holder` has it, nil when another replica does.
    public static func lease(_ ledger: any PurchaseLedger, holder: String, nowMs: Int64, untilMs: Int64) throws(BillingError) -> WebhookCursor? {
        try ledger.ensureWebhookCursor()
        guard try ledger.takeWebhookLease(holder: holder, nowMs: nowMs, untilMs: untilMs) else { return nil }
        return try ledger.webhookCursor()
    }

    /// Records a delivery (or a filtered skip) up to `position`, if `holder` still has the lease and nobody moved
    /// the position since `expected` (an operator's replay); answers false otherwise (the sender re-reads).
    public static func advance(
        _ ledger: any PurchaseLedger, holder: String, from expected: UInt64, to position: UInt64, nowMs: Int64, untilMs: Int64,
        delivered: Bool
    ) throws(BillingError) -> Bool {
        try ledger.advanceWebhook(holder: holder, from: expected, to: position, nowMs: nowMs, untilMs: untilMs, delivered: delivered)
    }

    /// Records a failed attempt (and renews the lease); false when `holder` lost the lease.
    public static func failed(_ ledger: any PurchaseLedger, holder: String, error: String, nowMs: Int64, untilMs: Int64) throws(BillingError) -> Bool {
        try ledger.webhookFailed(holder: holder, error: String(error.prefix(500)), nowMs: nowMs, untilMs: untilMs)
    }

    /// An operator's replay: delivery goes on after `position` (whoever holds the lease sees it at its next step).
    public static func replay(_ ledger: any PurchaseLedger, after position: UInt64) throws(BillingError) -> WebhookCursor {
        try ledger.ensureWebhookCursor()
        try ledger.setWebhookPosition(position)
        return try ledger.webhookCursor() ?? WebhookCursor(position: position)
    }
}
