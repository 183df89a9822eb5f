import Synchronization

/// The in-memory twin of the SQL stores, with the same rules; for tests.
public final class InMemoryOrderStore: OrderStore {
    private struct State {
        var orders: [String: Order] = [:]
        var byKey: [String: String] = [:]
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

    public func isReachable() -> Bool { true }
    public func close() {}
}
