/// The reads and writes the rules need, inside one database transaction of a store.
public protocol PurchaseLedger: RevenueLedger {
    func order(id: String) throws(BillingError) -> Order?
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
    /// Moves a pending order to the completed state `order` describes (its transaction, environment, time).
    /// Throws `orderNotPending` with the real state when another writer moved it first.
    func complete(_ order: Order) throws(BillingError)
    /// Moves an order from `from` to `to`; answers the order afterwards, or nil when it was not in `from`.
    func move(orderID: String, from: OrderState, to: OrderState, nowMs: Int64) throws(BillingError) -> Order?
    /// Ids of PENDING orders created before the cutoff, oldest first (expiry).
    func pendingOrders(createdBeforeMs: Int64, limit: Int) throws(BillingError) -> [String]
    /// Every transaction the account owns.
    func transactions(accountID: String) throws(BillingError) -> [OwnedTransaction]
    /// The account's transactions newest purchase first (purchase time, then transaction id, both descending),
    /// starting after `after` when given; at most `limit`.
    func history(accountID: String, after: HistoryCursor?, limit: Int) throws(BillingError) -> [OwnedTransaction]
    /// Sets how many units of an order are refunded and its state (COMPLETED or REFUNDED) together; answers
    /// the order afterwards, or nil when it was in neither state.
    func refund(orderID: String, refundedQuantity: Int, state: OrderState, nowMs: Int64) throws(BillingError) -> Order?
    /// Every transaction of one subscription (or one purchase), whoever owns it.
    func transactions(originalTransactionID: String) throws(BillingError) -> [OwnedTransaction]
    /// The newest transaction (latest purchase) recorded with a Google Play purchase token; nil when none is.
    func transaction(purchaseToken: String) throws(BillingError) -> OwnedTransaction?
    func entitlement(accountID: String, key: String) throws(BillingError) -> EntitlementRecord?
    func entitlements(accountID: String) throws(BillingError) -> [EntitlementRecord]
    func put(_ entitlement: EntitlementRecord) throws(BillingError)
    func deleteEntitlement(accountID: String, key: String) throws(BillingError)
    func renewal(originalTransactionID: String) throws(BillingError) -> RenewalState?
    func put(_ renewal: RenewalState) throws(BillingError)
    /// The recorded result of a notification UUID, if it was seen.
    func notification(uuid: String) throws(BillingError) -> NotificationResult?
    func record(_ notification: NotificationRecord) throws(BillingError)
    /// The newest signedDate of any notification recorded (applied, duplicate or ignored); nil when none was.
    func newestNotificationSignedMs() throws(BillingError) -> Int64?
    /// Appends an event; the store gives it its cursor in commit order.
    func append(_ event: EventRecord) throws(BillingError)
    /// Committed events after `cursor`, oldest first.
    func events(after cursor: UInt64, limit: Int, accountID: String?) throws(BillingError) -> [EventRecord]
    /// The cursor of the newest committed event; 0 when there is none.
    func lastCursor() throws(BillingError) -> UInt64
    /// Accounts that own transactions, in order, after `account` (paging; upgrade backfill).
    func accounts(after account: String, limit: Int) throws(BillingError) -> [String]
    /// The account's orders, oldest first (support's customer view).
    func orders(accountID: String) throws(BillingError) -> [Order]
    /// The accounts owning a transaction that carries this appAccountToken, in order.
    func accounts(appAccountToken: String) throws(BillingError) -> [String]
    /// Appends one audit entry. Nothing updates or deletes one.
    func appendAudit(_ entry: AuditRecord) throws(BillingError)
    /// The audit entries `filter` matches, newest first (time, then id, both descending), after `after` when
    /// given; at most `limit`.
    func auditEntries(_ filter: AuditFilter, after: AuditCursor?, limit: Int) throws(BillingError) -> [AuditRecord]
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
    /// Erasure: `pseudonym` replaces `accountID` in every stored copy (orders, transactions' ownership, entitlements,
    /// grants, events and their order snapshots, audit entries and the requests they keep, refund watches,
    /// acknowledgements); the account's idempotency keys are dropped. Answers what it rewrote.
    func renameAccount(_ accountID: String, to pseudonym: String) throws(BillingError) -> ErasureCounts
    /// Serializes writers of one subscription (original transaction) until the end of the database transaction,
    /// so that each reads what the previous one committed (renewal state, entitlement) before it writes.
    /// A no-op where writers are already serialized (memory, SQLite).
    func lockSubscription(originalTransactionID: String) throws(BillingError)
    /// Notes a customer whose refund history reconciliation reads; a repeat (same environment and id) changes nothing.
    func watchRefunds(_ watch: RefundWatch) throws(BillingError)
    /// The customers whose refund history reconciliation reads, least recently read first; at most `limit`.
    func refundWatches(limit: Int) throws(BillingError) -> [RefundWatch]
    /// Records that a customer's refund history was read through at `nowMs`.
    func refundWatchChecked(transactionID: String, environment: StoreEnvironment, nowMs: Int64) throws(BillingError)
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

extension PurchaseLedger {
    public func lockSubscription(originalTransactionID: String) throws(BillingError) {}
}

/// What every rule needs besides the ledger: the time of the change, its cause, the catalog.
public struct RuleContext: Sendable {
    public var nowMs: Int64
    public var cause: EventCause
    public var catalog: Catalog?

