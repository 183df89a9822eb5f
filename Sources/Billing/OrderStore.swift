/// The fields of an order about to be created.
public struct NewOrder: Sendable, Equatable {
    public var id: String
    public var accountID: String
    public var productID: String
    public var quantity: Int
    public var idempotencyKey: String?
    public var createTimeMs: Int64

    public init(id: String, accountID: String, productID: String, quantity: Int, idempotencyKey: String?, createTimeMs: Int64) {
        self.id = id
        self.accountID = accountID
        self.productID = productID
        self.quantity = quantity
        self.idempotencyKey = idempotencyKey
        self.createTimeMs = createTimeMs
    }

    /// The order as stored right after creation.
    public var pendingOrder: Order {
        Order(id: id, accountID: accountID, productID: productID, quantity: quantity, state: .pending,
              idempotencyKey: idempotencyKey, createTimeMs: createTimeMs, updateTimeMs: createTimeMs)
    }
}

/// Where orders live. Implementations answer on their own threads, never the caller's,
/// and call `completion` exactly once, only after a write is durable.
public protocol OrderStore: Sendable {
    /// Inserts `order`, unless the account already used its idempotency key: then answers that order.
    /// `abandoned` is checked just before writing; if it says true nothing is written.
    func create(_ order: NewOrder, abandoned: @escaping @Sendable () -> Bool,
                completion: @escaping @Sendable (Result<CreateOutcome, BillingError>) -> Void)

    /// Reads one order by its canonical id.
    func order(id: String, completion: @escaping @Sendable (Result<Order?, BillingError>) -> Void)

    /// Completes an order with the first candidate that can pay it (`PurchaseRules.complete`), in one
    /// database transaction; answered only once durable.
    func complete(orderID: String, candidates: [StoreTransaction], check: @escaping @Sendable (Order, StoreTransaction) -> BillingError?,
                  nowMs: Int64, abandoned: @escaping @Sendable () -> Bool,
                  completion: @escaping @Sendable (Result<CompletedPurchase, BillingError>) -> Void)

    /// Records restored transactions (`PurchaseRules.restore`) and answers what the account owns.
    func restore(accountID: String, transactions: [StoreTransaction], policy: RestorePolicy,
                 completion: @escaping @Sendable (Result<[OwnedTransaction], BillingError>) -> Void)

    /// Moves PENDING orders created before `cutoffMs` to EXPIRED (at most `limit` of them), recording
    /// each transition; answers how many moved.
    func expire(createdBeforeMs cutoffMs: Int64, nowMs: Int64, limit: Int,
                completion: @escaping @Sendable (Result<Int, BillingError>) -> Void)

    /// Whether the database answers now (readiness).
    func isReachable() -> Bool

    /// Finishes queued work and closes the database.
    func close()
}
