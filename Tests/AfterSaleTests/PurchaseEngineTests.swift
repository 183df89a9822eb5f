import AfterSale
import AppStore
import Billing
import BillingService
import Crypto
import Foundation
import RPC
import Storage
import Synchronization
import Testing
import TestSupport

/// A real test store (OpenSSL keys and signatures) shared by the purchase tests.
enum Shop {
    static let store: TestStore = {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("billing-teststore-\(UUID().uuidString)").path
        return try! TestStore.open(directory: dir, create: true)
    }()

    static let bundle = "com.example.app"
    static let now: Int64 = 1_790_000_000_000

    static func verifier(environments: Set<AppStoreEnvironment> = [.xcode, .sandbox]) -> AppStoreProofVerifier {
        AppStoreProofVerifier(
            settings: VerifierSettings(
                anchors: TrustAnchors(roots: [store.root]), bundleIDs: [bundle],
                environments: environments, now: { now }))
    }

    static func jws(
        _ id: String, product: String = "com.example.premium", type: String = "Non-Consumable", token: String? = nil,
        purchase: Int64 = now - 1000, expires: Int64? = nil, revoked: Int64? = nil, original: String? = nil,
        environment: String = "Xcode", bundle: String = Shop.bundle
    ) -> String {
        var t = TestStore.Transaction(
            transactionID: id, productID: product, type: type, bundleID: bundle, environment: environment,
            purchaseDate: purchase)
        t.appAccountToken = token
        t.expiresDate = expires
        t.revocationDate = revoked
        t.originalTransactionID = original
        t.signedDate = now
        return try! store.signedTransaction(t)
    }

    static func receipt(_ purchases: [(product: String, id: String, purchase: Int64, expires: Int64?)], bundle: String = Shop.bundle) -> String {
        let inApp = purchases.map { p -> AppReceipt.InAppPurchase in
            var r = AppReceipt.InAppPurchase()
            r.productID = p.product
            r.transactionID = p.id
            r.purchaseDate = p.purchase
            r.expiresDate = p.expires
            r.quantity = 1
            return r
        }
        return try! store.appReceipt(bundleID: bundle, receiptType: "Xcode", creationDate: now, inApp: inApp)
    }
}

struct Backend: Sendable, CustomTestStringConvertible {
    let name: String
    let make: @Sendable () -> any OrderStore
    var testDescription: String { name }
    static var all: [Backend] {
        var backends = [
            Backend(name: "memory") { InMemoryOrderStore() },
            Backend(name: "sqlite") {
                let dir = FileManager.default.temporaryDirectory.appendingPathComponent("billing-purchase-\(UUID().uuidString)")
                try! FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
                return try! SQLiteOrderStore(path: dir.appendingPathComponent("o.db").path)
            },
        ]
        if ProcessInfo.processInfo.environment["BILLING_TEST_POSTGRES"] != nil {
            backends.append(Backend(name: "postgres") { try! PostgresOrderStore(url: PostgresDB.create(), poolSize: 4) })
        }
        return backends
    }
}

/// A fresh database per store on the BILLING_TEST_POSTGRES server.
enum PostgresDB {
    static func create() -> String {
        let base = ProcessInfo.processInfo.environment["BILLING_TEST_POSTGRES"]!
        let name = "billing_p_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        p.arguments = [base, "-q", "-c", "CREATE DATABASE \(name)"]
        p.standardOutput = FileHandle.nullDevice
        try! p.run()
        p.waitUntilExit()
        return String(base[...base.lastIndex(of: "/")!]) + name
    }
}

/// An engine over a backend, with helpers that wait for answers.
struct Harness {
    let store: any OrderStore
    let engine: PurchaseEngine

    init(_ backend: Backend, policy: RestorePolicy = .transfer, catalog: Catalog? = nil, rules: PurchaseEngine.Policy = .init()) {
        store = backend.make()
        let clock = ManualClock(milliseconds: Shop.now)
        engine = PurchaseEngine(
            orders: OrderService(store: store, catalog: catalog, clock: clock), verifier: Shop.verifier(),
            restorePolicy: policy, policy: rules, clock: clock)
    }

