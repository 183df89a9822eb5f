@testable import AfterSale
import AppStore
import Billing
@testable import BillingService
import Crypto
import Foundation
import Testing
import TestSupport

/// A notification processor over an in-memory store, with the test store's root and a manual clock.
struct Intake {
    static let other = "com.example.other"

    let store = InMemoryOrderStore()
    let clock = ManualClock(milliseconds: Shop.now)
    let processor: NotificationProcessor

    /// `bundleIDs` may serve a second app, so that a nested item of that app passes the verifier and meets the
    /// notification's own check.
    init(bundleIDs: Set<String> = [Shop.bundle], policy: PurchaseEngine.Policy = .init()) {
        processor = NotificationProcessor(
            settings: VerifierSettings(
                anchors: TrustAnchors(roots: [Shop.store.root]), bundleIDs: bundleIDs, environments: [.xcode, .sandbox],
                now: { Shop.now }),
            store: store, catalog: nil, policy: policy, clock: clock)
    }

    static func note(
        _ type: String = "ONE_TIME_CHARGE", subtype: String? = nil, uuid: String? = nil, signed: Int64 = Shop.now
    )
        -> TestStore.Notification
    {
        TestStore.Notification(type: type, subtype: subtype, uuid: uuid, signedDate: signed, bundleID: Shop.bundle)
    }

    static func tx(_ id: String, signed: Int64 = Shop.now) -> TestStore.Transaction {
        var t = TestStore.Transaction(
            transactionID: id, productID: "com.example.pro.monthly", type: "Auto-Renewable Subscription", bundleID: Shop.bundle,
            purchaseDate: Shop.now - 60_000)
        t.expiresDate = Shop.now + 30 * 86_400_000
        t.signedDate = signed
        return t
    }

    /// What the processor makes of a signed payload, without applying it.
    func verify(_ signed: String) -> Result<VerifiedNotification, NotificationProcessor.Refusal> {
        var summary = NotificationProcessor.Summary()
        return processor.verify(signed: signed, &summary)
    }

    func verify(_ n: TestStore.Notification) -> Result<VerifiedNotification, NotificationProcessor.Refusal> {
        verify(try! Shop.store.signedNotification(n))
    }

    /// The payload of `n` after `edit`, signed.
    static func signed(_ n: TestStore.Notification, _ edit: (inout [String: Any]) -> Void) -> String {
        var payload = try! Shop.store.notificationPayload(n)
        edit(&payload)
        return try! Shop.store.signJWS(payload)
    }

    func deliver(_ signed: String) -> NotificationProcessor.Outcome {
        let body = Array(TestStore.notificationBody(signed).utf8)
        let r: Result<NotificationProcessor.Outcome, BillingError> = wait { done in
            processor.process(body: body) { outcome, _ in done(.success(outcome)) }
        }
        return try! r.get()
    }

    func deliver(_ n: TestStore.Notification) -> NotificationProcessor.Outcome { deliver(try! Shop.store.signedNotification(n)) }
}

extension Result where Failure == NotificationProcessor.Refusal {
    var reason: String? {
        if case .failure(let r) = self { return r.reason }
        return nil
    }
    var detail: String {
        if case .failure(let r) = self { return r.detail }
        return ""
    }
}

extension NotificationProcessor.Outcome {
    var reason: String? {
        if case .rejected(let r, _) = self { return r }
        return nil
    }
}

