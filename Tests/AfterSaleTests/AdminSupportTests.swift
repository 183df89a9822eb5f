import BillingTesting
import AfterSale
import AppStore
import AppStoreAPI
import Billing
import BillingAPI
import BillingService
import Crypto
import Foundation
import ProtoWire
import RPC
import Testing
import TestSupport

/// billing.admin.v1.Admin's support calls and refund-history reconciliation, through the router as the transport
/// calls them, over the in-memory App Store Server API and every store.
struct AdminWorld {
    let store: any OrderStore
    let api = InMemoryAppStoreAPI(pageSize: 2, nowMs: { Shop.now })
    let router: Router
    let reconciler: Reconciler
    let engine: PurchaseEngine

    static let sub = "com.example.pro.monthly"
    static let day: Int64 = 86_400_000

    init(_ backend: Backend) {
        store = backend.make()
        let clock = ManualClock(milliseconds: Shop.now)
        let verifier = Shop.verifier()
        let orders = OrderService(store: store, catalog: nil, clock: clock)
        engine = PurchaseEngine(orders: orders, verifier: verifier, clock: clock)
        let link = AppStoreLink(client: api, environments: [.production, .sandbox])
        let processor = NotificationProcessor(
            settings: VerifierSettings(
                anchors: TrustAnchors(roots: [Shop.store.root]), bundleIDs: [Shop.bundle], environments: [.xcode, .sandbox],
                now: { Shop.now }),
            store: store, catalog: nil, clock: clock)
        let reconciler = Reconciler(link: link, processor: processor, store: store, marginSeconds: 3600, verifier: verifier, clock: clock)
        self.reconciler = reconciler
        var r = Router()
        BillingService(orders: orders, purchases: engine, appStore: link).register(in: &r)
        AdminService(link: link, store: store, verifier: verifier, processor: processor, catalog: nil) { since in
            reconciler.run(sinceMs: since)
        }.register(in: &r)
        router = r
    }

    /// A sandbox transaction signed by the test store.
    static func jws(
        _ id: String, product: String = sub, type: String = "Auto-Renewable Subscription", original: String? = nil, token: String? = nil,
        purchase: Int64 = Shop.now - day, expires: Int64? = Shop.now + 29 * day, revoked: Int64? = nil, signed: Int64 = Shop.now,
        ownership: String = "PURCHASED"
    ) -> String {
        var t = TestStore.Transaction(
            transactionID: id, productID: product, type: type, bundleID: Shop.bundle, environment: "Sandbox", purchaseDate: purchase)
        t.originalTransactionID = original
        t.appAccountToken = token
        t.expiresDate = type == "Auto-Renewable Subscription" ? expires : nil
        t.revocationDate = revoked
        t.revocationReason = revoked == nil ? nil : 0
        t.signedDate = signed
        t.inAppOwnershipType = ownership
        return try! Shop.store.signedTransaction(t)
    }

    /// One call through the pipeline (BillingTesting's client).
    func call<Response: ProtoMessage>(_ method: String, _ request: some ProtoMessage, _: Response.Type) -> Result<Response, RPCError> {
        PipelineClient.call(router, method, request, Response.self)
    }

    func order(_ account: String, product: String = sub) -> Billing.Order {
        let r: Result<Billing.Order, BillingError> = wait { engine.orders.createOrder(.init(accountID: account, productID: product), completion: $0) }
        return try! r.get()
    }

    func restore(_ account: String, signed: [String]) {
        let r: Result<[Billing.Entitlement], BillingError> = wait {
            engine.restorePurchases(accountID: account, appReceipt: "", signedTransactions: signed, completion: $0)
        }
        #expect((try? r.get()) != nil)
    }

    /// Records a transaction nobody owns (as a notification without an account leaves it).
    func recordOrphan(_ jws: String) {
        let t = try! Shop.verifier().verifySignedTransaction(jws).get()
        let r: Result<Void, BillingError> = wait { done in
            store.write(
                abandoned: { false },
                { ledger throws(BillingError) in
                    try ledger.insert(OwnedTransaction(transaction: t, accountID: "", orderID: nil))
                }, completion: done)
        }
        #expect((try? r.get()) != nil)
    }

    func owned(_ id: String) -> OwnedTransaction? {
        let r: Result<OwnedTransaction?, BillingError> = wait { done in
            store.read({ ledger throws(BillingError) in try ledger.owned(transactionID: id) }, completion: done)
        }
        return try! r.get()
    }

