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
}
