import Billing

/// Rows as both databases hand them out.
protocol RowReader {
    func text(_ column: Int32) -> String
    func optionalText(_ column: Int32) -> String?
    func int64(_ column: Int32) -> Int64
    func int(_ column: Int32) -> Int
    func isNull(_ column: Int32) -> Bool
}

/// What the ledger needs from a connection: parameterised queries and updates. Statements use
/// `$1, $2, ...` in order of appearance, which both SQLite and PostgreSQL bind by position.
protocol SQLExecutor {
    associatedtype Reader: RowReader
    func query<T>(_ sql: String, _ values: [SQLValue], _ row: (Reader) -> T) throws(StorageError) -> [T]
    @discardableResult
    func update(_ sql: String, _ values: [SQLValue]) throws(StorageError) -> Int
    /// The current transaction carries other jobs too (a PostgreSQL batch): a lock held elsewhere is not waited for.
    var sharesTransaction: Bool { get }
    /// Appends one event (`SQLLedger.values`) to the feed in the current transaction. SQLite inserts it (its rowid
    /// is the cursor); PostgreSQL numbers it from the feed counter, last before COMMIT (`FeedCursors`).
    func appendEvent(_ values: [SQLValue]) throws(StorageError)
    /// Erasure: the account of events appended in this transaction but not yet inserted (a PostgreSQL batch), and the
    /// order snapshots they carry, rewritten; answers how many. Nothing waits anywhere else (SQLite inserts at once).
    func renamePendingEvents(from old: String, to new: String) -> Int
}

extension SQLExecutor {
    var sharesTransaction: Bool { false }

    func renamePendingEvents(from old: String, to new: String) -> Int { 0 }

    func appendEvent(_ values: [SQLValue]) throws(StorageError) {
        try update(LedgerSQL.insertEvent, values)
    }
}

extension Row: RowReader {}
extension PGRow: RowReader {}
extension PGConnection: SQLExecutor {}

/// `PurchaseLedger` over one connection inside its (group) transaction; the same SQL for both stores.
struct SQLLedger<DB: SQLExecutor>: PurchaseLedger {
    let db: DB
    /// PostgreSQL: lock the order row, so replicas completing one order serialize on it.
    var lockOrders = false
    /// What the job changed, for the store to act on after COMMIT (order cache, feed followers).
    var log: LedgerLog? = nil

    // The statements are built once (LedgerSQL): building a 26-column INSERT and its placeholders per call cost
    // about 46,000 instructions per notification (callgrind).
    static var columns: String { LedgerSQL.transactionColumns }
    static var entitlementColumns: String { LedgerSQL.entitlementColumns }
    static var eventColumns: String { LedgerSQL.eventColumns }
    static var insertEvent: String { LedgerSQL.insertEvent }

    @discardableResult
    func run<T>(_ body: () throws(StorageError) -> T) throws(BillingError) -> T {
        do throws(StorageError) {
            return try body()
        } catch {
            // Whole, as itself: the store reads its code back (JobFailure), the log gets its description.
            throw .storage(error)
        }
    }

    private var forUpdate: String { lockOrders ? " FOR UPDATE" : "" }

    func order(id: String) throws(BillingError) -> Order? {
        try run { () throws(StorageError) in
            try db.query(OrderRow.selectByID + forUpdate, [.text(id)], { OrderRow.decode($0) }).first
        }
    }

    func owned(transactionID: String) throws(BillingError) -> OwnedTransaction? {
        try run { () throws(StorageError) in
            // PostgreSQL: lock the row, so a completion and a restore of one transaction serialize.
            try db.query(
                lockOrders ? LedgerSQL.transactionByIDForUpdate : LedgerSQL.transactionByID,
                [.text(transactionID)], { Self.decode($0) }
            ).first
        }
    }

    func insert(_ o: OwnedTransaction) throws(BillingError) {
        let t = o.transaction
        log?.revenue.transactionIDs.append(t.transactionID)
        try run { () throws(StorageError) in
            try db.update(
                LedgerSQL.insertTransaction,
                [
                    .text(t.transactionID), .text(t.originalTransactionID), .text(o.accountID), o.orderID.map { .text($0) } ?? .null,
                    .text(t.productID), t.productKind.map { .text($0.rawValue) } ?? .null, .int(t.purchaseTimeMs), .int(t.expiresTimeMs),
                    .int(t.revocationTimeMs), .int(Int64(t.quantity)), .int(Int64(t.environment.rawValue)),
                    t.appAccountToken.map { .text($0) } ?? .null, .text(t.bundleID), .int(t.signedTimeMs),
                    t.revocationReason.map { .int(Int64($0)) } ?? .null, .int(Int64(t.store.rawValue)), .int(Int64(t.ownership.rawValue)),
                    .int(t.upgraded ? 1 : 0), .int(Int64(t.revocationType.rawValue)), .int(Int64(t.revocationPercentage)),
                    .int(t.price.priceMilliunits), .text(t.price.currency), .text(t.price.storefront), .text(t.price.offerID),
                    .text(t.price.offerType), .text(t.subscriptionGroupID), .text(t.purchaseToken),
                ])
        }
    }

    /// `$1, $2, ... $n`.
    static func placeholders(_ n: Int) -> String { LedgerSQL.placeholders(n) }

    func reassign(transactionID: String, accountID: String, orderID: String?) throws(BillingError) {
        log?.revenue.transactionIDs.append(transactionID)
        try run { () throws(StorageError) in
            try db.update(
                "UPDATE transactions SET account_id = $1, order_id = $2 WHERE transaction_id = $3",
                [.text(accountID), orderID.map { .text($0) } ?? .null, .text(transactionID)])
        }
    }

    func transfer(transactionID: String, to accountID: String) throws(BillingError) {
        log?.revenue.transactionIDs.append(transactionID)
        try run { () throws(StorageError) in
            try db.update("UPDATE transactions SET account_id = $1 WHERE transaction_id = $2", [.text(accountID), .text(transactionID)])
        }
    }

