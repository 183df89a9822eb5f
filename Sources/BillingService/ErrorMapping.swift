public import Billing
public import RPC

extension BillingError {
    /// The gRPC status and ErrorInfo for this error (the one table of ERRORS.md for the domain).
    public var rpcError: RPCError {
        switch self {
        case .invalidField(let field, let problem):
            RPCError(code: .invalidArgument, message: "\(field) \(problem)", reason: "INVALID_FIELD", metadata: ["field": field])
        case .productNotFound(let id):
            RPCError(code: .notFound, message: description, reason: "PRODUCT_NOT_FOUND", metadata: ["product_id": id])
        case .orderNotFound(let id):
            RPCError(code: .notFound, message: description, reason: "ORDER_NOT_FOUND", metadata: ["order_id": id])
        case .idempotencyKeyReused:
            RPCError(code: .failedPrecondition, message: description, reason: "IDEMPOTENCY_KEY_REUSED")
        case .infrastructure(let failure):
            failure.rpcError
        case .abandoned:
            RPCError(code: .deadlineExceeded, message: description)
        case .receiptMalformed:
            RPCError(code: .invalidArgument, message: description, reason: "RECEIPT_MALFORMED")
        case .receiptUntrusted:
            RPCError(code: .invalidArgument, message: description, reason: "RECEIPT_UNTRUSTED")
        case .wrongApp:
            RPCError(code: .invalidArgument, message: description, reason: "WRONG_APP")
        case .environmentNotAllowed:
            RPCError(code: .failedPrecondition, message: description, reason: "ENVIRONMENT_NOT_ALLOWED")
        case .productMismatch(let order, let proof):
            RPCError(
                code: .failedPrecondition, message: description, reason: "PRODUCT_MISMATCH",
                metadata: ["order_product_id": order, "product_id": proof])
        case .quantityMismatch(let order, let proof):
            RPCError(
                code: .failedPrecondition, message: description, reason: "PRODUCT_MISMATCH",
                metadata: ["field": "quantity", "order_quantity": String(order), "quantity": String(proof)])
        case .accountTokenMismatch(let orderID):
            RPCError(code: .permissionDenied, message: description, reason: "ACCOUNT_TOKEN_MISMATCH", metadata: ["order_id": orderID])
        case .transactionNotFound:
            RPCError(code: .notFound, message: description, reason: "TRANSACTION_NOT_FOUND")
        case .appStoreTransactionUnknown(let id):
            RPCError(code: .notFound, message: description, reason: "TRANSACTION_NOT_FOUND", metadata: ["transaction_id": id])
        case .transactionAlreadyClaimed(let id):
            RPCError(code: .alreadyExists, message: description, reason: "TRANSACTION_ALREADY_CLAIMED", metadata: ["transaction_id": id])
        case .transactionRevoked(let id):
            RPCError(code: .failedPrecondition, message: description, reason: "TRANSACTION_REVOKED", metadata: ["transaction_id": id])
        case .appStoreAPINotConfigured:
            RPCError(code: .failedPrecondition, message: description, reason: "APPSTORE_API_NOT_CONFIGURED")
        case .appStoreAPIRefused(let code, _):
            RPCError(code: .failedPrecondition, message: description, reason: "APPSTORE_API_REFUSED", metadata: ["apple_error_code": String(code)])
        case .transactionPredatesOrder(let id):
            RPCError(code: .failedPrecondition, message: description, reason: "TRANSACTION_PREDATES_ORDER", metadata: ["transaction_id": id])
        case .notPurchasedByAccount(let id):
            RPCError(code: .failedPrecondition, message: description, reason: "NOT_PURCHASED_BY_ACCOUNT", metadata: ["transaction_id": id])
        case .transactionUnknown(let id):
            RPCError(code: .notFound, message: description, reason: "TRANSACTION_NOT_FOUND", metadata: ["transaction_id": id])
        case .googlePlayNotConfigured:
            RPCError(code: .failedPrecondition, message: description, reason: "GOOGLE_PLAY_NOT_CONFIGURED")
        case .purchaseNotFound:
            RPCError(code: .notFound, message: description, reason: "PURCHASE_NOT_FOUND")
        case .purchasePending:
            RPCError(code: .failedPrecondition, message: description, reason: "PURCHASE_PENDING")
        case .purchaseCanceled:
            RPCError(code: .failedPrecondition, message: description, reason: "PURCHASE_CANCELED")
        case .offerSigningNotConfigured:
            RPCError(code: .failedPrecondition, message: description, reason: "OFFER_SIGNING_NOT_CONFIGURED")
        case .cursorOutOfRange(let cursor, let newest):
            RPCError(
                code: .outOfRange, message: description, reason: "CURSOR_OUT_OF_RANGE",
                metadata: ["after_cursor": String(cursor), "newest_cursor": String(newest)])
        case .orderNotPending(let id, _):
            RPCError(code: .failedPrecondition, message: description, reason: "ORDER_NOT_PENDING", metadata: ["order_id": id])
        }
    }
}

extension InfrastructureFailure {
    /// The gRPC status and ErrorInfo for a failure of what billing depends on: its description only, never its cause.
    public var rpcError: RPCError {
        switch self {
        case .storage:
            RPCError(code: .unavailable, message: description, reason: "STORAGE_UNAVAILABLE")
        case .overloaded:
            RPCError(code: .resourceExhausted, message: description, reason: "OVERLOADED")
        case .appStoreAPI:
            RPCError(code: .unavailable, message: description, reason: "APPSTORE_API_UNAVAILABLE")
        case .googlePlayAPI:
            RPCError(code: .unavailable, message: description, reason: "GOOGLE_PLAY_UNAVAILABLE")
        }
    }
}
