/// Who holds a purchase (billing.v1.Ownership; Apple's inAppOwnershipType).
public enum Ownership: Int, Sendable, Equatable {
    /// The buyer: it can pay an order.
    case purchased = 1
    /// A Family Sharing member: it grants an entitlement and never pays an order.
    case familyShared = 2
}