    func storedOrder(_ id: String) -> Billing.Order? {
        let r: Result<Billing.Order?, BillingError> = wait { store.order(id: id, completion: $0) }
        return try! r.get()
    }
}

@Suite("Admin support calls over the in-memory App Store Server API")
struct AdminSupportTests {
    static func refusal<R>(_ r: Result<R, RPCError>) -> RPCError? {
        if case .failure(let e) = r { return e }
        return nil
    }

    static func extendRequest(_ original: String, days: Int32 = 5, reason: Int32 = 3, requestID: String = "") -> ExtendRenewalDateRequest {
        var req = ExtendRenewalDateRequest()
        req.originalTransactionID = original
        req.extendByDays = days
        req.extendReasonCode = reason
        req.requestIdentifier = requestID
        return req
    }

    @Test("ExtendRenewalDate: Apple's answer with billingd's account and expiry, in the recorded environment", arguments: Backend.all)
    func extend(_ backend: Backend) throws {
        let w = AdminWorld(backend)
        let signed = AdminWorld.jws("1000", expires: Shop.now + 29 * AdminWorld.day)
        w.api.add(signed, in: .sandbox)
        w.restore("acct-x", signed: [signed])
        let r = try w.call(AdminService.extendRenewalDate, Self.extendRequest("1000"), ExtendRenewalDateResponse.self).get()
        #expect(r.success && r.originalTransactionID == "1000" && r.effectiveTimeMs == Shop.now + 34 * AdminWorld.day)
        #expect(r.accountID == "acct-x" && r.currentExpiresTimeMs == Shop.now + 29 * AdminWorld.day && r.environment == .sandbox)
        #expect(OrderID.canonical(r.requestIdentifier) == r.requestIdentifier)
        // Only the recorded environment was asked, with what the caller gave.
        let calls = w.api.calls.filter { $0.endpoint == "extend_renewal_date" }
        #expect(calls.map(\.environment) == [.sandbox] && calls[0].detail == "5 3 \(r.requestIdentifier)")

        // Refused before Apple is asked.
        for (bad, field) in [
            (Self.extendRequest("1000", days: 0), "extend_by_days"), (Self.extendRequest("1000", days: 91), "extend_by_days"),
            (Self.extendRequest("1000", reason: 4), "extend_reason_code"), (Self.extendRequest("1000", requestID: "nope"), "request_identifier"),
            (Self.extendRequest("10a0"), "original_transaction_id"),
        ] {
            let e = try #require(Self.refusal(w.call(AdminService.extendRenewalDate, bad, ExtendRenewalDateResponse.self)))
            #expect(e.code == .invalidArgument && e.reason == "INVALID_FIELD" && e.metadata["field"] == field)
        }
        #expect(w.api.calls.filter { $0.endpoint == "extend_renewal_date" }.count == 1)

        // Apple's refusals in the caller's terms.
        _ = try w.call(AdminService.extendRenewalDate, Self.extendRequest("1000"), ExtendRenewalDateResponse.self).get()
        let third = try #require(Self.refusal(w.call(AdminService.extendRenewalDate, Self.extendRequest("1000"), ExtendRenewalDateResponse.self)))
        #expect(third.code == .failedPrecondition && third.reason == "APPSTORE_API_REFUSED" && third.metadata["apple_error_code"] == "4030005")
        w.api.failNext("extend_renewal_date", with: .rejected(status: 400, code: 4_000_009, message: "Invalid extend by days value."))
        let apple400 = try #require(Self.refusal(w.call(AdminService.extendRenewalDate, Self.extendRequest("1000"), ExtendRenewalDateResponse.self)))
        #expect(apple400.reason == "INVALID_FIELD" && apple400.metadata["field"] == "extend_by_days")
        w.api.failNext("extend_renewal_date", with: .notFound(code: 4_040_006, message: "Original transaction id not found. Please try again."))
        let retry = try #require(Self.refusal(w.call(AdminService.extendRenewalDate, Self.extendRequest("1000"), ExtendRenewalDateResponse.self)))
        #expect(retry.code == .unavailable && retry.reason == "APPSTORE_API_UNAVAILABLE")
        // Unknown to billingd and to Apple: production, then sandbox.
        let before = w.api.calls.count
        let unknown = try #require(Self.refusal(w.call(AdminService.extendRenewalDate, Self.extendRequest("9999"), ExtendRenewalDateResponse.self)))
        #expect(unknown.code == .notFound && unknown.reason == "TRANSACTION_NOT_FOUND")
        #expect(w.api.calls.dropFirst(before).map(\.environment) == [.production, .sandbox])
    }

