import AppStore
import Billing
import BillingService
import Crypto
import Foundation
import Storage
import Testing
import TestSupport

/// After the sale: notifications, refunds, renewals, entitlements and events, on every store.
struct AfterSale {
    let h: Harness
    let processor: NotificationProcessor
    let clock = ManualClock(milliseconds: Shop.now)

    init(
        _ backend: Backend, environments: Set<AppStoreEnvironment> = [.xcode, .sandbox],
        policy: PurchaseEngine.Policy = PurchaseEngine.Policy()
    ) {
        h = Harness(backend)
        processor = NotificationProcessor(
            settings: VerifierSettings(
                anchors: TrustAnchors(roots: [Shop.store.root]), bundleIDs: [Shop.bundle],
                environments: environments, now: { Shop.now }),
            store: h.store, catalog: nil, policy: policy, clock: clock)
    }

    static let monthly = "com.example.pro.monthly"
    static let sub = "Auto-Renewable Subscription"

    /// A signed transaction as a notification nests it.
    static func tx(
        _ id: String, product: String = "com.example.premium", type: String = "Non-Consumable", original: String? = nil,
        token: String? = nil, purchase: Int64 = Shop.now - 10_000, expires: Int64? = nil, revoked: Int64? = nil,
        signed: Int64 = Shop.now
    ) -> TestStore.Transaction {
        var t = TestStore.Transaction(transactionID: id, productID: product, type: type, bundleID: Shop.bundle, purchaseDate: purchase)
        t.originalTransactionID = original
        t.appAccountToken = token
        t.expiresDate = expires
        t.revocationDate = revoked
        t.revocationReason = revoked == nil ? nil : 0
        t.signedDate = signed
        return t
    }

    static func note(
        _ type: String, subtype: String? = nil, uuid: String = UUID().uuidString.lowercased(), signed: Int64,
        tx: TestStore.Transaction? = nil, renewal: TestStore.RenewalInfo? = nil,
        environment: String = "Xcode"
    ) -> TestStore.Notification {
        var n = TestStore.Notification(
            type: type, subtype: subtype, uuid: uuid, signedDate: signed, bundleID: Shop.bundle,
            environment: environment)
        n.transaction = tx
        n.renewal = renewal
        return n
    }

    func notify(_ n: TestStore.Notification) -> NotificationProcessor.Outcome {
        let body = Array(TestStore.notificationBody(try! Shop.store.signedNotification(n)).utf8)
        let r: Result<NotificationProcessor.Outcome, BillingError> = wait { done in
            processor.process(body: body) { outcome, _ in done(.success(outcome)) }
        }
        return try! r.get()
    }

    func entitlements(_ account: String) -> [Billing.Entitlement] {
        let r: Result<[Billing.Entitlement], BillingError> = wait { h.store.entitlements(accountID: account, nowMs: clock.nowMilliseconds(), completion: $0) }
        return try! r.get()
    }

    func events(after: UInt64 = 0, account: String? = nil) -> [EventRecord] {
        let r: Result<[EventRecord], BillingError> = wait { h.store.events(after: after, limit: 1000, accountID: account, completion: $0) }
        return try! r.get()
    }

    func kinds(_ account: String? = nil, after: UInt64 = 0) -> [EventKind] { events(after: after, account: account).map(\.kind) }
}

