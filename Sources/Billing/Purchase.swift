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
