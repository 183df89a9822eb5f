import Billing
import Foundation
import Crypto
import Storage
import Synchronization
import Testing
import TestSupport

/// A store under test and how to reopen it (to check what survives a restart).
struct StoreFixture: Sendable, CustomTestStringConvertible {
    let name: String
    let open: @Sendable () throws -> any OrderStore
    /// Reopens the same data, or nil when the backend keeps nothing (in-memory).
    let reopen: (@Sendable () throws -> any OrderStore)?
    var testDescription: String { name }

    static func sqlite() -> StoreFixture {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("billing-store-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("orders.db").path
        return StoreFixture(name: "sqlite", open: { try SQLiteOrderStore(path: path) }, reopen: { try SQLiteOrderStore(path: path) })
    }

    static func memory() -> StoreFixture {
        StoreFixture(name: "memory", open: { InMemoryOrderStore() }, reopen: nil)
    }

    /// A fresh database on the PostgreSQL named by BILLING_TEST_POSTGRES (scripts/test starts one).
    static func postgres() -> StoreFixture? {
        guard let url = PostgresTestDatabase.create() else { return nil }
        return StoreFixture(
            name: "postgres", open: { try PostgresOrderStore(url: url, poolSize: 4) },
            reopen: { try PostgresOrderStore(url: url, poolSize: 4) })
    }

    static var all: [StoreFixture] { [memory(), sqlite()] + (postgres().map { [$0] } ?? []) }
}

func newOrder(_ account: String = "acct", key: String? = nil, product: String = "p", quantity: Int = 1) -> NewOrder {
    NewOrder(
        id: OrderID.make(), accountID: account, productID: product, quantity: quantity, idempotencyKey: key,
        createTimeMs: 1_700_000_000_000)
}

@Suite("OrderStore conformance (every backend)")
struct StoreConformanceTests {
    @Test("create then read", arguments: StoreFixture.all)
    func createRead(_ fixture: StoreFixture) throws {
        let store = try fixture.open()
        defer { store.close() }
        let new = newOrder(key: "k1", quantity: 3)
        let created: Result<CreateOutcome, BillingError> = wait { store.create(new, abandoned: { false }, completion: $0) }
        #expect(created == .success(.created(new.pendingOrder)))
        let read: Result<Order?, BillingError> = wait { store.order(id: new.id, completion: $0) }
        #expect(read == .success(new.pendingOrder))
        let missing: Result<Order?, BillingError> = wait { store.order(id: OrderID.make(), completion: $0) }
        #expect(missing == .success(nil))
    }

    @Test("an idempotency key answers the first order, per account", arguments: StoreFixture.all)
    func idempotency(_ fixture: StoreFixture) throws {
        let store = try fixture.open()
        defer { store.close() }
        let first = newOrder("a", key: "k")
        let second = newOrder("a", key: "k", product: "other")
        let other = newOrder("b", key: "k")
        _ = wait { store.create(first, abandoned: { false }, completion: $0) }
        let again: Result<CreateOutcome, BillingError> = wait { store.create(second, abandoned: { false }, completion: $0) }
        #expect(again == .success(.existing(first.pendingOrder)))
        let b: Result<CreateOutcome, BillingError> = wait { store.create(other, abandoned: { false }, completion: $0) }
        #expect(b == .success(.created(other.pendingOrder)))
        let lost: Result<Order?, BillingError> = wait { store.order(id: second.id, completion: $0) }
        #expect(lost == .success(nil))
    }

    @Test("an abandoned call writes nothing", arguments: StoreFixture.all)
    func abandoned(_ fixture: StoreFixture) throws {
        let store = try fixture.open()
        defer { store.close() }
        let new = newOrder()
        let r: Result<CreateOutcome, BillingError> = wait { store.create(new, abandoned: { true }, completion: $0) }
        #expect(r == .failure(.abandoned))
        let read: Result<Order?, BillingError> = wait { store.order(id: new.id, completion: $0) }
        #expect(read == .success(nil))
    }

