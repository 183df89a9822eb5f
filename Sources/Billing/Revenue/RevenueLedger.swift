/// The reads Revenue needs, inside one database transaction of a store (a role of `PurchaseLedger`).
public protocol RevenueLedger {
    /// Every transaction Revenue counts in `environment` (bought from a store, owned by an account, the buyer's
    /// own), in no particular order, each with its subscription's billing grace period end (0 when none).
    func revenueTransactions(
        environment: StoreEnvironment, _ visit: (StoreTransaction, String, Int64) -> Void
    ) throws(BillingError)

    /// One page of the export: every transaction of `environment` purchased in `[fromMs, toMs)`, oldest first
    /// (ties by transaction id), after `after` (the last one of the page before), at most `limit`.
    func exportPage(
        environment: StoreEnvironment, fromMs: Int64, toMs: Int64, after: HistoryCursor?, limit: Int
    ) throws(BillingError) -> [OwnedTransaction]

    /// The first paid purchase time of each of `originalTransactionIDs` that has one (the commission's LATER rate).
    func firstPaidPurchases(originalTransactionIDs: [String]) throws(BillingError) -> [String: Int64]

    /// Grants active at `atMs` (started at or before it, not yet expired or revoked).
    func activeGrantCount(atMs: Int64) throws(BillingError) -> Int
}