@Suite("After the sale: notifications, refunds, renewals, entitlements, events", .serialized)
struct AfterSaleTests {
    @Test("REFUND refunds the order and revokes the entitlement; a redelivery changes nothing", arguments: Backend.all)
    func refund(_ backend: Backend) throws {
        let a = AfterSale(backend)
        defer { a.h.store.close() }
        let order = a.h.order("alice")
        _ = try a.h.submit(order.id, .signedTransaction(Shop.jws("r1", token: order.id))).get()
        #expect(a.entitlements("alice").map(\.active) == [true])
        let start = a.events().last!.cursor
        let refund = AfterSale.note(
            "REFUND", signed: Shop.now + 5000,
            tx: AfterSale.tx("r1", token: order.id, revoked: Shop.now + 4000, signed: Shop.now + 5000))
        #expect(a.notify(refund) == .done(.applied))
        #expect(a.h.get(order.id).state == .refunded)
        let e = try #require(a.entitlements("alice").first)
        #expect(!e.active && e.revocationTimeMs == Shop.now + 4000)
        #expect(a.kinds(after: start) == [.orderRefunded, .entitlementRevoked])
        #expect(a.events(after: start).allSatisfy { $0.cause == "notification:REFUND" && $0.notificationUUID == refund.uuid })
        // Apple redelivers: 200, nothing new.
        #expect(a.notify(refund) == .done(.duplicate))
        #expect(a.kinds(after: start).count == 2)
        // The same proof again is refused now, and the order stays refunded.
        #expect(a.h.submit(order.id, .signedTransaction(Shop.jws("r1", token: order.id))).failure == .transactionRevoked(transactionID: "r1"))
        // REFUND_REVERSED (newer) undoes it.
        let reversed = AfterSale.note("REFUND_REVERSED", signed: Shop.now + 9000, tx: AfterSale.tx("r1", token: order.id, signed: Shop.now + 9000))
        #expect(a.notify(reversed) == .done(.applied))
        #expect(a.h.get(order.id).state == .completed)
        #expect(a.entitlements("alice").map(\.active) == [true])
        #expect(a.kinds(after: start).suffix(2) == [.orderCompleted, .entitlementReinstated])
    }

    @Test("a newer revoked transaction through SubmitReceipt or RestorePurchases refunds like REFUND", arguments: Backend.all)
    func revocationFromAnySource(_ backend: Backend) throws {
        let a = AfterSale(backend)
        defer { a.h.store.close() }
        let order = a.h.order("bob")
        _ = try a.h.submit(order.id, .signedTransaction(Shop.jws("v1", token: order.id))).get()
        var revoked = AfterSale.tx("v1", token: order.id, revoked: Shop.now + 100, signed: Shop.now + 200)
        revoked.revocationReason = 1
        let jws = try Shop.store.signedTransaction(revoked)
        #expect(a.h.submit(order.id, .signedTransaction(jws)).failure == .transactionRevoked(transactionID: "v1"))
        #expect(a.h.get(order.id).state == .refunded)
        #expect(a.entitlements("bob").first?.active == false)
        // The older, unrevoked proof never undoes the newer refund.
        _ = try a.h.restore("bob", jws: [Shop.jws("v1", token: order.id)]).get()
        #expect(a.entitlements("bob").first?.active == false)
        #expect(a.h.get(order.id).state == .refunded)

        // Through RestorePurchases.
        let second = a.h.order("bob", product: "com.example.other")
        _ = try a.h.submit(second.id, .signedTransaction(Shop.jws("v2", product: "com.example.other", token: second.id))).get()
        let newer = try Shop.store.signedTransaction(
            AfterSale.tx(
                "v2", product: "com.example.other", token: second.id,
                revoked: Shop.now + 100, signed: Shop.now + 300))
        let restored = try a.h.restore("bob", jws: [newer]).get()
        #expect(restored.first { $0.productID == "com.example.other" }?.active == false)
        #expect(a.h.get(second.id).state == .refunded)
    }

    @Test(
        "a purchase notification whose token names a PENDING order completes it once; SubmitReceipt then answers already_processed",
        arguments: Backend.all)
    func purchaseNotificationCompletes(_ backend: Backend) throws {
        let a = AfterSale(backend)
        defer { a.h.store.close() }
        let order = a.h.order("carol")
        let t = AfterSale.tx("p1", token: order.id)
        #expect(a.notify(AfterSale.note("ONE_TIME_CHARGE", signed: Shop.now, tx: t)) == .done(.applied))
        let paid = a.h.get(order.id)
        #expect(paid.state == .completed && paid.transactionID == "p1")
        let again = try a.h.submit(order.id, .signedTransaction(Shop.jws("p1", token: order.id))).get()
        #expect(again.alreadyProcessed)
        #expect(a.kinds("carol") == [.orderCreated, .orderCompleted, .entitlementGranted])
        // Another order of the same account cannot be paid by it.
        let other = a.h.order("carol")
        #expect(a.h.submit(other.id, .signedTransaction(Shop.jws("p1", token: order.id))).failure == .accountTokenMismatch(orderID: other.id))
    }

