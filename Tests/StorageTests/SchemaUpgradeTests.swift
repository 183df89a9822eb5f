import Billing
import Foundation
import Storage
import Testing
import TestSupport

/// Databases filled by the release before the subscription model (schema step 6, through its public API:
/// `Upgrade/fill_schema6.py` says what and how), upgraded in place by this build (step 7).
@Suite("Upgrade to the subscription model (schema step 7), SQLite and PostgreSQL", .serialized)
struct SchemaUpgradeTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Upgrade").path

    /// A store opened on a copy of the step-6 fixture of each available database.
    static func upgraded() throws -> [(name: String, store: any OrderStore)] {
        var out: [(String, any OrderStore)] = []
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("billing-step6-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("billing.db").path
        _ = try runCLI("/usr/bin/sqlite3", [path, ".read \(fixtures)/schema6.sqlite.sql"])
        #expect(try sqliteCLI(path, "PRAGMA user_version;").trimmingCharacters(in: .whitespacesAndNewlines) == "6")
        out.append(("sqlite", try SQLiteOrderStore(path: path)))
        if let url = PostgresTestDatabase.create() {
            _ = try runCLI("/usr/bin/psql", [url, "-q", "-v", "ON_ERROR_STOP=1", "-f", "\(fixtures)/schema6.postgres.sql"])
            #expect(try psqlCLI(url, "SELECT MAX(version) FROM billing_schema_migrations").trimmingCharacters(in: .whitespacesAndNewlines) == "6")
            out.append(("postgres", try PostgresOrderStore(url: url, poolSize: 2)))
        }
        return out
    }

    @Test("orders, transactions and entitlements upgrade in place: states computed, ownership PURCHASED, prices unknown")
    func upgradeInPlace() throws {
        for (name, store) in try Self.upgraded() {
            defer { store.close() }
            let events: Result<[EventRecord], BillingError> = wait { store.events(after: 0, limit: 1000, accountID: nil, completion: $0) }
            let before = try events.get()
            #expect(!before.isEmpty, "\(name)")
            // History: every transaction of legacy-a, newest purchase first, as the old build recorded them.
            let h: Result<[OwnedTransaction], BillingError> = wait { store.history(accountID: "legacy-a", after: nil, limit: 100, completion: $0) }
            let history = try h.get()
            #expect(history.map(\.transaction.transactionID) == ["600012", "600011", "600002", "600001", "600010"], "\(name)")
            #expect(history.allSatisfy { $0.transaction.ownership == .purchased && $0.transaction.store == .appStore }, "\(name)")
            #expect(history.allSatisfy { $0.transaction.price == PriceFacts() && !$0.transaction.upgraded }, "\(name)")
            // The refunded consumable order: every unit refunded; its transaction kept its revocation (type not said).
            let coins = try #require(history.first { $0.transaction.transactionID == "600002" })
            #expect(coins.transaction.isRevoked && coins.transaction.revocationType == .unspecified && coins.transaction.isFullyRefunded)
            let coinsOrder: Result<Billing.Order?, BillingError> = wait { store.order(id: coins.orderID!, completion: $0) }
            let refunded = try #require(try coinsOrder.get())
            #expect(refunded.state == .refunded && refunded.quantity == 3 && refunded.refundedQuantity == 3 && refunded.store == .appStore, "\(name)")
            // Entitlements, as of a day after the last renewal: computed states.
            let renewal = try #require(history.first { $0.transaction.transactionID == "600012" }).transaction
            let at = renewal.purchaseTimeMs + 86_400_000
            let a: Result<[Entitlement], BillingError> = wait { store.entitlements(accountID: "legacy-a", nowMs: at, completion: $0) }
            let ents = try a.get()
            #expect(ents.map(\.productID) == ["com.example.premium", "com.example.pro.monthly"], "\(name)")
            #expect(ents.map(\.state) == [.active, .active] && ents.allSatisfy { $0.ownership == .purchased && $0.store == .appStore }, "\(name)")
            #expect(ents[1].latestTransactionID == "600012" && ents[1].pendingProductID.isEmpty, "\(name)")
            let b: Result<[Entitlement], BillingError> = wait { store.entitlements(accountID: "legacy-b", nowMs: at, completion: $0) }
            #expect(try b.get().map(\.state) == [.expired], "\(name)")
            // A transaction found by id, with its order; the pending order is untouched.
            let found: Result<TransactionLookup?, BillingError> = wait { store.lookup(transactionID: "600001", completion: $0) }
            let hit = try #require(try found.get())
            #expect(hit.owned.accountID == "legacy-a" && hit.order?.state == .completed && hit.order?.refundedQuantity == 0, "\(name)")
            // The upgrade itself wrote no events.
            let after: Result<[EventRecord], BillingError> = wait { store.events(after: 0, limit: 1000, accountID: nil, completion: $0) }
            #expect(try after.get().count == before.count, "\(name)")
            // And the new rules apply to old data: an upgrade of legacy-a's subscription takes effect at once.
            var up = StoreTransaction(
                transactionID: "600100", originalTransactionID: "600010", productID: "com.example.pro.premium",
                productKind: .autoRenewableSubscription, purchaseTimeMs: at, expiresTimeMs: at + 20 * 86_400_000,
                environment: .xcode, bundleID: "com.example.app", signedTimeMs: at)
            up.subscriptionGroupID = "20000001"
            let n = VerifiedNotification(
                uuid: UUID().uuidString.lowercased(), type: "DID_CHANGE_RENEWAL_PREF", subtype: "UPGRADE", signedTimeMs: at,
                environment: .xcode, accepted: true, transaction: up, renewal: nil, signedPayload: "test.upgrade.sig")
            let applied: Result<NotificationResult, BillingError> = wait { store.apply(n, nowMs: at, catalog: nil, completion: $0) }
            #expect(try applied.get() == .applied)
            let c: Result<[Entitlement], BillingError> = wait { store.entitlements(accountID: "legacy-a", nowMs: at, completion: $0) }
            #expect(try c.get().map(\.productID) == ["com.example.premium", "com.example.pro.premium"], "\(name)")
            let e: Result<[EventRecord], BillingError> = wait { store.events(after: before.last!.cursor, limit: 10, accountID: nil, completion: $0) }
            #expect(try e.get().map(\.kind) == [.entitlementProductChanged], "\(name)")
        }
    }

    @Test("PostgreSQL step 10: events an old version left unnumbered get their cursors once; an old replica's insert is numbered too")
    func feedCounterUpgrade() throws {
        guard let url = PostgresTestDatabase.create() else { return }
        _ = try runCLI("/usr/bin/psql", [url, "-q", "-v", "ON_ERROR_STOP=1", "-f", "\(Self.fixtures)/schema6.postgres.sql"])
        let total = Int(try psqlCLI(url, "SELECT count(*) FROM events").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(total > 3)
        #expect(try psqlCLI(url, "SELECT MIN(feed_cursor), MAX(feed_cursor) FROM events") == "1|\(total)\n")
        // The last three events committed but not yet numbered when the old version stopped (its sequencer runs
        // after COMMIT); the third of them was written by the earliest of their transactions.
        _ = try psqlCLI(
            url,
            "UPDATE events SET feed_cursor = NULL WHERE feed_cursor > \(total - 3); "
                + "UPDATE events SET txid = (SELECT MIN(txid) FROM events WHERE feed_cursor IS NULL) - 1 WHERE id = (SELECT MAX(id) FROM events)")
        let ids = try psqlCLI(url, "SELECT id FROM events WHERE feed_cursor IS NULL ORDER BY txid, id")
        let store = try PostgresOrderStore(url: url, poolSize: 2)
        defer { store.close() }
        #expect(try psqlCLI(url, "SELECT MAX(version) FROM billing_schema_migrations") == "\(SQLiteOrderStore.schemaVersion)\n")
        // Numbered once, after the largest cursor, in the order the sequencer would have given: (txid, id).
        #expect(try psqlCLI(url, "SELECT id FROM events WHERE feed_cursor > \(total - 3) ORDER BY feed_cursor") == ids)
        #expect(try psqlCLI(url, "SELECT count(*), MAX(feed_cursor), (SELECT last FROM feed_counter) FROM events") == "\(total)|\(total)|\(total)\n")
        let all: Result<[EventRecord], BillingError> = wait { store.events(after: 0, limit: 1000, accountID: nil, completion: $0) }
        #expect(try all.get().map(\.cursor) == (1...UInt64(total)).map { $0 })
        // A replica of the previous version, still running during a rolling upgrade, inserts without a cursor: the
        // trigger numbers it from the counter. This version's next event follows it.
        _ = try psqlCLI(url, "INSERT INTO events (event_type, time_ms, account_id, cause) VALUES (1, 0, 'old-replica', 'create_order')")
        let order = newOrder("new-replica")
        #expect(wait { store.create(order, abandoned: { false }, completion: $0) } == .success(.created(order.pendingOrder)))
        let next: Result<[EventRecord], BillingError> = wait { store.events(after: UInt64(total), limit: 10, accountID: nil, completion: $0) }
        #expect(try next.get().map { "\($0.cursor) \($0.accountID)" } == ["\(total + 1) old-replica", "\(total + 2) new-replica"])
        #expect(try psqlCLI(url, "SELECT count(*) FILTER (WHERE feed_cursor IS NULL), (SELECT last FROM feed_counter) FROM events") == "0|\(total + 2)\n")
    }
}
