/// Where an entitlement stands (billing.v1.EntitlementState), as Apple's Get All Subscription Statuses says.
public enum EntitlementState: Int, Sendable, Equatable {
    case active = 1
    /// A renewal failed; access continues until the grace period ends.
    case gracePeriod = 2
    /// A renewal failed and the store still retries; no access.
    case billingRetry = 3
    case expired = 4
    /// Refunded, or a Family Sharing grant taken back.
    case revoked = 5
    /// Google Play: paused by the user.
    case paused = 6

    /// `active` is true exactly for these.
    public var grantsAccess: Bool { self == .active || self == .gracePeriod }
}