    func update(_ t: StoreTransaction) throws(BillingError) {
        log?.revenue.transactionIDs.append(t.transactionID)
        try run { () throws(StorageError) in
            try db.update(
                "UPDATE transactions SET expires_time_ms = $1, revocation_time_ms = $2, revocation_reason = $3, signed_time_ms = $4, "
                    + "upgraded = $5, revocation_type = $6, revocation_percentage = $7, ownership = $8, price_milliunits = $9, "
                    + "currency = $10, storefront = $11, offer_id = $12, offer_type = $13 WHERE transaction_id = $14",
                [
                    .int(t.expiresTimeMs), .int(t.revocationTimeMs), t.revocationReason.map { .int(Int64($0)) } ?? .null,
                    .int(t.signedTimeMs), .int(t.upgraded ? 1 : 0), .int(Int64(t.revocationType.rawValue)),
                    .int(Int64(t.revocationPercentage)), .int(Int64(t.ownership.rawValue)), .int(t.price.priceMilliunits),
                    .text(t.price.currency), .text(t.price.storefront), .text(t.price.offerID), .text(t.price.offerType),
                    .text(t.transactionID),
                ])
        }
    }

    func complete(_ order: Order) throws(BillingError) {
        let changed = try run { () throws(StorageError) -> Int in
            try db.update(
                "UPDATE orders SET state = $1, transaction_id = $2, environment = $3, update_time_ms = $4, store = $5 WHERE order_id = $6 AND state = $7",
                [
                    .int(Int64(OrderState.completed.rawValue)), order.transactionID.map { .text($0) } ?? .null,
                    order.environment.map { .int(Int64($0.rawValue)) } ?? .null, .int(order.updateTimeMs),
                    order.store.map { .int(Int64($0.rawValue)) } ?? .null, .text(order.id), .int(Int64(OrderState.pending.rawValue)),
                ])
        }
        // Another writer changed the order after our read (a replica completed it, or expiry ran):
        // answer the state it is really in, never a COMPLETED it may not be.
        guard changed == 1 else {
            guard let current = try self.order(id: order.id) else { throw .orderNotFound(orderID: order.id) }
            guard current.state != .pending else { throw .storage(.orderChanged(orderID: order.id)) }
            throw .orderNotPending(orderID: order.id, state: current.state)
        }
        log?.orders.append(order)
    }

    func move(orderID: String, from: OrderState, to: OrderState, nowMs: Int64) throws(BillingError) -> Order? {
        let changed = try run { () throws(StorageError) -> Int in
            try db.update(
                "UPDATE orders SET state = $1, update_time_ms = $2, refunded_quantity = CASE WHEN $3 = 1 THEN quantity ELSE 0 END "
                    + "WHERE order_id = $4 AND state = $5",
                [.int(Int64(to.rawValue)), .int(nowMs), .int(to == .refunded ? 1 : 0), .text(orderID), .int(Int64(from.rawValue))])
        }
        guard changed == 1, let moved = try order(id: orderID) else { return nil }
        log?.orders.append(moved)
        return moved
    }

    func refund(orderID: String, refundedQuantity: Int, state: OrderState, nowMs: Int64) throws(BillingError) -> Order? {
        let changed = try run { () throws(StorageError) -> Int in
            try db.update(
                "UPDATE orders SET state = $1, refunded_quantity = $2, update_time_ms = $3 WHERE order_id = $4 AND state IN ($5, $6)",
                [
                    .int(Int64(state.rawValue)), .int(Int64(refundedQuantity)), .int(nowMs), .text(orderID),
                    .int(Int64(OrderState.completed.rawValue)), .int(Int64(OrderState.refunded.rawValue)),
                ])
        }
        guard changed == 1, let moved = try order(id: orderID) else { return nil }
        log?.orders.append(moved)
        return moved
    }

    func history(accountID: String, after: HistoryCursor?, limit: Int) throws(BillingError) -> [OwnedTransaction] {
        try run { () throws(StorageError) in
            guard let after else {
                return try db.query(
                    LedgerSQL.historyFirst,
                    [.text(accountID), .int(Int64(limit))], { Self.decode($0) })
            }
            return try db.query(
                LedgerSQL.historyNext,
                [.text(accountID), .int(after.purchaseTimeMs), .text(after.transactionID), .int(Int64(limit))],
                { Self.decode($0) })
        }
    }

