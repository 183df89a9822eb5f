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
