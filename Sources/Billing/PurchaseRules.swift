/// The reads and writes a purchase needs, inside one database transaction of a store.
public protocol PurchaseLedger {
    func order(id: String) throws(BillingError) -> Order?
    func owned(transactionID: String) throws(BillingError) -> OwnedTransaction?
    /// Inserts a transaction the ledger has not seen (transaction_id is unique).
    func insert(_ owned: OwnedTransaction) throws(BillingError)
    /// Changes who owns a known transaction and, when given, the order it paid.
    func reassign(transactionID: String, accountID: String, orderID: String?) throws(BillingError)
    /// Changes only who owns a known transaction (restore under `transfer`); the order it paid stays.
    func transfer(transactionID: String, to accountID: String) throws(BillingError)
    /// Moves a pending order to COMPLETED with its transaction, and records the transition.
    func complete(orderID: String, transactionID: String, environment: StoreEnvironment, nowMs: Int64) throws(BillingError)
    /// Every transaction the account owns.
    func transactions(accountID: String) throws(BillingError) -> [OwnedTransaction]
}

/// The money rules, written once over a ledger so every store applies them identically.
public enum PurchaseRules {
    /// Completes `orderID` with the first candidate that can pay it, exactly once.
    ///
    /// - A candidate already recorded for this order answers `alreadyProcessed`.
    /// - A candidate owned by another order or account cannot pay it.
    /// - `check` refuses a candidate for this order (product, account token, revocation).
    public static func complete(_ ledger: some PurchaseLedger, orderID: String, candidates: [StoreTransaction],
                                check: (Order, StoreTransaction) -> BillingError?, nowMs: Int64) throws(BillingError) -> CompletedPurchase {
        guard let order = try ledger.order(id: orderID) else { throw .orderNotFound(orderID: orderID) }
        // A retry of the proof that completed this order answers the same result.
        for candidate in candidates {
            if let owned = try ledger.owned(transactionID: candidate.transactionID), owned.orderID == orderID {
                return CompletedPurchase(order: order, transaction: owned.transaction, alreadyProcessed: true)
            }
        }
        var firstRefusal: BillingError?
        var stale: BillingError?
        for candidate in candidates {
            if let refusal = check(order, candidate) {
                if firstRefusal == nil { firstRefusal = refusal }
                if stale == nil, case .transactionPredatesOrder = refusal { stale = refusal }
                continue
            }
            let owned = try ledger.owned(transactionID: candidate.transactionID)
            if let owned, owned.orderID != nil || owned.accountID != order.accountID {
                if firstRefusal == nil { firstRefusal = .transactionAlreadyClaimed(transactionID: candidate.transactionID) }
                continue
            }
            guard order.state == .pending else { throw .orderNotPending(orderID: order.id, state: order.state) }
            if owned != nil {
                // Restored earlier by this account, not yet tied to an order.
                try ledger.reassign(transactionID: candidate.transactionID, accountID: order.accountID, orderID: order.id)
            } else {
                try ledger.insert(OwnedTransaction(transaction: candidate, accountID: order.accountID, orderID: order.id))
            }
            try ledger.complete(orderID: order.id, transactionID: candidate.transactionID, environment: candidate.environment, nowMs: nowMs)
            var completed = order
            completed.state = .completed
            completed.transactionID = candidate.transactionID
            completed.environment = candidate.environment
            completed.updateTimeMs = nowMs
            return CompletedPurchase(order: completed, transaction: candidate, alreadyProcessed: false)
        }
        if candidates.count == 1, let firstRefusal { throw firstRefusal }
        if order.state != .pending { throw .orderNotPending(orderID: order.id, state: order.state) }
        // Several candidates (an app receipt): say why none could pay.
        for c in candidates where c.productID == order.productID && c.isRevoked {
            throw .transactionRevoked(transactionID: c.transactionID)
        }
        if let stale { throw stale }
        if candidates.isEmpty { throw .transactionNotFound(detail: "the proof holds no transaction") }
        throw .transactionNotFound(detail: "no unclaimed transaction of product \(order.productID) in the receipt")
    }

    /// Records what the proof shows the account owns; answers every transaction the account then owns.
    /// Consumables are never recorded here. Under `.keep`, a purchase owned by another account stays there.
    public static func restore(_ ledger: some PurchaseLedger, accountID: String, transactions: [StoreTransaction],
                               policy: RestorePolicy) throws(BillingError) -> [OwnedTransaction] {
        for t in transactions where t.productKind != .consumable {
            if let owned = try ledger.owned(transactionID: t.transactionID) {
                if owned.accountID != accountID && policy == .transfer {
                    try ledger.transfer(transactionID: t.transactionID, to: accountID)
                }
            } else {
                try ledger.insert(OwnedTransaction(transaction: t, accountID: accountID, orderID: nil))
            }
        }
        return try ledger.transactions(accountID: accountID)
    }

    /// Entitlements from owned transactions: one per non-consumable product, one per subscription
    /// (by original transaction), the latest purchase winning. Active while not revoked and not expired at `nowMs`.
    public static func entitlements(_ owned: [OwnedTransaction], catalog: Catalog?, nowMs: Int64) -> [Entitlement] {
        var latest: [String: OwnedTransaction] = [:]
        for o in owned {
            let kind = kind(of: o.transaction, catalog: catalog)
            guard kind != .consumable else { continue }
            let key = kind == .nonConsumable ? "p:" + o.transaction.productID : "s:" + o.transaction.originalTransactionID
            if let current = latest[key], current.transaction.purchaseTimeMs > o.transaction.purchaseTimeMs { continue }
            latest[key] = o
        }
        return latest.values.map { o in
            let t = o.transaction
            let kind = kind(of: t, catalog: catalog)
            var expires = t.expiresTimeMs
            if kind == .nonRenewingSubscription, expires == 0, let days = catalog?.product(t.productID)?.durationDays {
                expires = t.purchaseTimeMs + Int64(days) * 86_400_000
            }
            let expired = (kind == .autoRenewableSubscription || kind == .nonRenewingSubscription) && expires > 0 && expires <= nowMs
            return Entitlement(productID: t.productID, productKind: kind, originalTransactionID: t.originalTransactionID,
                               latestTransactionID: t.transactionID, purchaseTimeMs: t.purchaseTimeMs, expiresTimeMs: expires,
                               active: !t.isRevoked && !expired, orderID: o.orderID)
        }.sorted { ($0.productID, $0.originalTransactionID) < ($1.productID, $1.originalTransactionID) }
    }

    /// The catalog's word first; then the signed data's; then a guess from the expiry (receipts).
    public static func kind(of t: StoreTransaction, catalog: Catalog?) -> ProductKind {
        if let k = catalog?.product(t.productID)?.kind { return k }
        if let k = t.productKind { return k }
        return t.expiresTimeMs > 0 ? .autoRenewableSubscription : .nonConsumable
    }
}
