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
        Order(
            id: id, accountID: accountID, productID: productID, quantity: quantity, state: .pending,
            idempotencyKey: idempotencyKey, createTimeMs: createTimeMs, updateTimeMs: createTimeMs)
    }
}

/// Where a page of an account's purchase history ends: the last transaction answered.
public struct HistoryCursor: Sendable, Equatable {
    public var purchaseTimeMs: Int64
    public var transactionID: String
    public init(purchaseTimeMs: Int64, transactionID: String) {
        self.purchaseTimeMs = purchaseTimeMs
        self.transactionID = transactionID
    }
}

/// One transaction found by a store id, with the order it paid (when any).
public struct TransactionLookup: Sendable, Equatable {
    public var owned: OwnedTransaction
    public var order: Order?
    public init(owned: OwnedTransaction, order: Order?) {
        self.owned = owned
        self.order = order
    }
}

/// Where orders live. Implementations answer on their own threads, never the caller's,
/// and call `completion` exactly once, only after a write is durable.
public protocol OrderStore: Sendable {
    /// Inserts `order` (with its ORDER_CREATED event), unless the account already used its idempotency
    /// key: then answers that order. `abandoned` is checked just before writing; if it says true nothing is written.
    func create(
        _ order: NewOrder, abandoned: @escaping @Sendable () -> Bool,
        completion: @escaping @Sendable (Result<CreateOutcome, BillingError>) -> Void)

    /// Reads one order by its canonical id.
    func order(id: String, completion: @escaping @Sendable (Result<Order?, BillingError>) -> Void)

    /// Runs `body` over the rules' ledger in one database transaction: the store's one write primitive, as GRDB's
    /// `write { db in ... }`. What the body returns commits and is answered once durable; what it throws (a refusal,
    /// a database failure) rolls the body's work back and is answered. `abandoned` is checked before the body runs.
    /// A refusal that must still commit what was written before it (`PurchaseRules.complete` stores a newer signed
    /// view, then refuses the order) is the body's value, not a throw: `T` is then a `Result`, flattened by the caller.
    func write<T: Sendable>(
        abandoned: @escaping @Sendable () -> Bool,
        _ body: @escaping @Sendable (any PurchaseLedger) throws(BillingError) -> T,
        completion: @escaping @Sendable (Result<T, BillingError>) -> Void)

    /// Deprecated: the former shape of `write`, whose body answered a `Result` (a failure committed, a throw rolled
    /// back); the same as `write` with `T` a `Result`, flattened. Kept only so that callers and a wrapping store
    /// (billingd's `MeasuredOrderStore`) written against it still compile. A store implements one of the two and
    /// the other forwards to it by default (implementing neither would recurse); new code uses the first. Disfavoured,
    /// so a body both shapes fit (one without `return`, or one that only throws) is the first's.
    @_disfavoredOverload
    func write<T: Sendable>(
        abandoned: @escaping @Sendable () -> Bool,
        _ body: @escaping @Sendable (any PurchaseLedger) throws(BillingError) -> Result<T, BillingError>,
        completion: @escaping @Sendable (Result<T, BillingError>) -> Void)

    /// Runs `body` over committed data, off the caller's thread.
    func read<T: Sendable>(
        _ body: @escaping @Sendable (any PurchaseLedger) throws(BillingError) -> T,
        completion: @escaping @Sendable (Result<T, BillingError>) -> Void)

    /// Committed events after `cursor`, oldest first (a default reads through `read`).
    func events(
        after cursor: UInt64, limit: Int, accountID: String?,
        completion: @escaping @Sendable (Result<[EventRecord], BillingError>) -> Void)

    /// `listener` is called, on a store thread, after each commit that made events visible to readers.
    func setEventListener(_ listener: @escaping @Sendable () -> Void)

    /// `listener` is called, on a store thread, after each commit that changed what Revenue reads (through this
    /// process at once, before the write is answered; through another replica when its notice arrives). False
    /// when the store cannot say what changed: Revenue then reads everything for each answer.
    @discardableResult
    func setRevenueListener(_ listener: @escaping @Sendable (RevenueChanges) -> Void) -> Bool

    /// Whether the database answers now (readiness).
    func isReachable() -> Bool

    /// Finishes queued work and closes the database.
    func close()

    /// Jobs waiting for a database connection (bounded; a full queue answers `overloaded`).
    var queuedJobs: Int { get }
}

extension OrderStore {
    public var queuedJobs: Int { 0 }

    /// A store that cannot say what changed: Revenue reads it whole each time (the default, so that a wrapping
    /// store that does not forward it stays correct, only slower).
    @discardableResult
    public func setRevenueListener(_ listener: @escaping @Sendable (RevenueChanges) -> Void) -> Bool { false }

    /// Forwards to the deprecated `Result`-answering `write` (for a store that implements only that one).
    public func write<T: Sendable>(
        abandoned: @escaping @Sendable () -> Bool,
        _ body: @escaping @Sendable (any PurchaseLedger) throws(BillingError) -> T,
        completion: @escaping @Sendable (Result<T, BillingError>) -> Void
    ) {
        let answering: @Sendable (any PurchaseLedger) throws(BillingError) -> Result<T, BillingError> = { ledger throws(BillingError) in
            .success(try body(ledger))
        }
        write(abandoned: abandoned, answering, completion: completion)
    }

