/// Who holds a purchase (billing.v1.Ownership; Apple's inAppOwnershipType).
public enum Ownership: Int, Sendable, Equatable {
    /// The buyer: it can pay an order.
    case purchased = 1
    /// A Family Sharing member: it grants an entitlement and never pays an order.
    case familyShared = 2
}

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

/// What the store signed about the money of a transaction; app receipts carry none (all empty).
public struct PriceFacts: Sendable, Equatable {
    /// Thousandths of the currency unit; 0 when unknown.
    public var priceMilliunits: Int64 = 0
    /// ISO 4217; empty when unknown.
    public var currency = ""
    /// ISO 3166-1 alpha-3; empty when unknown.
    public var storefront = ""
    public var offerID = ""
    /// The store's offer type name (App Store: INTRODUCTORY_OFFER, PROMOTIONAL_OFFER, OFFER_CODE, WIN_BACK_OFFER).
    public var offerType = ""

    public init(priceMilliunits: Int64 = 0, currency: String = "", storefront: String = "", offerID: String = "", offerType: String = "") {
        self.priceMilliunits = priceMilliunits
        self.currency = currency
        self.storefront = storefront
        self.offerID = offerID
        self.offerType = offerType
    }
}

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

/// A transaction as the store keeps it: who owns it and which order it paid, if any.
public struct OwnedTransaction: Sendable, Equatable {
    public var transaction: StoreTransaction
    public var accountID: String
    public var orderID: String?

    public init(transaction: StoreTransaction, accountID: String, orderID: String?) {
        self.transaction = transaction
        self.accountID = accountID
        self.orderID = orderID
    }
}

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
}

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

/// What SubmitReceipt answers.
public struct CompletedPurchase: Sendable, Equatable {
    public var order: Order
    public var transaction: StoreTransaction
    /// This proof had already completed this order.
    public var alreadyProcessed: Bool

    public init(order: Order, transaction: StoreTransaction, alreadyProcessed: Bool) {
        self.order = order
        self.transaction = transaction
        self.alreadyProcessed = alreadyProcessed
    }
}

/// Where a purchase already owned by another account goes on restore.
public enum RestorePolicy: String, Sendable {
    /// It moves to the restoring account (default).
    case transfer
    /// It stays; the restoring account does not get it.
    case keep
}

/// Proof of payment, verified: implemented over the App Store verifiers outside this module.
public protocol ProofVerifier: Sendable {
    /// One StoreKit 2 signed transaction.
    func verifySignedTransaction(_ jws: String) -> Result<StoreTransaction, BillingError>
    /// Every in-app record of a StoreKit 1 app receipt.
    func verifyAppReceipt(_ base64: String) -> Result<[StoreTransaction], BillingError>
    /// Whether `jws`'s certificate chain is verified and cached now, so that checking it costs one ES256
    /// signature (cheap enough for an event loop); false sends the check to a worker pool.
    func hasVerifiedChain(signedTransaction jws: String) -> Bool
}

extension ProofVerifier {
    public func hasVerifiedChain(signedTransaction jws: String) -> Bool { false }
}
