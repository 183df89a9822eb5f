import BillingTesting
import Billing
import BillingAPI
import BillingService
import Foundation
import ProtoWire
import RPC
import Testing
import TestSupport

/// Support's changes on SQLite and PostgreSQL, through the service as the transport calls it: the audit entry and
/// the change commit together (a database that refuses the entry keeps neither), erasure leaves the old id in no
/// table, a grant's expiry is noted once, a transfer moves the entitlement.
@Suite("Support on SQLite and PostgreSQL: audit atomicity, erasure, grant expiry, transfer")
struct SupportStorageTests {
    static let now: Int64 = 1_800_000_000_000

    struct Desk {
        let name: String
        let store: any OrderStore
        let sql: (String) throws -> String
        let router: Router

        init(_ backend: (name: String, open: () throws -> any OrderStore, sql: (String) throws -> String)) throws {
            name = backend.name
            store = try backend.open()
            sql = backend.sql
            var r = Router()
            SupportService(
                store: store, clock: ManualClock(milliseconds: SupportStorageTests.now), operatorName: { _ in "tester" },
                requestJSON: { _, _ in "{}" }
            ).register(in: &r)
            router = r
        }

        /// One call through the pipeline (BillingTesting's client).
        func call<Response: ProtoMessage>(_ method: String, _ request: some ProtoMessage, _: Response.Type) -> Result<Response, RPCError> {
            PipelineClient.call(router, "billing.v1.Support/" + method, request, Response.self)
        }

        func count(_ sql: String) throws -> Int { Int(try self.sql(sql).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1 }
    }

    static func grantRequest(_ account: String, seconds: Int64 = 0) -> GrantEntitlementRequest {
        var r = GrantEntitlementRequest()
        r.accountID = account
        r.productID = "com.example.pro"
        r.reason = "ticket 1"
        r.durationSeconds = seconds
        return r
    }

    @Test("a database that refuses the audit entry keeps the grant neither: the change and its entry commit together")
    func auditAtomicity() throws {
        for backend in NotificationAuditTests.backends() {
            let desk = try Desk(backend)
            defer { desk.store.close() }
            _ = try desk.sql(
                desk.name == "sqlite"
                    ? "CREATE TRIGGER audit_fails BEFORE INSERT ON audit_entries BEGIN SELECT RAISE(ABORT, 'audit refused'); END;"
                    : "CREATE FUNCTION audit_fails() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'audit refused'; END $$; "
                        + "CREATE TRIGGER audit_fails BEFORE INSERT ON audit_entries FOR EACH ROW EXECUTE FUNCTION audit_fails();")
            let failed = desk.call("GrantEntitlement", Self.grantRequest("ann"), GrantEntitlementResponse.self)
            guard case .failure(let error) = failed else {
                Issue.record("\(desk.name): the grant answered OK without its audit entry")
                continue
            }
            #expect(error.code == .unavailable || error.code == .internal, "\(desk.name): \(error)")
            #expect(try desk.count("SELECT count(*) FROM grants;") == 0, "\(desk.name)")
            #expect(try desk.count("SELECT count(*) FROM entitlements WHERE account_id = 'ann';") == 0, "\(desk.name)")
            #expect(try desk.count("SELECT count(*) FROM events WHERE account_id = 'ann';") == 0, "\(desk.name)")
            #expect(try desk.count("SELECT count(*) FROM audit_entries;") == 0, "\(desk.name)")
            _ = try desk.sql("DROP TRIGGER audit_fails" + (desk.name == "sqlite" ? ";" : " ON audit_entries;"))
            let granted = try desk.call("GrantEntitlement", Self.grantRequest("ann"), GrantEntitlementResponse.self).get()
            #expect(try desk.count("SELECT count(*) FROM grants;") == 1, "\(desk.name)")
            #expect(
                try desk.sql("SELECT method, outcome, target FROM audit_entries;")
                    == "billing.v1.Support/GrantEntitlement|OK|com.example.pro\n", "\(desk.name)")
            #expect(granted.entitlement?.grantID == granted.grant?.grantID, "\(desk.name)")
        }
    }

