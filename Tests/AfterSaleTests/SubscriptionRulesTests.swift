import Billing
import Foundation
import Synchronization
import Testing
import TestSupport

/// Proofs as the rules see them once verified: each proof string names a transaction registered here. The
/// signatures are not under test in this file (AfterSaleFlowTests and the wire tests sign for real); the rules are.
final class DirectVerifier: ProofVerifier {
    private let table = Mutex<[String: StoreTransaction]>([:])
    func proof(_ t: StoreTransaction) -> String {
        let key = "proof-" + UUID().uuidString
        table.withLock { $0[key] = t }
        return key
    }
    func verifySignedTransaction(_ jws: String) -> Result<StoreTransaction, BillingError> {
        guard let t = table.withLock({ $0[jws] }) else { return .failure(.receiptMalformed(detail: "unknown test proof")) }
        return .success(t)
    }
    func verifyAppReceipt(_ base64: String) -> Result<[StoreTransaction], BillingError> { .failure(.receiptMalformed(detail: "no receipts here")) }
}

/// One store (memory, SQLite or PostgreSQL) with an engine over direct proofs, and helpers that apply
/// notifications as the verifier hands them to the rules.
struct Subs {
    static let now = Shop.now
    static let day: Int64 = 86_400_000
    static let basicYearly = "com.example.basic.yearly"
    static let premiumMonthly = "com.example.premium.monthly"
    static let basicMonthly = "com.example.basic.monthly"
    static let plusMonthly = "com.example.plus.monthly"
    static let coins = "com.example.coins"

    let store: any OrderStore
    let engine: PurchaseEngine
    let verifier = DirectVerifier()
    let clock = ManualClock(milliseconds: Subs.now)

    init(_ backend: Backend) {
        store = backend.make()
        engine = PurchaseEngine(orders: OrderService(store: store, catalog: nil, clock: clock), verifier: verifier, clock: clock)
    }

    static func sub(
        _ id: String, _ product: String, original: String, purchase: Int64, expires: Int64, signed: Int64? = nil,
        token: String? = nil, upgraded: Bool = false, ownership: Ownership = .purchased
    ) -> StoreTransaction {
        var t = StoreTransaction(
            transactionID: id, originalTransactionID: original, productID: product, productKind: .autoRenewableSubscription,
            purchaseTimeMs: purchase, expiresTimeMs: expires, environment: .sandbox, appAccountToken: token, bundleID: "com.example.app",
            signedTimeMs: signed ?? purchase)
        t.upgraded = upgraded
        t.ownership = ownership
        t.subscriptionGroupID = "21000001"
        t.price = PriceFacts(priceMilliunits: 9990, currency: "USD", storefront: "USA")
        return t
    }

    static func item(
        _ id: String, _ product: String, kind: ProductKind, quantity: Int = 1, token: String? = nil, purchase: Int64 = Subs.now - 1000,
        ownership: Ownership = .purchased
    ) -> StoreTransaction {
        var t = StoreTransaction(
            transactionID: id, originalTransactionID: id, productID: product, productKind: kind, purchaseTimeMs: purchase,
            quantity: quantity, environment: .sandbox, appAccountToken: token, bundleID: "com.example.app", signedTimeMs: purchase)
        t.ownership = ownership
        return t
    }

    /// `t` revoked at `at` (signed then), as a REFUND or REVOKE notification carries it.
    static func revoked(_ t: StoreTransaction, at: Int64, type: RevocationType, percentage: Int = 0) -> StoreTransaction {
        var r = t
        r.revocationTimeMs = at
        r.revocationType = type
        r.revocationPercentage = percentage
        r.revocationReason = 0
        r.signedTimeMs = at
        return r
    }

    func order(_ account: String, _ product: String, quantity: Int = 1) -> Billing.Order {
        let r: Result<Billing.Order, BillingError> = wait {
            engine.orders.createOrder(.init(accountID: account, productID: product, quantity: quantity), completion: $0)
        }
        return try! r.get()
    }

    func submit(_ orderID: String, _ t: StoreTransaction) -> Result<CompletedPurchase, BillingError> {
        let proof = verifier.proof(t)
        return wait { engine.submitReceipt(orderID: orderID, proof: .signedTransaction(proof), transactionID: "", completion: $0) }
    }