    func order(_ account: String = "acct", product: String = "com.example.premium") -> Billing.Order {
        let r: Result<Billing.Order, BillingError> = wait { engine.orders.createOrder(.init(accountID: account, productID: product), completion: $0) }
        return try! r.get()
    }

    func submit(_ orderID: String, _ proof: PurchaseEngine.Proof?, transactionID: String = "") -> Result<CompletedPurchase, BillingError> {
        wait { engine.submitReceipt(orderID: orderID, proof: proof, transactionID: transactionID, completion: $0) }
    }

    func restore(_ account: String, receipt: String = "", jws: [String] = []) -> Result<[Billing.Entitlement], BillingError> {
        wait { engine.restorePurchases(accountID: account, appReceipt: receipt, signedTransactions: jws, completion: $0) }
    }

    func get(_ id: String) -> Billing.Order {
        let r: Result<Billing.Order, BillingError> = wait { engine.orders.getOrder(id: id, completion: $0) }
        return try! r.get()
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let f) = self { return f }
        return nil
    }
}

@Suite("Purchase engine: exactly-once crediting", .serialized)
struct PurchaseEngineTests {
    @Test("a signed transaction completes its order once; a retry answers already_processed", arguments: Backend.all)
    func completeOnce(_ backend: Backend) throws {
        let h = Harness(backend)
        defer { h.store.close() }
        let order = h.order()
        let jws = Shop.jws("1001", token: order.id)
        let first = try h.submit(order.id, .signedTransaction(jws)).get()
        #expect(!first.alreadyProcessed)
        #expect(first.order.state == .completed)
        #expect(first.order.transactionID == "1001")
        #expect(first.order.environment == .xcode)
        #expect(first.transaction.appAccountToken == order.id)
        let again = try h.submit(order.id.uppercased(), .signedTransaction(jws)).get()
        #expect(again.alreadyProcessed)
        #expect(again.order == first.order)
        #expect(h.get(order.id) == first.order)
    }

    @Test("the same transaction cannot pay a second order, of this or another account", arguments: Backend.all)
    func claimed(_ backend: Backend) {
        let h = Harness(backend)
        defer { h.store.close() }
        let a = h.order("acct"), b = h.order("acct"), c = h.order("other")
        let jws = Shop.jws("2002")
        _ = try! h.submit(a.id, .signedTransaction(jws)).get()
        #expect(h.submit(b.id, .signedTransaction(jws)).failure == .transactionAlreadyClaimed(transactionID: "2002"))
        #expect(h.submit(c.id, .signedTransaction(jws)).failure == .transactionAlreadyClaimed(transactionID: "2002"))
        #expect(h.get(b.id).state == .pending)
    }

