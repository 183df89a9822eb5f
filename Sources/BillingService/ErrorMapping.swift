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
        case .storageUnavailable:
            RPCError(code: .unavailable, message: description, reason: "STORAGE_UNAVAILABLE")
        case .abandoned:
            RPCError(code: .deadlineExceeded, message: description)
        }
    }
}
