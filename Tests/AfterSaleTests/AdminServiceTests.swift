import BillingTesting
import AfterSale
import AppStore
import AppStoreAPI
import Billing
import BillingAPI
import BillingService
import ProtoWire
import RPC
import Testing
import TestSupport

/// billing.admin.v1.Admin's own calls (Reconcile, LookUpOrder, RequestTestNotification, GetTestNotificationStatus)
/// through the router, over the in-memory App Store Server API: input refused before Apple is asked, Apple's
/// failures answered with the documented errors (docs/ERRORS.md).
@Suite("Admin calls over the in-memory App Store Server API")
struct AdminServiceTests {
    static func refusal<R>(_ r: Result<R, RPCError>) -> RPCError? {
        if case .failure(let e) = r { return e }
        return nil
    }

    /// One unary call on `router` through the pipeline (BillingTesting's client), as the transport makes it.
    static func call<Response: ProtoMessage>(
        _ router: Router, _ method: String, _ request: some ProtoMessage, _: Response.Type
    ) -> Result<Response, RPCError> {
        PipelineClient.call(router, method, request, Response.self)
    }

    /// An admin service whose reconciliation answers `reconcile`, with or without a verifier.
    static func router(_ w: AdminWorld, verifier: Bool = true, reconcile: @escaping @Sendable (Int64?) -> Result<Reconciler.Report, BillingError>?) -> Router {
        var r = Router()
        let link = AppStoreLink(client: w.api, environments: [.production, .sandbox])
        AdminService(link: link, store: w.store, verifier: verifier ? Shop.verifier() : nil, processor: nil, catalog: nil, reconcile: reconcile)
            .register(in: &r)
        return r
    }

    static func reconcileRequest(since: Int64) -> ReconcileRequest {
        var r = ReconcileRequest()
        r.sinceTimeMs = since
        return r
    }

    @Test("Reconcile: its input checked, its counts answered, Apple's and the run's failures in the documented terms")
    func reconcile() throws {
        let w = AdminWorld(Backend.all[0])
        let order = w.order("acct-rc", product: "com.example.premium")
        let signed = Shop.now - 60_000
        w.api.addNotification(ReconcilerTests.charge("920", order: order.id, signed: signed), signedMs: signed, in: .sandbox)
        let r = try w.call(AdminService.reconcile, ReconcileRequest(), ReconcileResponse.self).get()
        #expect(r.applied == 1 && r.duplicate == 0 && r.rejected == 0 && r.pages == 2 && r.endTimeMs == Shop.now)
        #expect(w.storedOrder(order.id)?.state == .completed)

        for since in [-1, SystemClock().nowMilliseconds() + 3_600_000] {
            let e = try #require(Self.refusal(w.call(AdminService.reconcile, Self.reconcileRequest(since: since), ReconcileResponse.self)))
            #expect(e.code == .invalidArgument && e.reason == "INVALID_FIELD" && e.metadata["field"] == "since_time_ms")
        }
        // Apple down, or refusing billingd's credentials: UNAVAILABLE APPSTORE_API_UNAVAILABLE.
        for failure: AppStoreAPIError in [.unavailable("HTTP 503 after 3 tries"), .rejected(status: 401, code: 0, message: "Unauthenticated")] {
            w.api.failNext("notification_history", with: failure)
            let e = try #require(Self.refusal(w.call(AdminService.reconcile, Self.reconcileRequest(since: signed - 1), ReconcileResponse.self)))
            #expect(e.code == .unavailable && e.reason == "APPSTORE_API_UNAVAILABLE", "\(failure)")
        }
        // A run already going: RESOURCE_EXHAUSTED OVERLOADED; no way to verify notifications: APPSTORE_API_NOT_CONFIGURED.
        let busy = Self.router(w) { _ in .failure(.overloaded) }
        let overloaded = try #require(Self.refusal(Self.call(busy, AdminService.reconcile, ReconcileRequest(), ReconcileResponse.self)))
        #expect(overloaded.code == .resourceExhausted && overloaded.reason == "OVERLOADED")
        let none = Self.router(w) { _ in nil }
        let unconfigured = try #require(Self.refusal(Self.call(none, AdminService.reconcile, ReconcileRequest(), ReconcileResponse.self)))
        #expect(unconfigured.code == .failedPrecondition && unconfigured.reason == "APPSTORE_API_NOT_CONFIGURED")
    }