    func restore(_ account: String, _ ts: [StoreTransaction]) -> [Billing.Entitlement] {
        let proofs = ts.map(verifier.proof)
        let r: Result<[Billing.Entitlement], BillingError> = wait {
            engine.restorePurchases(accountID: account, appReceipt: "", signedTransactions: proofs, completion: $0)
        }
        return try! r.get()
    }

    @discardableResult
    func notify(
        _ type: String, _ subtype: String? = nil, signed: Int64, tx: StoreTransaction? = nil, renewal: RenewalFact? = nil,
        uuid: String = UUID().uuidString.lowercased()
    ) -> NotificationResult {
        let n = VerifiedNotification(
            uuid: uuid, type: type, subtype: subtype, signedTimeMs: signed, environment: .sandbox, accepted: true,
            transaction: tx, renewal: renewal, signedPayload: "test." + uuid + ".sig")
        let r: Result<NotificationResult, BillingError> = wait { store.apply(n, nowMs: clock.nowMilliseconds(), catalog: nil, completion: $0) }
        return try! r.get()
    }

    static func renewal(
        _ original: String, next: String, signed: Int64, autoRenew: Bool = true, retry: Bool = false, grace: Int64? = nil
    ) -> RenewalFact {
        RenewalFact(
            originalTransactionID: original, autoRenew: autoRenew, gracePeriodExpiresTimeMs: grace, signedTimeMs: signed,
            billingRetry: retry, autoRenewProductID: next)
    }

    func entitlements(_ account: String, at: Int64? = nil) -> [Billing.Entitlement] {
        let r: Result<[Billing.Entitlement], BillingError> = wait {
            store.entitlements(accountID: account, nowMs: at ?? clock.nowMilliseconds(), completion: $0)
        }
        return try! r.get()
    }

    func one(_ account: String, at: Int64? = nil) -> Billing.Entitlement {
        let all = entitlements(account, at: at)
        precondition(all.count == 1, "expected one entitlement, found \(all.count)")
        return all[0]
    }

    func get(_ id: String) -> Billing.Order {
        let r: Result<Billing.Order, BillingError> = wait { engine.orders.getOrder(id: id, completion: $0) }
        return try! r.get()
    }

    var cursor: UInt64 {
        let r: Result<[EventRecord], BillingError> = wait { store.events(after: 0, limit: 100_000, accountID: nil, completion: $0) }
        return try! r.get().last?.cursor ?? 0
    }

    func events(after: UInt64) -> [EventRecord] {
        let r: Result<[EventRecord], BillingError> = wait { store.events(after: after, limit: 1000, accountID: nil, completion: $0) }
        return try! r.get()
    }

    func kinds(after: UInt64) -> [EventKind] { events(after: after).map(\.kind) }

    /// Subscribes `account` to `product` through an order paid by SubmitReceipt; answers the order.
    func subscribe(_ account: String, _ t: StoreTransaction) -> Billing.Order {
        let o = order(account, t.productID)
        var paid = t
        paid.appAccountToken = o.id
        _ = try! submit(o.id, paid).get()
        return o
    }
}

@Suite("Subscriptions as the stores model them: upgrades, downgrades, family sharing, refunds, states", .serialized)
struct SubscriptionRulesTests {
    typealias S = Subs

    @Test("an upgrade takes effect at once: the new product, its expiry, PRODUCT_CHANGED only", arguments: Backend.all)
    func immediateUpgrade(_ backend: Backend) {
        let s = Subs(backend)
        defer { s.store.close() }
        let yearly = S.sub("y1", S.basicYearly, original: "y1", purchase: S.now - 30 * S.day, expires: S.now + 335 * S.day)
        _ = s.subscribe("ann", yearly)
        let start = s.cursor
        let monthly = S.sub("m1", S.premiumMonthly, original: "y1", purchase: S.now - 1000, expires: S.now + 30 * S.day)
        s.notify(
            "DID_CHANGE_RENEWAL_PREF", "UPGRADE", signed: S.now, tx: monthly,
            renewal: S.renewal("y1", next: S.premiumMonthly, signed: S.now))
        let e = s.one("ann")
        #expect(e.productID == S.premiumMonthly && e.latestTransactionID == "m1")
        #expect(e.expiresTimeMs == S.now + 30 * S.day && e.state == .active && e.active && e.pendingProductID.isEmpty)
        #expect(e.subscriptionGroupID == "21000001")
        #expect(s.kinds(after: start) == [.entitlementProductChanged])
        #expect(s.events(after: start).allSatisfy { $0.entitlement?.productID == S.premiumMonthly })
        // The yearly re-signed with isUpgraded arrives later (a restore): nothing changes, no event.
        let mark = s.cursor
        var flagged = yearly
        flagged.upgraded = true
        flagged.signedTimeMs = S.now + 10
        _ = s.restore("ann", [flagged])
        #expect(s.one("ann").productID == S.premiumMonthly)
        #expect(s.kinds(after: mark) == [])
    }

