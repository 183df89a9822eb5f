import Billing
import Foundation
import Storage
import Synchronization
import Lifecycle
import Testing
import TestSupport

/// The PostgreSQL store writes a batch's CreateOrders with one statement. These tests put many
/// CreateOrders, of every kind, into one batch (a one-connection pool held busy while they queue) and
/// check each answer and the rows against what the order-at-a-time path gives.
@Suite("PostgreSQL: a batch's CreateOrders in one statement")
struct PostgresBatchTests {
    /// Answers collected by order id.
    final class Answers: Sendable {
        let results = Mutex<[String: Result<CreateOutcome, BillingError>]>([:])
        let group = DispatchGroup()

        func create(_ store: any OrderStore, _ order: NewOrder, abandoned: Bool = false) {
            group.enter()
            store.create(order, abandoned: { abandoned }) { r in
                self.results.withLock { $0[order.id] = r }
                self.group.leave()
            }
        }

        subscript(_ order: NewOrder) -> Result<CreateOutcome, BillingError>? { results.withLock { $0[order.id] } }
    }

    /// Holds the store's only connection for `ms` milliseconds, so what is submitted meanwhile forms one batch.
    static func holdPool(_ store: any OrderStore, ms: UInt32) -> DispatchGroup {
        let held = DispatchGroup()
        held.enter()
        let taken = Signal()
        store.read(
            { _ throws(BillingError) in
                taken.signal()
                usleep(ms * 1000)
            }, completion: { _ in held.leave() })
        // The connection has the job (not only the queue): what is submitted from now on waits for it.
        _ = taken.wait(timeout: .seconds(10))
        return held
    }

