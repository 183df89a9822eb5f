/// A store transaction as verified proof describes it (StoreKit 2 JWS or one app receipt record).
public struct StoreTransaction: Sendable, Equatable {
    public var transactionID: String
    public var originalTransactionID: String
    public var productID: String
    /// From the catalog when one is configured, else from the signed data.
    public var productKind: ProductKind?
    public var purchaseTimeMs: Int64
    /// Subscriptions; 0 otherwise.
    public var expiresTimeMs: Int64
    /// 0 unless refunded or revoked.
    public var revocationTimeMs: Int64
    public var quantity: Int
    public var environment: StoreEnvironment
    /// Lowercase UUID, or nil.
    public var appAccountToken: String?
    public var bundleID: String
    /// When the App Store signed this view of the transaction (the JWS `signedDate`, a receipt's creation
    /// date): per transaction, the newest view wins; 0 when unknown.
    public var signedTimeMs: Int64
    /// Apple's revocationReason (0 other, 1 an issue in the app), when revoked.
    public var revocationReason: Int?
    public var store: Store = .appStore
    public var ownership: Ownership = .purchased
    /// Superseded at once by an upgrade in its subscription group (Apple's isUpgraded): it never grants access
    /// again. Once true it stays true, whatever order the signed views arrive in.
    public var upgraded = false
    public var revocationType: RevocationType = .unspecified
    /// Prorated refunds: the refunded share in thousandths of a percent (33333 = 33.333%); 0 otherwise.
    public var revocationPercentage = 0
    public var price = PriceFacts()
    public var subscriptionGroupID = ""
    /// Google Play: the purchase token the proof named (to acknowledge it, and to find the transaction by it:
    /// GetTransaction); empty for the App Store.
    public var purchaseToken = ""
    /// Google Play: the transaction (orderId) of the purchase this one replaced through `linkedPurchaseToken` (an
    /// upgrade, downgrade or resubscribe); it is marked `upgraded` when this one cut its paid period short. Read
    /// from Google with this one; not stored.
    public var replacedTransactionID = ""
    /// Google Play: the store said the replacement took effect at once (`itemReplacement` with a mode other than
    /// DEFERRED): the replaced purchase is superseded whatever its expiry says.
    public var replacedAtOnce = false

    public init(
        transactionID: String, originalTransactionID: String, productID: String, productKind: ProductKind?,
        purchaseTimeMs: Int64, expiresTimeMs: Int64 = 0, revocationTimeMs: Int64 = 0, quantity: Int = 1,
        environment: StoreEnvironment, appAccountToken: String? = nil, bundleID: String,
        signedTimeMs: Int64 = 0, revocationReason: Int? = nil
    ) {
        self.signedTimeMs = signedTimeMs
        self.revocationReason = revocationReason
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.productKind = productKind
        self.purchaseTimeMs = purchaseTimeMs
        self.expiresTimeMs = expiresTimeMs
        self.revocationTimeMs = revocationTimeMs
        self.quantity = quantity
        self.environment = environment
        self.appAccountToken = appAccountToken
        self.bundleID = bundleID
    }

    public var isRevoked: Bool { revocationTimeMs > 0 }

    /// Revoked as a whole refund: a full refund, a prorated one of 100%, or a revocation that does not say how.
    public var isFullyRefunded: Bool {
        guard isRevoked else { return false }
        switch revocationType {
        case .unspecified, .refundFull: return true
        case .refundProrated: return revocationPercentage >= 100_000
        case .familyRevoke: return false
        }
    }
}