    @Test("after an upgrade lapses, the superseded transaction never grants access again", arguments: Backend.all)
    func upgradeThenLapse(_ backend: Backend) {
        let s = Subs(backend)
        defer { s.store.close() }
        let yearly = S.sub("y1", S.basicYearly, original: "y1", purchase: S.now - 30 * S.day, expires: S.now + 335 * S.day)
        _ = s.subscribe("ann", yearly)
        let monthly = S.sub("m1", S.premiumMonthly, original: "y1", purchase: S.now - 1000, expires: S.now + 30 * S.day)
        s.notify("DID_CHANGE_RENEWAL_PREF", "UPGRADE", signed: S.now, tx: monthly)
        // The monthly lapses with no notification at all: past its expiry nothing grants access.
        let later = S.now + 31 * S.day
        #expect(s.one("ann", at: later).state == .expired)
        #expect(!s.one("ann", at: later).active)
        let start = s.cursor
        s.notify("EXPIRED", "VOLUNTARY", signed: S.now + 31 * S.day, tx: monthly)
        #expect(s.kinds(after: start) == [.entitlementExpired])
        #expect(s.events(after: start).first?.entitlement?.state == .expired)
        // Restoring the upgraded yearly (its expiry still 300 days away) does not bring access back.
        var flagged = yearly
        flagged.upgraded = true
        flagged.signedTimeMs = S.now + 32 * S.day
        let mark = s.cursor
        let restored = s.restore("ann", [flagged])
        #expect(restored.map(\.productID) == [S.premiumMonthly] && restored.allSatisfy { !$0.active })
        #expect(s.kinds(after: mark) == [])
    }

    @Test("whatever order the upgrade's data arrives in, the end state is the same", arguments: Backend.all)
    func upgradeAnyOrder(_ backend: Backend) {
        let s = Subs(backend)
        defer { s.store.close() }
        let yearly = S.sub("y1", S.basicYearly, original: "y1", purchase: S.now - 30 * S.day, expires: S.now + 335 * S.day)
        _ = s.subscribe("ann", yearly)
        // The flagged yearly first: it grants nothing (EXPIRED event), then the upgrade's transaction.
        var flagged = yearly
        flagged.upgraded = true
        flagged.signedTimeMs = S.now + 5
        let start = s.cursor
        _ = s.restore("ann", [flagged])
        #expect(s.one("ann").state == .expired)
        #expect(s.kinds(after: start) == [.entitlementExpired])
        let monthly = S.sub("m1", S.premiumMonthly, original: "y1", purchase: S.now - 1000, expires: S.now + 30 * S.day)
        s.notify("DID_CHANGE_RENEWAL_PREF", "UPGRADE", signed: S.now, tx: monthly)
        let e = s.one("ann")
        #expect(e.productID == S.premiumMonthly && e.state == .active)
        // An older view of the yearly without the flag cannot clear it.
        _ = s.restore("ann", [yearly])
        #expect(s.one("ann").productID == S.premiumMonthly && s.one("ann").active)
    }

    @Test("a downgrade waits for the renewal: pending product, then PRODUCT_CHANGED and RENEWED", arguments: Backend.all)
    func downgradeScheduledThenRenewed(_ backend: Backend) {
        let s = Subs(backend)
        defer { s.store.close() }
        let p1 = S.sub("p1", S.premiumMonthly, original: "p1", purchase: S.now - 10 * S.day, expires: S.now + 20 * S.day)
        _ = s.subscribe("bea", p1)
        var start = s.cursor
        s.notify("DID_CHANGE_RENEWAL_PREF", "DOWNGRADE", signed: S.now, tx: p1, renewal: S.renewal("p1", next: S.basicMonthly, signed: S.now))
        var e = s.one("bea")
        #expect(e.productID == S.premiumMonthly && e.pendingProductID == S.basicMonthly && e.expiresTimeMs == S.now + 20 * S.day)
        #expect(s.kinds(after: start) == [.renewalProductChanged])
        // The renewal brings the new product.
        start = s.cursor
        let b2 = S.sub("b2", S.basicMonthly, original: "p1", purchase: S.now + 20 * S.day, expires: S.now + 50 * S.day)
        s.notify("DID_RENEW", signed: S.now + 20 * S.day, tx: b2, renewal: S.renewal("p1", next: S.basicMonthly, signed: S.now + 20 * S.day))
        e = s.one("bea")
        #expect(e.productID == S.basicMonthly && e.pendingProductID.isEmpty && e.expiresTimeMs == S.now + 50 * S.day)
        #expect(s.kinds(after: start) == [.entitlementProductChanged, .entitlementRenewed])
    }