    @Test("one batch: new orders, a reused key, a key used twice in the batch, an abandoned call and a read")
    func mixedBatch() throws {
        guard let url = PostgresTestDatabase.create() else { return }
        let store = try PostgresOrderStore(url: url, poolSize: 1)
        defer { store.close() }
        let earlier = newOrder("a", key: "known")
        #expect(wait { store.create(earlier, abandoned: { false }, completion: $0) } == .success(.created(earlier.pendingOrder)))

        let held = Self.holdPool(store, ms: 300)
        let answers = Answers()
        let fresh = (0..<40).map { newOrder("acct-\($0)") }
        let reused = newOrder("a", key: "known", product: "other")
        let twiceFirst = newOrder("b", key: "twice")
        let twiceSecond = newOrder("b", key: "twice")
        let gone = newOrder("c")
        for order in fresh { answers.create(store, order) }
        answers.create(store, reused)
        answers.create(store, twiceFirst)
        answers.create(store, twiceSecond)
        answers.create(store, gone, abandoned: true)
        let read = Mutex<Result<Order?, BillingError>?>(nil)
        answers.group.enter()
        store.order(id: earlier.id) { r in
            read.withLock { $0 = r }
            answers.group.leave()
        }
        #expect(answers.group.wait(timeout: .now() + 20) == .success)
        #expect(held.wait(timeout: .now() + 5) == .success)

        for order in fresh { #expect(answers[order] == .success(.created(order.pendingOrder))) }
        #expect(answers[reused] == .success(.existing(earlier.pendingOrder)))
        #expect(answers[twiceFirst] == .success(.created(twiceFirst.pendingOrder)))
        #expect(answers[twiceSecond] == .success(.existing(twiceFirst.pendingOrder)))
        #expect(answers[gone] == .failure(.abandoned))
        #expect(read.withLock { $0 } == .success(earlier.pendingOrder))
        // The CreateOrders shared one batch (the read ran apart: CreateOrders are batched only together).
        #expect(store.groups.largest >= 44)

        // Every stored order has exactly one ORDER_CREATED event, and nothing else was written.
        let counts = try psqlCLI(
            url,
            "SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM events), "
                + "(SELECT count(*) FROM orders o WHERE (SELECT count(*) FROM events e WHERE e.order_snapshot LIKE '%' || o.order_id || '%') = 1)")
        #expect(counts == "42|42|42\n")
        let lost = try psqlCLI(url, "SELECT count(*) FROM orders WHERE order_id IN ('\(reused.id)', '\(twiceSecond.id)', '\(gone.id)')")
        #expect(lost == "0\n")
    }

    @Test("a statement that fails (a CHECK violated) falls back to one order at a time: only the bad order fails")
    func fallback() throws {
        guard let url = PostgresTestDatabase.create() else { return }
        let store = try PostgresOrderStore(url: url, poolSize: 1)
        defer { store.close() }
        let held = Self.holdPool(store, ms: 300)
        let answers = Answers()
        let good = (0..<20).map { newOrder("acct-\($0)", key: "k\($0)") }
        // quantity 0 breaks the table's CHECK (quantity >= 1); the service never sends it, the database still refuses it.
        let bad = newOrder("acct-bad", quantity: 0)
        for order in good.prefix(10) { answers.create(store, order) }
        answers.create(store, bad)
        for order in good.suffix(10) { answers.create(store, order) }
        #expect(answers.group.wait(timeout: .now() + 20) == .success)
        #expect(held.wait(timeout: .now() + 5) == .success)
        for order in good { #expect(answers[order] == .success(.created(order.pendingOrder))) }
        guard case .failure(.infrastructure(.storage(let cause))) = answers[bad] else {
            Issue.record("the bad order was answered \(String(describing: answers[bad]))")
            return
        }
        // PostgreSQL's own error, whole: its SQLSTATE typed, never a string to parse again.
        #expect((cause as? StorageError)?.sqlState == .checkViolation)
        #expect(cause.description.contains("check"))
        let counts = try psqlCLI(url, "SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM events)")
        #expect(counts == "20|20\n")
    }

    @Test("an order the statement finds already written under its id: its own (a resend) is created, another's is refused")
    func resend() throws {
        guard let url = PostgresTestDatabase.create() else { return }
        let store = try PostgresOrderStore(url: url, poolSize: 1)
        defer { store.close() }
        let first = newOrder("a")
        #expect(wait { store.create(first, abandoned: { false }, completion: $0) } == .success(.created(first.pendingOrder)))
        // The same order sent again (as after a connection lost while the first try committed): created, nothing written twice.
        #expect(wait { store.create(first, abandoned: { false }, completion: $0) } == .success(.created(first.pendingOrder)))
        // Another order under a taken id: refused, nothing written.
        var other = newOrder("b")
        other.id = first.id
        guard case .failure(.infrastructure(.storage(let cause))) = wait({ store.create(other, abandoned: { false }, completion: $0) }),
            cause as? StorageError == .orderIDTaken(orderID: first.id)
        else {
            Issue.record("an order under a taken id was not refused")
            return
        }
        // Both copies of one order in one batch: both answered created, one row, one event.
        let held = Self.holdPool(store, ms: 300)
        let answers = Answers()
        let twice = newOrder("c")
        answers.create(store, twice)
        answers.create(store, twice)
        #expect(answers.group.wait(timeout: .now() + 20) == .success)
        #expect(held.wait(timeout: .now() + 5) == .success)
        #expect(answers[twice] == .success(.created(twice.pendingOrder)))
        let counts = try psqlCLI(url, "SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM events)")
        #expect(counts == "2|2\n")
    }

    @Test("many concurrent CreateOrders with and without keys: one order per key, one event per order")
    func concurrentMix() throws {
        guard let url = PostgresTestDatabase.create() else { return }
        let store = try PostgresOrderStore(url: url, poolSize: 4)
        defer { store.close() }
        let answers = Answers()
        var orders: [NewOrder] = []
        for i in 0..<1500 {
            // Every third carries one of 100 keys of one account, so each key is sent about five times.
            let order = i % 3 == 0 ? newOrder("keyed", key: "key-\(i % 100)") : newOrder("acct-\(i % 50)")
            orders.append(order)
            answers.create(store, order)
        }
        #expect(answers.group.wait(timeout: .now() + 60) == .success)
        var byKey: [String: Set<String>] = [:]
        var created = 0
        for order in orders {
            switch answers[order] {
            case .success(.created(let o)):
                created += 1
                #expect(o == order.pendingOrder)
                if let key = order.idempotencyKey { byKey[key, default: []].insert(o.id) }
            case .success(.existing(let o)):
                #expect(order.idempotencyKey != nil && o.idempotencyKey == order.idempotencyKey)
                byKey[order.idempotencyKey ?? "", default: []].insert(o.id)
            default:
                Issue.record("order \(order.id) answered \(String(describing: answers[order]))")
            }
        }
        #expect(byKey.count == 100)
        #expect(byKey.values.allSatisfy { $0.count == 1 })
        #expect(created == 1000 + 100)
        let counts = try psqlCLI(url, "SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM events WHERE event_type = 1)")
        #expect(counts == "1100|1100\n")
        #expect(store.groups.largest > 1)
    }
}
