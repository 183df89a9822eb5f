import AppStore
import Crypto
import Foundation
import Testing

/// One test store for this file's tests.
enum ScopeStore {
    static let store: TestStore = {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("billing-scope-\(UUID().uuidString)").path
        return try! TestStore.open(directory: dir, create: true)
    }()
    static let now: Int64 = 1_790_000_000_000
    static let bundle = "com.example.app"

    static func verifier(
        environments: Set<AppStoreEnvironment> = [.xcode, .sandbox, .production], appAppleID: Int64? = nil
    )
        -> SignedDataVerifier
    {
        SignedDataVerifier(
            settings: VerifierSettings(
                anchors: TrustAnchors(roots: [store.root]), bundleIDs: [bundle], appAppleID: appAppleID,
                environments: environments, now: { now }))
    }

    /// The decoded payload of a compact JWS.
    static func decoded(_ jws: String) throws -> [String: Any] {
        let part = String(jws.split(separator: ".")[1])
        var b64 = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        b64 += String(repeating: "=", count: (4 - b64.count % 4) % 4)
        let data = try #require(Data(base64Encoded: b64))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }
}

@Suite("Notification scope: data, summary, externalPurchaseToken, appData")
struct NotificationScopeTests {
    func rescind(environment: String = "Xcode", bundle: String = ScopeStore.bundle, appAppleID: Int64? = nil) throws -> String {
        var n = TestStore.Notification(
            type: "RESCIND_CONSENT", uuid: "0f8fad5b-d9cb-469f-a165-70867728950e", signedDate: ScopeStore.now, bundleID: bundle,
            environment: environment)
        n.appAppleID = appAppleID
        n.appTransaction = TestStore.AppTransaction(
            bundleID: bundle, receiptType: environment, originalPurchaseDate: ScopeStore.now - 1000, receiptCreationDate: ScopeStore.now)
        return try ScopeStore.store.signedNotification(n)
    }

    @Test("RESCIND_CONSENT's appData gives the environment, bundle id and app id, and its app transaction")
    func appData() throws {
        let p = try ScopeStore.verifier().verifyNotification(rescind(appAppleID: 42)).get()
        #expect(p.data == nil)
        let app = try #require(p.appData)
        #expect(app.bundleID == ScopeStore.bundle && app.environment == "Xcode" && app.appAppleID == 42)
        #expect(p.environment == "Xcode" && p.bundleID == ScopeStore.bundle && p.appAppleID == 42)
        let signed = try #require(app.signedAppTransactionInfo)
        let transaction = try ScopeStore.verifier().verifyAppTransaction(signed).get()
        #expect(transaction.bundleID == ScopeStore.bundle && transaction.receiptType == "Xcode")
    }

    @Test("appData is checked like data: another app, an environment not accepted, another production app id")
    func appDataRefusals() throws {
        guard case .failure(.wrongApp) = ScopeStore.verifier().verifyNotification(try rescind(bundle: "com.other.app")) else {
            Issue.record("another bundle")
            return
        }
        guard case .failure(.environmentNotAllowed) = ScopeStore.verifier(environments: [.sandbox]).verifyNotification(try rescind())
        else {
            Issue.record("environment")
            return
        }
        let production = try rescind(environment: "Production", appAppleID: 7)
        guard case .failure(.wrongApp) = ScopeStore.verifier(appAppleID: 8).verifyNotification(production) else {
            Issue.record("app id")
            return
        }
        #expect((try? ScopeStore.verifier(appAppleID: 7).verifyNotification(production).get()) != nil)
    }