    @Test("a crossgrade at the next renewal: pending, and cancelling it says so", arguments: Backend.all)
    func crossgrade(_ backend: Backend) {
        let s = Subs(backend)
        defer { s.store.close() }
        let p1 = S.sub("c1", S.basicMonthly, original: "c1", purchase: S.now - 10 * S.day, expires: S.now + 20 * S.day)
        _ = s.subscribe("cal", p1)
        var start = s.cursor
        s.notify("DID_CHANGE_RENEWAL_PREF", signed: S.now, tx: p1, renewal: S.renewal("c1", next: S.plusMonthly, signed: S.now))
        #expect(s.one("cal").pendingProductID == S.plusMonthly)
        #expect(s.kinds(after: start) == [.renewalProductChanged])
        // The customer goes back to the product they have: no pending product any more.
        start = s.cursor
        s.notify("DID_CHANGE_RENEWAL_PREF", signed: S.now + 100, tx: p1, renewal: S.renewal("c1", next: S.basicMonthly, signed: S.now + 100))
        #expect(s.one("cal").pendingProductID.isEmpty)
        #expect(s.kinds(after: start) == [.renewalProductChanged])
        // The same renewal info again (a second delivery under another UUID) changes nothing.
        start = s.cursor
        s.notify("DID_CHANGE_RENEWAL_PREF", signed: S.now + 100, tx: p1, renewal: S.renewal("c1", next: S.basicMonthly, signed: S.now + 100))
        #expect(s.kinds(after: start) == [])
    }

    @Test("Family Sharing: never pays an order, grants by restore or notification, REVOKE takes it back without order events", arguments: Backend.all)
    func familySharing(_ backend: Backend) {
        let s = Subs(backend)
        defer { s.store.close() }
        let o = s.order("kid", S.premiumMonthly)
        let shared = S.sub(
            "f1", S.premiumMonthly, original: "f1", purchase: S.now - 1000, expires: S.now + 30 * S.day, token: o.id, ownership: .familyShared)
        #expect(s.submit(o.id, shared).failure == .notPurchasedByAccount(transactionID: "f1"))
        #expect(s.get(o.id).state == .pending)
        // A purchase notification naming the member's order grants the entitlement and leaves the order pending.
        var start = s.cursor
        s.notify("SUBSCRIBED", "INITIAL_BUY", signed: S.now, tx: shared)
        #expect(s.get(o.id).state == .pending)
        var e = s.one("kid")
        #expect(e.ownership == .familyShared && e.active && e.orderID == nil)
        #expect(s.kinds(after: start) == [.entitlementGranted])
        // REVOKE: the grant goes, no order event.
        start = s.cursor
        s.notify("REVOKE", signed: S.now + 1000, tx: S.revoked(shared, at: S.now + 1000, type: .familyRevoke))
        e = s.one("kid")
        #expect(e.state == .revoked && !e.active)
        #expect(s.kinds(after: start) == [.entitlementRevoked])
        #expect(s.get(o.id).state == .pending)
        // A restore grants a family member's non-consumable the same way.
        let book = S.item("f2", "com.example.book", kind: .nonConsumable, ownership: .familyShared)
        let restored = s.restore("kid2", [book])
        #expect(restored.map(\.ownership) == [.familyShared] && restored.allSatisfy(\.active))
    }