    func pendingOrders(createdBeforeMs cutoffMs: Int64, limit: Int) throws(BillingError) -> [String] {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT order_id FROM orders WHERE state = $1 AND create_time_ms < $2 ORDER BY create_time_ms LIMIT $3"
                    + (lockOrders ? " FOR UPDATE SKIP LOCKED" : ""),
                [.int(Int64(OrderState.pending.rawValue)), .int(cutoffMs), .int(Int64(limit))], { $0.text(0) })
        }
    }

    func transactions(accountID: String) throws(BillingError) -> [OwnedTransaction] {
        try run { () throws(StorageError) in
            try db.query(LedgerSQL.transactionsByAccount, [.text(accountID)], { Self.decode($0) })
        }
    }

    func transactions(originalTransactionID: String) throws(BillingError) -> [OwnedTransaction] {
        try run { () throws(StorageError) in
            try db.query(
                LedgerSQL.transactionsByOriginal,
                [.text(originalTransactionID)], { Self.decode($0) })
        }
    }

    func transaction(purchaseToken: String) throws(BillingError) -> OwnedTransaction? {
        guard !purchaseToken.isEmpty else { return nil }
        return try run { () throws(StorageError) in
            try db.query(LedgerSQL.transactionByPurchaseToken, [.text(purchaseToken)], { Self.decode($0) }).first
        }
    }

    func entitlement(accountID: String, key: String) throws(BillingError) -> EntitlementRecord? {
        try run { () throws(StorageError) in
            try db.query(
                lockOrders ? LedgerSQL.entitlementForUpdate : LedgerSQL.entitlement,
                [.text(accountID), .text(key)], { Self.decodeEntitlement($0) }
            ).first ?? nil
        }
    }

    func entitlements(accountID: String) throws(BillingError) -> [EntitlementRecord] {
        try run { () throws(StorageError) in
            try db.query(
                LedgerSQL.entitlementsByAccount,
                [.text(accountID)], { Self.decodeEntitlement($0) }
            ).compactMap { $0 }
        }
    }

    func put(_ e: EntitlementRecord) throws(BillingError) {
        try run { () throws(StorageError) in
            try db.update("DELETE FROM entitlements WHERE account_id = $1 AND entitlement_key = $2", [.text(e.accountID), .text(e.key)])
            try db.update(
                LedgerSQL.insertEntitlement,
                [
                    .text(e.accountID), .text(e.key), .text(e.productID), .text(e.productKind.rawValue), .text(e.originalTransactionID),
                    .text(e.latestTransactionID), .int(e.purchaseTimeMs), .int(e.expiresTimeMs), .int(e.revocationTimeMs),
                    .int(e.gracePeriodExpiresTimeMs), .int(e.autoRenew ? 1 : 0), .int(Int64(e.environment.rawValue)),
                    e.orderID.map { .text($0) } ?? .null, .int(e.ended ? 1 : 0), .int(e.upgraded ? 1 : 0), .int(e.billingRetry ? 1 : 0),
                    .int(Int64(e.ownership.rawValue)), .int(Int64(e.store.rawValue)), .text(e.subscriptionGroupID), .text(e.pendingProductID),
                    .int(e.paused ? 1 : 0),
                ])
        }
    }

    func deleteEntitlement(accountID: String, key: String) throws(BillingError) {
        try run { () throws(StorageError) in
            try db.update("DELETE FROM entitlements WHERE account_id = $1 AND entitlement_key = $2", [.text(accountID), .text(key)])
        }
    }

    func renewal(originalTransactionID: String) throws(BillingError) -> RenewalState? {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT original_transaction_id, auto_renew, grace_period_expires_ms, signed_time_ms, ended_signed_time_ms, billing_retry, "
                    + "auto_renew_product_id, paused FROM renewals WHERE original_transaction_id = $1" + forUpdate,
                [.text(originalTransactionID)],
                { r in
                    var state = RenewalState(
                        originalTransactionID: r.text(0), autoRenew: r.int(1) != 0, gracePeriodExpiresTimeMs: r.int64(2),
                        signedTimeMs: r.int64(3), endedSignedTimeMs: r.int64(4), billingRetry: r.int(5) != 0, autoRenewProductID: r.text(6))
                    state.paused = r.int(7) != 0
                    return state
                }
            ).first
        }
    }

    func put(_ r: RenewalState) throws(BillingError) {
        log?.revenue.originalTransactionIDs.append(r.originalTransactionID)
        try run { () throws(StorageError) in
            try db.update("DELETE FROM renewals WHERE original_transaction_id = $1", [.text(r.originalTransactionID)])
            try db.update(
                "INSERT INTO renewals (original_transaction_id, auto_renew, grace_period_expires_ms, signed_time_ms, ended_signed_time_ms, "
                    + "billing_retry, auto_renew_product_id, paused) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                [
                    .text(r.originalTransactionID), .int(r.autoRenew ? 1 : 0), .int(r.gracePeriodExpiresTimeMs), .int(r.signedTimeMs),
                    .int(r.endedSignedTimeMs), .int(r.billingRetry ? 1 : 0), .text(r.autoRenewProductID), .int(r.paused ? 1 : 0),
                ])
        }
    }

    func notification(uuid: String) throws(BillingError) -> NotificationResult? {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT result FROM notifications WHERE notification_uuid = $1", [.text(uuid)],
                {
                    NotificationResult(rawValue: $0.text(0)) ?? .applied
                }
            ).first
        }
    }

    func newestNotificationSignedMs() throws(BillingError) -> Int64? {
        try run { () throws(StorageError) in
            try db.query("SELECT signed_time_ms FROM notifications ORDER BY signed_time_ms DESC LIMIT 1", [], { $0.int64(0) }).first
        }
    }

    /// Records a notification; its JWS header goes to `jws_headers` once (by digest), the row keeps the rest.
    func record(_ n: NotificationRecord) throws(BillingError) {
        try run { () throws(StorageError) in
            var payload = n.signedPayload
            var headerDigest = SQLValue.null
            if let split = JWSHeaders.split(n.signedPayload) {
                let utf8 = n.signedPayload.utf8
                let known = try db.query("SELECT 1 FROM jws_headers WHERE digest = $1", [.text(split.digest)], { $0.int(0) })
                if known.isEmpty, let header = String(utf8.prefix(split.headerLength)) {
                    // Another replica may insert the same header at once: the first one stays.
                    try db.update(
                        "INSERT INTO jws_headers (digest, header) VALUES ($1, $2) ON CONFLICT (digest) DO NOTHING",
                        [.text(split.digest), .text(header)])
                }
                if let rest = String(utf8.dropFirst(split.headerLength)) {
                    payload = rest
                    headerDigest = .text(split.digest)
                }
            }
            try db.update(
                "INSERT INTO notifications (notification_uuid, notification_type, subtype, signed_time_ms, result, applied_time_ms, transaction_id, signed_payload, header_digest) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                [
                    .text(n.uuid), .text(n.type), n.subtype.map { .text($0) } ?? .null, .int(n.signedTimeMs), .text(n.result.rawValue),
                    .int(n.appliedTimeMs), n.transactionID.map { .text($0) } ?? .null, .text(payload), headerDigest,
                ])
        }
    }

    func append(_ e: EventRecord) throws(BillingError) {
        try run { () throws(StorageError) in
            try db.appendEvent(Self.values(e))
        }
        log?.events += 1
    }

    static func values(_ e: EventRecord) -> [SQLValue] {
        [
            .int(Int64(e.kind.rawValue)), .int(e.timeMs), .text(e.accountID), .text(e.cause), e.notificationUUID.map { .text($0) } ?? .null,
            e.transactionID.map { .text($0) } ?? .null, e.order.map { .text(EventSnapshot.encode($0)) } ?? .null,
            e.entitlement.map { .text(EventSnapshot.encode($0)) } ?? .null,
        ]
    }

    func events(after cursor: UInt64, limit: Int, accountID: String?) throws(BillingError) -> [EventRecord] {
        try run { () throws(StorageError) in
            if let accountID {
                return try db.query(
                    LedgerSQL.eventsByAccount,
                    [.text(accountID), .int(Int64(clamping: cursor)), .int(Int64(limit))], { Self.decodeEvent($0) })
            }
            return try db.query(
                LedgerSQL.events,
                [.int(Int64(clamping: cursor)), .int(Int64(limit))], { Self.decodeEvent($0) })
        }
    }

    /// PostgreSQL: a transaction-scoped advisory lock on (namespace "subs", hash of the id); the two-key form
    /// never collides with the one-key lock of migrations (nor the previous version's event sequencer).
    ///
    /// Inside a batch (`sharesTransaction`) the lock is only tried: waiting for it while holding the other jobs'
    /// locks is how two batches deadlock. If another transaction holds it, the job fails with `lockBusy`, its
    /// savepoint is rolled back, and it runs again alone once the batch has committed, where waiting is safe.
    func lockSubscription(originalTransactionID: String) throws(BillingError) {
        guard lockOrders else { return }
        if db.sharesTransaction {
            let locked = try run { () throws(StorageError) in
                try db.query(
                    "SELECT pg_try_advisory_xact_lock(\(Self.subscriptionLockSpace), hashtext($1))",
                    [.text(originalTransactionID)], { $0.text(0) == "t" }
                ).first ?? false
            }
            if locked { return }
            throw .storage(.lockBusy)
        }
        try run { () throws(StorageError) in
            _ = try db.query(
                "SELECT pg_advisory_xact_lock(\(Self.subscriptionLockSpace), hashtext($1))",
                [.text(originalTransactionID)], { _ in 0 })
        }
    }

    static var subscriptionLockSpace: Int32 { 0x7375_6273 }  // "subs"

    func accounts(after account: String, limit: Int) throws(BillingError) -> [String] {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT DISTINCT account_id FROM transactions WHERE account_id > $1 ORDER BY account_id LIMIT $2",
                [.text(account), .int(Int64(limit))], { $0.text(0) })
        }
    }

    func orders(accountID: String) throws(BillingError) -> [Order] {
        try run { () throws(StorageError) in
            try db.query(OrderRow.selectByAccount, [.text(accountID)], { OrderRow.decode($0) })
        }
    }

    func accounts(appAccountToken: String) throws(BillingError) -> [String] {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT DISTINCT account_id FROM transactions WHERE app_account_token = $1 AND account_id <> '' ORDER BY account_id",
                [.text(appAccountToken)], { $0.text(0) })
        }
    }

    func appendAudit(_ e: AuditRecord) throws(BillingError) {
        try run { () throws(StorageError) in
            try db.update(
                "INSERT INTO audit_entries (audit_id, time_ms, operator, method, account_id, target, reason, outcome, request_json) "
                    + "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                [
                    .text(e.auditID), .int(e.timeMs), .text(e.operatorName), .text(e.method), .text(e.accountID), .text(e.target),
                    .text(e.reason), .text(e.outcome), .text(e.requestJSON),
                ])
        }
    }

    /// One condition per filter field set. With an account, the planner seeks `audit_entries_account` (account, time,
    /// id); without one it walks the primary key newest first: an audit id is "audit_" + a UUID v7 whose leading 48
    /// bits are the entry's time_ms (AuditID), so `audit_id` order is (time_ms, audit_id) order, and a time bound is a
    /// bound on the id too.
    func auditEntries(_ filter: AuditFilter, after: AuditCursor?, limit: Int) throws(BillingError) -> [AuditRecord] {
        var conditions: [String] = []
        var values: [SQLValue] = []
        func add(_ condition: (Int) -> String, _ value: SQLValue) {
            values.append(value)
            conditions.append(condition(values.count))
        }
        if !filter.accountID.isEmpty { add({ "account_id = $\($0)" }, .text(filter.accountID)) }
        if !filter.operatorName.isEmpty { add({ "operator = $\($0)" }, .text(filter.operatorName)) }
        if !filter.method.isEmpty { add({ "method = $\($0)" }, .text(filter.method)) }
        let byAccount = !filter.accountID.isEmpty
        if filter.sinceTimeMs > 0 {
            add({ "time_ms >= $\($0)" }, .int(filter.sinceTimeMs))
            if !byAccount { add({ "audit_id >= $\($0)" }, .text(Self.auditIDFloor(filter.sinceTimeMs))) }
        }
        if filter.untilTimeMs > 0 {
            add({ "time_ms <= $\($0)" }, .int(filter.untilTimeMs))
            if !byAccount && filter.untilTimeMs < (1 << 48) - 1 {
                add({ "audit_id < $\($0)" }, .text(Self.auditIDFloor(filter.untilTimeMs + 1)))
            }
        }
        if let after {
            if byAccount {
                values.append(.int(after.timeMs))
                values.append(.text(after.auditID))
                conditions.append("(time_ms, audit_id) < ($\(values.count - 1), $\(values.count))")
            } else {
                add({ "audit_id < $\($0)" }, .text(after.auditID))
            }
        }
        values.append(.int(Int64(limit)))
        let sql =
            "SELECT audit_id, time_ms, operator, method, account_id, target, reason, outcome, request_json FROM audit_entries"
            + (conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND "))
            + (byAccount ? " ORDER BY time_ms DESC, audit_id DESC" : " ORDER BY audit_id DESC") + " LIMIT $\(values.count)"
        return try run { () throws(StorageError) in
            try db.query(
                sql, values,
                { r in
                    AuditRecord(
                        auditID: r.text(0), timeMs: r.int64(1), operatorName: r.text(2), method: r.text(3), accountID: r.text(4),
                        target: r.text(5), reason: r.text(6), outcome: r.text(7), requestJSON: r.text(8))
                })
        }
    }

    // MARK: Grants

    static var grantColumns: String { LedgerSQL.grantColumns }

    static func decodeGrant(_ r: some RowReader) -> GrantRecord {
        GrantRecord(
            grantID: r.text(0), accountID: r.text(1), productID: r.text(2), startTimeMs: r.int64(3), expiresTimeMs: r.int64(4),
            revocationTimeMs: r.int64(5), reason: r.text(6), operatorName: r.text(7), idempotencyKey: r.optionalText(8),
            expiryNoted: r.int(9) != 0)
    }

    func insertGrant(_ g: GrantRecord) throws(BillingError) {
        try run { () throws(StorageError) in
            try db.update(
                "INSERT INTO grants (\(Self.grantColumns)) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                [
                    .text(g.grantID), .text(g.accountID), .text(g.productID), .int(g.startTimeMs), .int(g.expiresTimeMs),
                    .int(g.revocationTimeMs), .text(g.reason), .text(g.operatorName), g.idempotencyKey.map { .text($0) } ?? .null,
                    .int(g.expiryNoted ? 1 : 0),
                ])
        }
    }

    func grant(id: String) throws(BillingError) -> GrantRecord? {
        try run { () throws(StorageError) in
            // PostgreSQL: the row locked to the end of the transaction (revoke, sweep and erasure serialize on it).
            try db.query(
                "SELECT \(Self.grantColumns) FROM grants WHERE grant_id = $1" + forUpdate, [.text(id)], { Self.decodeGrant($0) }
            ).first
        }
    }

    func grant(accountID: String, idempotencyKey: String) throws(BillingError) -> GrantRecord? {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT \(Self.grantColumns) FROM grants WHERE account_id = $1 AND idempotency_key = $2", [.text(accountID), .text(idempotencyKey)],
                { Self.decodeGrant($0) }
            ).first
        }
    }

    func grants(accountID: String) throws(BillingError) -> [GrantRecord] {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT \(Self.grantColumns) FROM grants WHERE account_id = $1 ORDER BY start_time_ms, grant_id", [.text(accountID)],
                { Self.decodeGrant($0) })
        }
    }

    func updateGrant(_ g: GrantRecord) throws(BillingError) {
        try run { () throws(StorageError) in
            try db.update(
                "UPDATE grants SET revocation_time_ms = $1, expires_time_ms = $2 WHERE grant_id = $3",
                [.int(g.revocationTimeMs), .int(g.expiresTimeMs), .text(g.grantID)])
        }
    }

    /// The conditions of the partial index `grants_due`, so that both planners read only grants still to be noted.
    func dueGrants(nowMs: Int64, limit: Int) throws(BillingError) -> [GrantRecord] {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT \(Self.grantColumns) FROM grants WHERE expiry_noted = 0 AND revocation_time_ms = 0 AND expires_time_ms > 0 "
                    + "AND expires_time_ms <= $1 ORDER BY expires_time_ms, grant_id LIMIT $2",
                [.int(nowMs), .int(Int64(limit))], { Self.decodeGrant($0) })
        }
    }

    /// PostgreSQL: a second replica's UPDATE waits for the first's row lock, then re-checks `expiry_noted` and
    /// changes nothing: one event per expiry.
    func noteGrantExpired(grantID: String) throws(BillingError) -> Bool {
        try run { () throws(StorageError) in
            try db.update(
                "UPDATE grants SET expiry_noted = 1 WHERE grant_id = $1 AND expiry_noted = 0 AND revocation_time_ms = 0", [.text(grantID)]) == 1
        }
    }

    // MARK: Erasure

    func renameAccount(_ old: String, to new: String) throws(BillingError) -> ErasureCounts {
        let log = self.log
        return try run { () throws(StorageError) in
            var c = ErasureCounts()
            if lockOrders {
                // PostgreSQL: the account's grants locked first, so a revoke or an expiry of one of them commits
                // wholly before the rename reads anything, or waits and then finds the pseudonym.
                _ = try db.query("SELECT grant_id FROM grants WHERE account_id = $1 FOR UPDATE", [.text(old)], { $0.text(0) })
            }
            // Events earlier jobs of this batch appended, not yet inserted (a PostgreSQL batch numbers them last).
            c.events += db.renamePendingEvents(from: old, to: new)
            // SQLite numbers `$n` parameters in order of appearance: each statement names them in that order.
            let ids: [SQLValue] = [.text(new), .text(old)]
            c.idempotencyKeys =
                (try db.query(
                    "SELECT COUNT(*) FROM orders WHERE account_id = $1 AND idempotency_key IS NOT NULL", [.text(old)], { $0.int(0) }
                ).first ?? 0)
                + (try db.query(
                    "SELECT COUNT(*) FROM grants WHERE account_id = $1 AND idempotency_key IS NOT NULL", [.text(old)], { $0.int(0) }
                ).first ?? 0)
            c.orders = try db.update("UPDATE orders SET account_id = $1, idempotency_key = NULL WHERE account_id = $2", ids)
            if c.orders > 0, let log {
                // The SQLite order cache learns the rewritten orders after COMMIT, as it learns every order change.
                log.orders += try db.query(OrderRow.selectByAccount, [.text(new)], { OrderRow.decode($0) })
            }
            c.transactions = try db.update("UPDATE transactions SET account_id = $1 WHERE account_id = $2", ids)
            c.entitlements = try db.update("UPDATE entitlements SET account_id = $1 WHERE account_id = $2", ids)
            c.grants = try db.update("UPDATE grants SET account_id = $1, idempotency_key = NULL WHERE account_id = $2", ids)
            // The feed keeps its cursors; an order snapshot names its account too.
            let snapshots = try db.query(
                "SELECT feed_cursor, order_snapshot FROM events WHERE account_id = $1 AND feed_cursor IS NOT NULL AND order_snapshot IS NOT NULL",
                [.text(old)], { ($0.int64(0), $0.text(1)) })
            for (cursor, text) in snapshots {
                guard var order = EventSnapshot.decodeOrder(text) else { continue }
                order.accountID = new
                order.idempotencyKey = nil
                try db.update("UPDATE events SET order_snapshot = $1 WHERE feed_cursor = $2", [.text(EventSnapshot.encode(order)), .int(cursor)])
            }
            c.events += try db.update("UPDATE events SET account_id = $1 WHERE account_id = $2 AND feed_cursor IS NOT NULL", ids)
            try db.update("UPDATE audit_entries SET account_id = $1 WHERE account_id = $2", ids)
            try db.update("UPDATE audit_entries SET target = $1 WHERE target = $2", ids)
            let entries = try db.query(
                "SELECT audit_id, request_json FROM audit_entries WHERE account_id = $1 OR target = $1", [.text(new)], { ($0.text(0), $0.text(1)) })
            c.auditEntries = entries.count
            for (id, json) in entries {
                let rewritten = AuditText.replacing(old, with: new, in: json)
                if rewritten != json {
                    try db.update("UPDATE audit_entries SET request_json = $1 WHERE audit_id = $2", [.text(rewritten), .text(id)])
                }
            }
            try db.update("UPDATE refund_watches SET account_id = $1 WHERE account_id = $2", ids)
            try db.update("UPDATE play_acknowledgements SET account_id = $1 WHERE account_id = $2", ids)
            return c
        }
    }

    /// The smallest audit id of millisecond `ms`: "audit_" and the UUID v7's time fields (48 bits, as 8 + 4 lowercase
    /// hex digits around the first hyphen).
    static func auditIDFloor(_ ms: Int64) -> String {
        let hex = Array("0123456789abcdef".utf8)
        var out = Array("audit_".utf8)
        let v = UInt64(max(0, min(ms, (1 << 48) - 1)))
        for shift in stride(from: 44, through: 0, by: -4) {
            if shift == 12 { out.append(UInt8(ascii: "-")) }
            out.append(hex[Int((v >> UInt64(shift)) & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// After an upgrade from before schema step 7 (from before step 3, when the table did not exist, too): every
    /// entitlement computed from the transactions with the subscription model, without events.
    func recomputeEntitlements() throws(StorageError) {
        do throws(BillingError) {
            _ = try PurchaseRules.backfillEntitlements(
                self, context: RuleContext(nowMs: SystemClock().nowMilliseconds(), cause: .restorePurchases, catalog: nil))
        } catch {
            // The ledger throws nothing but database failures here (the rules refuse nothing in a backfill).
            switch JobFailure(error) {
            case .storage(let e): throw e
            case .answered(let e): preconditionFailure("entitlement recompute refused: \(e)")
            }
        }
    }

    func watchRefunds(_ w: RefundWatch) throws(BillingError) {
        try run { () throws(StorageError) in
            // Another replica may note the same customer at once: the first row stays.
            try db.update(
                "INSERT INTO refund_watches (environment, transaction_id, account_id, added_time_ms, checked_time_ms) "
                    + "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (environment, transaction_id) DO NOTHING",
                [.int(Int64(w.environment.rawValue)), .text(w.transactionID), .text(w.accountID), .int(w.addedTimeMs), .int(w.checkedTimeMs)])
        }
    }

    func refundWatches(limit: Int) throws(BillingError) -> [RefundWatch] {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT environment, transaction_id, account_id, added_time_ms, checked_time_ms FROM refund_watches "
                    + "ORDER BY checked_time_ms, environment, transaction_id LIMIT $1",
                [.int(Int64(limit))],
                { r in
                    RefundWatch(
                        transactionID: r.text(1), environment: StoreEnvironment(rawValue: r.int(0)) ?? .production, accountID: r.text(2),
                        addedTimeMs: r.int64(3), checkedTimeMs: r.int64(4))
                })
        }
    }

    func refundWatchChecked(transactionID: String, environment: StoreEnvironment, nowMs: Int64) throws(BillingError) {
        try run { () throws(StorageError) in
            try db.update(
                "UPDATE refund_watches SET checked_time_ms = $1 WHERE environment = $2 AND transaction_id = $3",
                [.int(nowMs), .int(Int64(environment.rawValue)), .text(transactionID)])
        }
    }

    func webhookCursor() throws(BillingError) -> WebhookCursor? {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT delivered_cursor, holder, lease_until_ms, failures, last_error, last_attempt_ms, last_delivery_ms FROM webhook_cursor WHERE id = 1", [],
                { r in
                    WebhookCursor(
                        position: UInt64(max(0, r.int64(0))), holder: r.text(1), leaseUntilMs: r.int64(2), failures: r.int(3), lastError: r.text(4),
                        lastAttemptMs: r.int64(5), lastDeliveryMs: r.int64(6))
                }
            ).first
        }
    }

    func ensureWebhookCursor() throws(BillingError) {
        try run { () throws(StorageError) in
            _ = try db.update("INSERT INTO webhook_cursor (id) VALUES (1) ON CONFLICT (id) DO NOTHING", [])
        }
    }

    func takeWebhookLease(holder: String, nowMs: Int64, untilMs: Int64) throws(BillingError) -> Bool {
        try run { () throws(StorageError) in
            try db.update(
                "UPDATE webhook_cursor SET holder = $1, lease_until_ms = $2 WHERE id = 1 AND (holder = $1 OR holder = '' OR lease_until_ms < $3)",
                [.text(holder), .int(untilMs), .int(nowMs)]) == 1
        }
    }

    func advanceWebhook(
        holder: String, from expected: UInt64, to position: UInt64, nowMs: Int64, untilMs: Int64, delivered: Bool
    ) throws(BillingError)
        -> Bool
    {
        try run { () throws(StorageError) in
            try db.update(
                "UPDATE webhook_cursor SET delivered_cursor = $1, lease_until_ms = $2, failures = 0, last_error = '', "
                    + "last_attempt_ms = CASE WHEN $3 = 1 THEN $4 ELSE last_attempt_ms END, "
                    + "last_delivery_ms = CASE WHEN $3 = 1 THEN $4 ELSE last_delivery_ms END "
                    + "WHERE id = 1 AND holder = $5 AND delivered_cursor = $6",
                [.int(Int64(position)), .int(untilMs), .int(delivered ? 1 : 0), .int(nowMs), .text(holder), .int(Int64(expected))]) == 1
        }
    }

    func webhookFailed(holder: String, error: String, nowMs: Int64, untilMs: Int64) throws(BillingError) -> Bool {
        try run { () throws(StorageError) in
            try db.update(
                "UPDATE webhook_cursor SET failures = failures + 1, last_error = $1, last_attempt_ms = $2, lease_until_ms = $3 "
                    + "WHERE id = 1 AND holder = $4",
                [.text(error), .int(nowMs), .int(untilMs), .text(holder)]) == 1
        }
    }

    func setWebhookPosition(_ position: UInt64) throws(BillingError) {
        try run { () throws(StorageError) in
            _ = try db.update("UPDATE webhook_cursor SET delivered_cursor = $1, failures = 0, last_error = '' WHERE id = 1", [.int(Int64(position))])
        }
    }

    func queueAcknowledgement(_ a: PlayAcknowledgement) throws(BillingError) {
        try run { () throws(StorageError) in
            _ = try db.update(
                "INSERT INTO play_acknowledgements (purchase_token, package_name, product_id, subscription, consume, transaction_id, account_id, "
                    + "created_ms, attempts, next_attempt_ms, last_error, acknowledged_ms, consumed_ms) "
                    + "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (purchase_token) DO NOTHING",
                Self.values(a))
        }
    }

    func claimAcknowledgements(nowMs: Int64, untilMs: Int64, limit: Int) throws(BillingError) -> [PlayAcknowledgement] {
        try run { () throws(StorageError) in
            try db.query(
                "UPDATE play_acknowledgements SET next_attempt_ms = $1 WHERE done = 0 AND next_attempt_ms <= $2 AND purchase_token IN "
                    + "(SELECT purchase_token FROM play_acknowledgements WHERE done = 0 AND next_attempt_ms <= $2 "
                    + "ORDER BY next_attempt_ms, purchase_token LIMIT $3) "
                    + "RETURNING purchase_token, package_name, product_id, subscription, consume, transaction_id, account_id, created_ms, attempts, "
                    + "next_attempt_ms, last_error, acknowledged_ms, consumed_ms",
                [.int(untilMs), .int(nowMs), .int(Int64(limit))],
                { r in
                    PlayAcknowledgement(
                        purchaseToken: r.text(0), packageName: r.text(1), productID: r.text(2), subscription: r.int(3) != 0, consume: r.int(4) != 0,
                        transactionID: r.text(5), accountID: r.text(6), createdMs: r.int64(7), attempts: r.int(8), nextAttemptMs: r.int64(9),
                        lastError: r.text(10), acknowledgedMs: r.int64(11), consumedMs: r.int64(12))
                })
        }
    }

    func updateAcknowledgement(_ a: PlayAcknowledgement) throws(BillingError) {
        try run { () throws(StorageError) in
            _ = try db.update(
                "UPDATE play_acknowledgements SET attempts = $1, next_attempt_ms = $2, last_error = $3, acknowledged_ms = $4, consumed_ms = $5, "
                    + "done = $6 WHERE purchase_token = $7",
                [
                    .int(Int64(a.attempts)), .int(a.nextAttemptMs), .text(String(a.lastError.prefix(500))), .int(a.acknowledgedMs), .int(a.consumedMs),
                    .int(a.isDone ? 1 : 0), .text(a.purchaseToken),
                ])
        }
    }

    func unacknowledgedCount(createdBeforeMs: Int64) throws(BillingError) -> Int {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT COUNT(*) FROM play_acknowledgements WHERE acknowledged_ms = 0 AND created_ms < $1", [.int(createdBeforeMs)], { $0.int(0) }
            ).first ?? 0
        }
    }

    static func values(_ a: PlayAcknowledgement) -> [SQLValue] {
        [
            .text(a.purchaseToken), .text(a.packageName), .text(a.productID), .int(a.subscription ? 1 : 0), .int(a.consume ? 1 : 0),
            .text(a.transactionID), .text(a.accountID), .int(a.createdMs), .int(Int64(a.attempts)), .int(a.nextAttemptMs), .text(a.lastError),
            .int(a.acknowledgedMs), .int(a.consumedMs),
        ]
    }

    func lastCursor() throws(BillingError) -> UInt64 {
        try run { () throws(StorageError) in
            UInt64(max(0, try db.query("SELECT COALESCE(MAX(feed_cursor), 0) FROM events", [], { $0.int64(0) }).first ?? 0))
        }
    }

    static func decode(_ r: some RowReader) -> OwnedTransaction {
        let t = StoreTransaction(
            transactionID: r.text(0), originalTransactionID: r.text(1), productID: r.text(4),
            productKind: r.optionalText(5).flatMap(ProductKind.init(rawValue:)), purchaseTimeMs: r.int64(6),
            expiresTimeMs: r.int64(7), revocationTimeMs: r.int64(8), quantity: r.int(9),
            environment: StoreEnvironment(rawValue: r.int(10)) ?? .production, appAccountToken: r.optionalText(11), bundleID: r.text(12),
            signedTimeMs: r.int64(13), revocationReason: r.isNull(14) ? nil : r.int(14))
        var x = t
        x.store = Store(rawValue: r.int(15)) ?? .appStore
        x.ownership = Ownership(rawValue: r.int(16)) ?? .purchased
        x.upgraded = r.int(17) != 0
        x.revocationType = RevocationType(rawValue: r.int(18)) ?? .unspecified
        x.revocationPercentage = r.int(19)
        x.price = PriceFacts(priceMilliunits: r.int64(20), currency: r.text(21), storefront: r.text(22), offerID: r.text(23), offerType: r.text(24))
        x.subscriptionGroupID = r.text(25)
        x.purchaseToken = r.text(26)
        return OwnedTransaction(transaction: x, accountID: r.text(2), orderID: r.optionalText(3))
    }

    static func decodeEntitlement(_ r: some RowReader) -> EntitlementRecord? {
        guard let kind = ProductKind(rawValue: r.text(3)) else { return nil }
        var e = EntitlementRecord(
            accountID: r.text(0), key: r.text(1), productID: r.text(2), productKind: kind, originalTransactionID: r.text(4),
            latestTransactionID: r.text(5), purchaseTimeMs: r.int64(6), expiresTimeMs: r.int64(7), revocationTimeMs: r.int64(8),
            gracePeriodExpiresTimeMs: r.int64(9), autoRenew: r.int(10) != 0, environment: StoreEnvironment(rawValue: r.int(11)) ?? .production,
            orderID: r.optionalText(12), ended: r.int(13) != 0, upgraded: r.int(14) != 0, billingRetry: r.int(15) != 0,
            ownership: Ownership(rawValue: r.int(16)) ?? .purchased, store: Store(rawValue: r.int(17)) ?? .appStore,
            subscriptionGroupID: r.text(18), pendingProductID: r.text(19))
        e.paused = r.int(20) != 0
        return e
    }

    static func decodeEvent(_ r: some RowReader) -> EventRecord {
        var e = EventRecord(
            kind: EventKind(rawValue: r.int(1)) ?? .orderCreated, timeMs: r.int64(2), accountID: r.text(3),
            order: r.optionalText(7).flatMap(EventSnapshot.decodeOrder),
            entitlement: r.optionalText(8).flatMap(EventSnapshot.decodeEntitlement),
            cause: EventCause(r.text(4), notificationUUID: r.optionalText(5)), transactionID: r.optionalText(6))
        e.cursor = UInt64(max(0, r.int64(0)))
        return e
    }
}

