/// How a transaction was revoked (billing.v1.RevocationType; Apple's revocationType).
public enum RevocationType: Int, Sendable, Equatable {
    /// Not revoked, or revoked by data that does not say how (app receipts, older signed data): a full refund.
    case unspecified = 0
    case refundFull = 1
    /// Part refunded: `revocationPercentage` thousandths of a percent.
    case refundProrated = 2
    /// A Family Sharing grant taken back: no money moved.
    case familyRevoke = 3
}