    @Test(
        "a Family Sharing grant that paid an order before ownership was recorded (an upgraded database): its REVOKE leaves the order paid",
        arguments: Backend.all)
    func familyRevokeOfLegacyPayment(_ backend: Backend) throws {
        let s = Subs(backend)
        defer { s.store.close() }
        // The release before the subscription model let a family member's copy pay an order; upgraded, it reads PURCHASED.
        let t = S.sub("lf1", S.premiumMonthly, original: "lf1", purchase: S.now - 1000, expires: S.now + 30 * S.day)
        let o = s.subscribe("kid", t)
        let start = s.cursor
        var revoked = S.revoked(t, at: S.now + 1000, type: .familyRevoke)
        revoked.ownership = .familyShared
        revoked.appAccountToken = o.id
        s.notify("REVOKE", signed: S.now + 1000, tx: revoked)
        // No money moved: the order stays COMPLETED; the grant is gone; the transaction now says FAMILY_SHARED.
        #expect(s.get(o.id).state == .completed && s.get(o.id).refundedQuantity == 0)
        #expect(s.one("kid").state == .revoked && s.one("kid").ownership == .familyShared)
        #expect(s.kinds(after: start) == [.entitlementRevoked])
    }

    @Test("a transaction first recorded without a price takes the price facts a later view carries, once", arguments: Backend.all)
    func priceFilledIn(_ backend: Backend) throws {
        let s = Subs(backend)
        defer { s.store.close() }
        let o = s.order("pia", "com.example.lifetime")
        let bare = S.item("p1", "com.example.lifetime", kind: .nonConsumable, token: o.id)  // as an app receipt: no price
        _ = try s.submit(o.id, bare).get()
        var priced = bare
        priced.signedTimeMs += 10
        priced.price = PriceFacts(priceMilliunits: 4990, currency: "EUR", storefront: "DEU")
        _ = s.restore("pia", [priced])
        var other = priced
        other.signedTimeMs += 10
        other.price = PriceFacts(priceMilliunits: 1, currency: "USD")
        _ = s.restore("pia", [other])
        let h: Result<[OwnedTransaction], BillingError> = wait { s.store.history(accountID: "pia", after: nil, limit: 10, completion: $0) }
        #expect(try h.get().map(\.transaction.price) == [priced.price])
    }

    @Test("prorated refunds refund part of a consumable order; a full refund all of it", arguments: Backend.all)
    func proratedConsumable(_ backend: Backend) throws {
        let s = Subs(backend)
        defer { s.store.close() }
        let o = s.order("dan", S.coins, quantity: 3)
        let coins = S.item("k1", S.coins, kind: .consumable, quantity: 3, token: o.id)
        _ = try s.submit(o.id, coins).get()
        var start = s.cursor
        s.notify("REFUND", signed: S.now + 10, tx: S.revoked(coins, at: S.now + 10, type: .refundProrated, percentage: 33333))
        var got = s.get(o.id)
        #expect(got.state == .completed && got.refundedQuantity == 1)
        #expect(s.kinds(after: start) == [.orderPartiallyRefunded])
        #expect(s.events(after: start).first?.order?.refundedQuantity == 1)
        start = s.cursor
        s.notify("REFUND", signed: S.now + 20, tx: S.revoked(coins, at: S.now + 20, type: .refundFull))
        got = s.get(o.id)
        #expect(got.state == .refunded && got.refundedQuantity == 3)
        #expect(s.kinds(after: start) == [.orderRefunded])
    }

    @Test("a prorated refund of a subscription ends its access; the order is REFUNDED only when full", arguments: Backend.all)
    func proratedSubscription(_ backend: Backend) {
        let s = Subs(backend)
        defer { s.store.close() }
        let t = S.sub("s1", S.premiumMonthly, original: "s1", purchase: S.now - S.day, expires: S.now + 29 * S.day)
        let o = s.subscribe("eve", t)
        let start = s.cursor
        s.notify("REFUND", signed: S.now + 10, tx: S.revoked(t, at: S.now + 10, type: .refundProrated, percentage: 50000))
        #expect(s.get(o.id).state == .completed)
        #expect(s.one("eve").state == .revoked)
        #expect(s.kinds(after: start) == [.orderPartiallyRefunded, .entitlementRevoked])
    }