/// What one job's ledger changed: orders (for the SQLite order cache) and how many events it appended.
final class LedgerLog {
    var orders: [Order] = []
    var events = 0
    /// What Revenue reads that the job changed.
    var revenue = RevenueChanges()
}

/// The ledger's statements, built once (a generic type cannot hold stored statics). Values are always bound.
enum LedgerSQL {
    static let transactionColumns =
        "transaction_id, original_transaction_id, account_id, order_id, product_id, product_kind, purchase_time_ms, expires_time_ms, "
        + "revocation_time_ms, quantity, environment, app_account_token, bundle_id, signed_time_ms, revocation_reason, "
        + "store, ownership, upgraded, revocation_type, revocation_percentage, price_milliunits, currency, storefront, offer_id, "
        + "offer_type, subscription_group_id, purchase_token"
    static let entitlementColumns =
        "account_id, entitlement_key, product_id, product_kind, original_transaction_id, latest_transaction_id, "
        + "purchase_time_ms, expires_time_ms, revocation_time_ms, grace_period_expires_ms, auto_renew, environment, order_id, ended, "
        + "upgraded, billing_retry, ownership, store, subscription_group_id, pending_product_id, paused"
    static let eventColumns =
        "feed_cursor, event_type, time_ms, account_id, cause, notification_uuid, transaction_id, order_snapshot, entitlement_snapshot"
    static let insertEvent =
        "INSERT INTO events (event_type, time_ms, account_id, cause, notification_uuid, transaction_id, order_snapshot, "
        + "entitlement_snapshot) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"