    static func lookUp(_ id: String) -> LookUpOrderRequest {
        var r = LookUpOrderRequest()
        r.customerOrderID = id
        return r
    }

    @Test("LookUpOrder: the verified transactions with billingd's accounts and orders; unknown ids, refusals and failures", arguments: Backend.all)
    func lookUpOrder(_ backend: Backend) throws {
        let w = AdminWorld(backend)
        defer { w.store.close() }
        let order = w.order("acct-lu", product: "com.example.premium")
        let bought = AdminWorld.jws("9700", product: "com.example.premium", type: "Non-Consumable", token: order.id)
        w.api.add(bought, in: .sandbox)
        w.api.add(AdminWorld.jws("9701", product: "com.example.other", type: "Non-Consumable"), in: .sandbox)
        w.api.addOrder("MQ7GH2XK1", transactionIDs: ["9700", "9701"], in: .sandbox)
        let paid: Result<CompletedPurchase, BillingError> = wait {
            w.engine.submitReceipt(orderID: order.id, proof: .signedTransaction(bought), transactionID: "", completion: $0)
        }
        #expect((try? paid.get()) != nil)

        let r = try w.call(AdminService.lookUpOrder, Self.lookUp("MQ7GH2XK1"), LookUpOrderResponse.self).get()
        #expect(r.found && r.environment == .sandbox)
        #expect(r.transactions.map(\.transactionID) == ["9700", "9701"])
        #expect(r.accountIDs == ["acct-lu"] && r.orders.map(\.orderID) == [order.id])
        // Production first (it does not know the order), then the sandbox.
        #expect(w.api.calls.filter { $0.endpoint == "look_up_order" }.map(\.environment) == [.production, .sandbox])

        let unknown = try w.call(AdminService.lookUpOrder, Self.lookUp("ZZZ999"), LookUpOrderResponse.self).get()
        #expect(!unknown.found && unknown.transactions.isEmpty)

        // Refused before Apple is asked.
        let before = w.api.calls.count
        for bad in ["", "MQ7-GH2", String(repeating: "A", count: 65)] {
            let e = try #require(Self.refusal(w.call(AdminService.lookUpOrder, Self.lookUp(bad), LookUpOrderResponse.self)))
            #expect(e.code == .invalidArgument && e.metadata["field"] == "customer_order_id", "\(bad)")
        }
        #expect(w.api.calls.count == before)

        // Apple unavailable, or answering what billingd cannot use: UNAVAILABLE APPSTORE_API_UNAVAILABLE.
        for failure: AppStoreAPIError in [.unavailable("timed out"), .rejected(status: 429, code: 4_290_000, message: "Rate limit exceeded.")] {
            w.api.failNext("look_up_order", with: failure)
            let e = try #require(Self.refusal(w.call(AdminService.lookUpOrder, Self.lookUp("MQ7GH2XK1"), LookUpOrderResponse.self)))
            #expect(e.code == .unavailable && e.reason == "APPSTORE_API_UNAVAILABLE", "\(failure)")
        }
        // Apple's answer is verified like a proof: another app's transaction is refused, never answered.
        let foreign = TestStore.Transaction(
            transactionID: "9702", productID: "com.example.premium", type: "Non-Consumable", bundleID: "com.example.elsewhere",
            environment: "Sandbox", purchaseDate: Shop.now - 1000)
        w.api.add(try Shop.store.signedTransaction(foreign), in: .sandbox)
        w.api.addOrder("OTHERAPP1", transactionIDs: ["9702"], in: .sandbox)
        let wrongApp = try #require(Self.refusal(w.call(AdminService.lookUpOrder, Self.lookUp("OTHERAPP1"), LookUpOrderResponse.self)))
        #expect(wrongApp.code == .invalidArgument && wrongApp.reason == "WRONG_APP")
        // Without trust roots, Apple's answer cannot be verified: RECEIPT_UNTRUSTED, Apple not asked.
        let blind = Self.router(w, verifier: false) { _ in nil }
        let calls = w.api.calls.count
        let e = try #require(Self.refusal(Self.call(blind, AdminService.lookUpOrder, Self.lookUp("MQ7GH2XK1"), LookUpOrderResponse.self)))
        #expect(e.code == .invalidArgument && e.reason == "RECEIPT_UNTRUSTED" && w.api.calls.count == calls)
    }

