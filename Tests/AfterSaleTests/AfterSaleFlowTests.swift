import AfterSale
import AppStore
import Billing
import BillingService
import Crypto
import Foundation
import Storage
import Testing
import TestSupport

/// After the sale: notifications, refunds, renewals, entitlements and events, on every store.
struct AfterSaleWorld {
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

    /// Delivers `n` as Apple would: no earlier than it was signed (the clock moves forward to its signedDate;
    /// billingd refuses a signedDate beyond its clock skew in the future).
    func notify(_ n: TestStore.Notification) -> NotificationProcessor.Outcome {
        let ahead = n.signedDate - clock.nowMilliseconds()
        if ahead > 0 { clock.advance(milliseconds: ahead) }
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
struct AfterSaleFlowTests {
    @Test("REFUND refunds the order and revokes the entitlement; a redelivery changes nothing", arguments: Backend.all)
    func refund(_ backend: Backend) throws {
        let a = AfterSaleWorld(backend)
        defer { a.h.store.close() }
        let order = a.h.order("alice")
        _ = try a.h.submit(order.id, .signedTransaction(Shop.jws("r1", token: order.id))).get()
        #expect(a.entitlements("alice").map(\.active) == [true])
        let start = a.events().last!.cursor
        let refund = AfterSaleWorld.note(
            "REFUND", signed: Shop.now + 5000,
            tx: AfterSaleWorld.tx("r1", token: order.id, revoked: Shop.now + 4000, signed: Shop.now + 5000))
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
        let reversed = AfterSaleWorld.note("REFUND_REVERSED", signed: Shop.now + 9000, tx: AfterSaleWorld.tx("r1", token: order.id, signed: Shop.now + 9000))
        #expect(a.notify(reversed) == .done(.applied))
        #expect(a.h.get(order.id).state == .completed)
        #expect(a.entitlements("alice").map(\.active) == [true])
        #expect(a.kinds(after: start).suffix(2) == [.orderCompleted, .entitlementReinstated])
    }

    @Test("a newer revoked transaction through SubmitReceipt or RestorePurchases refunds like REFUND", arguments: Backend.all)
    func revocationFromAnySource(_ backend: Backend) throws {
        let a = AfterSaleWorld(backend)
        defer { a.h.store.close() }
        let order = a.h.order("bob")
        _ = try a.h.submit(order.id, .signedTransaction(Shop.jws("v1", token: order.id))).get()
        var revoked = AfterSaleWorld.tx("v1", token: order.id, revoked: Shop.now + 100, signed: Shop.now + 200)
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
            AfterSaleWorld.tx(
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
        let a = AfterSaleWorld(backend)
        defer { a.h.store.close() }
        let order = a.h.order("carol")
        let t = AfterSaleWorld.tx("p1", token: order.id)
        #expect(a.notify(AfterSaleWorld.note("ONE_TIME_CHARGE", signed: Shop.now, tx: t)) == .done(.applied))
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
        let a = AfterSaleWorld(backend)
        defer { a.h.store.close() }
        for i in 0..<10 {
            let order = a.h.order("race")
            let t = AfterSaleWorld.tx("race-\(i)", token: order.id)
            let jws = Shop.jws("race-\(i)", token: order.id)
            let results = Results()
            DispatchQueue.concurrentPerform(iterations: 2) { k in
                if k == 0 {
                    results.add(a.notify(AfterSaleWorld.note("ONE_TIME_CHARGE", signed: Shop.now, tx: t)) == .done(.applied) ? "notified" : "failed")
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
        let a = AfterSaleWorld(backend)
        defer { a.h.store.close() }
        // No token, no owner: kept without an account.
        #expect(a.notify(AfterSaleWorld.note("ONE_TIME_CHARGE", signed: Shop.now, tx: AfterSaleWorld.tx("u1"))) == .done(.applied))
        #expect(
            a.notify(AfterSaleWorld.note("REFUND", signed: Shop.now + 10, tx: AfterSaleWorld.tx("u1", revoked: Shop.now + 5, signed: Shop.now + 10)))
                == .done(.applied))
        #expect(a.events().isEmpty)
        let order = a.h.order("dave")
        #expect(a.h.submit(order.id, .signedTransaction(Shop.jws("u1"))).failure == .transactionRevoked(transactionID: "u1"))
        // Another, unrefunded one attaches to the first account that restores it; a second account cannot take it.
        #expect(a.notify(AfterSaleWorld.note("ONE_TIME_CHARGE", signed: Shop.now, tx: AfterSaleWorld.tx("u2", product: "com.example.two"))) == .done(.applied))
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
        let renewal = AfterSaleWorld.tx(
            "k2", product: AfterSaleWorld.monthly, type: AfterSaleWorld.sub, original: "k1", purchase: Shop.now - 10 * day,
            expires: Shop.now + 20 * day, signed: Shop.now - 10 * day)
        let refunded = AfterSaleWorld.tx(
            "k2", product: AfterSaleWorld.monthly, type: AfterSaleWorld.sub, original: "k1", purchase: Shop.now - 10 * day,
            expires: Shop.now + 20 * day, revoked: Shop.now - day, signed: Shop.now - day)
        let proof = Shop.jws(
            "k1", product: AfterSaleWorld.monthly, type: AfterSaleWorld.sub, purchase: Shop.now - 40 * day, expires: Shop.now - 10 * day,
            original: "k1")
        var seen: [[String]] = []
        for proveFirst in [true, false] {
            let a = AfterSaleWorld(backend)
            defer { a.h.store.close() }
            if proveFirst { _ = try a.h.restore("ivan", jws: [proof]).get() }
            #expect(a.notify(AfterSaleWorld.note("DID_RENEW", signed: Shop.now - 10 * day, tx: renewal)) == .done(.applied))
            #expect(a.notify(AfterSaleWorld.note("REFUND", signed: Shop.now - day, tx: refunded)) == .done(.applied))
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
        let a = AfterSaleWorld(backend)
        defer { a.h.store.close() }
        let order = a.h.order("gina", product: AfterSaleWorld.monthly)
        let day: Int64 = 86_400_000
        let t0 = AfterSaleWorld.tx(
            "s1", product: AfterSaleWorld.monthly, type: AfterSaleWorld.sub, original: "s1", token: order.id,
            purchase: Shop.now - day, expires: Shop.now + 29 * day, signed: Shop.now - day)
        #expect(a.notify(AfterSaleWorld.note("SUBSCRIBED", subtype: "INITIAL_BUY", signed: Shop.now - day, tx: t0)) == .done(.applied))
        #expect(a.h.get(order.id).state == .completed)
        var e = try #require(a.entitlements("gina").first)
        #expect(e.active && e.expiresTimeMs == Shop.now + 29 * day && e.autoRenew)

        let t1 = AfterSaleWorld.tx(
            "s2", product: AfterSaleWorld.monthly, type: AfterSaleWorld.sub, original: "s1", purchase: Shop.now + 29 * day,
            expires: Shop.now + 59 * day, signed: Shop.now + 29 * day)
        #expect(a.notify(AfterSaleWorld.note("DID_RENEW", signed: Shop.now + 29 * day, tx: t1)) == .done(.applied))
        e = try #require(a.entitlements("gina").first)
        #expect(e.latestTransactionID == "s2" && e.expiresTimeMs == Shop.now + 59 * day)
        // An older view arriving late moves nothing backward.
        #expect(a.notify(AfterSaleWorld.note("DID_RENEW", signed: Shop.now - day + 1, tx: t0)) == .done(.applied))
        #expect(a.entitlements("gina").first?.expiresTimeMs == Shop.now + 59 * day)

        var off = TestStore.RenewalInfo(originalTransactionID: "s1", productID: AfterSaleWorld.monthly, autoRenewStatus: 0, signedDate: Shop.now + 30 * day)
        #expect(
            a.notify(
                AfterSaleWorld.note(
                    "DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED", signed: Shop.now + 30 * day,
                    tx: t1, renewal: off)) == .done(.applied))
        #expect(a.entitlements("gina").first?.autoRenew == false)
        // An older status never wins over the newer one.
        off.autoRenewStatus = 1
        off.signedDate = Shop.now + 29 * day + 5
        _ = a.notify(AfterSaleWorld.note("DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_ENABLED", signed: Shop.now + 29 * day + 5, tx: t1, renewal: off))
        #expect(a.entitlements("gina").first?.autoRenew == false)

        // Billing grace period: active past the expiry until the grace period ends.
        var grace = TestStore.RenewalInfo(originalTransactionID: "s1", productID: AfterSaleWorld.monthly, signedDate: Shop.now + 59 * day)
        grace.gracePeriodExpiresDate = Shop.now + 75 * day
        #expect(
            a.notify(AfterSaleWorld.note("DID_FAIL_TO_RENEW", subtype: "GRACE_PERIOD", signed: Shop.now + 59 * day, tx: t1, renewal: grace))
                == .done(.applied))
        a.clock.advance(milliseconds: Shop.now + 60 * day - a.clock.nowMilliseconds())
        e = try #require(a.entitlements("gina").first)
        #expect(e.active && e.gracePeriodExpiresTimeMs == Shop.now + 75 * day)
        #expect(a.kinds("gina").contains(.billingIssue))
        #expect(a.notify(AfterSaleWorld.note("GRACE_PERIOD_EXPIRED", signed: Shop.now + 75 * day, tx: t1)) == .done(.applied))
        #expect(a.entitlements("gina").first?.active == false)
        let inactive: Result<[Billing.Entitlement], BillingError> = wait { a.h.engine.entitlements(accountID: "gina", includeInactive: false, completion: $0) }
        #expect(try inactive.get().isEmpty)
        // Events say what changed: the late older DID_RENEW and the older status change write nothing; the grace
        // period's renewal info says auto-renew is on again (RENEWAL_STATUS_CHANGED) and starts billing retry.
        #expect(
            a.kinds("gina") == [
                .orderCreated, .orderCompleted, .entitlementGranted, .entitlementRenewed,
                .renewalStatusChanged, .renewalStatusChanged, .billingIssue, .entitlementExpired,
            ])
    }

    @Test("a notification for an environment not accepted is recorded as ignored and changes nothing", arguments: Backend.all)
    func ignoredEnvironment(_ backend: Backend) throws {
        let a = AfterSaleWorld(backend, environments: [.xcode])
        defer { a.h.store.close() }
        let order = a.h.order("hank")
        let n = AfterSaleWorld.note(
            "ONE_TIME_CHARGE", signed: Shop.now,
            tx: {
                var t = AfterSaleWorld.tx("i1", token: order.id); t.environment = "Sandbox"; return t
            }(),
            environment: "Sandbox")
        #expect(a.notify(n) == .done(.ignored))
        #expect(a.notify(n) == .done(.duplicate))
        #expect(a.h.get(order.id).state == .pending)
        #expect(a.kinds() == [.orderCreated])
    }

    @Test("forged or foreign notifications are refused with the proof reasons and record nothing", arguments: [Backend.all[0]])
    func refusals(_ backend: Backend) throws {
        let a = AfterSaleWorld(backend)
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
        let good = try Shop.store.signedNotification(AfterSaleWorld.note("TEST", signed: Shop.now))
        var parts = good.split(separator: ".").map(String.init)
        parts[2] = String(parts[2].reversed())
        #expect(reason(outcome(TestStore.notificationBody(parts.joined(separator: ".")))) == "RECEIPT_UNTRUSTED")
        var foreign = AfterSaleWorld.note("TEST", signed: Shop.now)
        foreign.bundleID = "com.other.app"
        #expect(reason(outcome(TestStore.notificationBody(try Shop.store.signedNotification(foreign)))) == "WRONG_APP")
        // A nested transaction of another app is refused as a whole.
        var nested = AfterSaleWorld.note("ONE_TIME_CHARGE", signed: Shop.now, tx: AfterSaleWorld.tx("x1"))
        nested.transaction?.bundleID = "com.other.app"
        #expect(reason(outcome(TestStore.notificationBody(try Shop.store.signedNotification(nested)))) == "WRONG_APP")
        // Unknown fields and types are tolerated.
        #expect(outcome("{\"signedPayload\":\"\(good)\",\"extra\":[1,{}]}") == .done(.applied))
        #expect(a.notify(AfterSaleWorld.note("SOMETHING_NEW", signed: Shop.now, tx: AfterSaleWorld.tx("x2"))) == .done(.applied))
        #expect(a.events().isEmpty)
    }

    @Test("restore under transfer moves the entitlement with an ENTITLEMENT_TRANSFERRED event", arguments: Backend.all)
    func transferEvent(_ backend: Backend) throws {
        let a = AfterSaleWorld(backend)
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
        let a = AfterSaleWorld(backend)
        defer { a.h.store.close() }
        let day: Int64 = 86_400_000
        let order = a.h.order("kim", product: AfterSaleWorld.monthly)
        let t1 = AfterSaleWorld.tx(
            "m1", product: AfterSaleWorld.monthly, type: AfterSaleWorld.sub, original: "m1", token: order.id,
            purchase: Shop.now - day, expires: Shop.now + 29 * day, signed: Shop.now - day)
        let t2 = AfterSaleWorld.tx(
            "m2", product: AfterSaleWorld.monthly, type: AfterSaleWorld.sub, original: "m1",
            purchase: Shop.now + 29 * day, expires: Shop.now + 59 * day, signed: Shop.now + 29 * day)
        #expect(a.notify(AfterSaleWorld.note("SUBSCRIBED", signed: Shop.now - day, tx: t1)) == .done(.applied))
        #expect(a.notify(AfterSaleWorld.note("DID_RENEW", signed: Shop.now + 29 * day, tx: t2)) == .done(.applied))
        // Another account restores with the renewal alone (StoreKit's current entitlements): the whole subscription moves.
        _ = try a.h.restore("lee", jws: [try Shop.store.signedTransaction(t2)]).get()
        #expect(a.entitlements("kim").isEmpty)
        #expect(a.entitlements("lee").map(\.latestTransactionID) == ["m2"])
        var refunded = t2
        refunded.revocationDate = Shop.now + 30 * day
        refunded.revocationReason = 0
        refunded.signedDate = Shop.now + 30 * day
        #expect(a.notify(AfterSaleWorld.note("REFUND", signed: Shop.now + 30 * day, tx: refunded)) == .done(.applied))
        #expect(a.entitlements("lee").first?.active == false)
        #expect(a.entitlements("lee").first?.revocationTimeMs == Shop.now + 30 * day)
        #expect(a.events(account: "lee").last?.kind == .entitlementRevoked)
        #expect(a.entitlements("kim").isEmpty)
    }

    @Test("with --reject-stale-purchases a purchase notification does not pay an order opened after the purchase", arguments: Backend.all)
    func stalePurchaseNotification(_ backend: Backend) throws {
        let a = AfterSaleWorld(backend, policy: PurchaseEngine.Policy(rejectStalePurchases: true))
        defer { a.h.store.close() }
        let order = a.h.order("nia")
        // Bought a day before the order existed (far beyond the 300 s allowance).
        let old = AfterSaleWorld.tx("st1", token: order.id, purchase: order.createTimeMs - 86_400_000)
        #expect(a.notify(AfterSaleWorld.note("ONE_TIME_CHARGE", signed: Shop.now, tx: old)) == .done(.applied))
        #expect(a.h.get(order.id).state == .pending)
        // A fresh purchase still pays it.
        let fresh = AfterSaleWorld.tx("st2", token: order.id, purchase: order.createTimeMs + 1000)
        #expect(a.notify(AfterSaleWorld.note("ONE_TIME_CHARGE", signed: Shop.now + 1, tx: fresh)) == .done(.applied))
        #expect(a.h.get(order.id).transactionID == "st2")
    }

    @Test("event cursors increase in commit order, one commit's events consecutive; paging by account", arguments: Backend.all)
    func cursors(_ backend: Backend) throws {
        let a = AfterSaleWorld(backend)
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

    @Test(
        "notifications (upgrades, downgrades, family grants, refunds) and restores applied shuffled, with duplicates, end in the same orders and entitlements as in signedDate order; every event agrees with its snapshot"
    )
    func orderIndependence() throws {
        var rng = SplitMix(seed: 9)
        let inOrder = AfterSaleWorld(Backend.all[0]), shuffled = AfterSaleWorld(Backend.all[0])
        var ops: [Storm.Op] = []
        var orders: [(String, String)] = []
        for i in 0..<40 {
            let account = "acct-\(i % 7)"
            let a = inOrder.h.order(account, product: AfterSaleWorld.monthly)
            let b = shuffled.h.order(account, product: AfterSaleWorld.monthly)
            orders.append((a.id, b.id))
            ops += Storm.lifecycle(index: i, token: "TOKEN-\(i)", rng: &rng)
        }
        func resolve(_ t: TestStore.Transaction?, _ pick: (String, String) -> String) -> TestStore.Transaction? {
            guard var t else { return nil }
            if let token = t.appAccountToken, let i = Int(token.dropFirst(6)) { t.appAccountToken = pick(orders[i].0, orders[i].1) }
            return t
        }
        func run(_ op: Storm.Op, on a: AfterSaleWorld, _ pick: @escaping (String, String) -> String) {
            switch op {
            case .note(var n):
                n.transaction = resolve(n.transaction, pick)
                _ = a.notify(n)
            case .restore(let index, let t):
                let jws = try! Shop.store.signedTransaction(resolve(t, pick)!)
                _ = a.h.restore("acct-\(index % 7)", jws: [jws])
            }
        }
        for op in ops.sorted(by: { $0.signedDate < $1.signedDate }) { run(op, on: inOrder) { a, _ in a } }
        var storm = ops + ops.prefix(ops.count / 3)
        storm.shuffle(using: &rng)
        for op in storm { run(op, on: shuffled) { _, b in b } }
        // Both clocks end at the newest signedDate; entitlements are compared as of then.
        #expect(inOrder.clock.nowMilliseconds() == shuffled.clock.nowMilliseconds())
        for (a, b) in orders {
            let x = inOrder.h.get(a), y = shuffled.h.get(b)
            #expect(x.state == y.state && x.refundedQuantity == y.refundedQuantity && x.transactionID == y.transactionID)
        }
        var states = Set<Billing.EntitlementState>()
        for i in 0..<7 {
            func view(_ e: Billing.Entitlement) -> String {
                "\(e.originalTransactionID) \(e.productID) \(e.latestTransactionID) \(e.expiresTimeMs) \(e.state) \(e.autoRenew) "
                    + "\(e.revocationTimeMs) \(e.pendingProductID) \(e.ownership) \(e.gracePeriodExpiresTimeMs)"
            }
            let x = inOrder.entitlements("acct-\(i)").map(view), y = shuffled.entitlements("acct-\(i)").map(view)
            #expect(x == y)
            states.formUnion(inOrder.entitlements("acct-\(i)").map(\.state))
        }
        // The storm reaches the interesting states, not only ACTIVE.
        #expect(states.contains(.revoked) && states.contains(.expired) && states.contains(.active))
        #expect(inOrder.entitlements("acct-0").count + inOrder.entitlements("acct-1").count > 2)
        #expect(Storm.violations(inOrder.events()).isEmpty, "\(Storm.violations(inOrder.events()).prefix(3))")
        #expect(Storm.violations(shuffled.events()).isEmpty, "\(Storm.violations(shuffled.events()).prefix(3))")
    }
}

/// Notification lifecycles for storms: a purchase, renewals, maybe an upgrade or a downgrade, a refund of the
/// first, status changes, expiry, and sometimes a Family Sharing grant taken back.
enum Storm {
    static let premium = "com.example.pro.premium"
    static let basic = "com.example.pro.basic"

    /// A notification, or a restore of one signed transaction by the lifecycle's account (how an isUpgraded copy
    /// reaches billingd: from the device).
    enum Op {
        case note(TestStore.Notification)
        case restore(index: Int, TestStore.Transaction)

        var signedDate: Int64 {
            switch self {
            case .note(let n): n.signedDate
            case .restore(_, let t): t.signedDate ?? 0
            }
        }
    }

    static func lifecycle(index i: Int, token: String, rng: inout SplitMix) -> [Op] {
        let day: Int64 = 86_400_000
        let original = "st-\(i)-0"
        var t = Shop.now + Int64(i) * 1000
        var ops: [Op] = []
        func tx(_ id: String, _ product: String, purchase: Int64, original: String = original) -> TestStore.Transaction {
            var x = AfterSaleWorld.tx(
                id, product: product, type: AfterSaleWorld.sub, original: original, token: token, purchase: purchase,
                expires: purchase + 30 * day, signed: purchase)
            x.subscriptionGroupIdentifier = "20000001"
            return x
        }
        let first = tx(original, AfterSaleWorld.monthly, purchase: t)
        ops.append(.note(AfterSaleWorld.note("SUBSCRIBED", subtype: "INITIAL_BUY", signed: t, tx: first)))
        let renewals = Int.random(in: 0...3, using: &rng)
        var last = first
        for r in 1...max(1, renewals) where renewals > 0 {
            t += 30 * day
            last = tx("st-\(i)-\(r)", AfterSaleWorld.monthly, purchase: t)
            ops.append(.note(AfterSaleWorld.note("DID_RENEW", signed: t, tx: last)))
        }
        switch Int.random(in: 0..<4, using: &rng) {
        case 0:
            // Upgrade mid-period: the new product at once; the old transaction re-signed isUpgraded reaches
            // billingd later from the device.
            t += 10 * day
            let up = tx("st-\(i)-up", premium, purchase: t)
            var info = TestStore.RenewalInfo(originalTransactionID: original, productID: premium, signedDate: t)
            info.autoRenewProductID = premium
            ops.append(.note(AfterSaleWorld.note("DID_CHANGE_RENEWAL_PREF", subtype: "UPGRADE", signed: t, tx: up, renewal: info)))
            var flagged = last
            flagged.isUpgraded = true
            flagged.signedDate = t + 1
            ops.append(.restore(index: i, flagged))
            last = up
        case 1:
            // Downgrade: pending until the renewal, which brings the cheaper product.
            t += 1000
            var info = TestStore.RenewalInfo(originalTransactionID: original, productID: AfterSaleWorld.monthly, signedDate: t)
            info.autoRenewProductID = basic
            ops.append(.note(AfterSaleWorld.note("DID_CHANGE_RENEWAL_PREF", subtype: "DOWNGRADE", signed: t, tx: last, renewal: info)))
            t = last.purchaseDate + 30 * day
            last = tx("st-\(i)-down", basic, purchase: t)
            var renewed = TestStore.RenewalInfo(originalTransactionID: original, productID: basic, signedDate: t)
            renewed.autoRenewProductID = basic
            ops.append(.note(AfterSaleWorld.note("DID_RENEW", signed: t, tx: last, renewal: renewed)))
        default: break
        }
        if Int.random(in: 0..<3, using: &rng) == 0 {
            t += 1000
            var refunded = first
            refunded.revocationDate = t
            refunded.revocationReason = 0
            refunded.revocationType = "REFUND_FULL"
            refunded.signedDate = t
            ops.append(.note(AfterSaleWorld.note("REFUND", signed: t, tx: refunded)))
        }
        if Bool.random(using: &rng) {
            t += 1000
            var info = TestStore.RenewalInfo(originalTransactionID: original, productID: last.productID, autoRenewStatus: 0, signedDate: t)
            info.autoRenewProductID = last.productID
            ops.append(.note(AfterSaleWorld.note("DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED", signed: t, tx: last, renewal: info)))
        }
        if Int.random(in: 0..<4, using: &rng) == 0 {
            t += 1000
            ops.append(.note(AfterSaleWorld.note("EXPIRED", subtype: "VOLUNTARY", signed: t, tx: last)))
        }
        if Int.random(in: 0..<4, using: &rng) == 0 {
            // A Family Sharing grant of another subscription to the same account, later taken back.
            let base = Shop.now + Int64(i) * 1000 + 500
            var shared = tx("st-\(i)-fam", AfterSaleWorld.monthly, purchase: base, original: "st-\(i)-fam")
            shared.inAppOwnershipType = "FAMILY_SHARED"
            ops.append(.note(AfterSaleWorld.note("SUBSCRIBED", subtype: "INITIAL_BUY", signed: base, tx: shared)))
            var revoked = shared
            revoked.revocationDate = base + 5 * day
            revoked.revocationType = "FAMILY_REVOKE"
            revoked.signedDate = base + 5 * day
            ops.append(.note(AfterSaleWorld.note("REVOKE", signed: base + 5 * day, tx: revoked)))
        }
        return ops
    }

    /// Events whose type does not agree with their snapshot, or that repeat what was already said: a REVOKED that
    /// is not revoked, a second GRANTED for one account and entitlement, a RENEWED whose expiry did not move
    /// forward, a PRODUCT_CHANGED whose product did not change, an EXPIRED that still grants access.
    static func violations(_ events: [EventRecord]) -> [String] {
        var bad: [String] = []
        // Per entitlement: the change seen last (one change may write several events with one snapshot) and the
        // snapshot from before it.
        var last: [String: (change: String, before: Billing.Entitlement?, after: Billing.Entitlement)] = [:]
        var granted = Set<String>()
        for e in events {
            guard let snap = e.entitlement else { continue }
            let key = e.accountID + "|" + snap.originalTransactionID
            let change = "\(e.cause)|\(e.notificationUUID ?? "")|\(e.timeMs)|\(e.transactionID ?? "")"
            let before = last[key].map { $0.change == change ? $0.before : $0.after } ?? nil
            switch e.kind {
            case .entitlementRevoked where snap.state != .revoked: bad.append("REVOKED not revoked at \(e.cursor)")
            case .entitlementGranted where !granted.insert(key).inserted: bad.append("second GRANTED at \(e.cursor)")
            case .entitlementRenewed where before.map({ snap.expiresTimeMs <= $0.expiresTimeMs }) ?? false:
                bad.append("RENEWED without a later expiry at \(e.cursor)")
            case .entitlementProductChanged where before?.productID == snap.productID: bad.append("PRODUCT_CHANGED same product at \(e.cursor)")
            case .entitlementExpired where snap.active: bad.append("EXPIRED but active at \(e.cursor)")
            default: break
            }
            last[key] = (change, before, snap)
        }
        return bad
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