    static let grantColumns =
        "grant_id, account_id, product_id, start_time_ms, expires_time_ms, revocation_time_ms, reason, operator, idempotency_key, expiry_noted"
    static let transactionByID = "SELECT \(transactionColumns) FROM transactions WHERE transaction_id = $1"
    static let transactionByIDForUpdate = transactionByID + " FOR UPDATE"
    static let insertTransaction = "INSERT INTO transactions (\(transactionColumns)) VALUES (\(placeholders(27)))"
    static let historyFirst =
        "SELECT \(transactionColumns) FROM transactions WHERE account_id = $1 ORDER BY purchase_time_ms DESC, transaction_id DESC LIMIT $2"
    /// A row value, so that both planners seek the history index to the cursor (an OR of the two conditions
    /// scanned every earlier page's rows: +60 us a page on SQLite, a filter on PostgreSQL's generic plan).
    static let historyNext =
        "SELECT \(transactionColumns) FROM transactions WHERE account_id = $1 AND (purchase_time_ms, transaction_id) < ($2, $3) "
        + "ORDER BY purchase_time_ms DESC, transaction_id DESC LIMIT $4"
    /// `purchase_token <> ''` lets both planners use the partial index.
    static let transactionByPurchaseToken =
        "SELECT \(transactionColumns) FROM transactions WHERE purchase_token = $1 AND purchase_token <> '' "
        + "ORDER BY purchase_time_ms DESC, transaction_id DESC LIMIT 1"
    static let transactionsByAccount = "SELECT \(transactionColumns) FROM transactions WHERE account_id = $1 ORDER BY transaction_id"
    static let transactionsByOriginal =
        "SELECT \(transactionColumns) FROM transactions WHERE original_transaction_id = $1 ORDER BY transaction_id"
    static let entitlement = "SELECT \(entitlementColumns) FROM entitlements WHERE account_id = $1 AND entitlement_key = $2"
    static let entitlementForUpdate = entitlement + " FOR UPDATE"
    static let entitlementsByAccount = "SELECT \(entitlementColumns) FROM entitlements WHERE account_id = $1 ORDER BY entitlement_key"
    static let insertEntitlement = "INSERT INTO entitlements (\(entitlementColumns)) VALUES (\(placeholders(21)))"
    static let eventsByAccount =
        "SELECT \(eventColumns) FROM events WHERE account_id = $1 AND feed_cursor > $2 ORDER BY feed_cursor LIMIT $3"
    static let events = "SELECT \(eventColumns) FROM events WHERE feed_cursor > $1 ORDER BY feed_cursor LIMIT $2"

    /// `$1, $2, ... $n`.
    static func placeholders(_ n: Int) -> String { (1...n).map { "$\($0)" }.joined(separator: ", ") }
}
