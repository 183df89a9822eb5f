/// A Google Play purchase billingd recorded as paid and must acknowledge (and, for a consumable, consume) before
/// Google's three days run out: queued in the same transaction that recorded it, done by the acknowledger, retried
/// until Google has it, surviving restarts.
public struct PlayAcknowledgement: Sendable, Equatable {
    public var purchaseToken: String
    public var packageName: String
    public var productID: String
    /// purchases.subscriptions.acknowledge rather than purchases.products.acknowledge.
    public var subscription: Bool
    /// A consumable: consumed once acknowledged, so that the customer can buy it again.
    public var consume: Bool
    /// The Google Play orderId (billingd's transaction id).
    public var transactionID: String
    /// Who owns it ("" when nobody yet), for the log.
    public var accountID: String
    public var createdMs: Int64
    public var attempts: Int
    public var nextAttemptMs: Int64
    public var lastError: String
    /// When Google confirmed the acknowledgement (0: not yet).
    public var acknowledgedMs: Int64
    /// When Google confirmed the consumption (0: not yet, or not a consumable).
    public var consumedMs: Int64

    public init(
        purchaseToken: String, packageName: String, productID: String, subscription: Bool, consume: Bool, transactionID: String, accountID: String,
        createdMs: Int64, attempts: Int = 0, nextAttemptMs: Int64 = 0, lastError: String = "", acknowledgedMs: Int64 = 0, consumedMs: Int64 = 0
    ) {
        self.purchaseToken = purchaseToken
        self.packageName = packageName
        self.productID = productID
        self.subscription = subscription
        self.consume = consume
        self.transactionID = transactionID
        self.accountID = accountID
        self.createdMs = createdMs
        self.attempts = attempts
        self.nextAttemptMs = nextAttemptMs
        self.lastError = lastError
        self.acknowledgedMs = acknowledgedMs
        self.consumedMs = consumedMs
    }

    /// Nothing left to ask of Google.
    public var isDone: Bool { acknowledgedMs > 0 && (!consume || consumedMs > 0) }
}

/// When a Google Play purchase is queued for acknowledgement: whenever a transaction of it is first recorded as
/// paid (credited to an order, restored, or kept from a notification), never for one billingd refused.
public enum PlayAcknowledgementRules {
    public static func queueIfDue(_ ledger: some PurchaseLedger, _ t: StoreTransaction, accountID: String, nowMs: Int64) throws(BillingError) {
        guard t.store == .googlePlay, !t.purchaseToken.isEmpty, !t.isRevoked else { return }
        try ledger.queueAcknowledgement(
            PlayAcknowledgement(
                purchaseToken: t.purchaseToken, packageName: t.bundleID, productID: t.productID,
                subscription: t.productKind == .autoRenewableSubscription, consume: t.productKind == .consumable, transactionID: t.transactionID,
                accountID: accountID, createdMs: nowMs, nextAttemptMs: nowMs))
    }
}
