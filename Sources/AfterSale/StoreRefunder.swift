public import Billing

/// RefundPurchase's store half: asks the store to refund (and, when asked, revoke) a purchase, and answers the
/// transaction as the store now shows it (revoked), to be recorded as the store's own refund would be. Blocking.
public protocol StoreRefunder: Sendable {
    /// `latest`: the transaction is its subscription's newest (a revoke ends that one).
    func refund(_ transaction: StoreTransaction, revokeAccess: Bool, latest: Bool) throws(BillingError) -> StoreTransaction
}
