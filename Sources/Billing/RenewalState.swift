/// What the App Store last said about a subscription's renewal, per original transaction.
public struct RenewalState: Sendable, Equatable {
    public var originalTransactionID: String
    public var autoRenew: Bool
    public var gracePeriodExpiresTimeMs: Int64
    /// The renewal info's own signedDate: the newest wins for auto-renew and grace period.
    public var signedTimeMs: Int64
    /// The newest signedDate of an EXPIRED / GRACE_PERIOD_EXPIRED notification; 0 if none.
    public var endedSignedTimeMs: Int64
    /// The renewal info's isInBillingRetryPeriod.
    public var billingRetry = false
    /// The renewal info's autoRenewProductId: the product of the next renewal; empty when unknown.
    public var autoRenewProductID = ""
    /// Google Play: paused by the user.
    public var paused = false

    public init(
        originalTransactionID: String, autoRenew: Bool = true, gracePeriodExpiresTimeMs: Int64 = 0,
        signedTimeMs: Int64 = 0, endedSignedTimeMs: Int64 = 0, billingRetry: Bool = false, autoRenewProductID: String = ""
    ) {
        self.billingRetry = billingRetry
        self.autoRenewProductID = autoRenewProductID
        self.originalTransactionID = originalTransactionID
        self.autoRenew = autoRenew
        self.gracePeriodExpiresTimeMs = gracePeriodExpiresTimeMs
        self.signedTimeMs = signedTimeMs
        self.endedSignedTimeMs = endedSignedTimeMs
    }
}
