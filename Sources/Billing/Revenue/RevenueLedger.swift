/// The reads Revenue needs, inside one database transaction of a store (a role of `PurchaseLedger`).
public protocol RevenueLedger {
    /// Every transaction Revenue counts in `environment` (bought from a store, owned by an account, the buyer's
    /// own), in no particular order, each with its subscription's billing grace period end (0 when none).
    func revenueTransactions(
        environment: StoreEnvironment, _ visit: (StoreTransaction, String, Int64) -> Void
    ) throws(BillingError)

    /// The transactions named that exist (whatever their environment, counted or not), each with its owner and its
    /// subscription's grace period end: a newer view of what a commit changed.
    func revenueTransactions(ids: [String]) throws(BillingError) -> [(OwnedTransaction, Int64)]

    /// The billing grace period end of each original transaction named (0 when none).
    func gracePeriods(originalTransactionIDs: [String]) throws(BillingError) -> [String: Int64]

    /// One page of the export: the transactions of `environment` purchased in `[fromMs, toMs)`, in transaction id
    /// order after `after` (the last id of the page before), at most `limit`. By the primary key: a page reads the
    /// table in order, so the export reads it once whatever the range, and writes need no index of their own for it.
    func exportPage(
        environment: StoreEnvironment, fromMs: Int64, toMs: Int64, after: String, limit: Int
    ) throws(BillingError) -> [OwnedTransaction]

    /// The first paid purchase time of each of `originalTransactionIDs` that has one (the commission's LATER rate).
    func firstPaidPurchases(originalTransactionIDs: [String]) throws(BillingError) -> [String: Int64]

    /// Grants active at `atMs` (started at or before it, not yet expired or revoked).
    func activeGrantCount(atMs: Int64) throws(BillingError) -> Int
}