    public init(nowMs: Int64, cause: EventCause, catalog: Catalog?) {
        self.nowMs = nowMs
        self.cause = cause
        self.catalog = catalog
    }
}

/// The money rules, written once over a ledger so every store applies them identically.
public enum PurchaseRules {
    /// Completes `orderID` with the first candidate that can pay it, exactly once.
    ///
    /// - A newer signed view of a known candidate is stored first (a revocation refunds its order), and
    ///   stays committed whatever the answer.
    /// - A candidate already recorded for this order answers `alreadyProcessed` (or TRANSACTION_REVOKED).
    /// - A candidate owned by another order or account cannot pay it; one nobody owns yet can.
    /// - `check` refuses a candidate for this order (product, account token, revocation).
    public static func complete(
        _ ledger: some PurchaseLedger, orderID: String, candidates: [StoreTransaction],
        check: (Order, StoreTransaction) -> BillingError?, context: RuleContext,
        refreshEntitlement: Bool = true
    ) throws(BillingError) -> Result<CompletedPurchase, BillingError> {
        // Subscription locks first, in one order (PostgreSQL), as notifications take them: no lock-order deadlock.
        for original in Set(candidates.map(\.originalTransactionID)).sorted() {
            try ledger.lockSubscription(originalTransactionID: original)
        }
        guard try ledger.order(id: orderID) != nil else { return .failure(.orderNotFound(orderID: orderID)) }
        var known: [String: OwnedTransaction] = [:]
        for c in candidates {
            if let owned = try ledger.owned(transactionID: c.transactionID) {
                let merged = try merge(ledger, c, into: owned, context: context)
                known[c.transactionID] = merged
                if merged != owned && refreshEntitlement {
                    try refresh(ledger, accountID: merged.accountID, for: merged.transaction, context: context)
                }
            }
        }
        guard let order = try ledger.order(id: orderID) else { return .failure(.orderNotFound(orderID: orderID)) }
        // A retry of the proof that completed this order answers the stored result.
        for c in candidates {
            if let owned = known[c.transactionID], owned.orderID == orderID {
                if owned.transaction.isRevoked { return .failure(.transactionRevoked(transactionID: c.transactionID)) }
                return .success(CompletedPurchase(order: order, transaction: owned.transaction, alreadyProcessed: true))
            }
        }
        var firstRefusal: BillingError?
        var stale: BillingError?
        for candidate in candidates {
            let owned = known[candidate.transactionID]
            let current = owned?.transaction ?? candidate
            if let refusal = check(order, current) {
                if firstRefusal == nil { firstRefusal = refusal }
                if stale == nil, case .transactionPredatesOrder = refusal { stale = refusal }
                continue
            }
            if let owned, owned.orderID != nil || (!owned.accountID.isEmpty && owned.accountID != order.accountID) {
                if firstRefusal == nil { firstRefusal = .transactionAlreadyClaimed(transactionID: candidate.transactionID) }
                continue
            }
            guard order.state == .pending else { return .failure(.orderNotPending(orderID: order.id, state: order.state)) }
            if owned != nil {
                // Restored earlier by this account, or kept from a notification before anyone proved it.
                try ledger.reassign(transactionID: current.transactionID, accountID: order.accountID, orderID: order.id)
            } else {
                try ledger.insert(OwnedTransaction(transaction: current, accountID: order.accountID, orderID: order.id))
            }
            try PlayAcknowledgementRules.queueIfDue(ledger, current, accountID: order.accountID, nowMs: context.nowMs)
            try adoptUnowned(ledger, originalTransactionID: current.originalTransactionID, owner: order.accountID)
            var completed = order
            completed.state = .completed
            completed.transactionID = current.transactionID
            completed.environment = current.environment
            completed.store = current.store
            completed.updateTimeMs = context.nowMs
            try ledger.complete(completed)
            try ledger.append(
                EventRecord(
                    kind: .orderCompleted, timeMs: context.nowMs, accountID: order.accountID, order: completed,
                    cause: context.cause, transactionID: current.transactionID))
            if refreshEntitlement {
                try refresh(ledger, accountID: order.accountID, for: current, context: context)
            }
            return .success(CompletedPurchase(order: completed, transaction: current, alreadyProcessed: false))
        }
        if candidates.count == 1, let firstRefusal { return .failure(firstRefusal) }
        if order.state != .pending { return .failure(.orderNotPending(orderID: order.id, state: order.state)) }
        // Several candidates (an app receipt): say why none could pay.
        for c in candidates where c.productID == order.productID && (known[c.transactionID]?.transaction ?? c).isRevoked {
            return .failure(.transactionRevoked(transactionID: c.transactionID))
        }
        if let stale { return .failure(stale) }
        if candidates.isEmpty { return .failure(.transactionNotFound(detail: "the proof holds no transaction")) }
        return .failure(.transactionNotFound(detail: "no unclaimed transaction of product \(order.productID) in the receipt"))
    }

