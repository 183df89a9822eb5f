/// The kinds of change the event feed reports (billing.v1.EventType).
public enum EventKind: Int, Sendable, Equatable, CaseIterable {
    case orderCreated = 1
    case orderCompleted = 2
    case orderRefunded = 3
    case orderExpired = 4
    case entitlementGranted = 5
    case entitlementRenewed = 6
    case entitlementRevoked = 7
    case entitlementReinstated = 8
    case entitlementExpired = 9
    case entitlementTransferred = 10
    case renewalStatusChanged = 11
    case billingIssue = 12
    /// Part of an order refunded (the order's refunded quantity, the transaction's revocation percentage).
    case orderPartiallyRefunded = 13
    /// An upgrade or crossgrade took effect, or a scheduled downgrade renewed: the entitlement's product is new.
    case entitlementProductChanged = 14
    /// The product of the next renewal changed (the entitlement's pending product).
    case renewalProductChanged = 15
    /// Support.DeleteCustomer erased the account: the event's account is its pseudonym.
    case accountDeleted = 16
}