    @Test("ExtendRenewalDatesForAll and GetExtensionStatus", arguments: Backend.all)
    func extendAll(_ backend: Backend) throws {
        let w = AdminWorld(backend)
        w.api.add(AdminWorld.jws("2000"), in: .sandbox)
        w.api.add(AdminWorld.jws("2100", expires: Shop.now - AdminWorld.day), in: .sandbox)
        var req = ExtendRenewalDatesForAllRequest()
        req.productID = AdminWorld.sub
        req.extendByDays = 3
        req.extendReasonCode = 1
        req.storefrontCountryCodes = ["USA", "FRA"]
        let r = try w.call(AdminService.extendRenewalDatesForAll, req, ExtendRenewalDatesForAllResponse.self).get()
        #expect(r.environment == .sandbox && OrderID.canonical(r.requestIdentifier) == r.requestIdentifier)
        #expect(w.api.calls.last?.detail == "3 1 \(r.requestIdentifier) USA,FRA")
        var status = GetExtensionStatusRequest()
        status.productID = AdminWorld.sub
        status.requestIdentifier = r.requestIdentifier
        let s = try w.call(AdminService.getExtensionStatus, status, GetExtensionStatusResponse.self).get()
        #expect(s.complete && s.succeededCount == 1 && s.failedCount == 0 && s.requestIdentifier == r.requestIdentifier)

        status.requestIdentifier = "0f8fad5b-d9cb-469f-a165-70867728950e"
        let unknown = try #require(Self.refusal(w.call(AdminService.getExtensionStatus, status, GetExtensionStatusResponse.self)))
        #expect(unknown.reason == "INVALID_FIELD" && unknown.metadata["field"] == "request_identifier")
        var bad = req
        bad.storefrontCountryCodes = ["usa"]
        let storefront = try #require(Self.refusal(w.call(AdminService.extendRenewalDatesForAll, bad, ExtendRenewalDatesForAllResponse.self)))
        #expect(storefront.metadata["field"] == "storefront_country_codes")
        bad = req
        bad.productID = ""
        let product = try #require(Self.refusal(w.call(AdminService.extendRenewalDatesForAll, bad, ExtendRenewalDatesForAllResponse.self)))
        #expect(product.metadata["field"] == "product_id")
        bad = req
        bad.environment = .xcode
        let env = try #require(Self.refusal(w.call(AdminService.extendRenewalDatesForAll, bad, ExtendRenewalDatesForAllResponse.self)))
        #expect(env.metadata["field"] == "environment")
    }

    static func tokenRequest(_ original: String, _ order: String) -> SetAppAccountTokenRequest {
        var req = SetAppAccountTokenRequest()
        req.originalTransactionID = original
        req.orderID = order
        return req
    }

    @Test("SetAppAccountToken moves an orphan purchase onto the order's account and completes the order", arguments: Backend.all)
    func setTokenOrphan(_ backend: Backend) throws {
        let w = AdminWorld(backend)
        let signed = AdminWorld.jws("3000", product: "com.example.premium", type: "Non-Consumable")
        w.api.add(signed, in: .sandbox)
        w.recordOrphan(signed)
        let order = w.order("acct-a", product: "com.example.premium")
        let r = try w.call(AdminService.setAppAccountToken, Self.tokenRequest("3000", order.id), SetAppAccountTokenResponse.self).get()
        #expect(r.orderCompleted && r.order?.state == .completed && r.order?.transactionID == "3000" && r.environment == .sandbox)
        #expect(r.transactions.map(\.transactionID) == ["3000"])
        #expect(w.api.appAccountTokens == ["3000": order.id])
        #expect(w.owned("3000")?.accountID == "acct-a" && w.owned("3000")?.orderID == order.id)
        // Calling again changes nothing and still answers.
        let again = try w.call(AdminService.setAppAccountToken, Self.tokenRequest("3000", order.id), SetAppAccountTokenResponse.self).get()
        #expect(!again.orderCompleted && again.order?.state == .completed)

        // Another account's order: refused before Apple is asked.
        let calls = w.api.calls.count
        let other = w.order("acct-b", product: "com.example.premium")
        let e = try #require(Self.refusal(w.call(AdminService.setAppAccountToken, Self.tokenRequest("3000", other.id), SetAppAccountTokenResponse.self)))
        #expect(e.code == .alreadyExists && e.reason == "TRANSACTION_ALREADY_CLAIMED")
        #expect(w.api.calls.count == calls && w.api.appAccountTokens["3000"] == order.id)
        #expect(w.storedOrder(other.id)?.state == .pending)
        let nobody = Self.tokenRequest("3000", "0f8fad5b-d9cb-469f-a165-70867728950e")
        let missing = try #require(Self.refusal(w.call(AdminService.setAppAccountToken, nobody, SetAppAccountTokenResponse.self)))
        #expect(missing.code == .notFound && missing.reason == "ORDER_NOT_FOUND")
        let malformed = try #require(Self.refusal(w.call(AdminService.setAppAccountToken, Self.tokenRequest("3000", "x"), SetAppAccountTokenResponse.self)))
        #expect(malformed.metadata["field"] == "order_id")
    }

