import Billing
import Foundation
@testable import Storage
import Testing
import TestSupport

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

@Suite("Upgrade to the entitlement table")
struct EntitlementBackfillTests {
    @Test("a database from before schema step 3 gets its entitlements from the transactions it holds")
    func backfill() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("billing-upgrade-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("o.db").path
        do {
            // The previous release's schema (steps 1 and 2) and what it recorded.
            let db = try SQLiteConnection(path: path)
            for step in Schema.steps(.sqlite).prefix(2) { try db.execute(step.sql) }
            try db.execute("PRAGMA user_version = 2")
            let columns =
                "transaction_id, original_transaction_id, account_id, order_id, product_id, product_kind, purchase_time_ms, expires_time_ms, revocation_time_ms, quantity, environment, app_account_token, bundle_id"
            try db.execute(
                "INSERT INTO transactions (\(columns)) VALUES ('t1', 't1', 'old-account', NULL, 'com.example.premium', 'non_consumable', 1000, 0, 0, 1, 2, NULL, 'b')"
            )
            try db.execute(
                "INSERT INTO transactions (\(columns)) VALUES ('s2', 's1', 'old-account', NULL, 'com.example.pro', 'auto_renewable_subscription', 2000, 4102444800000, 0, 1, 2, NULL, 'b')"
            )
            try db.execute(
                "INSERT INTO transactions (\(columns)) VALUES ('c1', 'c1', 'old-account', NULL, 'com.example.coins', 'consumable', 3000, 0, 0, 1, 2, NULL, 'b')"
            )
            db.close()
        }
        let store = try SQLiteOrderStore(path: path)
        defer { store.close() }
        let r: Result<[Entitlement], BillingError> = wait { store.entitlements(accountID: "old-account", nowMs: 5000, completion: $0) }
        let list = try r.get()
        #expect(list.map(\.productID) == ["com.example.premium", "com.example.pro"])
        #expect(list.allSatisfy { $0.active })
        // No events for history: the feed starts with what happens after the upgrade.
        let e: Result<[EventRecord], BillingError> = wait { store.events(after: 0, limit: 10, accountID: nil, completion: $0) }
        #expect(try e.get().isEmpty)
    }
}

@Suite("When the SQLite writer checkpoints itself")
struct WALCheckpointPolicyTests {
    @Test("past 1 MiB on a disk short of room, past 16 MiB on a roomy one")
    func policy() {
        let small = SQLiteOrderStore.walLimitBytes, large = SQLiteOrderStore.walRoomyLimitBytes
        #expect(!WALPolicy.needsCheckpoint(walBytes: 0, roomy: false))
        #expect(!WALPolicy.needsCheckpoint(walBytes: small, roomy: false))
        #expect(WALPolicy.needsCheckpoint(walBytes: small + 1, roomy: false))
        #expect(!WALPolicy.needsCheckpoint(walBytes: small + 1, roomy: true))
        #expect(!WALPolicy.needsCheckpoint(walBytes: large, roomy: true))
        #expect(WALPolicy.needsCheckpoint(walBytes: large + 1, roomy: true))
    }

    @Test("a roomy file system is one with 256 MiB free")
    func room() {
        var fs = statvfs()
        #expect(statvfs("/tmp", &fs) == 0)
        let free = UInt64(fs.f_bavail) * UInt64(fs.f_frsize)
        #expect(SQLiteOrderStore.hasRoom("/tmp") == (free >= UInt64(SQLiteOrderStore.roomyFreeBytes)))
        #expect(!SQLiteOrderStore.hasRoom("/no/such/dir"))
    }
}

@Suite("Migration batches")
struct MigrationBatchTests {
    @Test("An upgrade across step 7 runs every remaining step and the entitlement recompute in one transaction; others one step each")
    func batches() {
        #expect(Schema.batches(from: 3, count: 12) == [3..<12])
        #expect(Schema.recomputes(from: 3, batch: 3..<12))
        #expect(Schema.batches(from: 0, count: 3) == [0..<1, 1..<2, 2..<3])
        #expect(!Schema.recomputes(from: 0, batch: 6..<7))
        #expect(Schema.batches(from: 7, count: 9) == [7..<8, 8..<9])
        #expect(!Schema.recomputes(from: 7, batch: 7..<8))
        #expect(Schema.batches(from: 12, count: 12) == [])
    }
}
