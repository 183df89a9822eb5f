/// Everything the billing domain can refuse, one case per reason in ERRORS.md it decides; a failure of what the
/// domain depends on (the database, the App Store Server API) is one case apart, `infrastructure`, never a refusal.
public enum BillingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A field is empty, too long or malformed.
    case invalidField(field: String, problem: String)
    case productNotFound(productID: String)
    case orderNotFound(orderID: String)
    case idempotencyKeyReused(key: String)
    /// Not the caller's fault: something the domain depends on failed (answered UNAVAILABLE or OVERLOADED; retry later).
    case infrastructure(InfrastructureFailure)
    /// The caller went away (deadline or cancel) before anything was written.
    case abandoned
    /// Not a JWS / not base64 PKCS#7 / cannot be decoded.
    case receiptMalformed(detail: String)
    /// Signature, chain, marker OIDs or certificate dates fail.
    case receiptUntrusted(detail: String)
    /// Bundle id or appAppleId is not one this service serves.
    case wrongApp(detail: String)
    case environmentNotAllowed(environment: String)
    case productMismatch(orderProduct: String, proofProduct: String)
    /// The proof pays for another number of units than the order asks for (reported as PRODUCT_MISMATCH).
    case quantityMismatch(orderQuantity: Int, proofQuantity: Int)
    case accountTokenMismatch(orderID: String)
    case transactionNotFound(detail: String)
    /// A restore or an operator call named a transaction id that no accepted App Store environment knows
    /// (reported as TRANSACTION_NOT_FOUND); there is no order to pay.
    case appStoreTransactionUnknown(transactionID: String)
    case transactionAlreadyClaimed(transactionID: String)
    case transactionRevoked(transactionID: String)
    /// With `--reject-stale-purchases`: bought before the order was created (beyond the clock skew),
    /// or a subscription that had expired by then.
    case transactionPredatesOrder(transactionID: String)
    case orderNotPending(orderID: String, state: OrderState)
    /// The call needs the App Store Server API, whose credentials are not configured.
    case appStoreAPINotConfigured(feature: String)
    /// The App Store Server API refused an operator's request for a reason of the App Store's (403: a subscription
    /// not eligible for a renewal-date extension, or already extended as often as Apple allows); `code` is Apple's.
    case appStoreAPIRefused(code: Int64, detail: String)
    /// A Family Sharing grant (or another holder's copy) was offered as payment: it grants an entitlement,
    /// never pays an order.
    case notPurchasedByAccount(transactionID: String)
    /// `GetTransaction`: no transaction is recorded under that store id.
    case transactionUnknown(transactionID: String)
    /// A Google Play proof, and Google Play is not configured.
    case googlePlayNotConfigured
    /// Google Play does not know that purchase token for that product and package (400, 404, 410).
    case purchaseNotFound(detail: String)
    /// The Google Play purchase is still pending (a slow payment method): it cannot pay yet.
    case purchasePending(detail: String)
    /// The Google Play purchase was canceled before it was paid.
    case purchaseCanceled(detail: String)
    /// `SignOffer` without the In-App Purchase key (or, for the JWS kinds, its issuer id).
    case offerSigningNotConfigured(detail: String)
    /// `after_cursor` is beyond the newest committed event (a cursor from another database, or from before a restore).
    case cursorOutOfRange(cursor: UInt64, newest: UInt64)
    /// Support: billingd has no record of the account (no order, transaction or entitlement).
    case accountNotFound(accountID: String)
    /// No grant has that id (Support.RevokeGrant).
    case grantNotFound(grantID: String)
    /// RefundPurchase of a purchase its store does not let a seller refund (the App Store), or of a grant.
    case refundNotSupported(detail: String)
    /// The store refused an operator's request for a reason of its own (`storeError`: the store's words).
    case storeRefused(storeError: String)

    public var description: String {
        switch self {
        case .invalidField(let field, let problem): "\(field) \(problem)"
        case .productNotFound(let id): "product \(id) is not in the catalog"
        case .orderNotFound(let id): "no order has id \(id)"
        case .idempotencyKeyReused: "the idempotency key was used before with different fields"
        case .infrastructure(let failure): failure.description
        case .abandoned: "the call was abandoned before it was written"
        case .receiptMalformed(let d): "the proof cannot be decoded: \(d)"
        case .receiptUntrusted(let d): "the proof is not trusted: \(d)"
        case .wrongApp(let d): "the proof is for another app: \(d)"
        case .environmentNotAllowed(let e): "\(e) by this service"
        case .productMismatch(let order, let proof): "the proof is for product \(proof), the order is for \(order)"
        case .quantityMismatch(let order, let proof): "the proof pays for \(proof) units, the order is for \(order)"
        case .accountTokenMismatch: "the transaction's appAccountToken is not this order's id"
        case .transactionNotFound(let d): "no transaction in the proof can pay this order: \(d)"
        case .appStoreTransactionUnknown(let id): "no accepted App Store environment knows transaction \(id)"
        case .transactionAlreadyClaimed(let id): "transaction \(id) already paid another order or belongs to another account"
        case .transactionRevoked(let id): "transaction \(id) was refunded or revoked"
        case .transactionPredatesOrder(let id): "transaction \(id) was purchased, or had expired, before the order was created"
        case .orderNotPending(_, let state): "the order is \(state) and can no longer be paid"
        case .appStoreAPIRefused(let code, let d): "the App Store refused the request (\(code)): \(d)"
        case .notPurchasedByAccount(let id):
            "transaction \(id) is a Family Sharing grant: it gives the family member an entitlement (RestorePurchases), never pays an order"
        case .transactionUnknown(let id): "no transaction is recorded under id \(id)"
        case .googlePlayNotConfigured:
            "Google Play proofs need --google-play-service-account and --google-play-packages, and this billingd has neither"
        case .purchaseNotFound(let d): "Google Play does not know this purchase: \(d)"
        case .purchasePending(let d): "the Google Play purchase is still pending; the order completes when it is paid: \(d)"
        case .purchaseCanceled(let d): "the Google Play purchase was canceled before it was paid: \(d)"
        case .offerSigningNotConfigured(let d): "offer signing is not configured: \(d)"
        case .accountNotFound(let id): "billingd has no record of account \(id)"
        case .grantNotFound(let id): "no grant has id \(id)"
        case .refundNotSupported(let d): d
        case .storeRefused(let e): "the store refused the request: \(e)"
        case .cursorOutOfRange(let cursor, let newest):
            "after_cursor \(cursor) is beyond the newest event (\(newest)): a cursor from another database or from before a restore"
        case .appStoreAPINotConfigured(let feature):
            "\(feature) needs the App Store Server API, and this billingd has no App Store Server API client configured"
        }
    }
}

extension BillingError {
    /// The order database failed, known only by a message (`detail`, for the log only). Stores throw
    /// `.infrastructure(.storage(cause:))` with their own error instead, so its code survives.
    public static func storageUnavailable(detail: String) -> BillingError {
        .infrastructure(.storage(cause: DescribedStoreFailure(description: detail)))
    }

    /// The store's queue is full. Shorthand for `.infrastructure(.overloaded)`.
    public static var overloaded: BillingError { .infrastructure(.overloaded) }

    /// The Play Developer API failed. Shorthand for `.infrastructure(.googlePlayAPI(detail:))`.
    public static func googlePlayUnavailable(detail: String) -> BillingError { .infrastructure(.googlePlayAPI(detail: detail)) }

    /// The App Store Server API failed. Shorthand for `.infrastructure(.appStoreAPI(detail:))`.
    public static func appStoreAPIUnavailable(detail: String) -> BillingError { .infrastructure(.appStoreAPI(detail: detail)) }
}
