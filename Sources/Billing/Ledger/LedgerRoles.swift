/// The ledger a store hands the rules inside one database transaction, cut by aggregate: one role protocol per
/// table family, composed into `PurchaseLedger`. A rule that needs one aggregate can say so (`some GrantLedger`);
/// a store implements them all (SQLLedger, one file per table; InMemoryOrderStore).

/// Every role together: what `OrderStore.write` and `read` hand their bodies. Composed by inheritance rather than
/// a typealias of a composition: `any PurchaseLedger` stays one witness table (an existential of twelve protocols
/// carries twelve), and the rules' shared defaults extend it.
public protocol PurchaseLedger: RevenueLedger, OrderLedger, TransactionLedger, EntitlementLedger, RenewalLedger, NotificationLedger,
    EventLedger, AccountLedger, AuditLedger, GrantLedger, RefundWatchLedger, WebhookLedger, AcknowledgementLedger
{}

/// Orders: the order rows (state, refunded quantity) and their reads.
public protocol OrderLedger {
    func order(id: String) throws(BillingError) -> Order?
    /// Moves a pending order to the completed state `order` describes (its transaction, environment, time).
    /// Throws `orderNotPending` with the real state when another writer moved it first.
    func complete(_ order: Order) throws(BillingError)
    /// Moves an order from `from` to `to`; answers the order afterwards, or nil when it was not in `from`.
    func move(orderID: String, from: OrderState, to: OrderState, nowMs: Int64) throws(BillingError) -> Order?
    /// Ids of PENDING orders created before the cutoff, oldest first (expiry).
    func pendingOrders(createdBeforeMs: Int64, limit: Int) throws(BillingError) -> [String]
    /// Sets how many units of an order are refunded and its state (COMPLETED or REFUNDED) together; answers
    /// the order afterwards, or nil when it was in neither state.
    func refund(orderID: String, refundedQuantity: Int, state: OrderState, nowMs: Int64) throws(BillingError) -> Order?
    /// The account's orders, oldest first (support's customer view).
    func orders(accountID: String) throws(BillingError) -> [Order]
}

/// Store transactions and who owns them.
public protocol TransactionLedger {
    func owned(transactionID: String) throws(BillingError) -> OwnedTransaction?
    /// Inserts a transaction the ledger has not seen (transaction_id is unique). An empty account: nobody owns it yet.
    func insert(_ owned: OwnedTransaction) throws(BillingError)
    /// Changes who owns a known transaction and, when given, the order it paid.
    func reassign(transactionID: String, accountID: String, orderID: String?) throws(BillingError)
    /// Changes only who owns a known transaction (restore under `transfer`); the order it paid stays.
    func transfer(transactionID: String, to accountID: String) throws(BillingError)
    /// Stores what a newer signed view may change: expiry, revocation (time, reason, type, percentage), ownership,
    /// `upgraded`, the signed date.
    func update(_ transaction: StoreTransaction) throws(BillingError)
    /// Every transaction the account owns.
    func transactions(accountID: String) throws(BillingError) -> [OwnedTransaction]
    /// The account's transactions newest purchase first (purchase time, then transaction id, both descending),
    /// starting after `after` when given; at most `limit`.
    func history(accountID: String, after: HistoryCursor?, limit: Int) throws(BillingError) -> [OwnedTransaction]
    /// Every transaction of one subscription (or one purchase), whoever owns it.
    func transactions(originalTransactionID: String) throws(BillingError) -> [OwnedTransaction]
    /// The newest transaction (latest purchase) recorded with a Google Play purchase token; nil when none is.
    func transaction(purchaseToken: String) throws(BillingError) -> OwnedTransaction?
    /// Serializes writers of one subscription (original transaction) until the end of the database transaction,
    /// so that each reads what the previous one committed (renewal state, entitlement) before it writes.
    /// A no-op where writers are already serialized (memory, SQLite).
    func lockSubscription(originalTransactionID: String) throws(BillingError)
}

/// Entitlements: what an account may use now, per key.
public protocol EntitlementLedger {
    func entitlement(accountID: String, key: String) throws(BillingError) -> EntitlementRecord?
    func entitlements(accountID: String) throws(BillingError) -> [EntitlementRecord]
    func put(_ entitlement: EntitlementRecord) throws(BillingError)
    func deleteEntitlement(accountID: String, key: String) throws(BillingError)
}

/// Subscription renewal states, per original transaction.
public protocol RenewalLedger {
    func renewal(originalTransactionID: String) throws(BillingError) -> RenewalState?
    func put(_ renewal: RenewalState) throws(BillingError)
}

/// App Store notifications seen, by UUID (exactly-once application).
public protocol NotificationLedger {
    /// The recorded result of a notification UUID, if it was seen.
    func notification(uuid: String) throws(BillingError) -> NotificationResult?
    func record(_ notification: NotificationRecord) throws(BillingError)
    /// The newest signedDate of any notification recorded (applied, duplicate or ignored); nil when none was.
    func newestNotificationSignedMs() throws(BillingError) -> Int64?
}

/// The event feed: events in commit order.
public protocol EventLedger {
    /// Appends an event; the store gives it its cursor in commit order.
    func append(_ event: EventRecord) throws(BillingError)
    /// Committed events after `cursor`, oldest first.
    func events(after cursor: UInt64, limit: Int, accountID: String?) throws(BillingError) -> [EventRecord]
    /// The cursor of the newest committed event; 0 when there is none.
    func lastCursor() throws(BillingError) -> UInt64
}