    @Test("erasure: the old id is in no table afterwards, the event snapshots included; the money stays under the pseudonym")
    func erasure() throws {
        for backend in NotificationAuditTests.backends() {
            let desk = try Desk(backend)
            defer { desk.store.close() }
            let new = NewOrder(
                id: OrderID.make(milliseconds: Self.now), accountID: "bob", productID: "com.example.book", quantity: 1, idempotencyKey: "k",
                createTimeMs: Self.now)
            _ = try wait { desk.store.create(new, abandoned: { false }, completion: $0) }.get()
            let order = new.pendingOrder
            var t = StoreTransaction(
                transactionID: "9001", originalTransactionID: "9001", productID: "com.example.book", productKind: .nonConsumable,
                purchaseTimeMs: Self.now, environment: .sandbox, appAccountToken: order.id, bundleID: "b")
            t.price = PriceFacts(priceMilliunits: 4990, currency: "USD", storefront: "USA", offerID: "", offerType: "")
            _ = try wait {
                desk.store.complete(
                    orderID: order.id, candidates: [t], check: { _, _ in nil },
                    context: RuleContext(nowMs: Self.now, cause: .submitReceipt, catalog: nil), completion: $0)
            }.get()
            _ = try desk.call("GrantEntitlement", Self.grantRequest("bob"), GrantEntitlementResponse.self).get()
            var get = GetCustomerRequest()
            get.accountID = "bob"
            let before = try desk.call("GetCustomer", get, GetCustomerResponse.self).get().customer
            var erase = DeleteCustomerRequest()
            erase.accountID = "bob"
            erase.reason = "erasure request"
            let gone = try desk.call("DeleteCustomer", erase, DeleteCustomerResponse.self).get()
            #expect(gone.orders == 1 && gone.transactions == 1 && gone.events >= 3, "\(desk.name): \(gone)")
            for table in ["orders", "transactions", "entitlements", "grants", "events", "audit_entries"] {
                #expect(try desk.count("SELECT count(*) FROM \(table) WHERE account_id = 'bob';") == 0, "\(desk.name): \(table)")
            }
            #expect(try desk.count("SELECT count(*) FROM events WHERE order_snapshot LIKE '%3:bob%';") == 0, "\(desk.name)")
            #expect(try desk.count("SELECT count(*) FROM audit_entries WHERE target = 'bob' OR request_json LIKE '%\"bob\"%';") == 0)
            #expect(try desk.count("SELECT count(*) FROM orders WHERE idempotency_key IS NOT NULL;") == 0, "\(desk.name)")
            let events = try wait { desk.store.events(after: 0, limit: 100, accountID: gone.pseudonym, completion: $0) }.get()
            #expect(events.last?.kind == .accountDeleted && events.allSatisfy { $0.order.map { $0.accountID == gone.pseudonym } ?? true })
            get.accountID = gone.pseudonym
            let after = try desk.call("GetCustomer", get, GetCustomerResponse.self).get().customer
            #expect(after?.spent == before?.spent && after?.deleted == true, "\(desk.name)")
            // Once erased, the id is unknown: a second erasure finds nothing and writes nothing.
            erase.accountID = "bob"
            guard case .failure(let again) = desk.call("DeleteCustomer", erase, DeleteCustomerResponse.self) else {
                Issue.record("\(desk.name): a second erasure answered OK")
                continue
            }
            #expect(again.reason == ErrorReason.accountNotFound.rawValue, "\(desk.name)")
        }
    }

    @Test("a grant past its end: EXPIRED by the rule, its event written once by the sweep, whoever sweeps again")
    func grantExpiry() throws {
        for backend in NotificationAuditTests.backends() {
            let desk = try Desk(backend)
            defer { desk.store.close() }
            let g = try desk.call("GrantEntitlement", Self.grantRequest("cat", seconds: 60), GrantEntitlementResponse.self).get()
            let end = Self.now + 60_000
            #expect(g.grant?.expiresTimeMs == end)
            func sweep(_ at: Int64) throws -> Int {
                try wait {
                    desk.store.write(
                        abandoned: { false },
                        { ledger throws(BillingError) in
                            try GrantRules.expireDue(ledger, context: RuleContext(nowMs: at, cause: .grantExpiry, catalog: nil), limit: 10)
                        }, completion: $0)
                }.get()
            }
            #expect(try sweep(end - 1) == 0, "\(desk.name)")
            #expect(try sweep(end) == 1, "\(desk.name)")
            #expect(try sweep(end + 1000) == 0, "\(desk.name)")
            let entitlements = try wait { desk.store.entitlements(accountID: "cat", nowMs: end, completion: $0) }.get()
            #expect(entitlements.map(\.state) == [.expired] && entitlements.map(\.active) == [false], "\(desk.name)")
            let expired = try wait { desk.store.events(after: 0, limit: 100, accountID: "cat", completion: $0) }.get()
                .filter { $0.kind == .entitlementExpired }
            #expect(expired.map(\.cause) == ["grant_expiry"], "\(desk.name)")
        }
    }

    @Test("a transfer moves the subscription's entitlement: the old owner keeps none, the new one has it")
    func transfer() throws {
        for backend in NotificationAuditTests.backends() {
            let desk = try Desk(backend)
            defer { desk.store.close() }
            let t = StoreTransaction(
                transactionID: "7001", originalTransactionID: "7001", productID: "com.example.monthly", productKind: .autoRenewableSubscription,
                purchaseTimeMs: Self.now - 1000, expiresTimeMs: Self.now + 86_400_000, environment: .sandbox, bundleID: "b")
            _ = try wait {
                desk.store.restore(
                    accountID: "dan", transactions: [t], policy: .transfer, context: RuleContext(nowMs: Self.now, cause: .restorePurchases, catalog: nil),
                    completion: $0)
            }.get()
            var r = TransferPurchasesRequest()
            r.fromAccountID = "dan"
            r.toAccountID = "eve"
            r.reason = "new sign-in"
            let moved = try desk.call("TransferPurchases", r, TransferPurchasesResponse.self).get()
            #expect(moved.transferred == 1 && moved.entitlements.map(\.originalTransactionID) == ["7001"], "\(desk.name)")
            #expect(try wait { desk.store.entitlements(accountID: "dan", nowMs: Self.now, completion: $0) }.get().isEmpty, "\(desk.name)")
            #expect(try desk.count("SELECT count(*) FROM transactions WHERE account_id = 'eve';") == 1, "\(desk.name)")
            let events = try wait { desk.store.events(after: 0, limit: 100, accountID: "eve", completion: $0) }.get()
            #expect(events.map(\.kind) == [.entitlementTransferred] && events.map(\.cause) == ["support:TransferPurchases"], "\(desk.name)")
        }
    }
}
