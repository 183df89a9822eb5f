import AfterSale
import AppStore
import AppStoreAPI
import Billing
import BillingService
import Crypto
import Synchronization
import Testing
import TestSupport

/// `--consumption-answers auto`: a CONSUMPTION_REQUEST answered through Send Consumption Information, wired as the
/// daemon wires it (after the notification commits), over the in-memory App Store Server API and every store.
struct Consumption {
    /// What the responder reported: transaction id, result, detail.
    final class Reports: Sendable {
        let list = Mutex<[(id: String, result: String, detail: String)]>([])
    }

    let h: Harness
    let api = InMemoryAppStoreAPI(nowMs: { Shop.now })
    let responder: ConsumptionResponder
    let processor: NotificationProcessor
    let reported = Reports()

    init(_ backend: Backend) {
        let h = Harness(backend)
        self.h = h
        let reports = reported
        let responder = ConsumptionResponder(client: api, store: h.store) { id, result, detail in
            reports.list.withLock { $0.append((id, result, detail)) }
        }
        self.responder = responder
        processor = NotificationProcessor(
            settings: VerifierSettings(
                anchors: TrustAnchors(roots: [Shop.store.root]), bundleIDs: [Shop.bundle], environments: [.xcode, .sandbox],
                now: { Shop.now }),
            store: h.store, catalog: nil, clock: ManualClock(milliseconds: Shop.now)
        ) { summary, result in
            if result == .applied, summary.type == "CONSUMPTION_REQUEST" {
                responder.answer(transactionID: summary.transactionID, environment: summary.environment)
            }
        }
    }

    static func coins(_ id: String, token: String?) -> TestStore.Transaction {
        var t = TestStore.Transaction(
            transactionID: id, productID: "com.example.coins", type: "Consumable", bundleID: Shop.bundle, environment: "Sandbox",
            purchaseDate: Shop.now - 60_000)
        t.appAccountToken = token
        t.signedDate = Shop.now - 60_000
        return t
    }

    /// An order for coins, paid by transaction `id` (known to the in-memory API too).
    func paidOrder(_ id: String, account: String) -> Billing.Order {
        let order = h.order(account, product: "com.example.coins")
        let jws = try! Shop.store.signedTransaction(Self.coins(id, token: order.id))
        api.add(jws, in: .sandbox)
        #expect((try? h.submit(order.id, .signedTransaction(jws)).get()) != nil)
        return order
    }

    /// Delivers a CONSUMPTION_REQUEST for transaction `id`.
    func request(_ id: String, token: String?, uuid: String? = nil) -> NotificationProcessor.Outcome {
        var n = TestStore.Notification(type: "CONSUMPTION_REQUEST", uuid: uuid, signedDate: Shop.now - 1000, bundleID: Shop.bundle, environment: "Sandbox")
        n.transaction = Self.coins(id, token: token)
        return deliver(n)
    }

    func deliver(_ n: TestStore.Notification) -> NotificationProcessor.Outcome {
        let signed = try! Shop.store.signedNotification(n)
        let outcome: NotificationProcessor.Outcome = wait { done in processor.process(signedPayload: signed) { o, _ in done(o) } }
        return outcome
    }

    /// The reports once there are `n` (waits at most 5 s).
    func reports(count n: Int) -> [(id: String, result: String, detail: String)] {
        _ = eventually { reported.list.withLock { $0.count } >= n }
        return reported.list.withLock { $0 }
    }

    func sent(_ endpoint: String) -> [InMemoryAppStoreAPI.Call] { api.calls.filter { $0.endpoint == endpoint } }
}