    /// Records what the proofs show the account owns and answers its entitlements (inactive ones too).
    /// Consumables are never recorded here. Under `.keep`, a purchase owned by another account stays there;
    /// one nobody owns yet attaches to this account.
    /// `transactions` were proven by the caller (signed data from the device) and restore under `policy`.
    /// `byID` were fetched by billingd from the App Store for transaction ids the caller named; an id proves
    /// less than a signed transaction from the device (ids are sequential), so those restore as proofs do
    /// except that nothing another account owns, and nothing whose appAccountToken names another account's
    /// order, is touched (PurchaseRules.mayAttachByID).
    public static func restore(
        _ ledger: some PurchaseLedger, accountID: String, transactions: [StoreTransaction],
        byID: [StoreTransaction] = [], policy: RestorePolicy, context: RuleContext
    ) throws(BillingError) -> [Entitlement] {
        for original in Set((transactions + byID).map(\.originalTransactionID)).sorted() {
            try ledger.lockSubscription(originalTransactionID: original)
        }
        // Every transaction is recorded first, then each entitlement is refreshed once from all of them: a
        // refresh in between would settle a subscription on its oldest renewal (the later ones not yet recorded).
        var keys: [String] = []
        var touched: [String: (transaction: StoreTransaction, transferred: Bool)] = [:]
        let proven = transactions.map { ($0, true) }
        for (t, isProof) in proven + byID.map({ ($0, false) }) where kind(of: t, catalog: context.catalog) != .consumable {
            if !isProof, try !mayAttachByID(ledger, t, accountID: accountID) { continue }
            let (owned, from) = try record(ledger, t, owner: accountID, transfer: isProof && policy == .transfer, context: context)
            guard owned.accountID == accountID else { continue }
            let key = EntitlementRecord.key(
                kind: kind(of: t, catalog: context.catalog), productID: t.productID,
                originalTransactionID: t.originalTransactionID)
            if let seen = touched[key] {
                touched[key] = (owned.transaction, seen.transferred || from != nil)
            } else {
                touched[key] = (owned.transaction, from != nil)
                keys.append(key)
            }
        }
        for key in keys {
            let (transaction, transferred) = touched[key]!
            try refresh(ledger, accountID: accountID, for: transaction, context: context, transferred: transferred)
        }
        return try ledger.entitlements(accountID: accountID).map { $0.entitlement(nowMs: context.nowMs) }
            .sorted { ($0.productID, $0.originalTransactionID) < ($1.productID, $1.originalTransactionID) }
    }

