public import Billing
public import RPC

extension BillingError {
    /// The gRPC status and ErrorInfo for this error (the one table of ERRORS.md for the domain).
    public var rpcError: RPCError {
        switch self {
        case .invalidField(let field, let problem):
            RPCError(code: .invalidArgument, message: "\(field) \(problem)", reason: .invalidField, metadata: ["field": field])
        case .productNotFound(let id):
            RPCError(code: .notFound, message: description, reason: .productNotFound, metadata: ["product_id": id])
        case .orderNotFound(let id):
            RPCError(code: .notFound, message: description, reason: .orderNotFound, metadata: ["order_id": id])
        case .idempotencyKeyReused:
            RPCError(code: .failedPrecondition, message: description, reason: .idempotencyKeyReused)
        case .infrastructure(let failure):
            failure.rpcError
        case .abandoned:
            RPCError(code: .deadlineExceeded, message: description)
        case .receiptMalformed:
            RPCError(code: .invalidArgument, message: description, reason: .receiptMalformed)
        case .receiptUntrusted:
            RPCError(code: .invalidArgument, message: description, reason: .receiptUntrusted)
        case .wrongApp:
            RPCError(code: .invalidArgument, message: description, reason: .wrongApp)
        case .environmentNotAllowed:
            RPCError(code: .failedPrecondition, message: description, reason: .environmentNotAllowed)
        case .productMismatch(let order, let proof):
            RPCError(
                code: .failedPrecondition, message: description, reason: .productMismatch,
                metadata: ["order_product_id": order, "product_id": proof])
        case .quantityMismatch(let order, let proof):
            RPCError(
                code: .failedPrecondition, message: description, reason: .productMismatch,
                metadata: ["field": "quantity", "order_quantity": String(order), "quantity": String(proof)])
        case .accountTokenMismatch(let orderID):
            RPCError(code: .permissionDenied, message: description, reason: .accountTokenMismatch, metadata: ["order_id": orderID])
        case .transactionNotFound:
            RPCError(code: .notFound, message: description, reason: .transactionNotFound)
        case .appStoreTransactionUnknown(let id):
            RPCError(code: .notFound, message: description, reason: .transactionNotFound, metadata: ["transaction_id": id])
        case .transactionAlreadyClaimed(let id):
            RPCError(code: .alreadyExists, message: description, reason: .transactionAlreadyClaimed, metadata: ["transaction_id": id])
        case .transactionRevoked(let id):
            RPCError(code: .failedPrecondition, message: description, reason: .transactionRevoked, metadata: ["transaction_id": id])
        case .appStoreAPINotConfigured:
            RPCError(code: .failedPrecondition, message: description, reason: .appStoreAPINotConfigured)
        case .appStoreAPIRefused(let code, _):
            RPCError(code: .failedPrecondition, message: description, reason: .appStoreAPIRefused, metadata: ["apple_error_code": String(code)])
        case .transactionPredatesOrder(let id):
            RPCError(code: .failedPrecondition, message: description, reason: .transactionPredatesOrder, metadata: ["transaction_id": id])
        case .notPurchasedByAccount(let id):
            RPCError(code: .failedPrecondition, message: description, reason: .notPurchasedByAccount, metadata: ["transaction_id": id])
        case .transactionUnknown(let id):
            RPCError(code: .notFound, message: description, reason: .transactionNotFound, metadata: ["transaction_id": id])
        case .googlePlayNotConfigured:
            RPCError(code: .failedPrecondition, message: description, reason: .googlePlayNotConfigured)
        case .purchaseNotFound:
            RPCError(code: .notFound, message: description, reason: .purchaseNotFound)
        case .purchasePending:
            RPCError(code: .failedPrecondition, message: description, reason: .purchasePending)
        case .purchaseCanceled:
            RPCError(code: .failedPrecondition, message: description, reason: .purchaseCanceled)
        case .offerSigningNotConfigured:
            RPCError(code: .failedPrecondition, message: description, reason: .offerSigningNotConfigured)
        case .accountNotFound(let id):
            RPCError(code: .notFound, message: description, reason: .accountNotFound, metadata: ["account_id": id])
        case .grantNotFound(let id):
            RPCError(code: .notFound, message: description, reason: .grantNotFound, metadata: ["grant_id": id])
        case .refundNotSupported:
            RPCError(code: .failedPrecondition, message: description, reason: .refundNotSupported)
        case .storeRefused(let e):
            RPCError(code: .failedPrecondition, message: description, reason: .storeRefused, metadata: ["store_error": e])
        case .cursorOutOfRange(let cursor, let newest):
            RPCError(
                code: .outOfRange, message: description, reason: .cursorOutOfRange,
                metadata: ["after_cursor": String(cursor), "newest_cursor": String(newest)])
        case .orderNotPending(let id, _):
            RPCError(code: .failedPrecondition, message: description, reason: .orderNotPending, metadata: ["order_id": id])
        }
    }
}

extension InfrastructureFailure {
    /// The gRPC status and ErrorInfo for a failure of what billing depends on: its description only, never its cause.
    public var rpcError: RPCError {
        switch self {
        case .storage:
            RPCError(code: .unavailable, message: description, reason: .storageUnavailable)
        case .overloaded:
            RPCError(code: .resourceExhausted, message: description, reason: .overloaded)
        case .appStoreAPI:
            RPCError(code: .unavailable, message: description, reason: .appStoreAPIUnavailable)
        case .googlePlayAPI:
            RPCError(code: .unavailable, message: description, reason: .googlePlayUnavailable)
        }
    }
}
