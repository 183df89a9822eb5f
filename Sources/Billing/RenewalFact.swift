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
    /// The store says the subscription has ended, as of `signedTimeMs` (Google Play: SUBSCRIPTION_STATE_EXPIRED; the
    /// App Store says it by an EXPIRED or GRACE_PERIOD_EXPIRED notification instead): the entitlement is EXPIRED
    /// until a newer transaction, and ENTITLEMENT_EXPIRED is written once when it ends.
    public var ended = false

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