    /// Whether a transaction fetched by id may be recorded for `accountID`: not when another account owns it
    /// (or its subscription), and not when its appAccountToken names another account's order (a purchase
    /// paid for someone else's pending order, not submitted yet); otherwise it restores as a proof would.
    static func mayAttachByID(_ ledger: some PurchaseLedger, _ t: StoreTransaction, accountID: String) throws(BillingError) -> Bool {
        if let known = try ledger.owned(transactionID: t.transactionID), !known.accountID.isEmpty {
            return known.accountID == accountID
        }
        let family = try ledger.transactions(originalTransactionID: t.originalTransactionID)
        if let owner = family.first(where: { !$0.accountID.isEmpty })?.accountID { return owner == accountID }
        if let token = t.appAccountToken, let orderID = OrderID.canonical(token), let order = try ledger.order(id: orderID) {
            return order.accountID == accountID
        }
        return true
    }

    /// Builds the entitlement table from the transactions already recorded (a database upgraded from before
    /// the table existed), without events; answers how many accounts it went through.
    public static func backfillEntitlements(_ ledger: some PurchaseLedger, context: RuleContext) throws(BillingError) -> Int {
        var after = "", seen = 0
        while true {
            let page = try ledger.accounts(after: after, limit: 500)
            guard let last = page.last else { return seen }
            for account in page where !account.isEmpty {
                var done = Set<String>()
                for o in try ledger.transactions(accountID: account) {
                    let k = kind(of: o.transaction, catalog: context.catalog)
                    guard k != .consumable else { continue }
                    let key = EntitlementRecord.key(
                        kind: k, productID: o.transaction.productID,
                        originalTransactionID: o.transaction.originalTransactionID)
                    if done.insert(key).inserted {
                        try refresh(ledger, accountID: account, for: o.transaction, context: context, forced: [])
                    }
                }
                seen += 1
            }
            after = last
        }
    }

    /// PENDING -> EXPIRED for orders created before the cutoff (at most `limit`), each with its event.
    public static func expire(
        _ ledger: some PurchaseLedger, createdBeforeMs: Int64, limit: Int,
        context: RuleContext
    ) throws(BillingError) -> Int {
        var moved = 0
        for id in try ledger.pendingOrders(createdBeforeMs: createdBeforeMs, limit: limit) {
            guard let order = try ledger.move(orderID: id, from: .pending, to: .expired, nowMs: context.nowMs) else { continue }
            try ledger.append(
                EventRecord(
                    kind: .orderExpired, timeMs: context.nowMs, accountID: order.accountID, order: order,
                    cause: context.cause))
            moved += 1
        }
        return moved
    }

    /// Stores a newer signed view of a known transaction (newest signedDate wins; on equal dates what is
    /// stored stays). `upgraded` is sticky: once any view says so, it stays, whatever order they arrive in.
    /// A change of the revocation settles the order the transaction paid (`settle`).
    static func merge(
        _ ledger: some PurchaseLedger, _ t: StoreTransaction, into owned: OwnedTransaction,
        context: RuleContext
    ) throws(BillingError) -> OwnedTransaction {
        let old = owned.transaction
        var next = old
        if t.signedTimeMs > old.signedTimeMs {
            next.expiresTimeMs = t.expiresTimeMs
            // Google Play never reverses a revocation, and its API shows a revoked or voided purchase as merely
            // expired (or still purchased): a later read without one keeps the revocation a notification or the
            // voided list brought. (An App Store view without one is a reversal: REFUND_REVERSED.)
            let keepRevocation = t.store == .googlePlay && old.isRevoked && !t.isRevoked
            if !keepRevocation {
                next.revocationTimeMs = t.revocationTimeMs
                next.revocationReason = t.revocationReason
                next.revocationType = t.revocationType
                next.revocationPercentage = t.revocationPercentage
            }
            next.ownership = t.ownership
            next.signedTimeMs = t.signedTimeMs
        } else if t.store == .googlePlay && t.isRevoked && !old.isRevoked {
            // A revocation read before a later view without one (two notifications applied in the other order, on
            // two replicas) still counts: Google never reverses one.
            next.revocationTimeMs = t.revocationTimeMs
            next.revocationReason = t.revocationReason
            next.revocationType = t.revocationType
            next.revocationPercentage = t.revocationPercentage
        }
        next.upgraded = old.upgraded || t.upgraded
        // A view that carries price facts fills them in for a transaction first recorded without any (an app
        // receipt): what it paid then counts in Revenue. Facts already known are never rewritten.
        if old.price.priceMilliunits == 0 && old.price.offerType.isEmpty && old.price.currency.isEmpty,
            t.price.priceMilliunits > 0 || !t.price.offerType.isEmpty
        {
            next.price = t.price
        }
        guard next != old else { return owned }
        var merged = owned
        merged.transaction = next
        try ledger.update(next)
        let refundChanged =
            old.isRevoked != next.isRevoked || old.revocationType != next.revocationType
            || old.revocationPercentage != next.revocationPercentage
        if let orderID = owned.orderID, refundChanged {
            try settle(ledger, orderID: orderID, transaction: next, previous: old, context: context)
        }
        return merged
    }