    @Test("SetAppAccountToken fetches what billingd never recorded; a token naming another account's order is refused", arguments: Backend.all)
    func setTokenFetched(_ backend: Backend) throws {
        let w = AdminWorld(backend)
        // Never seen by billingd: Get Transaction Info (production does not know it; the sandbox does), verified.
        w.api.add(AdminWorld.jws("4000"), in: .sandbox)
        w.api.add(AdminWorld.jws("4001", original: "4000", purchase: Shop.now - 1000), in: .sandbox)
        let order = w.order("acct-c")
        let r = try w.call(AdminService.setAppAccountToken, Self.tokenRequest("4000", order.id), SetAppAccountTokenResponse.self).get()
        #expect(r.orderCompleted && w.owned("4000")?.accountID == "acct-c")
        #expect(w.api.calls.filter { $0.endpoint == "transaction_info" }.map(\.environment) == [.production, .sandbox])
        // A renewal's id is not an original transaction id.
        let renewal = try #require(
            Self.refusal(w.call(AdminService.setAppAccountToken, Self.tokenRequest("4001", w.order("acct-c").id), SetAppAccountTokenResponse.self)))
        #expect(renewal.metadata["field"] == "original_transaction_id")
        // Paid for acct-d's order (its token), never submitted: acct-e's order cannot take it, and Apple is not asked.
        let paidFor = w.order("acct-d", product: "com.example.premium")
        w.api.add(AdminWorld.jws("5000", product: "com.example.premium", type: "Non-Consumable", token: paidFor.id), in: .sandbox)
        let e = try #require(
            Self.refusal(
                w.call(
                    AdminService.setAppAccountToken, Self.tokenRequest("5000", w.order("acct-e", product: "com.example.premium").id),
                    SetAppAccountTokenResponse.self)))
        #expect(e.reason == "TRANSACTION_ALREADY_CLAIMED" && w.api.appAccountTokens["5000"] == nil && w.owned("5000") == nil)
        // A Family Sharing grant has no token of its own.
        w.api.add(AdminWorld.jws("6000", ownership: "FAMILY_SHARED"), in: .sandbox)
        let family = try #require(Self.refusal(w.call(AdminService.setAppAccountToken, Self.tokenRequest("6000", order.id), SetAppAccountTokenResponse.self)))
        #expect(family.metadata["field"] == "original_transaction_id")
    }

    @Test("reconciliation reads refund history for customers restored by id and refunds as a REFUND notification does", arguments: Backend.all)
    func refundHistory(_ backend: Backend) throws {
        let w = AdminWorld(backend)
        let order = w.order("acct-r", product: "com.example.premium")
        let bought = AdminWorld.jws("7000", product: "com.example.premium", type: "Non-Consumable", token: order.id, signed: Shop.now - 5000)
        w.api.add(bought, customer: "rita", in: .sandbox)
        let paid: Result<CompletedPurchase, BillingError> = wait {
            w.engine.submitReceipt(orderID: order.id, proof: .signedTransaction(bought), transactionID: "", completion: $0)
        }
        #expect((try? paid.get()) != nil)
        var restore = RestorePurchasesRequest()
        restore.accountID = "acct-r"
        restore.transactionIDs = ["7000", "7000"]
        _ = try w.call(BillingService.restorePurchases, restore, RestorePurchasesResponse.self).get()
        _ = try w.call(BillingService.restorePurchases, restore, RestorePurchasesResponse.self).get()
        // Refunded at Apple; no notification says so.
        w.api.add(
            AdminWorld.jws("7000", product: "com.example.premium", type: "Non-Consumable", token: order.id, revoked: Shop.now - 1000),
            customer: "rita", in: .sandbox)
        let report = try w.reconciler.run().get()
        #expect(report.refundHistories == 1 && report.refundsApplied == 1 && report.refundsRejected == 0 && report.error == nil)
        #expect(w.api.calls.filter { $0.endpoint == "refund_history" }.map(\.id) == ["7000"])
        #expect(w.storedOrder(order.id)?.state == .refunded)
        #expect(w.owned("7000")?.transaction.revocationTimeMs == Shop.now - 1000)
        let events: Result<[EventRecord], BillingError> = wait { w.store.events(after: 0, limit: 100, accountID: "acct-r", completion: $0) }
        let refunds = try events.get().filter { $0.cause == "refund_history" }.map(\.kind)
        #expect(refunds == [.orderRefunded, .entitlementRevoked])
        // Read again: nothing changes.
        let again = try w.reconciler.run().get()
        #expect(again.refundHistories == 1 && again.refundsApplied == 0)
        // Through the admin service, the counts come back too.
        let admin = try w.call(AdminService.reconcile, ReconcileRequest(), ReconcileResponse.self).get()
        #expect(admin.refundHistories == 1 && admin.refundsApplied == 0)
        // Apple unavailable: the run reports it.
        w.api.failNext("refund_history", with: .unavailable("down"))
        #expect(try w.reconciler.run().get().error?.contains("refund history") == true)
        // A customer Apple no longer knows is read as empty, never an error that holds up the others.
        w.api.failNext("refund_history", with: .notFound(code: 4_040_010, message: "Transaction id not found."))
        let gone = try w.reconciler.run().get()
        #expect(gone.error == nil && gone.refundHistories == 1 && gone.refundsApplied == 0)
    }

    @Test("GetAppTransaction verifies Apple's answer", arguments: [Backend.all[0]])
    func appTransaction(_ backend: Backend) throws {
        let w = AdminWorld(backend)
        w.api.add(AdminWorld.jws("8000"), customer: "ana", in: .sandbox)
        w.api.add(AdminWorld.jws("8100"), customer: "bo", in: .sandbox)
        let app = TestStore.AppTransaction(bundleID: Shop.bundle, receiptType: "Sandbox", originalPurchaseDate: Shop.now - 9000, receiptCreationDate: Shop.now)
        let signed = try Shop.store.signedAppTransaction(app)
        w.api.addAppTransaction(signed, customer: "ana", in: .sandbox)
        var req = GetAppTransactionRequest()
        req.transactionID = "8000"
        let r = try w.call(AdminService.getAppTransaction, req, GetAppTransactionResponse.self).get()
        #expect(r.environment == .sandbox && r.bundleID == Shop.bundle && r.originalPurchaseTimeMs == Shop.now - 9000 && r.signedAppTransaction == signed)
        req.transactionID = "8100"
        let none = try #require(Self.refusal(w.call(AdminService.getAppTransaction, req, GetAppTransactionResponse.self)))
        #expect(none.code == .notFound && none.reason == "TRANSACTION_NOT_FOUND")
    }

    @Test("without App Store Server API credentials every support call is APPSTORE_API_NOT_CONFIGURED")
    func notConfigured() throws {
        var r = Router()
        AdminService(link: nil, store: InMemoryOrderStore(), verifier: nil, processor: nil, catalog: nil) { _ in nil }.register(in: &r)
        for method in [
            AdminService.extendRenewalDate, AdminService.extendRenewalDatesForAll, AdminService.getExtensionStatus,
            AdminService.setAppAccountToken, AdminService.getAppTransaction,
        ] {
            guard case .unary(_, let handler) = r.resolve(path: "/" + method) else {
                Issue.record("\(method) is not registered")
                continue
            }
            let result: Result<[UInt8], RPCError> = wait { done in handler(CallContext(method: method), [], Responder { done($0) }) }
            guard case .failure(let e) = result else {
                Issue.record("\(method) answered")
                continue
            }
            #expect(e.code == .failedPrecondition && e.reason == "APPSTORE_API_NOT_CONFIGURED", "\(method)")
        }
    }
}
