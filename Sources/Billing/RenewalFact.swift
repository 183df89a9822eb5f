/// Verified signed renewal info (`signedRenewalInfo`).
public struct RenewalFact: Sendable, Equatable {
    public var originalTransactionID: String
    public var autoRenew: Bool?
    public var gracePeriodExpiresTimeMs: Int64?
    public var signedTimeMs: Int64
    /// isInBillingRetryPeriod, when the renewal info says.
    public var billingRetry: Bool?
    /// autoRenewProductId, when the renewal info says.
    public var autoRenewProductID: String?
    /// Google Play: the subscription is paused by the user (no access until it resumes); nil when not said.
    public var paused: Bool?

    public init(
        originalTransactionID: String, autoRenew: Bool?, gracePeriodExpiresTimeMs: Int64?, signedTimeMs: Int64,
        billingRetry: Bool? = nil, autoRenewProductID: String? = nil
    ) {
        self.billingRetry = billingRetry
        self.autoRenewProductID = autoRenewProductID
        self.originalTransactionID = originalTransactionID
        self.autoRenew = autoRenew
        self.gracePeriodExpiresTimeMs = gracePeriodExpiresTimeMs
        self.signedTimeMs = signedTimeMs
    }
}