@Suite("Signed data as the rules see it: every field of Apple's payloads")
struct TransactionFieldTests {
    @Test("every new field of JWSTransactionDecodedPayload is mapped")
    func everyField() throws {
        var t = Intake.tx("f1")
        t.inAppOwnershipType = "FAMILY_SHARED"
        t.isUpgraded = true
        t.revocationDate = Shop.now - 1000
        t.revocationType = "REFUND_PRORATED"
        t.revocationPercentage = 33_333
        t.price = 9_990
        t.currency = "EUR"
        t.storefront = "FRA"
        t.offerType = 3
        t.offerIdentifier = "SPRING"
        t.subscriptionGroupIdentifier = "21345678"
        let got = try Shop.verifier().verifySignedTransaction(Shop.store.signedTransaction(t)).get()
        #expect(got.store == .appStore)
        #expect(got.ownership == .familyShared)
        #expect(got.upgraded)
        #expect(got.revocationType == .refundProrated && got.revocationPercentage == 33_333)
        #expect(got.price == PriceFacts(priceMilliunits: 9_990, currency: "EUR", storefront: "FRA", offerID: "SPRING", offerType: "OFFER_CODE"))
        #expect(got.subscriptionGroupID == "21345678")
        #expect(!got.isFullyRefunded)
    }

    @Test("absent fields take their defaults")
    func defaults() throws {
        var t = Intake.tx("f2")
        t.storefront = ""
        let got = try Shop.verifier().verifySignedTransaction(Shop.store.signedTransaction(t)).get()
        #expect(got.ownership == .purchased && !got.upgraded)
        #expect(got.revocationType == .unspecified && got.revocationPercentage == 0)
        #expect(got.price == PriceFacts())
        #expect(got.subscriptionGroupID == "")
    }

    @Test(
        "offerType numbers become Apple's names; others their decimal text",
        arguments: [(1, "INTRODUCTORY_OFFER"), (2, "PROMOTIONAL_OFFER"), (3, "OFFER_CODE"), (4, "WIN_BACK_OFFER"), (9, "9")])
    func offerTypes(_ n: Int, _ name: String) throws {
        var t = Intake.tx("o\(n)")
        t.offerType = n
        #expect(try Shop.verifier().verifySignedTransaction(Shop.store.signedTransaction(t)).get().price.offerType == name)
    }

    @Test(
        "revocationType names; absent or unknown is unspecified",
        arguments: [
            ("REFUND_FULL", RevocationType.refundFull), ("REFUND_PRORATED", .refundProrated), ("FAMILY_REVOKE", .familyRevoke),
            ("SOMETHING_NEW", .unspecified),
        ])
    func revocationTypes(_ name: String, _ type: RevocationType) throws {
        var t = Intake.tx("r-" + name)
        t.revocationDate = Shop.now - 1000
        t.revocationType = name
        #expect(try Shop.verifier().verifySignedTransaction(Shop.store.signedTransaction(t)).get().revocationType == type)
    }

    @Test("revocationPercentage is clamped to 0...100000", arguments: [(-5, 0), (0, 0), (100_000, 100_000), (250_000, 100_000)])
    func percentage(_ signed: Int, _ kept: Int) throws {
        var t = Intake.tx("p\(signed)")
        t.revocationPercentage = signed
        #expect(try Shop.verifier().verifySignedTransaction(Shop.store.signedTransaction(t)).get().revocationPercentage == kept)
    }
}

@Suite("Notifications: nested items, UUIDs, signed dates, RESCIND_CONSENT")
struct NotificationParsingTests {
    @Test("renewal info gives billing retry and the auto-renew product; the transaction keeps its new fields")
    func renewalFields() throws {
        var n = Intake.note("DID_FAIL_TO_RENEW")
        var t = Intake.tx("n1")
        t.price = 4_990
        t.currency = "USD"
        n.transaction = t
        var r = TestStore.RenewalInfo(originalTransactionID: "n1", productID: t.productID, signedDate: Shop.now - 5)
        r.isInBillingRetryPeriod = true
        r.autoRenewProductID = "com.example.basic.monthly"
        r.gracePeriodExpiresDate = Shop.now + 86_400_000
        n.renewal = r
        let v = try Intake().verify(n).get()
        let renewal = try #require(v.renewal)
        #expect(renewal.billingRetry == true && renewal.autoRenewProductID == "com.example.basic.monthly")
        #expect(renewal.gracePeriodExpiresTimeMs == Shop.now + 86_400_000 && renewal.signedTimeMs == Shop.now - 5)
        #expect(v.transaction?.price.priceMilliunits == 4_990 && v.transaction?.price.currency == "USD")
        #expect(v.signedTimeMs == Shop.now && v.uuid == n.uuid)
    }