    @Test("write: a returned value commits; a thrown refusal rolls the body's work back and is answered", arguments: StoreFixture.all)
    func writeCommitsValueRollsBackThrow(_ fixture: StoreFixture) throws {
        let store = try fixture.open()
        defer { store.close() }
        let tx = Self.transaction
        let kept: Result<String, BillingError> = wait { done in
            store.write(
                abandoned: { false },
                { ledger throws(BillingError) in
                    try ledger.insert(OwnedTransaction(transaction: tx("1"), accountID: "a", orderID: nil))
                    return "kept"
                }, completion: done)
        }
        #expect(kept == .success("kept"))
        let refused: Result<String, BillingError> = wait { done in
            store.write(
                abandoned: { false },
                { ledger throws(BillingError) in
                    try ledger.insert(OwnedTransaction(transaction: tx("2"), accountID: "a", orderID: nil))
                    throw .orderNotFound(orderID: "o")
                }, completion: done)
        }
        #expect(refused == .failure(.orderNotFound(orderID: "o")))
        let found: Result<[String], BillingError> = wait { done in
            store.read({ ledger throws(BillingError) in try ledger.transactions(accountID: "a").map(\.transaction.transactionID) }, completion: done)
        }
        #expect(found == .success(["1"]))
    }

    @Sendable static func transaction(_ id: String) -> StoreTransaction {
        StoreTransaction(
            transactionID: id, originalTransactionID: id, productID: "p", productKind: .consumable,
            purchaseTimeMs: 1_700_000_000_000, environment: .sandbox, bundleID: "b")
    }

    @Test(
        "a database failure in a write reaches the caller as itself, its code typed; the body's work is rolled back",
        arguments: StoreFixture.all.filter { $0.reopen != nil })
    func writeStorageFailure(_ fixture: StoreFixture) throws {
        let store = try fixture.open()
        defer { store.close() }
        let owned = OwnedTransaction(transaction: Self.transaction("9"), accountID: "a", orderID: nil)
        let r: Result<Void, BillingError> = wait { done in
            store.write(
                abandoned: { false },
                { ledger throws(BillingError) in
                    try ledger.insert(owned)
                    try ledger.insert(owned)  // the primary key refuses the second row
                }, completion: done)
        }
        guard case .failure(.infrastructure(.storage(let cause))) = r, let error = cause as? StorageError else {
            Issue.record("answered \(r)")
            return
        }
        if fixture.name == "sqlite" {
            #expect(error.isConstraint, "\(error)")
        } else {
            #expect(error.sqlState == .uniqueViolation, "\(error)")
        }
        let found: Result<[OwnedTransaction], BillingError> = wait { done in
            store.read({ ledger throws(BillingError) in try ledger.transactions(accountID: "a") }, completion: done)
        }
        #expect(found == .success([]))
    }

    @Test("many concurrent creates of one key make one order", arguments: StoreFixture.all)
    func concurrentKey(_ fixture: StoreFixture) throws {
        let store = try fixture.open()
        defer { store.close() }
        let results = Mutex<[CreateOutcome]>([])
        let group = DispatchGroup()
        for _ in 0..<200 {
            group.enter()
            store.create(newOrder("a", key: "same"), abandoned: { false }) { r in
                if case .success(let o) = r { results.withLock { $0.append(o) } }
                group.leave()
            }
        }
        #expect(group.wait(timeout: .now() + 20) == .success)
        let outcomes = results.withLock { $0 }
        #expect(outcomes.count == 200)
        var created = 0
        var ids = Set<String>()
        for o in outcomes {
            switch o {
            case .created(let order): created += 1; ids.insert(order.id)
            case .existing(let order): ids.insert(order.id)
            }
        }
        #expect(created == 1)
        #expect(ids.count == 1)
    }