    /// The order a transaction paid follows the transaction's revocation (DESIGN "Subscriptions as the stores
    /// model them", refunds):
    /// - a full refund (REFUND_FULL, a prorated one of 100%, or a revocation that does not say how): REFUNDED,
    ///   every unit refunded (ORDER_REFUNDED);
    /// - REFUND_PRORATED of a consumable order of n units: round(n * percentage / 100000) units, at least 1,
    ///   REFUNDED when that is all n (ORDER_REFUNDED), else COMPLETED with `refundedQuantity` (ORDER_PARTIALLY_REFUNDED);
    ///   of anything else: COMPLETED, ORDER_PARTIALLY_REFUNDED (the transaction's percentage says how much);
    /// - FAMILY_REVOKE: nothing (no money moved);
    /// - not revoked any more (a reversal): COMPLETED, nothing refunded (ORDER_COMPLETED).
    /// Writes an event only when the order changed (or a prorated refund of a non-consumable is new).
    static func settle(
        _ ledger: some PurchaseLedger, orderID: String, transaction t: StoreTransaction, previous: StoreTransaction?,
        context: RuleContext
    ) throws(BillingError) {
        guard t.revocationType != .familyRevoke || !t.isRevoked else { return }
        guard let order = try ledger.order(id: orderID), order.state == .completed || order.state == .refunded else { return }
        let target: (state: OrderState, refunded: Int, kind: EventKind)
        if !t.isRevoked {
            target = (.completed, 0, .orderCompleted)
        } else if t.isFullyRefunded {
            target = (.refunded, order.quantity, .orderRefunded)
        } else if kind(of: t, catalog: context.catalog) == .consumable {
            let n = order.quantity
            let units = min(n, max(1, (n * min(max(t.revocationPercentage, 0), 100_000) + 50_000) / 100_000))
            target = units == n ? (.refunded, n, .orderRefunded) : (.completed, units, .orderPartiallyRefunded)
        } else {
            target = (.completed, 0, .orderPartiallyRefunded)
        }
        let unchanged = order.state == target.state && order.refundedQuantity == target.refunded
        if unchanged {
            // A prorated refund of a subscription or non-consumable leaves the order as it is; it is reported once.
            let newPartial =
                target.kind == .orderPartiallyRefunded
                && (previous.map { !$0.isRevoked || $0.revocationPercentage != t.revocationPercentage || $0.revocationType != t.revocationType }
                    ?? true)
            guard newPartial else { return }
            try ledger.append(
                EventRecord(
                    kind: .orderPartiallyRefunded, timeMs: context.nowMs, accountID: order.accountID, order: order,
                    cause: context.cause, transactionID: t.transactionID))
            return
        }
        guard let moved = try ledger.refund(orderID: orderID, refundedQuantity: target.refunded, state: target.state, nowMs: context.nowMs)
        else { return }
        try ledger.append(
            EventRecord(
                kind: target.kind, timeMs: context.nowMs, accountID: moved.accountID, order: moved,
                cause: context.cause, transactionID: t.transactionID))
    }