    @Test("product, account token, revocation and order state are checked", arguments: Backend.all)
    func refusals(_ backend: Backend) {
        let h = Harness(backend)
        defer { h.store.close() }
        let order = h.order()
        #expect(
            h.submit(order.id, .signedTransaction(Shop.jws("3001", product: "com.example.other"))).failure
                == .productMismatch(orderProduct: "com.example.premium", proofProduct: "com.example.other"))
        #expect(
            h.submit(order.id, .signedTransaction(Shop.jws("3002", token: UUID().uuidString.lowercased()))).failure
                == .accountTokenMismatch(orderID: order.id))
        #expect(
            h.submit(order.id, .signedTransaction(Shop.jws("3003", revoked: Shop.now - 10))).failure
                == .transactionRevoked(transactionID: "3003"))
        _ = try! h.submit(order.id, .signedTransaction(Shop.jws("3004"))).get()
        #expect(h.submit(order.id, .signedTransaction(Shop.jws("3005"))).failure == .orderNotPending(orderID: order.id, state: .completed))
        #expect(
            h.submit("00000000-0000-4000-8000-000000000000", .signedTransaction(Shop.jws("3006"))).failure
                == .orderNotFound(orderID: "00000000-0000-4000-8000-000000000000"))
        #expect(h.submit("nope", .signedTransaction(Shop.jws("3007"))).failure == .invalidField(field: "order_id", problem: "is not a UUID"))
        #expect(h.submit(order.id, nil).failure == .invalidField(field: "proof", problem: "is required: signed_transaction or app_receipt"))
        // An upper-case appAccountToken is the same UUID.
        let second = h.order()
        #expect((try? h.submit(second.id, .signedTransaction(Shop.jws("3008", token: second.id.uppercased()))).get()) != nil)
    }

    @Test("an expired order cannot be paid", arguments: Backend.all)
    func expired(_ backend: Backend) {
        let h = Harness(backend)
        defer { h.store.close() }
        let order = h.order()
        let _: Result<Int, BillingError> = wait { h.store.expire(createdBeforeMs: Shop.now + 1, nowMs: Shop.now + 2, limit: 10, completion: $0) }
        #expect(h.get(order.id).state == .expired)
        #expect(h.submit(order.id, .signedTransaction(Shop.jws("3201"))).failure == .orderNotPending(orderID: order.id, state: .expired))
    }

    @Test("the proof's quantity must be the order's", arguments: Backend.all)
    func quantity(_ backend: Backend) {
        let h = Harness(backend)
        defer { h.store.close() }
        let r: Result<Billing.Order, BillingError> = wait {
            h.engine.orders.createOrder(.init(accountID: "acct", productID: "com.example.premium", quantity: 3), completion: $0)
        }
        let order = try! r.get()
        #expect(h.submit(order.id, .signedTransaction(Shop.jws("3101"))).failure == .quantityMismatch(orderQuantity: 3, proofQuantity: 1))
        #expect(h.get(order.id).state == .pending)
    }

    @Test("verification failures carry their reason", arguments: Backend.all)
    func verification(_ backend: Backend) {
        let h = Harness(backend)
        defer { h.store.close() }
        let order = h.order()
        guard case .receiptMalformed = h.submit(order.id, .signedTransaction("not-a-jws")).failure else { Issue.record("malformed"); return }
        guard case .wrongApp = h.submit(order.id, .signedTransaction(Shop.jws("4001", bundle: "com.example.other"))).failure else {
            Issue.record("wrong app"); return
        }
        guard case .environmentNotAllowed = h.submit(order.id, .signedTransaction(Shop.jws("4002", environment: "Production"))).failure else {
            Issue.record("environment"); return
        }
        guard case .receiptMalformed = h.submit(order.id, .appReceipt("%%%")).failure else { Issue.record("receipt"); return }
        #expect(h.get(order.id).state == .pending)
    }

    @Test("app receipts: transaction_id picks, otherwise the newest unclaimed purchase of the product", arguments: Backend.all)
    func receipts(_ backend: Backend) throws {
        let h = Harness(backend)
        defer { h.store.close() }
        let receipt = Shop.receipt([
            ("com.example.premium", "5001", Shop.now - 3000, nil), ("com.example.premium", "5002", Shop.now - 2000, nil),
            ("com.example.other", "5003", Shop.now - 1000, nil),
        ])
        let a = h.order(), b = h.order(), c = h.order(), d = h.order()
        #expect(try h.submit(a.id, .appReceipt(receipt)).get().transaction.transactionID == "5002")
        #expect(try h.submit(b.id, .appReceipt(receipt)).get().transaction.transactionID == "5001")
        guard case .transactionNotFound = h.submit(c.id, .appReceipt(receipt)).failure else { Issue.record("all claimed"); return }
        guard case .transactionNotFound = h.submit(c.id, .appReceipt(receipt), transactionID: "9999").failure else { Issue.record("id"); return }
        #expect(
            h.submit(c.id, .appReceipt(receipt), transactionID: "5003").failure
                == .productMismatch(orderProduct: "com.example.premium", proofProduct: "com.example.other"))
        #expect(h.submit(d.id, .appReceipt(receipt), transactionID: "5001").failure == .transactionAlreadyClaimed(transactionID: "5001"))
        // The retry of a's receipt answers a's transaction.
        let again = try h.submit(a.id, .appReceipt(receipt)).get()
        #expect(again.alreadyProcessed && again.transaction.transactionID == "5002")
    }

    @Test("restore: non-consumables and subscriptions, never consumables; active by expiry and revocation", arguments: Backend.all)
    func restore(_ backend: Backend) throws {
        let h = Harness(backend)
        defer { h.store.close() }
        let jws = [
            Shop.jws("6001", product: "premium"),
            Shop.jws("6002", product: "coins", type: "Consumable"),
            Shop.jws("6003", product: "pro.monthly", type: "Auto-Renewable Subscription", expires: Shop.now + 86_400_000, original: "6000"),
            Shop.jws("6004", product: "old.monthly", type: "Auto-Renewable Subscription", expires: Shop.now - 1, original: "5990"),
            Shop.jws("6005", product: "refunded", revoked: Shop.now - 5),
        ]
        let e = try h.restore("acct", jws: jws).get()
        #expect(e.map(\.productID) == ["old.monthly", "premium", "pro.monthly", "refunded"])
        #expect(e.first { $0.productID == "pro.monthly" }?.active == true)
        #expect(e.first { $0.productID == "pro.monthly" }?.originalTransactionID == "6000")
        #expect(e.first { $0.productID == "old.monthly" }?.active == false)
        #expect(e.first { $0.productID == "refunded" }?.active == false)
        #expect(e.first { $0.productID == "premium" }?.active == true)
    }

    @Test(
        "restore: a subscription's renewals oldest first end on the newest (all recorded before the entitlement is computed)",
        arguments: Backend.all)
    func restoreRenewalsOldestFirst(_ backend: Backend) throws {
        let h = Harness(backend)
        defer { h.store.close() }
        let month: Int64 = 30 * 86_400_000
        let first = Shop.now - 5 * month + 1000
        var jws: [String] = []
        for i in 0..<6 {
            let purchase: Int64 = first + Int64(i) * month
            let expires: Int64 = purchase + month
            jws.append(
                Shop.jws(
                    String(8000 + i), product: "pro.monthly", type: "Auto-Renewable Subscription", purchase: purchase,
                    expires: expires, original: "8000"))
        }
        for (account, order) in [("acct-up", jws), ("acct-down", Array(jws.reversed()))] {
            let e = try h.restore(account, jws: order).get()
            #expect(e.count == 1)
            #expect(e.first?.latestTransactionID == "8005")
            #expect(e.first?.expiresTimeMs == first + 6 * month)
            #expect(e.first?.active == true)
        }
    }

    @Test(
        "restore under keep: a newer revoked view of another account's purchase revokes that account's entitlement",
        arguments: Backend.all)
    func keepRevocationReachesOwner(_ backend: Backend) throws {
        let h = Harness(backend, policy: .keep)
        defer { h.store.close() }
        #expect(try h.restore("alice", jws: [Shop.jws("9100", product: "premium")]).get().first?.active == true)
        var later = TestStore.Transaction(
            transactionID: "9100", productID: "premium", type: "Non-Consumable", bundleID: Shop.bundle,
            environment: "Xcode", purchaseDate: Shop.now - 1000)
        later.revocationDate = Shop.now - 10
        later.signedDate = Shop.now + 1000  // newer than what alice's proof said
        let revoked = try Shop.store.signedTransaction(later)
        #expect(try h.restore("bob", jws: [revoked]).get().isEmpty)
        let alice: Result<[Billing.Entitlement], BillingError> = wait {
            h.store.entitlements(accountID: "alice", nowMs: Shop.now, completion: $0)
        }
        #expect(try alice.get().first?.active == false)
    }

    @Test("restore moves a purchase to the restoring account under transfer, not under keep", arguments: Backend.all)
    func restorePolicy(_ backend: Backend) throws {
        let transfer = Harness(backend, policy: .transfer)
        defer { transfer.store.close() }
        let jws = Shop.jws("7001", product: "premium")
        #expect(try transfer.restore("alice", jws: [jws]).get().count == 1)
        #expect(try transfer.restore("bob", jws: [jws]).get().count == 1)
        #expect(transfer.restore("alice", jws: []).failure != nil)  // no proof: INVALID_FIELD
        #expect(try transfer.restore("alice", jws: [Shop.jws("7002", product: "other")]).get().map(\.productID) == ["other"])

        let keep = Harness(backend, policy: .keep)
        defer { keep.store.close() }
        #expect(try keep.restore("alice", jws: [jws]).get().count == 1)
        #expect(try keep.restore("bob", jws: [jws]).get().isEmpty)
    }

    @Test("a purchase restored first can still pay the same account's order; another account's cannot", arguments: Backend.all)
    func restoredThenSubmitted(_ backend: Backend) throws {
        let h = Harness(backend)
        defer { h.store.close() }
        let jws = Shop.jws("8001")
        _ = try h.restore("acct", jws: [jws]).get()
        let other = h.order("someone-else")
        #expect(h.submit(other.id, .signedTransaction(jws)).failure == .transactionAlreadyClaimed(transactionID: "8001"))
        let mine = h.order("acct")
        #expect(try h.submit(mine.id, .signedTransaction(jws)).get().order.state == .completed)
        #expect(try h.restore("acct", jws: [jws]).get().first?.orderID == mine.id)
    }

    @Test("50 concurrent submissions of one transaction for 50 orders: exactly one completes", arguments: Backend.all.dropFirst())
    func concurrentClaims(_ backend: Backend) throws {
        let h = Harness(backend)
        defer { h.store.close() }
        let orders = (0..<50).map { _ in h.order() }
        let jws = Shop.jws("9001")
        let results = Mutex<[Result<CompletedPurchase, BillingError>]>([])
        DispatchQueue.concurrentPerform(iterations: 50) { i in
            let r = h.submit(orders[i].id, .signedTransaction(jws))
            results.withLock { $0.append(r) }
        }
        let all = results.withLock { $0 }
        #expect(all.filter { (try? $0.get()) != nil }.count == 1)
        #expect(all.filter { $0.failure == .transactionAlreadyClaimed(transactionID: "9001") }.count == 49)
    }

    @Test("in a PostgreSQL batch, a purchase whose subscription lock is held elsewhere waits alone; the rest of the batch commits")
    func lockHeldElsewhere() throws {
        guard ProcessInfo.processInfo.environment["BILLING_TEST_POSTGRES"] != nil else { return }
        let url = PostgresDB.create()
        // One pool connection, so both purchases share one batch (one transaction).
        let h = Harness(Backend(name: "postgres") { try! PostgresOrderStore(url: url, poolSize: 1) })
        defer { h.store.close() }
        let a = h.order("a"), b = h.order("b")
        // Another session holds account "a"'s purchase lock until this test ends it (a non-consumable locks its
        // account and product; the NUL between them ends the C string, so the key PostgreSQL hashes is the account).
        // It is released by ending that session once b is answered, never by a timer: a slow machine cannot let
        // it go before the batch meets it.
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        holder.arguments = [url, "-q", "-c", "SELECT pg_advisory_lock(1937072755, hashtext('a'))", "-c", "SELECT pg_sleep(60)"]
        holder.standardOutput = FileHandle.nullDevice
        holder.environment = ProcessInfo.processInfo.environment.merging(["PGAPPNAME": "billing-lock-holder"]) { $1 }
        try holder.run()
        defer {
            if holder.isRunning { holder.terminate() }
            holder.waitUntilExit()
        }
        var held = false
        for _ in 0..<100 where !held {
            let probe = Process()
            probe.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
            probe.arguments = [url, "-At", "-c", "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 1937072755 AND granted"]
            let pipe = Pipe()
            probe.standardOutput = pipe
            try probe.run()
            let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            probe.waitUntilExit()
            held = out.trimmingCharacters(in: .whitespacesAndNewlines) == "1"
            if !held { usleep(20_000) }
        }
        #expect(held)
        // Keep the pool's connection busy while both purchases queue, so they form one batch. The proofs are signed
        // first: signed (and verified, the first time in a process) inside the second, they took long enough on a
        // busy machine for a to reach the free connection alone and wait for the lock there, with b behind it.
        let proofs = [("a", a, Shop.jws("61001")), ("b", b, Shop.jws("61002"))]
        h.store.read({ _ throws(BillingError) in usleep(3_000_000) }, completion: { _ in })
        let answered = Mutex<[String]>([])
        let group = DispatchGroup()
        for (name, order, jws) in proofs {
            group.enter()
            h.engine.submitReceipt(orderID: order.id, proof: .signedTransaction(jws), transactionID: "") { r in
                if case .success = r { answered.withLock { $0.append(name) } }
                group.leave()
            }
        }
        // b is answered while a's lock is still held elsewhere (before, the whole batch waited for the lock, and a
        // batch that held such a lock could deadlock with another batch); a only once the holder's session ends.
        var bAnswered = false
        for _ in 0..<1500 where !bAnswered {
            bAnswered = answered.withLock { $0.contains("b") }
            if !bAnswered { usleep(20_000) }
        }
        #expect(bAnswered)
        #expect(answered.withLock { $0 } == ["b"])
        // End the holder's backend (a client that goes away mid pg_sleep is noticed only when the sleep ends).
        let release = Process()
        release.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        release.arguments = [
            url, "-q", "-c",
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'billing-lock-holder'",
        ]
        release.standardOutput = FileHandle.nullDevice
        try release.run()
        release.waitUntilExit()
        #expect(group.wait(timeout: .now() + 30) == .success)
        #expect(answered.withLock { $0 } == ["b", "a"])
        #expect(h.get(a.id).state == .completed && h.get(b.id).state == .completed)
    }

    @Test("a retry answers the stored transaction, whatever the retried proof says about it", arguments: Backend.all)
    func retryAnswersStored(_ backend: Backend) throws {
        let h = Harness(backend)
        defer { h.store.close() }
        let order = h.order()
        let first = try h.submit(order.id, .signedTransaction(Shop.jws("1101", token: order.id))).get()
        #expect(h.get(order.id).state == .completed)  // the order now sits in any cache as COMPLETED
        // The same transaction again, now in an app receipt: no appAccountToken, another purchase date.
        let receipt = Shop.receipt([("com.example.premium", "1101", Shop.now - 500, nil)])
        let again = try h.submit(order.id, .appReceipt(receipt)).get()
        #expect(again.alreadyProcessed)
        #expect(again.transaction == first.transaction)
        #expect(again.transaction.appAccountToken == order.id)
        let signedAgain = try h.submit(order.id, .signedTransaction(Shop.jws("1101", token: order.id, purchase: Shop.now - 700))).get()
        #expect(signedAgain.transaction == first.transaction)
    }

    @Test("--require-account-token: a signed transaction must carry the order id; app receipts are exempt", arguments: Backend.all)
    func requireAccountToken(_ backend: Backend) throws {
        let h = Harness(backend, rules: .init(requireAccountToken: true))
        defer { h.store.close() }
        let order = h.order()
        #expect(h.submit(order.id, .signedTransaction(Shop.jws("1201"))).failure == .accountTokenMismatch(orderID: order.id))
        #expect(
            h.submit(order.id, .signedTransaction(Shop.jws("1202", token: UUID().uuidString.lowercased()))).failure
                == .accountTokenMismatch(orderID: order.id))
        #expect(h.get(order.id).state == .pending)
        #expect(try h.submit(order.id, .signedTransaction(Shop.jws("1203", token: order.id.uppercased()))).get().order.state == .completed)
        let second = h.order()
        let receipt = Shop.receipt([("com.example.premium", "1204", Shop.now - 500, nil)])
        #expect(try h.submit(second.id, .appReceipt(receipt)).get().transaction.transactionID == "1204")
        // Off by default: no token is fine.
        let relaxed = Harness(backend)
        defer { relaxed.store.close() }
        #expect((try? relaxed.submit(relaxed.order().id, .signedTransaction(Shop.jws("1205"))).get()) != nil)
    }

    @Test("--reject-stale-purchases: bought before the order beyond the skew, or a subscription expired by then", arguments: Backend.all)
    func rejectStale(_ backend: Backend) throws {
        let h = Harness(backend, rules: .init(rejectStalePurchases: true, clockSkewMs: 60_000))
        defer { h.store.close() }
        let order = h.order()  // created at Shop.now
        #expect(
            h.submit(order.id, .signedTransaction(Shop.jws("1301", purchase: Shop.now - 60_001))).failure
                == .transactionPredatesOrder(transactionID: "1301"))
        #expect(
            h.submit(
                order.id,
                .signedTransaction(
                    Shop.jws(
                        "1302", product: "com.example.premium", type: "Auto-Renewable Subscription",
                        purchase: Shop.now - 1000, expires: Shop.now - 1))
            ).failure
                == .transactionPredatesOrder(transactionID: "1302"))
        // Several receipt records, all stale: the reason is said, not TRANSACTION_NOT_FOUND.
        let stale = Shop.receipt([("com.example.premium", "1303", Shop.now - 3_600_000, nil), ("com.example.other", "1304", Shop.now, nil)])
        #expect(h.submit(order.id, .appReceipt(stale)).failure == .transactionPredatesOrder(transactionID: "1303"))
        #expect(h.get(order.id).state == .pending)
        // Within the skew pays.
        #expect(try h.submit(order.id, .signedTransaction(Shop.jws("1305", purchase: Shop.now - 59_000))).get().order.state == .completed)
        // Off by default: an old purchase pays.
        let relaxed = Harness(backend)
        defer { relaxed.store.close() }
        #expect((try? relaxed.submit(relaxed.order().id, .signedTransaction(Shop.jws("1306", purchase: Shop.now - 86_400_000))).get()) != nil)
    }
}