/// Accounts across the aggregates: paging, lookup by appAccountToken, erasure.
public protocol AccountLedger {
    /// Accounts that own transactions, in order, after `account` (paging; upgrade backfill).
    func accounts(after account: String, limit: Int) throws(BillingError) -> [String]
    /// The accounts owning a transaction that carries this appAccountToken, in order.
    func accounts(appAccountToken: String) throws(BillingError) -> [String]
    /// Erasure: `pseudonym` replaces `accountID` in every stored copy (orders, transactions' ownership, entitlements,
    /// grants, events and their order snapshots, audit entries and the requests they keep, refund watches,
    /// acknowledgements); the account's idempotency keys are dropped. Answers what it rewrote.
    func renameAccount(_ accountID: String, to pseudonym: String) throws(BillingError) -> ErasureCounts
}

/// The append-only audit trail.
public protocol AuditLedger {
    /// Appends one audit entry. Nothing updates or deletes one.
    func appendAudit(_ entry: AuditRecord) throws(BillingError)
    /// The audit entries `filter` matches, newest first (time, then id, both descending), after `after` when
    /// given; at most `limit`.
    func auditEntries(_ filter: AuditFilter, after: AuditCursor?, limit: Int) throws(BillingError) -> [AuditRecord]
}

/// Grants: entitlements given by support for a while.
public protocol GrantLedger {
    /// Inserts a grant (its id is new).
    func insertGrant(_ grant: GrantRecord) throws(BillingError)
    func grant(id: String) throws(BillingError) -> GrantRecord?
    /// The account's grant made with that idempotency key, if any.
    func grant(accountID: String, idempotencyKey: String) throws(BillingError) -> GrantRecord?
    /// The account's grants, oldest first.
    func grants(accountID: String) throws(BillingError) -> [GrantRecord]
    /// Stores a grant's revocation.
    func updateGrant(_ grant: GrantRecord) throws(BillingError)
    /// Grants past their end at `nowMs`, not revoked, whose expiry is not yet noted; the earliest first, at most `limit`.
    func dueGrants(nowMs: Int64, limit: Int) throws(BillingError) -> [GrantRecord]
    /// Marks a grant's expiry noted; true only for the one writer that changed it (a replica sweeping at once gets false).
    func noteGrantExpired(grantID: String) throws(BillingError) -> Bool
}

/// The customers whose App Store refund history reconciliation reads.
public protocol RefundWatchLedger {
    /// Notes a customer whose refund history reconciliation reads; a repeat (same environment and id) changes nothing.
    func watchRefunds(_ watch: RefundWatch) throws(BillingError)
    /// The customers whose refund history reconciliation reads, least recently read first; at most `limit`.
    func refundWatches(limit: Int) throws(BillingError) -> [RefundWatch]
    /// Records that a customer's refund history was read through at `nowMs`.
    func refundWatchChecked(transactionID: String, environment: StoreEnvironment, nowMs: Int64) throws(BillingError)
}

/// The webhook cursor: position and lease.
public protocol WebhookLedger {
    /// The webhook cursor (`WebhookRules`); nil before `ensureWebhookCursor`.
    func webhookCursor() throws(BillingError) -> WebhookCursor?
    /// Adds the webhook cursor at position 0 (the oldest event kept) unless it exists.
    func ensureWebhookCursor() throws(BillingError)
    /// Sets holder and lease end when the lease is `holder`'s, free, or expired at `nowMs`; true when it did.
    func takeWebhookLease(holder: String, nowMs: Int64, untilMs: Int64) throws(BillingError) -> Bool
    /// Moves the position from `expected` to `position` and renews the lease, if `holder` has it; true when it did.
    func advanceWebhook(
        holder: String, from expected: UInt64, to position: UInt64, nowMs: Int64, untilMs: Int64, delivered: Bool
    ) throws(BillingError)
        -> Bool
    /// Counts a failed attempt and renews the lease, if `holder` has it; true when it did.
    func webhookFailed(holder: String, error: String, nowMs: Int64, untilMs: Int64) throws(BillingError) -> Bool
    /// Sets the position (replay), clearing the failure count.
    func setWebhookPosition(_ position: UInt64) throws(BillingError)
}

/// Google Play purchases to acknowledge.
public protocol AcknowledgementLedger {
    /// Queues a Google Play purchase for acknowledgement; a token already queued changes nothing.
    func queueAcknowledgement(_ a: PlayAcknowledgement) throws(BillingError)
    /// Claims acknowledgements not done whose next attempt is due at `nowMs`, the oldest due first, at most `limit`:
    /// their next attempt moves to `untilMs`, so another replica claiming at once skips them (the UPDATE re-checks
    /// that they are due).
    func claimAcknowledgements(nowMs: Int64, untilMs: Int64, limit: Int) throws(BillingError) -> [PlayAcknowledgement]
    /// Records an attempt's outcome: what Google confirmed (times, 0 for not yet), the error and the next attempt.
    func updateAcknowledgement(_ a: PlayAcknowledgement) throws(BillingError)
    /// Purchases queued before `createdBeforeMs` and not yet acknowledged.
    func unacknowledgedCount(createdBeforeMs: Int64) throws(BillingError) -> Int
}

extension TransactionLedger {
    public func lockSubscription(originalTransactionID: String) throws(BillingError) {}
}