    @Test("an older period's refund refunds its order and leaves the renewed entitlement alone", arguments: Backend.all)
    func olderPeriodRefund(_ backend: Backend) {
        let s = Subs(backend)
        defer { s.store.close() }
        let p1 = S.sub("r1", S.premiumMonthly, original: "r1", purchase: S.now - 40 * S.day, expires: S.now - 10 * S.day)
        let o = s.subscribe("fay", p1)
        let p2 = S.sub("r2", S.premiumMonthly, original: "r1", purchase: S.now - 10 * S.day, expires: S.now + 20 * S.day)
        s.notify("DID_RENEW", signed: S.now - 10 * S.day, tx: p2)
        let start = s.cursor
        s.notify("REFUND", signed: S.now, tx: S.revoked(p1, at: S.now, type: .refundFull))
        #expect(s.get(o.id).state == .refunded)
        #expect(s.one("fay").active && s.one("fay").latestTransactionID == "r2")
        #expect(s.kinds(after: start) == [.orderRefunded])
    }

    @Test("a notification that changes nothing writes no event (ONE_TIME_CHARGE after SubmitReceipt)", arguments: Backend.all)
    func noChangeNoEvent(_ backend: Backend) throws {
        let s = Subs(backend)
        defer { s.store.close() }
        let o = s.order("gus", "com.example.book")
        let book = S.item("n1", "com.example.book", kind: .nonConsumable, token: o.id)
        _ = try s.submit(o.id, book).get()
        let start = s.cursor
        #expect(s.notify("ONE_TIME_CHARGE", signed: S.now, tx: book) == .applied)
        #expect(s.kinds(after: start) == [])
    }

    @Test("OFFER_REDEEMED INITIAL_BUY completes the pending order its token names", arguments: Backend.all)
    func offerRedeemedInitialBuy(_ backend: Backend) {
        let s = Subs(backend)
        defer { s.store.close() }
        let o = s.order("hal", S.premiumMonthly)
        var t = S.sub("o1", S.premiumMonthly, original: "o1", purchase: S.now - 1000, expires: S.now + 7 * S.day, token: o.id)
        t.price = PriceFacts(priceMilliunits: 0, currency: "USD", storefront: "USA", offerID: "WELCOME", offerType: "OFFER_CODE")
        let start = s.cursor
        s.notify("OFFER_REDEEMED", "INITIAL_BUY", signed: S.now, tx: t)
        let got = s.get(o.id)
        #expect(got.state == .completed && got.transactionID == "o1" && got.store == .appStore)
        #expect(s.kinds(after: start) == [.orderCompleted, .entitlementGranted])
        // OFFER_REDEEMED of a running subscription (UPGRADE) is not a purchase: another pending order stays pending.
        let o2 = s.order("hal", S.premiumMonthly)
        var t2 = S.sub("o2", S.premiumMonthly, original: "o1", purchase: S.now, expires: S.now + 30 * S.day, token: o2.id)
        t2.signedTimeMs = S.now + 1
        s.notify("OFFER_REDEEMED", "UPGRADE", signed: S.now + 1, tx: t2)
        #expect(s.get(o2.id).state == .pending)
    }

    @Test("grace period, then billing retry, then recovery: states and events", arguments: Backend.all)
    func graceRetryRecovery(_ backend: Backend) {
        let s = Subs(backend)
        defer { s.store.close() }
        let t1 = S.sub("g1", S.premiumMonthly, original: "g1", purchase: S.now - 30 * S.day, expires: S.now + 1000)
        _ = s.subscribe("ida", t1)
        var start = s.cursor
        s.notify(
            "DID_FAIL_TO_RENEW", "GRACE_PERIOD", signed: S.now + 2000, tx: t1,
            renewal: S.renewal("g1", next: S.premiumMonthly, signed: S.now + 2000, retry: true, grace: S.now + 16 * S.day))
        #expect(s.kinds(after: start) == [.billingIssue])
        #expect(s.one("ida", at: S.now + 5 * S.day).state == .gracePeriod)
        #expect(s.one("ida", at: S.now + 5 * S.day).active)
        #expect(s.one("ida", at: S.now + 17 * S.day).state == .billingRetry)
        #expect(!s.one("ida", at: S.now + 17 * S.day).active)
        start = s.cursor
        s.notify("GRACE_PERIOD_EXPIRED", signed: S.now + 16 * S.day, tx: t1)
        #expect(s.kinds(after: start) == [.entitlementExpired])
        #expect(s.one("ida", at: S.now + 16 * S.day).state == .billingRetry)
        // The store recovers the payment: a new period, active again.
        start = s.cursor
        let t2 = S.sub("g2", S.premiumMonthly, original: "g1", purchase: S.now + 20 * S.day, expires: S.now + 50 * S.day)
        s.notify(
            "DID_RENEW", "BILLING_RECOVERY", signed: S.now + 20 * S.day, tx: t2,
            renewal: S.renewal("g1", next: S.premiumMonthly, signed: S.now + 20 * S.day))
        let e = s.one("ida", at: S.now + 21 * S.day)
        #expect(e.state == .active && e.latestTransactionID == "g2")
        #expect(s.kinds(after: start) == [.entitlementRenewed])
    }

