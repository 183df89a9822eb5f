/// Everything the billing domain can refuse, one case per reason in ERRORS.md it decides.
public enum BillingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A field is empty, too long or malformed.
    case invalidField(field: String, problem: String)
    case productNotFound(productID: String)
    case orderNotFound(orderID: String)
    case idempotencyKeyReused(key: String)
    /// The database cannot be reached or failed; the detail is for the log only.
    case storageUnavailable(detail: String)
    /// The caller went away (deadline or cancel) before anything was written.
    case abandoned

    public var description: String {
        switch self {
        case .invalidField(let field, let problem): "\(field) \(problem)"
        case .productNotFound(let id): "product \(id) is not in the catalog"
        case .orderNotFound(let id): "no order has id \(id)"
        case .idempotencyKeyReused: "the idempotency key was used before with different fields"
        case .storageUnavailable: "the order database is unavailable; retry"
        case .abandoned: "the call was abandoned before it was written"
        }
    }
}