    /// Records a verified transaction: new ones are inserted (owned by `owner`, possibly nobody), known ones
    /// merged. A known one nobody owns attaches to `owner`; one owned elsewhere moves only when `transfer`.
    /// Answers the stored transaction and, when it moved, the account it left.
    static func record(
        _ ledger: some PurchaseLedger, _ t: StoreTransaction, owner: String, transfer: Bool,
        context: RuleContext
    ) throws(BillingError) -> (OwnedTransaction, movedFrom: String?) {
        try supersede(ledger, replacedBy: t, context: context)
        guard let known = try ledger.owned(transactionID: t.transactionID) else {
            let owned = OwnedTransaction(transaction: t, accountID: owner, orderID: nil)
            try ledger.insert(owned)
            try PlayAcknowledgementRules.queueIfDue(ledger, t, accountID: owner, nowMs: context.nowMs)
            try adoptUnowned(ledger, originalTransactionID: t.originalTransactionID, owner: owner)
            return (owned, nil)
        }
        var owned = try merge(ledger, t, into: known, context: context)
        guard !owner.isEmpty, owned.accountID != owner, owned.accountID.isEmpty || transfer else {
            if owned.accountID == owner { try adoptUnowned(ledger, originalTransactionID: t.originalTransactionID, owner: owner) }
            // A newer signed view (a revocation, a later expiry) of a purchase that stays with another account:
            // that account's entitlement follows it now, not at its next notification.
            if !owned.accountID.isEmpty, owned.accountID != owner, owned.transaction != known.transaction {
                try refresh(ledger, accountID: owned.accountID, for: owned.transaction, context: context)
            }
            return (owned, nil)
        }
        let previous = owned.accountID
        try ledger.transfer(transactionID: t.transactionID, to: owner)
        owned.accountID = owner
        // A subscription moves whole: its other transactions that the previous owner held go with it, so it is
        // never split across two accounts (and later notifications find one owner).
        if !previous.isEmpty && kind(of: t, catalog: context.catalog) != .nonConsumable {
            for sibling in try ledger.transactions(originalTransactionID: t.originalTransactionID)
            where sibling.accountID == previous && sibling.transaction.transactionID != t.transactionID {
                try ledger.transfer(transactionID: sibling.transaction.transactionID, to: owner)
            }
        }
        try adoptUnowned(ledger, originalTransactionID: t.originalTransactionID, owner: owner)
        if !previous.isEmpty {
            try refresh(ledger, accountID: previous, for: owned.transaction, context: context)
            return (owned, previous)
        }
        return (owned, nil)
    }

    /// Google Play: the purchase a new one replaced through `linkedPurchaseToken` is `upgraded` (as Apple marks the
    /// transaction an upgrade supersedes) when the replacement cut its paid period short: Google said it took effect
    /// at once, or the replaced period still ran when the new one was bought. A resubscribe after a lapse and a
    /// deferred downgrade supersede nothing. Sticky, like Apple's isUpgraded (`merge`).
    static func supersede(_ ledger: some PurchaseLedger, replacedBy t: StoreTransaction, context: RuleContext) throws(BillingError) {
        guard t.store == .googlePlay, !t.replacedTransactionID.isEmpty, t.replacedTransactionID != t.transactionID,
            let old = try ledger.owned(transactionID: t.replacedTransactionID), old.transaction.store == .googlePlay,
            !old.transaction.upgraded, !old.transaction.isRevoked
        else { return }
        guard t.replacedAtOnce || old.transaction.expiresTimeMs > t.purchaseTimeMs else { return }
        var superseded = old.transaction
        superseded.upgraded = true
        try ledger.update(superseded)
    }

    /// Transactions of the same original transaction that nobody owns yet (kept from notifications that came
    /// before anyone proved the purchase) belong to the account that now owns one of them, so that the newest
    /// signed data wins whatever order the notifications and proofs arrived in.
    static func adoptUnowned(_ ledger: some PurchaseLedger, originalTransactionID: String, owner: String) throws(BillingError) {
        guard !owner.isEmpty else { return }
        for sibling in try ledger.transactions(originalTransactionID: originalTransactionID) where sibling.accountID.isEmpty {
            try ledger.transfer(transactionID: sibling.transaction.transactionID, to: owner)
        }
    }