    @Test("renewal info without those fields says nothing about them")
    func renewalFieldsAbsent() throws {
        var n = Intake.note("DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED")
        n.renewal = TestStore.RenewalInfo(originalTransactionID: "n2", productID: "p", autoRenewStatus: 0, signedDate: Shop.now)
        let signed = Intake.signed(n) { payload in
            var data = payload["data"] as! [String: Any]
            let info: [String: Any] = ["originalTransactionId": "n2", "autoRenewStatus": 0, "environment": "Xcode", "signedDate": Shop.now]
            data["signedRenewalInfo"] = try! Shop.store.signJWS(info)
            payload["data"] = data
        }
        let renewal = try #require(try Intake().verify(signed).get().renewal)
        #expect(renewal.billingRetry == nil && renewal.autoRenewProductID == nil && renewal.autoRenew == false)
    }

    @Test("a nested transaction or renewal info of another environment is refused, naming both")
    func nestedEnvironment() {
        let a = Intake()
        var n = Intake.note()
        var t = Intake.tx("e1")
        t.environment = "Sandbox"
        n.transaction = t
        let r = a.verify(n)
        #expect(r.reason == "RECEIPT_MALFORMED")
        #expect(r.detail.contains("signedTransactionInfo") && r.detail.contains("Sandbox") && r.detail.contains("Xcode"))

        var m = Intake.note("DID_CHANGE_RENEWAL_STATUS")
        m.transaction = Intake.tx("e2")
        m.renewal = TestStore.RenewalInfo(originalTransactionID: "e2", productID: "p", environment: "Sandbox", signedDate: Shop.now)
        let s = a.verify(m)
        #expect(s.reason == "RECEIPT_MALFORMED" && s.detail.contains("signedRenewalInfo") && s.detail.contains("Sandbox"))
        // Over the whole path: 400, nothing recorded, so the same UUID applies once it is sound.
        #expect(a.deliver(n).reason == "RECEIPT_MALFORMED")
        n.transaction?.environment = "Xcode"
        #expect(a.deliver(n) == .done(.applied))
    }

    @Test("a nested transaction of another app (served here too) is refused with WRONG_APP")
    func nestedBundle() {
        let a = Intake(bundleIDs: [Shop.bundle, Intake.other])
        var n = Intake.note()
        var t = Intake.tx("b1")
        t.bundleID = Intake.other
        n.transaction = t
        let r = a.verify(n)
        #expect(r.reason == "WRONG_APP" && r.detail.contains(Intake.other) && r.detail.contains(Shop.bundle))
        #expect(a.deliver(n).reason == "WRONG_APP")
        n.transaction?.bundleID = Shop.bundle
        #expect(a.deliver(n) == .done(.applied))
    }

    @Test(
        "notificationUUID must be 8-4-4-12 hex digits",
        arguments: [
            "", "not-a-uuid", "0f8fad5b-d9cb-469f-a165-70867728950", "0f8fad5b-d9cb-469f-a165-70867728950e0",
            "0f8fad5bd9cb469fa16570867728950e", "{0f8fad5b-d9cb-469f-a165-70867728950e}", "0f8fad5b-d9cb-469f-a165-70867728950g",
            "0f8fad5b-d9cb-469f-a165-70867728950\0", "0f8fad5b-d9cb-469f-a165-70867728950e\0", "\00f8fad5b-d9cb-469f-a165-70867728950",
            "0f8fad5b_d9cb_469f_a165_70867728950e", "0f8fad5b-d9cb-469f-a165-7086772895Ω",
        ])
    func badUUID(_ uuid: String) {
        let a = Intake()
        let r = a.verify(Intake.note("TEST", uuid: uuid))
        #expect(r.reason == "RECEIPT_MALFORMED" && r.detail.contains("notificationUUID"))
        #expect(a.deliver(Intake.note("TEST", uuid: uuid)).reason == "RECEIPT_MALFORMED")
    }