    @Test("pending orders older than the cutoff expire; others stay", arguments: StoreFixture.all)
    func expiry(_ fixture: StoreFixture) throws {
        let store = try fixture.open()
        defer { store.close() }
        var old = newOrder("old")
        old.createTimeMs = 1_000
        let fresh = newOrder("fresh")
        _ = wait { store.create(old, abandoned: { false }, completion: $0) }
        _ = wait { store.create(fresh, abandoned: { false }, completion: $0) }
        // Read both first, so a cache (SQLite) holds them as PENDING.
        _ = wait { store.order(id: old.id, completion: $0) }
        let moved: Result<Int, BillingError> = wait { store.expire(createdBeforeMs: 2_000, nowMs: 5_000, limit: 100, completion: $0) }
        #expect(moved == .success(1))
        let read: Result<Order?, BillingError> = wait { store.order(id: old.id, completion: $0) }
        #expect((try? read.get())??.state == .expired)
        #expect((try? read.get())??.updateTimeMs == 5_000)
        let still: Result<Order?, BillingError> = wait { store.order(id: fresh.id, completion: $0) }
        #expect((try? still.get())??.state == .pending)
        let again: Result<Int, BillingError> = wait { store.expire(createdBeforeMs: 2_000, nowMs: 6_000, limit: 100, completion: $0) }
        #expect(again == .success(0))
    }

    @Test("acknowledged orders survive a reopen", arguments: StoreFixture.all.filter { $0.reopen != nil })
    func durable(_ fixture: StoreFixture) throws {
        let store = try fixture.open()
        let orders = (0..<50).map { newOrder("acct-\($0)", key: "k\($0)") }
        for o in orders { _ = wait { store.create(o, abandoned: { false }, completion: $0) } }
        store.close()
        let again = try fixture.reopen!()
        defer { again.close() }
        for o in orders {
            let read: Result<Order?, BillingError> = wait { again.order(id: o.id, completion: $0) }
            #expect(read == .success(o.pendingOrder))
        }
    }
}

@Suite("SQLite specifics")
struct SQLiteTests {
    @Test("WAL, synchronous=FULL and the schema version are set")
    func pragmas() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("billing-pragma-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("o.db").path
        let store = try SQLiteOrderStore(path: path)
        store.close()
        let out = try sqliteCLI(path, "PRAGMA journal_mode; PRAGMA user_version;")
        #expect(out == "wal\n\(SQLiteOrderStore.schemaVersion)\n")
        #expect(SQLiteOrderStore.schemaVersion >= 11)
    }

    @Test("concurrent writes share commits (group commit)")
    func groupCommit() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("billing-group-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let store = try SQLiteOrderStore(path: dir.appendingPathComponent("o.db").path)
        defer { store.close() }
        let group = DispatchGroup()
        for i in 0..<2000 {
            group.enter()
            store.create(newOrder("acct-\(i)"), abandoned: { false }) { _ in group.leave() }
        }
        #expect(group.wait(timeout: .now() + 30) == .success)
        #expect(store.groups.writes == 2000)
        #expect(store.groups.commits < 2000)
        #expect(store.groups.largest > 1)
    }

    @Test("a database from a newer billingd is refused")
    func newerSchema() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("billing-newer-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("o.db").path
        _ = try sqliteCLI(path, "PRAGMA user_version = 99;")
        let error = #expect(throws: StorageError.self) { try SQLiteOrderStore(path: path) }
        guard case .schemaTooNew(found: 99, _) = error else {
            Issue.record("answered \(String(describing: error))")
            return
        }
    }

    @Test("an unwritable path fails at open, with SQLite's own code")
    func badPath() {
        let error = #expect(throws: StorageError.self) { try SQLiteOrderStore(path: "/nonexistent-dir/x/orders.db") }
        #expect(error?.resultCode?.primary == .cantOpen)
    }
}

/// Runs Debian's sqlite3 CLI on a database (an independent reader).
func sqliteCLI(_ path: String, _ sql: String) throws -> String { try runCLI("/usr/bin/sqlite3", [path, sql]) }

/// Runs a command-line tool and returns what it printed.
func runCLI(_ executable: String, _ arguments: [String]) throws -> String {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: executable)
    p.arguments = arguments
    let pipe = Pipe()
    p.standardOutput = pipe
    try p.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}

/// Makes one empty database per call on the test server; nil (with a message) when there is none.
enum PostgresTestDatabase {
    static func create() -> String? {
        guard let base = ProcessInfo.processInfo.environment["BILLING_TEST_POSTGRES"], !base.isEmpty else {
            if ProcessInfo.processInfo.environment["CI"] == "true" {
                Issue.record("CI=true but BILLING_TEST_POSTGRES is not set (scripts/test starts PostgreSQL)")
            }
            return nil
        }
        let name = "billing_t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        p.arguments = [base, "-q", "-c", "CREATE DATABASE \(name)"]
        p.standardOutput = FileHandle.nullDevice
        try? p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0, let slash = base.lastIndex(of: "/") else { return nil }
        return String(base[...slash]) + name
    }
}

