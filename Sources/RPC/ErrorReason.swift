/// Every `ErrorInfo.reason` billingd's services answer: the error table of docs/ERRORS.md as a type. Servers make
/// their `RPCError`s from these cases only (`RPCError(code:message:reason:metadata:)` with an `ErrorReason`), so
/// the metric label set (`billingd_rpc_errors_total{reason}`) and the docs check are derived from this one list.
public enum ErrorReason: String, CaseIterable, Sendable {
    case invalidField = "INVALID_FIELD"
    case receiptMalformed = "RECEIPT_MALFORMED"
    case receiptUntrusted = "RECEIPT_UNTRUSTED"
    case wrongApp = "WRONG_APP"
    case environmentNotAllowed = "ENVIRONMENT_NOT_ALLOWED"
    case productMismatch = "PRODUCT_MISMATCH"
    case accountTokenMismatch = "ACCOUNT_TOKEN_MISMATCH"
    case transactionNotFound = "TRANSACTION_NOT_FOUND"
    case transactionAlreadyClaimed = "TRANSACTION_ALREADY_CLAIMED"
    case transactionRevoked = "TRANSACTION_REVOKED"
    case notPurchasedByAccount = "NOT_PURCHASED_BY_ACCOUNT"
    case transactionPredatesOrder = "TRANSACTION_PREDATES_ORDER"
    case orderNotFound = "ORDER_NOT_FOUND"
    case accountNotFound = "ACCOUNT_NOT_FOUND"
    case grantNotFound = "GRANT_NOT_FOUND"
    case refundNotSupported = "REFUND_NOT_SUPPORTED"
    case storeRefused = "STORE_REFUSED"
    case orderNotPending = "ORDER_NOT_PENDING"
    case productNotFound = "PRODUCT_NOT_FOUND"
    case idempotencyKeyReused = "IDEMPOTENCY_KEY_REUSED"
    case unauthenticated = "UNAUTHENTICATED"
    case permissionDenied = "PERMISSION_DENIED"
    case messageTooLarge = "MESSAGE_TOO_LARGE"
    case overloaded = "OVERLOADED"
    case cursorOutOfRange = "CURSOR_OUT_OF_RANGE"
    case storageUnavailable = "STORAGE_UNAVAILABLE"
    case shuttingDown = "SHUTTING_DOWN"
    case appStoreAPINotConfigured = "APPSTORE_API_NOT_CONFIGURED"
    case webhooksNotConfigured = "WEBHOOKS_NOT_CONFIGURED"
    case googlePlayNotConfigured = "GOOGLE_PLAY_NOT_CONFIGURED"
    case googlePlayUnavailable = "GOOGLE_PLAY_UNAVAILABLE"
    case purchaseNotFound = "PURCHASE_NOT_FOUND"
    case purchasePending = "PURCHASE_PENDING"
    case purchaseCanceled = "PURCHASE_CANCELED"
    case offerSigningNotConfigured = "OFFER_SIGNING_NOT_CONFIGURED"
    case appStoreAPIUnavailable = "APPSTORE_API_UNAVAILABLE"
    case appStoreAPIRefused = "APPSTORE_API_REFUSED"
}

extension RPCError {
    /// A failure the service decided, with its reason from the error table.
    public init(code: StatusCode, message: String, reason: ErrorReason, metadata: [String: String] = [:]) {
        self.init(code: code, message: message, reason: reason.rawValue as String?, metadata: metadata)
    }
}
