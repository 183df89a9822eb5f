/// What an account owns: one per non-consumable product or subscription (by original transaction).
public struct Entitlement: Sendable, Equatable {
    public var productID: String
    public var productKind: ProductKind
    public var originalTransactionID: String
    public var latestTransactionID: String
    public var purchaseTimeMs: Int64
    public var expiresTimeMs: Int64
    public var active: Bool
    public var orderID: String?
    public var revocationTimeMs: Int64 = 0
    public var gracePeriodExpiresTimeMs: Int64 = 0
    public var autoRenew = false
    public var environment: StoreEnvironment?
    public var state: EntitlementState = .active
    public var ownership: Ownership = .purchased
    public var store: Store = .appStore
    public var subscriptionGroupID = ""
    /// The product the subscription renews into when it differs from `productID` (a scheduled downgrade or
    /// crossgrade); empty otherwise.
    public var pendingProductID = ""

    /// STORE_GRANT: the grant (also its original transaction id); empty otherwise.
    public var grantID: String { store == .grant ? originalTransactionID : "" }
}
