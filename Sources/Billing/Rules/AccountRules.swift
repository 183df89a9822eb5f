/// What an erasure rewrote (DeleteCustomer's answer and its log line).
public struct ErasureCounts: Sendable, Equatable {
    public var orders = 0
    public var transactions = 0
    public var entitlements = 0
    public var grants = 0
    public var events = 0
    public var auditEntries = 0
    public var idempotencyKeys = 0
    public init() {}
}

/// What TransferPurchases moved.
public struct TransferOutcome: Sendable, Equatable {
    /// Original transactions moved.
    public var transferred: Int
    /// The receiving account's entitlements afterwards.
    public var entitlements: [EntitlementRecord]
}

/// Support's changes to whole accounts, written once over a ledger.
public enum AccountRules {
    /// Whether billingd has any record of the account (an order, a transaction it owns, an entitlement or a grant).
    public static func known(_ ledger: some PurchaseLedger, accountID: String) throws(BillingError) -> Bool {
        if try !ledger.entitlements(accountID: accountID).isEmpty { return true }
        if try !ledger.orders(accountID: accountID).isEmpty { return true }
        if try !ledger.grants(accountID: accountID).isEmpty { return true }
        return try !ledger.transactions(accountID: accountID).isEmpty
    }

    /// Moves whole store purchases (every transaction of each original transaction that `from` owns, and the
    /// entitlement) to `to`, as a restore under `transfer` would: ENTITLEMENT_TRANSFERRED on both accounts (the
    /// one it left sees it inactive), later notifications apply to `to` (they find the owner by the transaction).
    /// Orders stay with the account that placed them; grants do not move. `originals` empty: every purchase `from`
    /// owns. An original `from` does not own: TRANSACTION_NOT_FOUND.
    public static func transfer(
        _ ledger: some PurchaseLedger, from: String, to: String, originals: [String], context: RuleContext
    ) throws(BillingError) -> TransferOutcome {
        let owned = try ledger.transactions(accountID: from)
        guard try known(ledger, accountID: from) else { throw .accountNotFound(accountID: from) }
        var chosen = Set(originals)
        if chosen.isEmpty { chosen = Set(owned.map(\.transaction.originalTransactionID)) }
        for original in chosen where !owned.contains(where: { $0.transaction.originalTransactionID == original }) {
            throw .transactionUnknown(transactionID: original)
        }
        // Subscription locks first, in one order (as notifications take them).
        for original in chosen.sorted() { try ledger.lockSubscription(originalTransactionID: original) }
        var moved = 0
        for original in chosen.sorted() {
            let chain = try ledger.transactions(originalTransactionID: original).filter { $0.accountID == from }
            guard !chain.isEmpty else { continue }
            moved += 1
            for t in chain { try ledger.transfer(transactionID: t.transaction.transactionID, to: to) }
            let newest = chain.max { a, b in
                (a.transaction.purchaseTimeMs, a.transaction.transactionID) < (b.transaction.purchaseTimeMs, b.transaction.transactionID)
            }!
            try PurchaseRules.refresh(ledger, accountID: from, for: newest.transaction, context: context)
            try PurchaseRules.refresh(ledger, accountID: to, for: newest.transaction, context: context, transferred: true)
        }
        return TransferOutcome(transferred: moved, entitlements: try ledger.entitlements(accountID: to))
    }

    /// Erases an account: `pseudonym` replaces its id everywhere (`PurchaseLedger.renameAccount`), one
    /// ACCOUNT_DELETED event carries the pseudonym. The money records stay, so revenue does not change; store
    /// notifications about its purchases still apply, to the pseudonym. An account billingd has no record of
    /// (never known, or erased before): ACCOUNT_NOT_FOUND, nothing written.
    public static func erase(
        _ ledger: some PurchaseLedger, accountID: String, pseudonym: String, context: RuleContext
    ) throws(BillingError)
        -> ErasureCounts
    {
        guard try known(ledger, accountID: accountID) else { throw .accountNotFound(accountID: accountID) }
        // Its subscriptions' writers wait for the erasure (a notification mid-way would recreate the old id).
        let originals = Set(try ledger.transactions(accountID: accountID).map(\.transaction.originalTransactionID))
        for original in originals.sorted() { try ledger.lockSubscription(originalTransactionID: original) }
        let counts = try ledger.renameAccount(accountID, to: pseudonym)
        try ledger.append(EventRecord(kind: .accountDeleted, timeMs: context.nowMs, accountID: pseudonym, cause: context.cause))
        return counts
    }
}
