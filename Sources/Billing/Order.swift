/// Where an order is in its life: `pending -> completed -> refunded`, `pending -> expired`.
public enum OrderState: Int, Sendable, Equatable, CaseIterable {
    case pending = 1
    case completed = 2
    case refunded = 3
    case expired = 4

    /// Whether the state graph has an edge from `self` to `next`.
    public func canMove(to next: OrderState) -> Bool {
        switch (self, next) {
        case (.pending, .completed), (.completed, .refunded), (.pending, .expired): true
        default: false
        }
    }
}

/// The App Store environment a transaction was signed in.
public enum StoreEnvironment: Int, Sendable, Equatable {
    case production = 1
    case sandbox = 2
    case xcode = 3
}

/// The store a transaction comes from (billing.v1.Store).
public enum Store: Int, Sendable, Equatable, CaseIterable {
    case appStore = 1
    case googlePlay = 2
    /// No store: access an operator granted (Support.GrantEntitlement).
    case grant = 4
}

/// An order: opened before a purchase, completed by exactly one store transaction.
public struct Order: Sendable, Equatable {
    /// Lowercase canonical UUID (version 7: time-ordered, see `OrderID`).
    public var id: String
    public var accountID: String
    public var productID: String
    public var quantity: Int
    public var state: OrderState
    /// The key the caller chose for retries, scoped to the account.
    public var idempotencyKey: String?
    public var createTimeMs: Int64
    public var updateTimeMs: Int64
    /// The store transaction that completed it.
    public var transactionID: String?
    public var environment: StoreEnvironment?
    /// Units refunded so far: prorated refunds of a consumable order; `quantity` once REFUNDED, else 0.
    public var refundedQuantity: Int
    /// The store of the transaction that completed it; nil while none did.
    public var store: Store?

    public init(
        id: String, accountID: String, productID: String, quantity: Int, state: OrderState,
        idempotencyKey: String?, createTimeMs: Int64, updateTimeMs: Int64,
        transactionID: String? = nil, environment: StoreEnvironment? = nil, refundedQuantity: Int = 0, store: Store? = nil
    ) {
        self.refundedQuantity = refundedQuantity
        self.store = store
        self.id = id
        self.accountID = accountID
        self.productID = productID
        self.quantity = quantity
        self.state = state
        self.idempotencyKey = idempotencyKey
        self.createTimeMs = createTimeMs
        self.updateTimeMs = updateTimeMs
        self.transactionID = transactionID
        self.environment = environment
    }
}

/// What `OrderStore.create` answers: a new order, or the one an idempotency key already names.
public enum CreateOutcome: Sendable, Equatable {
    case created(Order)
    /// The account already has an order under this idempotency key; the caller compares fields.
    case existing(Order)
}