@Suite("consumption answers")
struct ConsumptionResponderTests {
    @Test("a CONSUMPTION_REQUEST for a delivered purchase is answered DELIVERED, once, in its environment", arguments: Backend.all)
    func delivered(_ backend: Backend) {
        let c = Consumption(backend)
        defer { c.h.store.close() }
        let order = c.paidOrder("7700", account: "acct-c")
        let uuid = "6f1b6c8e-2a7d-4e0f-9b1c-3d5e7f9a1b2c"
        #expect(c.request("7700", token: order.id, uuid: uuid) == .done(.applied))
        let reports = c.reports(count: 1)
        #expect(reports.map(\.id) == ["7700"] && reports.map(\.result) == ["sent"] && reports.map(\.detail) == ["DELIVERED"])
        let calls = c.sent("send_consumption")
        #expect(calls.map(\.id) == ["7700"] && calls.map(\.environment) == [.sandbox] && calls.map(\.detail) == ["DELIVERED"])
        // Apple redelivers the request: a duplicate, not answered again.
        #expect(c.request("7700", token: order.id, uuid: uuid) == .done(.duplicate))
        // A request that follows is answered; by then the first one's answer has long been sent.
        let second = c.paidOrder("7701", account: "acct-c")
        #expect(c.request("7701", token: second.id) == .done(.applied))
        #expect(c.reports(count: 2).map(\.id) == ["7700", "7701"])
        #expect(c.sent("send_consumption").map(\.id) == ["7700", "7701"])
    }

    @Test("a server without v2 (404) gets the same answer through v1")
    func fallsBackToV1() {
        let c = Consumption(Backend.all[0])
        _ = c.paidOrder("7710", account: "acct-v")
        c.api.failNext("send_consumption", with: .notFound(code: 4_040_000, message: "Not Found"))
        c.responder.answer(transactionID: "7710", environment: "Sandbox")
        #expect(c.reports(count: 1).map(\.result) == ["sent"])
        #expect(c.sent("send_consumption_v1").map(\.id) == ["7710"] && c.sent("send_consumption_v1").map(\.detail) == ["DELIVERED"])
    }

    @Test("no answer for what billingd cannot vouch for: an unknown transaction, a refunded order, an environment without an API")
    func noRecord() {
        let c = Consumption(Backend.all[0])
        c.responder.answer(transactionID: "7720", environment: "Sandbox")
        let order = c.paidOrder("7721", account: "acct-n")
        // Refunded since (REFUND): the order was delivered, then taken back.
        var refunded = Consumption.coins("7721", token: order.id)
        refunded.revocationDate = Shop.now - 500
        refunded.revocationReason = 0
        refunded.signedDate = Shop.now - 500
        var refund = TestStore.Notification(type: "REFUND", signedDate: Shop.now - 500, bundleID: Shop.bundle, environment: "Sandbox")
        refund.transaction = refunded
        #expect(c.deliver(refund) == .done(.applied))
        #expect(c.h.get(order.id).state == .refunded)
        c.responder.answer(transactionID: "7721", environment: "Sandbox")
        c.responder.answer(transactionID: "7722", environment: "Xcode")
        c.responder.answer(transactionID: "", environment: "Sandbox")
        let reports = c.reports(count: 4)
        #expect(reports.count == 4 && reports.allSatisfy { $0.result == "no_record" })
        #expect(Set(reports.map(\.id)) == ["7720", "7721", "7722", ""])
        #expect(reports.first { $0.id == "7721" }?.detail.contains("refunded") == true)
        #expect(c.sent("send_consumption").isEmpty && c.sent("send_consumption_v1").isEmpty)
    }

    @Test("Apple's failure is reported as failed, not retried")
    func failed() {
        let c = Consumption(Backend.all[0])
        _ = c.paidOrder("7730", account: "acct-f")
        c.api.failNext("send_consumption", with: .unavailable("HTTP 503"))
        c.responder.answer(transactionID: "7730", environment: "Sandbox")
        let reports = c.reports(count: 1)
        #expect(reports.map(\.result) == ["failed"] && reports.first?.detail.contains("503") == true)
        #expect(c.sent("send_consumption").count == 1 && c.sent("send_consumption_v1").isEmpty)
    }
}