    /// Recomputes one entitlement of an account from its transactions and renewal state, stores it if it
    /// changed, and writes events: `forced` ones (a notification's own effects), else one per change seen.
    @discardableResult
    static func refresh(
        _ ledger: some PurchaseLedger, accountID: String, for t: StoreTransaction, context: RuleContext,
        transferred: Bool = false, forced: [EventKind]? = nil
    ) throws(BillingError) -> EntitlementRecord? {
        guard !accountID.isEmpty else { return nil }
        let kind = kind(of: t, catalog: context.catalog)
        guard kind != .consumable else { return nil }
        // Writers of one subscription (a restore, a proof, a notification, through any replica) compute its
        // entitlement one after the other, each from what the one before committed.
        try ledger.lockSubscription(originalTransactionID: kind == .nonConsumable ? accountID + "\u{0}" + t.productID : t.originalTransactionID)
        let key = EntitlementRecord.key(kind: kind, productID: t.productID, originalTransactionID: t.originalTransactionID)
        let all: [OwnedTransaction] =
            kind == .nonConsumable
            ? try ledger.transactions(accountID: accountID).filter {
                $0.transaction.productID == t.productID && Self.kind(of: $0.transaction, catalog: context.catalog) == .nonConsumable
            }
            : try ledger.transactions(originalTransactionID: t.originalTransactionID).filter { $0.accountID == accountID }
        let old = try ledger.entitlement(accountID: accountID, key: key)
        guard !all.isEmpty else {
            // Moved away by a restore under `transfer`: the account it left hears of it too (inactive now).
            if let gone = old {
                try ledger.deleteEntitlement(accountID: accountID, key: key)
                var snapshot = gone.entitlement(nowMs: context.nowMs)
                snapshot.active = false
                try ledger.append(
                    EventRecord(
                        kind: .entitlementTransferred, timeMs: context.nowMs, accountID: accountID,
                        entitlement: snapshot, cause: context.cause, transactionID: t.transactionID))
            }
            return nil
        }
        let latest = pickLatest(all, kind: kind, catalog: context.catalog)
        let lt = latest.transaction
        let renewal = kind == .autoRenewableSubscription ? try ledger.renewal(originalTransactionID: lt.originalTransactionID) : nil
        var expires = lt.expiresTimeMs
        if kind == .nonRenewingSubscription, expires == 0, let days = context.catalog?.product(lt.productID)?.durationDays {
            expires = lt.purchaseTimeMs + Int64(days) * 86_400_000
        }
        // The renewal info speaks for the period after the current transaction only when it was signed after it.
        let renewalIsCurrent = renewal.map { $0.signedTimeMs >= lt.signedTimeMs } ?? false
        let next = renewal?.autoRenewProductID ?? ""
        var record = EntitlementRecord(
            accountID: accountID, key: key, productID: lt.productID, productKind: kind, originalTransactionID: lt.originalTransactionID,
            latestTransactionID: lt.transactionID, purchaseTimeMs: lt.purchaseTimeMs, expiresTimeMs: expires,
            revocationTimeMs: lt.revocationTimeMs, gracePeriodExpiresTimeMs: renewal?.gracePeriodExpiresTimeMs ?? 0,
            autoRenew: renewal?.autoRenew ?? true, environment: lt.environment,
            orderID: latest.orderID ?? all.first(where: { $0.orderID != nil })?.orderID,
            ended: renewal.map { $0.endedSignedTimeMs > 0 && $0.endedSignedTimeMs >= lt.signedTimeMs } ?? false,
            upgraded: lt.upgraded, billingRetry: renewalIsCurrent && renewal?.billingRetry == true, ownership: lt.ownership,
            store: lt.store,
            subscriptionGroupID: all.lazy.map(\.transaction.subscriptionGroupID).first { !$0.isEmpty } ?? "",
            pendingProductID: !next.isEmpty && next != lt.productID && !lt.upgraded ? next : "")
        record.paused = renewalIsCurrent && renewal?.paused == true
        if record != old { try ledger.put(record) }
        let kinds = forced ?? changes(from: old, to: record, transferred: transferred, nowMs: context.nowMs)
        let snapshot = record.entitlement(nowMs: context.nowMs)
        for k in kinds {
            var order: Order?
            if k == .entitlementGranted, let id = record.orderID { order = try ledger.order(id: id) }
            try ledger.append(
                EventRecord(
                    kind: k, timeMs: context.nowMs, accountID: accountID, order: order, entitlement: snapshot,
                    cause: context.cause, transactionID: t.transactionID))
        }
        return record
    }