    @Test("an external purchase token's environment follows Apple's SANDBOX prefix")
    func externalPurchaseToken() throws {
        for (id, environment) in [("SANDBOX_b2158121", "Sandbox"), ("SANDBOXb2158121", "Sandbox"), ("b2158121", "Production")] {
            let payload: [String: Any] = [
                "notificationType": "EXTERNAL_PURCHASE_TOKEN", "subtype": "UNREPORTED", "notificationUUID": "002e14d5-51f5-4503-b5a8-c3a1af68eb20",
                "version": "2.0", "signedDate": ScopeStore.now,
                "externalPurchaseToken": [
                    "externalPurchaseId": id, "tokenCreationDate": ScopeStore.now, "appAppleId": 55555, "bundleId": ScopeStore.bundle,
                ] as [String: Any],
            ]
            let p = try ScopeStore.verifier().verifyNotification(ScopeStore.store.signJWS(payload)).get()
            #expect(p.environment == environment, "\(id)")
        }
    }
}

@Suite("The test store mints Apple-shaped payloads")
struct TestStoreMintingTests {
    @Test("transactions carry every field they are given, with Apple's names and JSON types")
    func transactionFields() throws {
        var t = TestStore.Transaction(transactionID: "1", productID: "p", bundleID: ScopeStore.bundle, purchaseDate: ScopeStore.now)
        t.inAppOwnershipType = "FAMILY_SHARED"
        t.isUpgraded = true
        t.revocationType = "REFUND_PRORATED"
        t.revocationPercentage = 50_000
        t.price = 1_990
        t.currency = "EUR"
        t.storefront = "DEU"
        t.offerType = 4
        t.offerIdentifier = "WB"
        t.subscriptionGroupIdentifier = "G1"
        let json = try ScopeStore.decoded(ScopeStore.store.signedTransaction(t))
        #expect(json["inAppOwnershipType"] as? String == "FAMILY_SHARED")
        #expect(json["isUpgraded"] as? Bool == true)
        #expect(json["revocationType"] as? String == "REFUND_PRORATED" && json["revocationPercentage"] as? Int == 50_000)
        #expect(json["price"] as? Int == 1_990 && json["currency"] as? String == "EUR" && json["storefront"] as? String == "DEU")
        #expect(json["offerType"] as? Int == 4 && json["offerIdentifier"] as? String == "WB")
        #expect(json["subscriptionGroupIdentifier"] as? String == "G1")
        let p = try ScopeStore.verifier().verifyTransaction(ScopeStore.store.signedTransaction(t)).get()
        #expect(p.isUpgraded == true && p.price == 1_990 && p.offerType == 4 && p.revocationPercentage == 50_000)
    }

    @Test("renewal info carries the auto-renew product, billing retry and the grace period")
    func renewalFields() throws {
        var r = TestStore.RenewalInfo(originalTransactionID: "1", productID: "p", signedDate: ScopeStore.now)
        r.autoRenewProductID = "q"
        r.isInBillingRetryPeriod = true
        r.gracePeriodExpiresDate = ScopeStore.now + 1000
        var n = TestStore.Notification(type: "DID_FAIL_TO_RENEW", subtype: "GRACE_PERIOD", signedDate: ScopeStore.now, bundleID: ScopeStore.bundle)
        n.renewal = r
        let p = try ScopeStore.verifier().verifyNotification(ScopeStore.store.signedNotification(n)).get()
        let info = try ScopeStore.verifier().verifyRenewalInfo(#require(p.data?.signedRenewalInfo)).get()
        #expect(info.autoRenewProductID == "q" && info.isInBillingRetryPeriod == true && info.gracePeriodExpiresDate == ScopeStore.now + 1000)
    }

    @Test("RESCIND_CONSENT is minted with appData, everything else with data")
    func containers() throws {
        let rescind = TestStore.Notification(type: "RESCIND_CONSENT", signedDate: ScopeStore.now, bundleID: ScopeStore.bundle)
        #expect(rescind.container == .appData)
        let payload = try ScopeStore.store.notificationPayload(rescind)
        #expect(payload["data"] == nil && (payload["appData"] as? [String: Any])?["bundleId"] as? String == ScopeStore.bundle)
        var test = TestStore.Notification(type: "TEST", signedDate: ScopeStore.now, bundleID: ScopeStore.bundle)
        #expect(test.container == .data)
        test.container = .appData
        #expect(try ScopeStore.store.notificationPayload(test)["appData"] != nil)
    }
}