    @Test("SubmitReceipt and the purchase notification racing for one order: paid exactly once", arguments: Backend.all)
    func race(_ backend: Backend) throws {
        let a = AfterSale(backend)
        defer { a.h.store.close() }
        for i in 0..<10 {
            let order = a.h.order("race")
            let t = AfterSale.tx("race-\(i)", token: order.id)
            let jws = Shop.jws("race-\(i)", token: order.id)
            let results = Results()
            DispatchQueue.concurrentPerform(iterations: 2) { k in
                if k == 0 {
                    results.add(a.notify(AfterSale.note("ONE_TIME_CHARGE", signed: Shop.now, tx: t)) == .done(.applied) ? "notified" : "failed")
                } else {
                    switch a.h.submit(order.id, .signedTransaction(jws)) {
                    case .success(let done): results.add(done.alreadyProcessed ? "already" : "submitted")
                    case .failure(let e): results.add("\(e)")
                    }
                }
            }
            #expect(Set(results.all).isSubset(of: ["notified", "already", "submitted"]), "\(results.all)")
            #expect(a.h.get(order.id).state == .completed)
            #expect(a.events(account: "race").filter { $0.kind == .orderCompleted && $0.order?.id == order.id }.count == 1)
        }
    }

    @Test("a transaction nobody owns is kept, with its refund, and attaches to the first account that proves it", arguments: Backend.all)
    func unowned(_ backend: Backend) throws {
        let a = AfterSale(backend)
        defer { a.h.store.close() }
        // No token, no owner: kept without an account.
        #expect(a.notify(AfterSale.note("ONE_TIME_CHARGE", signed: Shop.now, tx: AfterSale.tx("u1"))) == .done(.applied))
        #expect(
            a.notify(AfterSale.note("REFUND", signed: Shop.now + 10, tx: AfterSale.tx("u1", revoked: Shop.now + 5, signed: Shop.now + 10)))
                == .done(.applied))
        #expect(a.events().isEmpty)
        let order = a.h.order("dave")
        #expect(a.h.submit(order.id, .signedTransaction(Shop.jws("u1"))).failure == .transactionRevoked(transactionID: "u1"))
        // Another, unrefunded one attaches to the first account that restores it; a second account cannot take it.
        #expect(a.notify(AfterSale.note("ONE_TIME_CHARGE", signed: Shop.now, tx: AfterSale.tx("u2", product: "com.example.two"))) == .done(.applied))
        let owned = try a.h.restore("erin", jws: [Shop.jws("u2", product: "com.example.two")]).get()
        #expect(owned.map(\.productID) == ["com.example.two"] && owned[0].active)
        let order2 = a.h.order("frank", product: "com.example.two")
        #expect(
            a.h.submit(order2.id, .signedTransaction(Shop.jws("u2", product: "com.example.two"))).failure
                == .transactionAlreadyClaimed(transactionID: "u2"))
    }

    @Test("a renewal and its refund kept before anyone owned the subscription apply when an earlier transaction of it is proved", arguments: Backend.all)
    func unownedRenewalsAttach(_ backend: Backend) throws {
        let day: Int64 = 86_400_000
        let renewal = AfterSale.tx(
            "k2", product: AfterSale.monthly, type: AfterSale.sub, original: "k1", purchase: Shop.now - 10 * day,
            expires: Shop.now + 20 * day, signed: Shop.now - 10 * day)
        let refunded = AfterSale.tx(
            "k2", product: AfterSale.monthly, type: AfterSale.sub, original: "k1", purchase: Shop.now - 10 * day,
            expires: Shop.now + 20 * day, revoked: Shop.now - day, signed: Shop.now - day)
        let proof = Shop.jws(
            "k1", product: AfterSale.monthly, type: AfterSale.sub, purchase: Shop.now - 40 * day, expires: Shop.now - 10 * day,
            original: "k1")
        var seen: [[String]] = []
        for proveFirst in [true, false] {
            let a = AfterSale(backend)
            defer { a.h.store.close() }
            if proveFirst { _ = try a.h.restore("ivan", jws: [proof]).get() }
            #expect(a.notify(AfterSale.note("DID_RENEW", signed: Shop.now - 10 * day, tx: renewal)) == .done(.applied))
            #expect(a.notify(AfterSale.note("REFUND", signed: Shop.now - day, tx: refunded)) == .done(.applied))
            if !proveFirst { _ = try a.h.restore("ivan", jws: [proof]).get() }
            let e = try #require(a.entitlements("ivan").first)
            #expect(e.latestTransactionID == "k2" && e.revocationTimeMs == Shop.now - day && !e.active)
            seen.append([e.latestTransactionID, String(e.expiresTimeMs), String(e.revocationTimeMs), String(e.active)])
        }
        #expect(seen[0] == seen[1])
    }

    @Test(
        "renewals: DID_RENEW moves the expiry forward, grace period keeps it active, EXPIRED ends it, auto-renew follows the newest",
        arguments: Backend.all)
    func renewals(_ backend: Backend) throws {
        let a = AfterSale(backend)
        defer { a.h.store.close() }
        let order = a.h.order("gina", product: AfterSale.monthly)
        let day: Int64 = 86_400_000
        let t0 = AfterSale.tx(
            "s1", product: AfterSale.monthly, type: AfterSale.sub, original: "s1", token: order.id,
            purchase: Shop.now - day, expires: Shop.now + 29 * day, signed: Shop.now - day)
        #expect(a.notify(AfterSale.note("SUBSCRIBED", subtype: "INITIAL_BUY", signed: Shop.now - day, tx: t0)) == .done(.applied))
        #expect(a.h.get(order.id).state == .completed)
        var e = try #require(a.entitlements("gina").first)
        #expect(e.active && e.expiresTimeMs == Shop.now + 29 * day && e.autoRenew)

        let t1 = AfterSale.tx(
            "s2", product: AfterSale.monthly, type: AfterSale.sub, original: "s1", purchase: Shop.now + 29 * day,
            expires: Shop.now + 59 * day, signed: Shop.now + 29 * day)
        #expect(a.notify(AfterSale.note("DID_RENEW", signed: Shop.now + 29 * day, tx: t1)) == .done(.applied))
        e = try #require(a.entitlements("gina").first)
        #expect(e.latestTransactionID == "s2" && e.expiresTimeMs == Shop.now + 59 * day)
        // An older view arriving late moves nothing backward.
        #expect(a.notify(AfterSale.note("DID_RENEW", signed: Shop.now - day + 1, tx: t0)) == .done(.applied))
        #expect(a.entitlements("gina").first?.expiresTimeMs == Shop.now + 59 * day)

        var off = TestStore.RenewalInfo(originalTransactionID: "s1", productID: AfterSale.monthly, autoRenewStatus: 0, signedDate: Shop.now + 30 * day)
        #expect(
            a.notify(
                AfterSale.note(
                    "DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED", signed: Shop.now + 30 * day,
                    tx: t1, renewal: off)) == .done(.applied))
        #expect(a.entitlements("gina").first?.autoRenew == false)
        // An older status never wins over the newer one.
        off.autoRenewStatus = 1
        off.signedDate = Shop.now + 29 * day + 5
        _ = a.notify(AfterSale.note("DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_ENABLED", signed: Shop.now + 29 * day + 5, tx: t1, renewal: off))
        #expect(a.entitlements("gina").first?.autoRenew == false)

        // Billing grace period: active past the expiry until the grace period ends.
        var grace = TestStore.RenewalInfo(originalTransactionID: "s1", productID: AfterSale.monthly, signedDate: Shop.now + 59 * day)
        grace.gracePeriodExpiresDate = Shop.now + 75 * day
        #expect(
            a.notify(AfterSale.note("DID_FAIL_TO_RENEW", subtype: "GRACE_PERIOD", signed: Shop.now + 59 * day, tx: t1, renewal: grace))
                == .done(.applied))
        a.clock.advance(milliseconds: 60 * day)
        e = try #require(a.entitlements("gina").first)
        #expect(e.active && e.gracePeriodExpiresTimeMs == Shop.now + 75 * day)
        #expect(a.kinds("gina").contains(.billingIssue))
        #expect(a.notify(AfterSale.note("GRACE_PERIOD_EXPIRED", signed: Shop.now + 75 * day, tx: t1)) == .done(.applied))
        #expect(a.entitlements("gina").first?.active == false)
        let inactive: Result<[Billing.Entitlement], BillingError> = wait { a.h.engine.entitlements(accountID: "gina", includeInactive: false, completion: $0) }
        #expect(try inactive.get().isEmpty)
        #expect(
            a.kinds("gina") == [
                .orderCreated, .orderCompleted, .entitlementGranted, .entitlementRenewed, .entitlementRenewed,
                .renewalStatusChanged, .renewalStatusChanged, .billingIssue, .entitlementExpired,
            ])
    }

    @Test("a notification for an environment not accepted is recorded as ignored and changes nothing", arguments: Backend.all)
    func ignoredEnvironment(_ backend: Backend) throws {
        let a = AfterSale(backend, environments: [.xcode])
        defer { a.h.store.close() }
        let order = a.h.order("hank")
        let n = AfterSale.note(
            "ONE_TIME_CHARGE", signed: Shop.now,
            tx: {
                var t = AfterSale.tx("i1", token: order.id); t.environment = "Sandbox"; return t
            }(),
            environment: "Sandbox")
        #expect(a.notify(n) == .done(.ignored))
        #expect(a.notify(n) == .done(.duplicate))
        #expect(a.h.get(order.id).state == .pending)
        #expect(a.kinds() == [.orderCreated])
    }

    @Test("forged or foreign notifications are refused with the proof reasons and record nothing", arguments: [Backend.all[0]])
    func refusals(_ backend: Backend) throws {
        let a = AfterSale(backend)
        defer { a.h.store.close() }
        func outcome(_ body: String) -> NotificationProcessor.Outcome {
            let r: Result<NotificationProcessor.Outcome, BillingError> = wait { done in
                a.processor.process(body: Array(body.utf8)) { o, _ in done(.success(o)) }
            }
            return try! r.get()
        }
        func reason(_ o: NotificationProcessor.Outcome) -> String? {
            if case .rejected(let r, _) = o { return r }
            return nil
        }
        #expect(reason(outcome("not json")) == "RECEIPT_MALFORMED")
        #expect(reason(outcome("{\"signedPayload\": 5}")) == "RECEIPT_MALFORMED")
        #expect(reason(outcome("{\"signedPayload\": \"a.b.c\"}")) == "RECEIPT_MALFORMED")
        let good = try Shop.store.signedNotification(AfterSale.note("TEST", signed: Shop.now))
        var parts = good.split(separator: ".").map(String.init)
        parts[2] = String(parts[2].reversed())
        #expect(reason(outcome(TestStore.notificationBody(parts.joined(separator: ".")))) == "RECEIPT_UNTRUSTED")
        var foreign = AfterSale.note("TEST", signed: Shop.now)
        foreign.bundleID = "com.other.app"
        #expect(reason(outcome(TestStore.notificationBody(try Shop.store.signedNotification(foreign)))) == "WRONG_APP")
        // A nested transaction of another app is refused as a whole.
        var nested = AfterSale.note("ONE_TIME_CHARGE", signed: Shop.now, tx: AfterSale.tx("x1"))
        nested.transaction?.bundleID = "com.other.app"
        #expect(reason(outcome(TestStore.notificationBody(try Shop.store.signedNotification(nested)))) == "WRONG_APP")
        // Unknown fields and types are tolerated.
        #expect(outcome("{\"signedPayload\":\"\(good)\",\"extra\":[1,{}]}") == .done(.applied))
        #expect(a.notify(AfterSale.note("SOMETHING_NEW", signed: Shop.now, tx: AfterSale.tx("x2"))) == .done(.applied))
        #expect(a.events().isEmpty)
    }

    @Test("restore under transfer moves the entitlement with an ENTITLEMENT_TRANSFERRED event", arguments: Backend.all)
    func transferEvent(_ backend: Backend) throws {
        let a = AfterSale(backend)
        defer { a.h.store.close() }
        let jws = Shop.jws("t1")
        _ = try a.h.restore("ivy", jws: [jws]).get()
        _ = try a.h.restore("jack", jws: [jws]).get()
        #expect(a.entitlements("ivy").isEmpty)
        #expect(a.entitlements("jack").map(\.productID) == ["com.example.premium"])
        #expect(a.kinds() == [.entitlementGranted, .entitlementTransferred, .entitlementTransferred])
        let moved = a.events().suffix(2)
        #expect(Set(moved.map(\.accountID)) == ["ivy", "jack"] && moved.allSatisfy { $0.cause == "restore_purchases" })
        #expect(moved.first { $0.accountID == "ivy" }?.entitlement?.active == false)
        #expect(moved.first { $0.accountID == "jack" }?.entitlement?.active == true)
    }

    @Test("a subscription moves whole on restore, and a refund afterwards reaches the account that holds it", arguments: Backend.all)
    func refundFollowsTheOwner(_ backend: Backend) throws {
        let a = AfterSale(backend)
        defer { a.h.store.close() }
        let day: Int64 = 86_400_000
        let order = a.h.order("kim", product: AfterSale.monthly)
        let t1 = AfterSale.tx(
            "m1", product: AfterSale.monthly, type: AfterSale.sub, original: "m1", token: order.id,
            purchase: Shop.now - day, expires: Shop.now + 29 * day, signed: Shop.now - day)
        let t2 = AfterSale.tx(
            "m2", product: AfterSale.monthly, type: AfterSale.sub, original: "m1",
            purchase: Shop.now + 29 * day, expires: Shop.now + 59 * day, signed: Shop.now + 29 * day)
        #expect(a.notify(AfterSale.note("SUBSCRIBED", signed: Shop.now - day, tx: t1)) == .done(.applied))
        #expect(a.notify(AfterSale.note("DID_RENEW", signed: Shop.now + 29 * day, tx: t2)) == .done(.applied))
        // Another account restores with the renewal alone (StoreKit's current entitlements): the whole subscription moves.
        _ = try a.h.restore("lee", jws: [try Shop.store.signedTransaction(t2)]).get()
        #expect(a.entitlements("kim").isEmpty)
        #expect(a.entitlements("lee").map(\.latestTransactionID) == ["m2"])
        var refunded = t2
        refunded.revocationDate = Shop.now + 30 * day
        refunded.revocationReason = 0
        refunded.signedDate = Shop.now + 30 * day
        #expect(a.notify(AfterSale.note("REFUND", signed: Shop.now + 30 * day, tx: refunded)) == .done(.applied))
        #expect(a.entitlements("lee").first?.active == false)
        #expect(a.entitlements("lee").first?.revocationTimeMs == Shop.now + 30 * day)
        #expect(a.events(account: "lee").last?.kind == .entitlementRevoked)
        #expect(a.entitlements("kim").isEmpty)
    }

    @Test("with --reject-stale-purchases a purchase notification does not pay an order opened after the purchase", arguments: Backend.all)
    func stalePurchaseNotification(_ backend: Backend) throws {
        let a = AfterSale(backend, policy: PurchaseEngine.Policy(rejectStalePurchases: true))
        defer { a.h.store.close() }
        let order = a.h.order("nia")
        // Bought a day before the order existed (far beyond the 300 s allowance).
        let old = AfterSale.tx("st1", token: order.id, purchase: order.createTimeMs - 86_400_000)
        #expect(a.notify(AfterSale.note("ONE_TIME_CHARGE", signed: Shop.now, tx: old)) == .done(.applied))
        #expect(a.h.get(order.id).state == .pending)
        // A fresh purchase still pays it.
        let fresh = AfterSale.tx("st2", token: order.id, purchase: order.createTimeMs + 1000)
        #expect(a.notify(AfterSale.note("ONE_TIME_CHARGE", signed: Shop.now + 1, tx: fresh)) == .done(.applied))
        #expect(a.h.get(order.id).transactionID == "st2")
    }

    @Test("event cursors increase in commit order, one commit's events consecutive; paging by account", arguments: Backend.all)
    func cursors(_ backend: Backend) throws {
        let a = AfterSale(backend)
        defer { a.h.store.close() }
        for i in 0..<20 { _ = a.h.order("acct-\(i % 3)") }
        let all = a.events()
        #expect(all.count == 20)
        #expect(zip(all, all.dropFirst()).allSatisfy { $0.cursor < $1.cursor })
        let mine = a.events(account: "acct-1")
        #expect(mine.count == 7 && mine.allSatisfy { $0.accountID == "acct-1" })
        let page = a.events(after: all[4].cursor)
        #expect(page.first?.cursor == all[5].cursor)
        #expect(all.allSatisfy { $0.kind == .orderCreated && $0.cause == "create_order" && $0.order?.state == .pending })
    }

    @Test("notifications applied shuffled, with duplicates, end in the same orders, entitlements and event counts as in signedDate order")
    func orderIndependence() throws {
        var rng = SplitMix(seed: 9)
        let inOrder = AfterSale(Backend.all[0]), shuffled = AfterSale(Backend.all[0])
        var notes: [TestStore.Notification] = []
        var orders: [(String, String)] = []
        for i in 0..<40 {
            let account = "acct-\(i % 7)"
            let a = inOrder.h.order(account, product: AfterSale.monthly)
            let b = shuffled.h.order(account, product: AfterSale.monthly)
            orders.append((a.id, b.id))
            notes += Storm.lifecycle(index: i, token: "TOKEN-\(i)", rng: &rng)
        }
        func resolve(_ n: TestStore.Notification, _ pick: (String, String) -> String) -> TestStore.Notification {
            var n = n
            if let token = n.transaction?.appAccountToken, let i = Int(token.dropFirst(6)) { n.transaction?.appAccountToken = pick(orders[i].0, orders[i].1) }
            return n
        }
        for n in notes.sorted(by: { $0.signedDate < $1.signedDate }) { _ = inOrder.notify(resolve(n) { a, _ in a }) }
        var storm = notes + notes.prefix(notes.count / 3)
        storm.shuffle(using: &rng)
        for n in storm { _ = shuffled.notify(resolve(n) { _, b in b }) }
        for (a, b) in orders { #expect(inOrder.h.get(a).state == shuffled.h.get(b).state) }
        for i in 0..<7 {
            let x = inOrder.entitlements("acct-\(i)").map {
                ($0.originalTransactionID, $0.latestTransactionID, $0.expiresTimeMs, $0.active, $0.autoRenew, $0.revocationTimeMs)
            }
            let y = shuffled.entitlements("acct-\(i)").map {
                ($0.originalTransactionID, $0.latestTransactionID, $0.expiresTimeMs, $0.active, $0.autoRenew, $0.revocationTimeMs)
            }
            #expect(x.count == y.count && zip(x, y).allSatisfy { $0 == $1 })
        }
        #expect(inOrder.events().count == shuffled.events().count)
        // The same events, kind by kind: GRANTED vs RENEWED must not depend on which notification arrived first.
        func tally(_ a: AfterSale) -> [Int: Int] { Dictionary(a.kinds().map { ($0.rawValue, 1) }, uniquingKeysWith: +) }
        #expect(tally(inOrder) == tally(shuffled))
    }
}