/// Runs `sql` with psql against `url`; rows as lines, columns separated by `|`.
func psqlCLI(_ url: String, _ sql: String) throws -> String { try runCLI("/usr/bin/psql", [url, "-At", "-c", sql]) }

@Suite("Notification audit (SQLite and PostgreSQL)")
struct NotificationAuditTests {
    /// A store on a fresh database, and how to run SQL on that database from outside.
    static func backends() -> [(name: String, open: () throws -> any OrderStore, sql: (String) throws -> String)] {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("billing-audit-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("a.db").path
        var list: [(name: String, open: () throws -> any OrderStore, sql: (String) throws -> String)] = [
            ("sqlite", { try SQLiteOrderStore(path: path) }, { try sqliteCLI(path, $0) })
        ]
        if let url = PostgresTestDatabase.create() {
            list.append(("postgres", { try PostgresOrderStore(url: url, poolSize: 2) }, { try psqlCLI(url, $0) }))
        }
        return list
    }

    static func notification(_ uuid: String, _ signed: String) -> VerifiedNotification {
        VerifiedNotification(
            uuid: uuid, type: "TEST", subtype: nil, signedTimeMs: 1_700_000_000_000, environment: nil, accepted: false,
            transaction: nil, renewal: nil, signedPayload: signed)
    }

    @Test("the JWS header is stored once and every notification's whole JWS comes back from notification_payloads")
    func headerOnce() throws {
        let header = "eyJhbGciOiJFUzI1NiIsIng1YyI6WyJNSUlCIiwiTUlJQyIsIk1JSUQiXX0"  // the same on both
        let signed = [header + ".eyJub3RpZmljYXRpb25UeXBlIjoiVEVTVCJ9.c2lnMQ", header + ".eyJzdWJ0eXBlIjoiWCJ9.c2lnMg"]
        for backend in Self.backends() {
            let store = try backend.open()
            for (i, s) in signed.enumerated() {
                let r = wait { store.apply(Self.notification("uuid-\(i)", s), nowMs: 1_700_000_000_000, catalog: nil, completion: $0) }
                #expect((try? r.get()) == .ignored, "\(backend.name)")
            }
            store.close()
            let whole = try backend.sql("SELECT signed_payload FROM notification_payloads ORDER BY notification_uuid;")
            #expect(whole == signed.joined(separator: "\n") + "\n", "\(backend.name)")
            #expect(try backend.sql("SELECT count(*) FROM jws_headers;") == "1\n", "\(backend.name)")
            // The rows hold the JWS from its first dot on, and the header's SHA-256.
            let rows = try backend.sql("SELECT signed_payload, header_digest FROM notifications ORDER BY notification_uuid;")
            let first = rows.split(separator: "\n").first.map(String.init) ?? ""
            #expect(first.hasPrefix(".eyJub3Rp"), "\(backend.name): \(first)")
            #expect(first.hasSuffix("|" + Digest.hex(Digest.sha256(Array(header.utf8)))), "\(backend.name)")
        }
    }

    @Test("a row from before the header table (no digest) comes back whole; a JWS without a dot is kept whole")
    func olderRows() throws {
        for backend in Self.backends() {
            let store = try backend.open()
            let r = wait { store.apply(Self.notification("no-dot", "garbage-without-dots"), nowMs: 1, catalog: nil, completion: $0) }
            #expect((try? r.get()) == .ignored)
            store.close()
            _ = try backend.sql(
                "INSERT INTO notifications (notification_uuid, notification_type, signed_time_ms, result, applied_time_ms, signed_payload) VALUES ('old', 'TEST', 1, 'ignored', 1, 'h.p.s');"
            )
            let whole = try backend.sql("SELECT signed_payload FROM notification_payloads ORDER BY notification_uuid;")
            #expect(whole == "garbage-without-dots\nh.p.s\n", "\(backend.name)")
        }
    }
}
