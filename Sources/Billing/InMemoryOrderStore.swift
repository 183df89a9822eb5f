import Synchronization

/// The in-memory twin of the SQL stores, with the same rules; for tests.
public final class InMemoryOrderStore: OrderStore {
    private struct State {
        var orders: [String: Order] = [:]
        var byKey: [String: String] = [:]
        var transactions: [String: OwnedTransaction] = [:]
    }

    /// A ledger over a copy of the state; committed by writing the copy back.
    private final class Ledger: PurchaseLedger {
        var state: State
        init(_ state: State) { self.state = state }
        func order(id: String) -> Order? { state.orders[id] }
        func owned(transactionID: String) -> OwnedTransaction? { state.transactions[transactionID] }
        func insert(_ owned: OwnedTransaction) { state.transactions[owned.transaction.transactionID] = owned }
        func reassign(transactionID: String, accountID: String, orderID: String?) {
            state.transactions[transactionID]?.accountID = accountID
            state.transactions[transactionID]?.orderID = orderID
        }
        func transfer(transactionID: String, to accountID: String) {
            state.transactions[transactionID]?.accountID = accountID
        }
        func complete(orderID: String, transactionID: String, environment: StoreEnvironment, nowMs: Int64) {
            state.orders[orderID]?.state = .completed
            state.orders[orderID]?.transactionID = transactionID
            state.orders[orderID]?.environment = environment
            state.orders[orderID]?.updateTimeMs = nowMs
        }
        func transactions(accountID: String) -> [OwnedTransaction] {
            state.transactions.values.filter { $0.accountID == accountID }.sorted { $0.transaction.transactionID < $1.transaction.transactionID }
        }
    }
    private let state = Mutex(State())

    public init() {}

    public func create(_ order: NewOrder, abandoned: @escaping @Sendable () -> Bool,
                       completion: @escaping @Sendable (Result<CreateOutcome, BillingError>) -> Void) {
        let result: Result<CreateOutcome, BillingError> = state.withLock { s in
            if let key = order.idempotencyKey, let existing = s.byKey[order.accountID + "\u{0}" + key] {
                return .success(.existing(s.orders[existing]!))
            }
            if abandoned() { return .failure(.abandoned) }
            let stored = order.pendingOrder
            s.orders[order.id] = stored
            if let key = order.idempotencyKey { s.byKey[order.accountID + "\u{0}" + key] = order.id }
            return .success(.created(stored))
        }
        completion(result)
    }

    public func order(id: String, completion: @escaping @Sendable (Result<Order?, BillingError>) -> Void) {
        completion(.success(state.withLock { $0.orders[id] }))
    }

    public func complete(orderID: String, candidates: [StoreTransaction], check: @escaping @Sendable (Order, StoreTransaction) -> BillingError?,
                         nowMs: Int64, abandoned: @escaping @Sendable () -> Bool,
                         completion: @escaping @Sendable (Result<CompletedPurchase, BillingError>) -> Void) {
        let result: Result<CompletedPurchase, BillingError> = state.withLock { s in
            if abandoned() { return .failure(.abandoned) }
            let ledger = Ledger(s)
            do throws(BillingError) {
                let done = try PurchaseRules.complete(ledger, orderID: orderID, candidates: candidates, check: check, nowMs: nowMs)
                s = ledger.state
                return .success(done)
            } catch {
                return .failure(error)
            }
        }
        completion(result)
    }

    public func restore(accountID: String, transactions: [StoreTransaction], policy: RestorePolicy,
                        completion: @escaping @Sendable (Result<[OwnedTransaction], BillingError>) -> Void) {
        let result: Result<[OwnedTransaction], BillingError> = state.withLock { s in
            let ledger = Ledger(s)
            do throws(BillingError) {
                let owned = try PurchaseRules.restore(ledger, accountID: accountID, transactions: transactions, policy: policy)
                s = ledger.state
                return .success(owned)
            } catch {
                return .failure(error)
            }
        }
        completion(result)
    }

    public func expire(createdBeforeMs cutoffMs: Int64, nowMs: Int64, limit: Int,
                       completion: @escaping @Sendable (Result<Int, BillingError>) -> Void) {
        let n = state.withLock { s -> Int in
            var moved = 0
            for (id, order) in s.orders where order.state == .pending && order.createTimeMs < cutoffMs && moved < limit {
                s.orders[id]?.state = .expired
                s.orders[id]?.updateTimeMs = nowMs
                moved += 1
            }
            return moved
        }
        completion(.success(n))
    }

    public func isReachable() -> Bool { true }
    public func close() {}
}