    /// The deprecated shape, forwarded to `write` with the body's `Result` as its value, flattened.
    @_disfavoredOverload
    public func write<T: Sendable>(
        abandoned: @escaping @Sendable () -> Bool,
        _ body: @escaping @Sendable (any PurchaseLedger) throws(BillingError) -> Result<T, BillingError>,
        completion: @escaping @Sendable (Result<T, BillingError>) -> Void
    ) {
        let flattened: @Sendable (Result<Result<T, BillingError>, BillingError>) -> Void = { completion($0.flatMap { $0 }) }
        write(abandoned: abandoned, body, completion: flattened)
    }
    /// Completes an order with the first candidate that can pay it (`PurchaseRules.complete`).
    public func complete(
        orderID: String, candidates: [StoreTransaction], check: @escaping @Sendable (Order, StoreTransaction) -> BillingError?,
        context: RuleContext, abandoned: @escaping @Sendable () -> Bool = { false },
        completion: @escaping @Sendable (Result<CompletedPurchase, BillingError>) -> Void
    ) {
        // A refusal commits what was stored before it (a newer signed view, a refund it shows): it is the body's value.
        let answer: @Sendable (Result<Result<CompletedPurchase, BillingError>, BillingError>) -> Void = { completion($0.flatMap { $0 }) }
        write(
            abandoned: abandoned,
            { ledger throws(BillingError) in
                try PurchaseRules.complete(ledger, orderID: orderID, candidates: candidates, check: check, context: context)
            }, completion: answer)
    }

    /// Records restored transactions (`PurchaseRules.restore`) and answers the account's entitlements; the
    /// customers whose histories were fetched by id (`watch`) are noted for refund-history reconciliation in the
    /// same database transaction.
    public func restore(
        accountID: String, transactions: [StoreTransaction], byID: [StoreTransaction] = [], watch: [RefundWatch] = [],
        policy: RestorePolicy, context: RuleContext, completion: @escaping @Sendable (Result<[Entitlement], BillingError>) -> Void
    ) {
        write(
            abandoned: { false },
            { ledger throws(BillingError) in
                let entitlements = try PurchaseRules.restore(
                    ledger, accountID: accountID, transactions: transactions, byID: byID, policy: policy,
                    context: context)
                for w in watch { try ledger.watchRefunds(w) }
                return entitlements
            }, completion: completion)
    }

    /// Moves PENDING orders created before `cutoffMs` to EXPIRED (at most `limit`); answers how many moved.
    public func expire(
        createdBeforeMs cutoffMs: Int64, nowMs: Int64, limit: Int,
        completion: @escaping @Sendable (Result<Int, BillingError>) -> Void
    ) {
        write(
            abandoned: { false },
            { ledger throws(BillingError) in
                try PurchaseRules.expire(
                    ledger, createdBeforeMs: cutoffMs, limit: limit, context: RuleContext(nowMs: nowMs, cause: .orderExpiry, catalog: nil))
            }, completion: completion)
    }

    /// Applies one verified App Store notification, exactly once by its UUID.
    public func apply(
        _ notification: VerifiedNotification, nowMs: Int64, catalog: Catalog?,
        policy: PurchaseEngine.Policy = PurchaseEngine.Policy(),
        completion: @escaping @Sendable (Result<NotificationResult, BillingError>) -> Void
    ) {
        write(
            abandoned: { false },
            { ledger throws(BillingError) in
                try NotificationRules.apply(ledger, notification, nowMs: nowMs, catalog: catalog, policy: policy)
            }, completion: completion)
    }

    /// The account's entitlements from the entitlement table, as of `nowMs`.
    public func entitlements(accountID: String, nowMs: Int64, completion: @escaping @Sendable (Result<[Entitlement], BillingError>) -> Void) {
        read(
            { ledger throws(BillingError) in
                try ledger.entitlements(accountID: accountID).map { $0.entitlement(nowMs: nowMs) }
                    .sorted { ($0.productID, $0.originalTransactionID) < ($1.productID, $1.originalTransactionID) }
            }, completion: completion)
    }

    /// One page of the account's purchase history (every store, consumables too), newest purchase first.
    public func history(
        accountID: String, after: HistoryCursor?, limit: Int,
        completion: @escaping @Sendable (Result<[OwnedTransaction], BillingError>) -> Void
    ) {
        read({ ledger throws(BillingError) in try ledger.history(accountID: accountID, after: after, limit: limit) }, completion: completion)
    }

    /// A transaction by its own id or, failing that, the newest transaction (latest purchase) of the original
    /// transaction with that id, or of the Google Play purchase token that is that id; with the order it paid.
    /// nil when none is recorded.
    public func lookup(transactionID: String, completion: @escaping @Sendable (Result<TransactionLookup?, BillingError>) -> Void) {
        read(
            { ledger throws(BillingError) in
                var found = try ledger.owned(transactionID: transactionID)
                if found == nil {
                    found = try ledger.transactions(originalTransactionID: transactionID).max { a, b in
                        (a.transaction.purchaseTimeMs, a.transaction.transactionID) < (b.transaction.purchaseTimeMs, b.transaction.transactionID)
                    }
                }
                if found == nil { found = try ledger.transaction(purchaseToken: transactionID) }
                guard let found else { return nil }
                let order = try found.orderID.flatMap { id throws(BillingError) in try ledger.order(id: id) }
                return TransactionLookup(owned: found, order: order)
            }, completion: completion)
    }

    /// Committed events after `cursor`, oldest first.
    public func events(
        after cursor: UInt64, limit: Int, accountID: String?,
        completion: @escaping @Sendable (Result<[EventRecord], BillingError>) -> Void
    ) {
        read(
            { ledger throws(BillingError) in
                try ledger.events(after: cursor, limit: limit, accountID: accountID)
            }, completion: completion)
    }
}