    @Test("a notification without notificationUUID, or with a number there, is refused")
    func missingUUID() {
        let a = Intake()
        #expect(a.verify(Intake.signed(Intake.note("TEST")) { $0["notificationUUID"] = nil }).reason == "RECEIPT_MALFORMED")
        #expect(a.verify(Intake.signed(Intake.note("TEST")) { $0["notificationUUID"] = 12 }).reason == "RECEIPT_MALFORMED")
    }

    @Test("UUIDs in either case are accepted, and recorded in lowercase (one notification, one record)")
    func goodUUID() throws {
        for uuid in ["0f8fad5b-d9cb-469f-a165-70867728950e", "0F8FAD5B-D9CB-469F-A165-70867728950E"] {
            #expect(try Intake().verify(Intake.note("TEST", uuid: uuid)).get().uuid == "0f8fad5b-d9cb-469f-a165-70867728950e")
        }
    }

    @Test("a signedDate more than the clock skew in the future is refused; at the skew it is accepted")
    func futureSignedDate() throws {
        let skew = PurchaseEngine.Policy().clockSkewMs
        let a = Intake()
        #expect(try a.verify(Intake.note("TEST", signed: Shop.now + skew)).get().signedTimeMs == Shop.now + skew)
        let r = a.verify(Intake.note("TEST", signed: Shop.now + skew + 1))
        #expect(r.reason == "RECEIPT_MALFORMED" && r.detail.contains("clock skew"))
        // The skew is the policy's (--clock-skew).
        let strict = Intake(policy: PurchaseEngine.Policy(clockSkewMs: 1000))
        #expect(strict.verify(Intake.note("TEST", signed: Shop.now + 1001)).reason == "RECEIPT_MALFORMED")
        #expect(strict.deliver(Intake.note("TEST", signed: Shop.now + 1001)).reason == "RECEIPT_MALFORMED")
        // The clock moves on: the same notification is then fine.
        strict.clock.advance(milliseconds: 1)
        #expect((try? strict.verify(Intake.note("TEST", signed: Shop.now + 1001)).get()) != nil)
    }

    @Test("nested items signed more than the clock skew in the future are refused")
    func futureNestedSignedDate() {
        let later = Shop.now + PurchaseEngine.Policy().clockSkewMs + 1
        var n = Intake.note()
        n.transaction = Intake.tx("d1", signed: later)
        let r = Intake().verify(n)
        #expect(r.reason == "RECEIPT_MALFORMED" && r.detail.contains("signedTransactionInfo"))
        var m = Intake.note("DID_CHANGE_RENEWAL_STATUS")
        m.renewal = TestStore.RenewalInfo(originalTransactionID: "d2", productID: "p", signedDate: later)
        let s = Intake().verify(m)
        #expect(s.reason == "RECEIPT_MALFORMED" && s.detail.contains("signedRenewalInfo"))
    }

