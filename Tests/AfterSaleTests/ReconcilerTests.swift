import AfterSale
import AppStore
import AppStoreAPI
import Billing
import BillingAPI
import BillingService
import Foundation
import Testing
import TestSupport

/// `Reconciler` over the in-memory App Store Server API (pages of 2) and every store: notifications the endpoint
/// missed, applied once; ranges that failed read again; refunds found in refund history applied exactly once.
@Suite("reconciliation")
struct ReconcilerTests {
    static let minute: Int64 = 60_000

    /// A sandbox purchase notification (ONE_TIME_CHARGE) for a non-consumable paid for `order`.
    static func charge(_ id: String, order: String, signed: Int64) -> String {
        var t = TestStore.Transaction(
            transactionID: id, productID: "com.example.premium", type: "Non-Consumable", bundleID: Shop.bundle, environment: "Sandbox",
            purchaseDate: signed - 1000)
        t.appAccountToken = order
        t.signedDate = signed
        var n = TestStore.Notification(type: "ONE_TIME_CHARGE", signedDate: signed, bundleID: Shop.bundle, environment: "Sandbox")
        n.transaction = t
        return try! Shop.store.signedNotification(n)
    }

    func events(_ w: AdminWorld, _ account: String) -> [EventRecord] {
        let r: Result<[EventRecord], BillingError> = wait { w.store.events(after: 0, limit: 1000, accountID: account, completion: $0) }
        return (try? r.get()) ?? []
    }

    @Test("missed notifications are fetched page by page and applied once; the next run finds them duplicates", arguments: Backend.all)
    func missedNotifications(_ backend: Backend) throws {
        let w = AdminWorld(backend)
        defer { w.store.close() }
        let orders = (0..<3).map { _ in w.order("acct-n", product: "com.example.premium") }
        for (i, order) in orders.enumerated() {
            let signed = Shop.now - Int64(10 - i) * Self.minute
            w.api.addNotification(Self.charge("90\(i)", order: order.id, signed: signed), signedMs: signed, in: .sandbox)
        }
        let first = try w.reconciler.run().get()
        #expect(first.error == nil)
        #expect(first.applied == 3 && first.duplicate == 0 && first.rejected == 0)
        // Production (nothing there) first, then the sandbox in pages of two.
        let history = w.api.calls.filter { $0.endpoint == "notification_history" }
        #expect(history.map(\.environment) == [.production, .sandbox, .sandbox])
        #expect(orders.allSatisfy { w.storedOrder($0.id)?.state == .completed })
        #expect(events(w, "acct-n").filter { $0.kind == .orderCompleted }.count == 3)

        let second = try w.reconciler.run().get()
        #expect(second.error == nil && second.applied == 0 && second.duplicate == 3)
        #expect(events(w, "acct-n").filter { $0.kind == .orderCompleted }.count == 3)
    }

    @Test("a range Apple failed to answer is read again from its start by the next run", arguments: [Backend.all[0]])
    func failedRangeReadAgain(_ backend: Backend) throws {
        let w = AdminWorld(backend)
        let order = w.order("acct-f", product: "com.example.premium")
        let signed = Shop.now - 5 * Self.minute
        w.api.addNotification(Self.charge("910", order: order.id, signed: signed), signedMs: signed, in: .sandbox)
        w.api.failNext("notification_history", with: .unavailable("HTTP 503"))
        let first = try w.reconciler.run().get()
        // Production failed; the sandbox was still read.
        #expect(first.error?.contains("Production") == true && first.applied == 1)
        func starts(_ env: AppStoreAPIEnvironment) -> [String] {
            w.api.calls.filter { $0.endpoint == "notification_history" && $0.environment == env }.map { String($0.detail.split(separator: "-")[0]) }
        }
        let second = try w.reconciler.run().get()
        #expect(second.error == nil && second.duplicate == 1)
        // Production starts where the failed range started; the sandbox moves on to the newest recorded less the margin.
        let production = starts(.production)
        #expect(production.count == 2 && production[0] == production[1])
        let sandbox = starts(.sandbox).compactMap { Int64($0) }
        #expect(sandbox.count == 2 && sandbox[1] == signed - 3_600_000 && sandbox[1] > sandbox[0])
    }

    @Test("a refund found in refund history is applied exactly once, even when its REFUND notification is fetched later", arguments: Backend.all)
    func refundExactlyOnce(_ backend: Backend) throws {
        let w = AdminWorld(backend)
        defer { w.store.close() }
        let order = w.order("acct-q", product: "com.example.premium")
        let bought = AdminWorld.jws("9500", product: "com.example.premium", type: "Non-Consumable", token: order.id, signed: Shop.now - 50_000)
        w.api.add(bought, customer: "quinn", in: .sandbox)
        let paid: Result<CompletedPurchase, BillingError> = wait {
            w.engine.submitReceipt(orderID: order.id, proof: .signedTransaction(bought), transactionID: "", completion: $0)
        }
        #expect((try? paid.get()) != nil)
        // Restored by transaction id: billingd now reads this customer's refund history.
        var restore = RestorePurchasesRequest()
        restore.accountID = "acct-q"
        restore.transactionIDs = ["9500"]
        _ = try w.call(BillingService.restorePurchases, restore, RestorePurchasesResponse.self).get()
        // Refunded at Apple; the REFUND notification never arrived.
        let revokedAt = Shop.now - 20_000
        w.api.add(
            AdminWorld.jws("9500", product: "com.example.premium", type: "Non-Consumable", token: order.id, revoked: revokedAt, signed: Shop.now - 10_000),
            customer: "quinn", in: .sandbox)

        let first = try w.reconciler.run().get()
        #expect(first.error == nil && first.refundHistories == 1 && first.refundsApplied == 1 && first.refundsRejected == 0)
        #expect(w.storedOrder(order.id)?.state == .refunded)
        #expect(w.owned("9500")?.transaction.revocationTimeMs == revokedAt)
        func refunds() -> [EventRecord] { events(w, "acct-q").filter { $0.kind == .orderRefunded } }
        #expect(refunds().count == 1 && refunds().first?.cause == "refund_history")

        // The history read again, and the REFUND notification for the same refund fetched from notification history:
        // recorded, but nothing is refunded twice.
        var t = TestStore.Transaction(
            transactionID: "9500", productID: "com.example.premium", type: "Non-Consumable", bundleID: Shop.bundle, environment: "Sandbox",
            purchaseDate: Shop.now - AdminWorld.day)
        t.appAccountToken = order.id
        t.revocationDate = revokedAt
        t.revocationReason = 0
        t.signedDate = Shop.now - 5_000
        var refund = TestStore.Notification(type: "REFUND", signedDate: Shop.now - 5_000, bundleID: Shop.bundle, environment: "Sandbox")
        refund.transaction = t
        w.api.addNotification(try Shop.store.signedNotification(refund), signedMs: Shop.now - 5_000, in: .sandbox)
        let second = try w.reconciler.run().get()
        #expect(second.error == nil && second.refundHistories == 1 && second.refundsApplied == 0)
        #expect(second.applied + second.duplicate + second.ignored == 1 && second.rejected == 0)
        #expect(refunds().count == 1)
        #expect(events(w, "acct-q").filter { $0.kind == .entitlementRevoked }.count == 1)
        #expect(w.storedOrder(order.id)?.state == .refunded)
    }
}
