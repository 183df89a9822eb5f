import Billing
import Foundation
@testable import Storage
import Testing

@Suite("SQL ledger")
struct SQLLedgerTests {
    /// A database with one PENDING order that another writer expires after the ledger read it.
    @Test("a completion that lost the race to expiry reports EXPIRED, never COMPLETED")
    func lostUpdateOnExpired() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("billing-ledger-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let db = try SQLiteConnection(path: dir.appendingPathComponent("o.db").path)
        defer { db.close() }
        try SQLiteMigrations.migrate(db)
        let order = newOrder().pendingOrder
        try db.update(OrderRow.insert, OrderRow.values(order))
        let ledger = SQLLedger(db: db)
        #expect(try ledger.order(id: order.id)?.state == .pending)
        // The other writer: expiry moves the order on between the read and the update.
        let expiry = RuleContext(nowMs: order.createTimeMs + 2, cause: .orderExpiry, catalog: nil)
        #expect(try PurchaseRules.expire(ledger, createdBeforeMs: order.createTimeMs + 1, limit: 10, context: expiry) == 1)
        var completed = order
        completed.state = .completed
        completed.transactionID = "t1"
        completed.environment = .sandbox
        completed.updateTimeMs = order.createTimeMs + 3
        #expect(throws: BillingError.orderNotPending(orderID: order.id, state: .expired)) {
            try ledger.complete(completed)
        }
        completed.id = "missing"
        #expect(throws: BillingError.orderNotFound(orderID: "missing")) {
            try ledger.complete(completed)
        }
    }
}

@Suite("Feed notifier")
struct FeedNotifierTests {
    /// A closure read back out of a Mutex used to be wrapped again on every read: after a load run the call
    /// went tens of thousands of thunks deep and overflowed the writer thread's stack.
    @Test("notifying 300,000 times calls the listener 300,000 times, at constant depth")
    func manyNotifications() {
        let notifier = FeedNotifier()
        let count = Counter()
        notifier.set { count.add() }
        for _ in 0..<300_000 { notifier.notify() }
        #expect(count.value == 300_000)
    }

    final class Counter: @unchecked Sendable {
        // Sendable: used from the test's one thread only.
        var value = 0
        func add() { value += 1 }
    }
}