@Suite("Infrastructure failures on the wire")
struct InfrastructureFailureMappingTests {
    static let database = "the order database is unavailable; retry"

    @Test(
        "a database, queue or App Store failure keeps its documented code, reason and message; its cause stays in the log",
        arguments: [
            (
                BillingError.infrastructure(.storage(cause: StorageError.postgres(.uniqueViolation, message: "duplicate key value violates \"orders_pkey\""))),
                "STORAGE_UNAVAILABLE", database
            ),
            (
                .infrastructure(.storage(cause: StorageError.sqlite(SQLiteResultCode(rawValue: 13), message: "database or disk is full"))),
                "STORAGE_UNAVAILABLE", database
            ),
            (
                .infrastructure(.storage(cause: StorageError.connectionLost(message: "server closed the connection unexpectedly"))), "STORAGE_UNAVAILABLE",
                database
            ),
            (.storageUnavailable(detail: "disk I/O error"), "STORAGE_UNAVAILABLE", database),
            (.infrastructure(.overloaded), "OVERLOADED", "the order database has too much work queued; retry later"),
            (
                .infrastructure(.appStoreAPI(detail: "503 from the App Store")), "APPSTORE_API_UNAVAILABLE",
                "the App Store Server API is unavailable; retry later"
            ),
        ])
    func mapping(_ error: BillingError, _ reason: String, _ message: String) {
        let rpc = error.rpcError
        #expect(rpc.reason == reason)
        #expect(rpc.code == (reason == "OVERLOADED" ? .resourceExhausted : .unavailable))
        #expect(rpc.message == message)
        #expect(rpc.metadata.isEmpty)
    }

    @Test("a StorageError comes back out of a BillingError as itself, for the log and the batch runner")
    func travelsWhole() {
        let error = BillingError.infrastructure(.storage(cause: StorageError.postgres(.serializationFailure, message: "could not serialize access")))
        guard case .infrastructure(let failure) = error, case .storage(let cause) = failure, let storage = cause as? StorageError else {
            Issue.record("lost its cause")
            return
        }
        #expect(storage.sqlState == .serializationFailure && storage.isRetryable)
        #expect(failure.detail == "postgres error 40001: could not serialize access")
        #expect(error == .infrastructure(.storage(cause: StorageError.postgres(.serializationFailure, message: "could not serialize access"))))
        #expect(error != .infrastructure(.storage(cause: StorageError.postgres(.deadlockDetected, message: "could not serialize access"))))
    }
}