/// Notification lifecycles for storms: a purchase, renewals, maybe a refund of the first, status changes.
enum Storm {
    static func lifecycle(index i: Int, token: String, rng: inout SplitMix) -> [TestStore.Notification] {
        let day: Int64 = 86_400_000
        let original = "st-\(i)-0"
        var t = Shop.now + Int64(i) * 1000
        var notes: [TestStore.Notification] = []
        let first = AfterSale.tx(
            original, product: AfterSale.monthly, type: AfterSale.sub, original: original, token: token,
            purchase: t, expires: t + 30 * day, signed: t)
        notes.append(AfterSale.note("SUBSCRIBED", subtype: "INITIAL_BUY", signed: t, tx: first))
        let renewals = Int.random(in: 0...3, using: &rng)
        var last = first
        for r in 1...max(1, renewals) where renewals > 0 {
            t += 30 * day
            last = AfterSale.tx(
                "st-\(i)-\(r)", product: AfterSale.monthly, type: AfterSale.sub, original: original, token: token,
                purchase: t, expires: t + 30 * day, signed: t)
            notes.append(AfterSale.note("DID_RENEW", signed: t, tx: last))
        }
        if Int.random(in: 0..<3, using: &rng) == 0 {
            t += 1000
            var refunded = first
            refunded.revocationDate = t
            refunded.revocationReason = 0
            refunded.signedDate = t
            notes.append(AfterSale.note("REFUND", signed: t, tx: refunded))
        }
        if Bool.random(using: &rng) {
            t += 1000
            let info = TestStore.RenewalInfo(originalTransactionID: original, productID: AfterSale.monthly, autoRenewStatus: 0, signedDate: t)
            notes.append(AfterSale.note("DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED", signed: t, tx: last, renewal: info))
        }
        if Int.random(in: 0..<4, using: &rng) == 0 {
            t += 1000
            notes.append(AfterSale.note("EXPIRED", subtype: "VOLUNTARY", signed: t, tx: last))
        }
        return notes
    }
}

/// Thread-safe list of outcomes.
final class Results: @unchecked Sendable {
    // Sendable: every access holds `lock`.
    private let lock = NSLock()
    private var items: [String] = []
    func add(_ s: String) { lock.lock(); items.append(s); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return items }
}