    @Test("RequestTestNotification and GetTestNotificationStatus: environments, tokens, Apple's 404 and failures")
    func testNotifications() throws {
        let w = AdminWorld(Backend.all[0])
        var request = RequestTestNotificationRequest()
        request.environment = .sandbox
        let r = try w.call(AdminService.requestTestNotification, request, RequestTestNotificationResponse.self).get()
        #expect(!r.testNotificationToken.isEmpty && r.environment == .sandbox)
        #expect(w.api.calls.last?.endpoint == "request_test_notification" && w.api.calls.last?.environment == .sandbox)
        request.environment = .xcode
        let xcode = try #require(Self.refusal(w.call(AdminService.requestTestNotification, request, RequestTestNotificationResponse.self)))
        #expect(xcode.code == .invalidArgument && xcode.metadata["field"] == "environment")
        request.environment = .production
        w.api.failNext("request_test_notification", with: .unavailable("HTTP 500"))
        let down = try #require(Self.refusal(w.call(AdminService.requestTestNotification, request, RequestTestNotificationResponse.self)))
        #expect(down.code == .unavailable && down.reason == "APPSTORE_API_UNAVAILABLE")
        #expect(w.api.calls.last?.environment == .production)

        var status = GetTestNotificationStatusRequest()
        status.environment = .sandbox
        for bad in ["", String(repeating: "t", count: 129)] {
            status.testNotificationToken = bad
            let e = try #require(Self.refusal(w.call(AdminService.getTestNotificationStatus, status, GetTestNotificationStatusResponse.self)))
            #expect(e.code == .invalidArgument && e.metadata["field"] == "test_notification_token")
        }
        // Apple's 404 (unknown or expired token) names the field; other failures are APPSTORE_API_UNAVAILABLE.
        status.testNotificationToken = r.testNotificationToken
        let expired = try #require(Self.refusal(w.call(AdminService.getTestNotificationStatus, status, GetTestNotificationStatusResponse.self)))
        #expect(expired.code == .invalidArgument && expired.metadata["field"] == "test_notification_token")
        w.api.failNext("test_notification_status", with: .unavailable("HTTP 502"))
        let failed = try #require(Self.refusal(w.call(AdminService.getTestNotificationStatus, status, GetTestNotificationStatusResponse.self)))
        #expect(failed.code == .unavailable && failed.reason == "APPSTORE_API_UNAVAILABLE")
    }

    @Test("without App Store Server API credentials the admin calls are APPSTORE_API_NOT_CONFIGURED")
    func notConfigured() throws {
        var r = Router()
        AdminService(link: nil, store: InMemoryOrderStore(), verifier: nil, processor: nil, catalog: nil) { _ in nil }.register(in: &r)
        var status = GetTestNotificationStatusRequest()
        status.testNotificationToken = "t"
        let answers: [(String, RPCError?)] = [
            (AdminService.reconcile, Self.refusal(Self.call(r, AdminService.reconcile, ReconcileRequest(), ReconcileResponse.self))),
            (AdminService.lookUpOrder, Self.refusal(Self.call(r, AdminService.lookUpOrder, Self.lookUp("MQ7GH2XK1"), LookUpOrderResponse.self))),
            (
                AdminService.requestTestNotification,
                Self.refusal(Self.call(r, AdminService.requestTestNotification, RequestTestNotificationRequest(), RequestTestNotificationResponse.self))
            ),
            (
                AdminService.getTestNotificationStatus,
                Self.refusal(Self.call(r, AdminService.getTestNotificationStatus, status, GetTestNotificationStatusResponse.self))
            ),
        ]
        for (method, e) in answers {
            #expect(e?.code == .failedPrecondition && e?.reason == "APPSTORE_API_NOT_CONFIGURED", "\(method)")
        }
    }
}