    /// Dates that are no number of milliseconds are refused as malformed (the chain is checked at the clock);
    /// 1970 itself fails the chain, whose certificates start later.
    @Test(
        "an absent or absurd signedDate is refused, never replaced by the clock",
        arguments: [
            ("absent", "RECEIPT_MALFORMED"), ("1e300", "RECEIPT_MALFORMED"), ("-1e300", "RECEIPT_MALFORMED"),
            ("9.3e18", "RECEIPT_MALFORMED"), ("text", "RECEIPT_MALFORMED"), ("0", "RECEIPT_UNTRUSTED"), ("-1", "RECEIPT_UNTRUSTED"),
        ])
    func absurdSignedDate(_ value: String, _ reason: String) {
        let a = Intake()
        let n = Intake.note("TEST")
        let signed = Intake.signed(n) { payload in
            switch value {
            case "absent": payload["signedDate"] = nil
            case "text": payload["signedDate"] = "1790000000000"
            default: payload["signedDate"] = Double(value)!
            }
        }
        #expect(a.verify(signed).reason == reason, "\(value)")
        #expect(a.deliver(signed).reason == reason, "\(value)")
        // Nothing was recorded: the sound notification with that UUID is applied, not a duplicate.
        #expect(a.deliver(n) == .done(.applied))
    }

    @Test("a nested transaction with an absurd signedDate is refused")
    func absurdNestedSignedDate() {
        var n = Intake.note()
        n.transaction = Intake.tx("a1")
        let signed = Intake.signed(n) { payload in
            var data = payload["data"] as! [String: Any]
            var json = Shop.store.transactionPayload(Intake.tx("a1"))
            json["signedDate"] = 1e300
            data["signedTransactionInfo"] = try! Shop.store.signJWS(json)
            payload["data"] = data
        }
        let r = Intake().verify(signed)
        #expect(r.reason == "RECEIPT_MALFORMED" && r.detail.contains("signedTransactionInfo"))
    }

    @Test("RESCIND_CONSENT carries appData: verified for its app and environment, recorded once")
    func rescindConsent() throws {
        let a = Intake()
        var n = Intake.note("RESCIND_CONSENT")
        n.appAppleID = 1_234_567_890
        n.appTransaction = TestStore.AppTransaction(
            bundleID: Shop.bundle, originalPurchaseDate: Shop.now - 86_400_000, receiptCreationDate: Shop.now)
        let payload = try Shop.store.notificationPayload(n)
        #expect(payload["data"] == nil && payload["appData"] != nil)
        let v = try a.verify(n).get()
        #expect(v.type == "RESCIND_CONSENT" && v.environment == .xcode && v.accepted)
        #expect(v.transaction == nil && v.renewal == nil)
        #expect(a.deliver(n) == .done(.applied))
        #expect(a.deliver(n) == .done(.duplicate))
        // Without the app transaction too.
        var bare = Intake.note("RESCIND_CONSENT")
        bare.appTransaction = nil
        #expect(a.deliver(bare) == .done(.applied))
    }

    @Test("RESCIND_CONSENT for another app, or with an app transaction of another app or environment, is refused")
    func rescindConsentRefusals() {
        let a = Intake(bundleIDs: [Shop.bundle, Intake.other])
        var foreign = Intake.note("RESCIND_CONSENT")
        foreign.bundleID = "com.stranger.app"
        #expect(a.verify(foreign).reason == "WRONG_APP")

        var n = Intake.note("RESCIND_CONSENT")
        n.appTransaction = TestStore.AppTransaction(bundleID: Intake.other, originalPurchaseDate: Shop.now, receiptCreationDate: Shop.now)
        let r = a.verify(n)
        #expect(r.reason == "WRONG_APP" && r.detail.contains("signedAppTransactionInfo"))

        n.appTransaction = TestStore.AppTransaction(
            bundleID: Shop.bundle, receiptType: "Sandbox", originalPurchaseDate: Shop.now, receiptCreationDate: Shop.now)
        let s = a.verify(n)
        #expect(s.reason == "RECEIPT_MALFORMED" && s.detail.contains("Sandbox") && s.detail.contains("Xcode"))
    }

    @Test("RESCIND_CONSENT for an environment not accepted is recorded as ignored")
    func rescindConsentIgnored() {
        let a = Intake()
        var n = Intake.note("RESCIND_CONSENT")
        n.environment = "Production"
        #expect(a.deliver(n) == .done(.ignored))
    }
}
