public import AppStore
public import Billing

/// `ProofVerifier` over the App Store verifiers: maps verified payloads to store transactions
/// and verification failures to the reasons of ERRORS.md.
public final class AppStoreProofVerifier: ProofVerifier {
    public let signedData: SignedDataVerifier
    public let receipts: AppReceiptVerifier
    /// Called with (kind, result) for every verification: `jws`/`receipt`, `ok` or the failure kind.
    private let observe: @Sendable (String, String) -> Void

    public init(settings: VerifierSettings, observe: @escaping @Sendable (String, String) -> Void = { _, _ in }) {
        signedData = SignedDataVerifier(settings: settings)
        receipts = AppReceiptVerifier(settings: settings)
        self.observe = observe
    }

    public func verifySignedTransaction(_ jws: String) -> Result<StoreTransaction, BillingError> {
        let result = signedData.verifyTransaction(jws)
        switch result {
        case .failure(let f):
            observe("jws", f.kind)
            return .failure(Self.map(f))
        case .success(let p):
            guard let t = Self.transaction(p) else {
                observe("jws", "malformed")
                return .failure(.receiptMalformed(detail: "the transaction lacks transactionId, productId or purchaseDate"))
            }
            observe("jws", "ok")
            return .success(t)
        }
    }

    /// A verified transaction payload as the rules see it; nil when it lacks what identifies a purchase.
    /// Names and types follow Apple's JWSTransactionDecodedPayload.
    static func transaction(_ p: TransactionPayload) -> StoreTransaction? {
        guard let id = p.transactionID, !id.isEmpty, let product = p.productID, !product.isEmpty,
            let purchase = p.purchaseDate
        else { return nil }
        var t = StoreTransaction(
            transactionID: id, originalTransactionID: p.originalTransactionID ?? id, productID: product,
            productKind: p.type.flatMap(Self.kind), purchaseTimeMs: purchase, expiresTimeMs: p.expiresDate ?? 0,
            revocationTimeMs: p.revocationDate ?? 0, quantity: max(1, p.quantity ?? 1),
            environment: Self.environment(p.environment), appAccountToken: p.appAccountToken?.lowercased(),
            bundleID: p.bundleID ?? "", signedTimeMs: p.signedDate ?? 0, revocationReason: p.revocationReason)
        t.store = .appStore
        t.ownership = p.inAppOwnershipType == "FAMILY_SHARED" ? .familyShared : .purchased
        t.upgraded = p.isUpgraded ?? false
        t.revocationType = Self.revocationType(p.revocationType)
        t.revocationPercentage = min(max(p.revocationPercentage ?? 0, 0), 100_000)
        // Apple's price is already in milliunits (thousandths of the currency unit).
        t.price = PriceFacts(
            priceMilliunits: p.price ?? 0, currency: p.currency ?? "", storefront: p.storefront ?? "",
            offerID: p.offerIdentifier ?? "", offerType: p.offerType.map(Self.offerType) ?? "")
        t.subscriptionGroupID = p.subscriptionGroupIdentifier ?? ""
        return t
    }

    /// Apple's revocationType; absent or unknown is `.unspecified` (which the rules treat as a full refund).
    static func revocationType(_ name: String?) -> RevocationType {
        switch name {
        case "REFUND_FULL": .refundFull
        case "REFUND_PRORATED": .refundProrated
        case "FAMILY_REVOKE": .familyRevoke
        default: .unspecified
        }
    }

    /// Apple's offerType number as its name; a number Apple adds later as its decimal text.
    static func offerType(_ n: Int) -> String {
        switch n {
        case 1: "INTRODUCTORY_OFFER"
        case 2: "PROMOTIONAL_OFFER"
        case 3: "OFFER_CODE"
        case 4: "WIN_BACK_OFFER"
        default: String(n)
        }
    }

    public func hasVerifiedChain(signedTransaction jws: String) -> Bool { signedData.hasVerifiedChain(jws) }

    public func verifyAppReceipt(_ base64: String) -> Result<[StoreTransaction], BillingError> {
        switch receipts.verify(base64: base64) {
        case .failure(let f):
            observe("receipt", f.kind)
            return .failure(Self.map(f))
        case .success(let r):
            observe("receipt", "ok")
            let environment: StoreEnvironment =
                switch r.environment {
                case .sandbox: .sandbox
                case .xcode, .localTesting: .xcode
                default: .production
                }
            return .success(
                r.inApp.compactMap { p in
                    guard let id = p.transactionID, !id.isEmpty, let product = p.productID, !product.isEmpty else { return nil }
                    return StoreTransaction(
                        transactionID: id, originalTransactionID: p.originalTransactionID ?? id, productID: product, productKind: nil,
                        purchaseTimeMs: p.purchaseDate ?? 0, expiresTimeMs: p.expiresDate ?? 0, revocationTimeMs: p.cancellationDate ?? 0,
                        quantity: max(1, p.quantity ?? 1), environment: environment, appAccountToken: nil, bundleID: r.bundleID ?? "",
                        signedTimeMs: r.creationDate ?? 0)
                })
        }
    }

    static func map(_ f: VerificationFailure) -> BillingError {
        switch f {
        case .malformed(let d): .receiptMalformed(detail: d)
        case .untrusted(let d): .receiptUntrusted(detail: d)
        case .wrongApp(let d): .wrongApp(detail: d)
        case .environmentNotAllowed(let d): .environmentNotAllowed(environment: d)
        }
    }

    static func kind(_ type: String) -> ProductKind? {
        switch type {
        case "Auto-Renewable Subscription": .autoRenewableSubscription
        case "Non-Consumable": .nonConsumable
        case "Consumable": .consumable
        case "Non-Renewing Subscription": .nonRenewingSubscription
        default: nil
        }
    }

    static func environment(_ e: String?) -> StoreEnvironment {
        switch e {
        case "Sandbox": .sandbox
        case "Xcode", "LocalTesting": .xcode
        default: .production
        }
    }
}

/// Refuses every proof: billingd started without bundle ids or trust roots.
public struct UnconfiguredProofVerifier: ProofVerifier {
    public let reason: BillingError
    public init(reason: BillingError) { self.reason = reason }
    public func verifySignedTransaction(_ jws: String) -> Result<StoreTransaction, BillingError> { .failure(reason) }
    public func verifyAppReceipt(_ base64: String) -> Result<[StoreTransaction], BillingError> { .failure(reason) }
}