    /// The transaction an entitlement shows. A non-consumable: the newest purchase not revoked (one the account
    /// bought before a Family Sharing grant), else the newest. A subscription: the one purchased last (Apple's
    /// lastTransaction: renewals, resubscribes, upgrades and crossgrades each replace it, a late older one never
    /// does). An upgrade's transaction is purchased after the one it supersedes, so it wins once known; until
    /// then the superseded one is current and, being `upgraded`, grants nothing (never an older renewal instead).
    static func pickLatest(_ all: [OwnedTransaction], kind: ProductKind, catalog: Catalog?) -> OwnedTransaction {
        if kind == .nonConsumable {
            func rank(_ o: OwnedTransaction) -> (Int, Int, Int64, String) {
                let t = o.transaction
                return (t.isRevoked ? 0 : 1, t.ownership == .purchased ? 1 : 0, t.purchaseTimeMs, t.transactionID)
            }
            return all.max { rank($0) < rank($1) }!
        }
        return all.max { a, b in
            (a.transaction.purchaseTimeMs, a.transaction.transactionID) < (b.transaction.purchaseTimeMs, b.transaction.transactionID)
        }!
    }

    /// The events a change from `old` to `new` means: each says what changed, and its snapshot (taken at
    /// `nowMs`) agrees with it. GRANTED once per account and entitlement (a first sight that grants no access
    /// is REVOKED or EXPIRED instead); RENEWED only when the expiry moved forward; PRODUCT_CHANGED when the
    /// product the customer has changed (an upgrade or crossgrade, or a scheduled downgrade renewing);
    /// RENEWAL_PRODUCT_CHANGED when the product of the next renewal changed; BILLING_ISSUE when a renewal
    /// failed (billing retry began, or a grace period was set or moved). Nothing when nothing changed.
    static func changes(from old: EntitlementRecord?, to new: EntitlementRecord, transferred: Bool, nowMs: Int64) -> [EventKind] {
        guard let old else {
            if new.revocationTimeMs > 0 { return [.entitlementRevoked] }
            if transferred { return [.entitlementTransferred] }
            return [new.isActive(nowMs: nowMs) ? .entitlementGranted : .entitlementExpired]
        }
        var kinds: [EventKind] = []
        if transferred { kinds.append(.entitlementTransferred) }
        if (old.revocationTimeMs > 0) != (new.revocationTimeMs > 0) {
            kinds.append(new.revocationTimeMs > 0 ? .entitlementRevoked : .entitlementReinstated)
        }
        if old.productID != new.productID { kinds.append(.entitlementProductChanged) }
        if new.expiresTimeMs > old.expiresTimeMs && new.revocationTimeMs == 0 && !new.upgraded { kinds.append(.entitlementRenewed) }
        if (!old.ended && new.ended) || (!old.upgraded && new.upgraded && old.productID == new.productID) {
            if new.revocationTimeMs == 0 { kinds.append(.entitlementExpired) }
        }
        if old.autoRenew != new.autoRenew { kinds.append(.renewalStatusChanged) }
        // Google Play: a pause takes access away until the subscription resumes (its renewal then moves the expiry:
        // ENTITLEMENT_RENEWED).
        if !old.paused && new.paused && new.revocationTimeMs == 0 && !kinds.contains(.entitlementExpired) { kinds.append(.entitlementExpired) }
        if old.pendingProductID != new.pendingProductID && !(new.pendingProductID.isEmpty && old.pendingProductID == new.productID) {
            kinds.append(.renewalProductChanged)
        }
        if (!old.billingRetry && new.billingRetry) || (new.gracePeriodExpiresTimeMs > old.gracePeriodExpiresTimeMs && new.gracePeriodExpiresTimeMs > 0) {
            kinds.append(.billingIssue)
        }
        return kinds
    }

    /// The catalog's word first; then the signed data's; then a guess from the expiry (receipts).
    public static func kind(of t: StoreTransaction, catalog: Catalog?) -> ProductKind {
        if let k = catalog?.product(t.productID)?.kind { return k }
        if let k = t.productKind { return k }
        return t.expiresTimeMs > 0 ? .autoRenewableSubscription : .nonConsumable
    }
}
