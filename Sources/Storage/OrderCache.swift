import Billing
import Synchronization

/// Recent orders in memory, for reads without a trip to a reader thread. Only for a store that sees
/// every write (SQLite: one process owns the file). The writer updates an entry after its COMMIT and
/// before answering, so a caller that saw OK reads what it wrote. A reader fills an entry only if no
/// write or eviction happened since its query began (the generation), so it never caches a stale row.
final class OrderCache: Sendable {
    private struct State {
        var orders: [String: Order] = [:]
        var generation: UInt64 = 0
    }
    private let state = Mutex(State())
    let capacity: Int

    init(capacity: Int = 100_000) { self.capacity = capacity }

    func get(_ id: String) -> Order? { state.withLock { $0.orders[id] } }

    /// The writer's view after a commit: always wins.
    func written(_ order: Order) {
        state.withLock { s in
            s.generation &+= 1
            if s.orders.count >= capacity { s.orders.removeAll(keepingCapacity: true) }
            s.orders[order.id] = order
        }
    }

    var generation: UInt64 { state.withLock { $0.generation } }

    /// Forgets everything (after a bulk change such as expiry).
    func clear() {
        state.withLock { s in
            s.generation &+= 1
            s.orders.removeAll(keepingCapacity: true)
        }
    }

    /// A reader's row, kept only if nothing changed since `generation` was read before the query.
    func read(_ order: Order, since generation: UInt64) {
        state.withLock { s in
            guard s.generation == generation, s.orders[order.id] == nil else { return }
            if s.orders.count >= capacity {
                s.orders.removeAll(keepingCapacity: true)
                s.generation &+= 1
                return
            }
            s.orders[order.id] = order
        }
    }
}