    @Test("a renewal's events: RENEWED only when the expiry moves forward; status changes say so", arguments: Backend.all)
    func renewalEvents(_ backend: Backend) {
        let s = Subs(backend)
        defer { s.store.close() }
        let t1 = S.sub("w1", S.premiumMonthly, original: "w1", purchase: S.now - 10 * S.day, expires: S.now + 20 * S.day)
        _ = s.subscribe("jon", t1)
        var start = s.cursor
        s.notify(
            "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", signed: S.now, renewal: S.renewal("w1", next: S.premiumMonthly, signed: S.now, autoRenew: false)
        )
        #expect(s.kinds(after: start) == [.renewalStatusChanged])
        #expect(s.one("jon").autoRenew == false)
        // An older renewal (period 0) arriving late moves nothing.
        start = s.cursor
        let t0 = S.sub("w0", S.premiumMonthly, original: "w1", purchase: S.now - 40 * S.day, expires: S.now - 10 * S.day)
        s.notify("DID_RENEW", signed: S.now - 40 * S.day, tx: t0)
        #expect(s.kinds(after: start) == [])
        #expect(s.one("jon").latestTransactionID == "w1")
    }

    @Test("prices, currency, storefront and offer are kept; history is newest purchase first, paged", arguments: Backend.all)
    func historyAndPrices(_ backend: Backend) throws {
        let s = Subs(backend)
        defer { s.store.close() }
        var ids: [String] = []
        for i in 0..<5 {
            let o = s.order("kim", S.coins)
            // h2 and h3 share a purchase time (ties go by transaction id), on both sides of a page boundary.
            let offsets: [Int64] = [10, 9, 8, 8, 6]
            var t = S.item("h\(i)", S.coins, kind: .consumable, token: o.id, purchase: S.now - offsets[i] * 1000)
            t.price = PriceFacts(priceMilliunits: 990 + Int64(i), currency: "EUR", storefront: "DEU", offerID: "", offerType: "")
            if i == 1 { t.purchaseToken = "tok." + String(repeating: "x", count: 300) }  // Google Play's, unbounded
            _ = try s.submit(o.id, t).get()
            ids.append("h\(i)")
        }
        let first: Result<[OwnedTransaction], BillingError> = wait { s.store.history(accountID: "kim", after: nil, limit: 3, completion: $0) }
        let page1 = try first.get()
        #expect(page1.map(\.transaction.transactionID) == ["h4", "h3", "h2"])
        #expect(page1[1].transaction.purchaseTimeMs == page1[2].transaction.purchaseTimeMs)
        #expect(page1[0].transaction.price == PriceFacts(priceMilliunits: 994, currency: "EUR", storefront: "DEU"))
        let last = page1.last!.transaction
        let second: Result<[OwnedTransaction], BillingError> = wait {
            s.store.history(
                accountID: "kim", after: HistoryCursor(purchaseTimeMs: last.purchaseTimeMs, transactionID: last.transactionID), limit: 3, completion: $0)
        }
        #expect(try second.get().map(\.transaction.transactionID) == ["h1", "h0"])
        let found: Result<TransactionLookup?, BillingError> = wait { s.store.lookup(transactionID: "h2", completion: $0) }
        let hit = try #require(try found.get())
        #expect(hit.owned.accountID == "kim" && hit.order?.transactionID == "h2")
        // A Google Play purchase token finds its transaction too (GetTransaction by the token an app holds).
        let byToken: Result<TransactionLookup?, BillingError> = wait {
            s.store.lookup(transactionID: "tok." + String(repeating: "x", count: 300), completion: $0)
        }
        let tokenHit = try #require(try byToken.get())
        #expect(tokenHit.owned.transaction.transactionID == "h1" && tokenHit.owned.transaction.purchaseToken.count == 304)
        let none: Result<TransactionLookup?, BillingError> = wait { s.store.lookup(transactionID: "nope", completion: $0) }
        #expect(try none.get() == nil)
    }
}
