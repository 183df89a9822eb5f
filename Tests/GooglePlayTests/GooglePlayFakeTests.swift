import Foundation
import GooglePlayAPI
import GooglePlayHTTP
import HTTPClient
import Synchronization
import Testing

/// The fake Google Play of IntegrationTests/googleplay_fake.py (which Google's own Python clients are held to), as
/// IntegrationTests/test_googleplay_client.py starts it and names it in the environment: GOOGLEPLAY_FAKE_URL,
/// GOOGLEPLAY_FAKE_CA, GOOGLEPLAY_FAKE_SERVICE_ACCOUNT, GOOGLEPLAY_FAKE_JWKS, GOOGLEPLAY_FAKE_PEM_CERTS,
/// GOOGLEPLAY_FAKE_PUSH_EMAIL, GOOGLEPLAY_FAKE_PUSH_TOKENS (a JSON file: audience and one push token per variant).
/// Without GOOGLEPLAY_FAKE_URL these tests are skipped.
struct FakeGooglePlay {
    let url: String
    let environment: [String: String]
    let control: HTTPClient

    static let configured = ProcessInfo.processInfo.environment["GOOGLEPLAY_FAKE_URL"] != nil

    init() throws {
        environment = ProcessInfo.processInfo.environment
        url = environment["GOOGLEPLAY_FAKE_URL"]!
        var c = HTTPClientConfiguration()
        c.extraCAPath = environment["GOOGLEPLAY_FAKE_CA"]
        control = try HTTPClient(configuration: c, name: "fake-control")
    }

    /// The billingd-side client of the fake, with short backoffs.
    func client(observe: @escaping GooglePlayAPIObserver = { _, _, _ in }) throws -> GooglePlayAPIClient {
        var c = GooglePlayAPIConfiguration(serviceAccount: try ServiceAccountKey.load(path: environment["GOOGLEPLAY_FAKE_SERVICE_ACCOUNT"]!))
        c.baseURL = url
        c.caPath = environment["GOOGLEPLAY_FAKE_CA"]
        c.baseBackoffMilliseconds = 20
        c.maxBackoffMilliseconds = 200
        c.attemptTimeoutMilliseconds = 5000
        return try GooglePlayAPIClient(c, observe: observe)
    }

    /// A control API call: the answer's JSON object.
    @discardableResult
    func post(_ path: String, _ body: [String: Any] = [:]) throws -> [String: Any] {
        let data = try JSONSerialization.data(withJSONObject: body)
        let answer = try exchange(
            control, HTTPClientRequest(method: "POST", url: url + path, headers: [("content-type", "application/json")], body: Array(data))
        ).get()
        guard answer.status == 200 else { throw CocoaError(.coderInvalidValue) }
        return jsonObject(answer.body)
    }

    /// The API calls the fake saw, by Google's method name.
    func calls(_ method: String) throws -> [[String: Any]] {
        let answer = try exchange(control, HTTPClientRequest(url: url + "/fake/calls")).get()
        return (jsonObject(answer.body)["calls"] as? [[String: Any]] ?? []).filter { $0["method"] as? String == method }
    }

    func stop() { control.shutdown() }
}

@Suite("GooglePlayAPIClient and GoogleIDTokenVerifier against googleplay_fake.py", .serialized, .enabled(if: FakeGooglePlay.configured))
struct GooglePlayFakeTests {
    static let package = "com.example.app"

    @Test("one-time products: get, acknowledge, consume once, pending, unknown and mismatched tokens")
    func products() throws {
        let fake = try FakeGooglePlay()
        defer { fake.stop() }
        let api = try fake.client()
        defer { api.shutdown() }
        let record = try fake.post("/fake/products", ["productId": "coins100", "quantity": 2, "test": true, "obfuscatedExternalAccountId": "ord_1"])
        let token = record["token"] as! String
        let p = try api.productPurchase(packageName: Self.package, productID: "coins100", token: token)
        #expect(p.orderID == record["orderId"] as? String && p.state == .purchased && p.quantity == 2 && p.isTest)
        #expect(p.obfuscatedExternalAccountID == "ord_1" && p.purchaseTimeMillis == (record["purchaseMs"] as? Int).map(Int64.init))
        try api.acknowledgeProduct(packageName: Self.package, productID: "coins100", token: token, developerPayload: "ord_1")
        #expect(try api.productPurchase(packageName: Self.package, productID: "coins100", token: token).isAcknowledged)
        try api.consumeProduct(packageName: Self.package, productID: "coins100", token: token)
        #expect(try api.productPurchase(packageName: Self.package, productID: "coins100", token: token).isConsumed)
        #expect(throws: GooglePlayAPIError.self) { try api.consumeProduct(packageName: Self.package, productID: "coins100", token: token) }
        do {
            try api.consumeProduct(packageName: Self.package, productID: "coins100", token: token)
        } catch {
            guard case .rejected(400, "invalidPurchaseState", _) = error else { throw error }
        }
        do {
            _ = try api.productPurchase(packageName: Self.package, productID: "gems", token: token)
            Issue.record("another product's token answered")
        } catch {
            guard case .notFound(400, "purchaseTokenDoesNotMatchProductId", _) = error else { throw error }
        }
        do {
            _ = try api.productPurchase(packageName: Self.package, productID: "coins100", token: "unknown.token/with:odd?chars")
            Issue.record("an unknown token answered")
        } catch {
            // 400 `invalid` for an unknown token; the fake routes on the decoded path, so this token's %2F makes the
            // path one it does not serve (404): either is PURCHASE_NOT_FOUND.
            guard case .notFound = error else { throw error }
        }
        let pending = try fake.post("/fake/products", ["productId": "coins100", "state": "pending"])
        let pendingToken = pending["token"] as! String
        let q = try api.productPurchase(packageName: Self.package, productID: "coins100", token: pendingToken)
        #expect(q.state == .pending && q.orderID == nil && !q.isTest)
        #expect(throws: GooglePlayAPIError.self) {
            try api.acknowledgeProduct(packageName: Self.package, productID: "coins100", token: pendingToken, developerPayload: nil)
        }
        #expect(try fake.calls("purchases.products.acknowledge").contains { ($0["json"] as? [String: Any])?["developerPayload"] as? String == "ord_1" })
    }

    @Test("subscriptions: get, acknowledge with account ids, an upgrade's linkedPurchaseToken, a user cancel")
    func subscriptions() throws {
        let fake = try FakeGooglePlay()
        defer { fake.stop() }
        let api = try fake.client()
        defer { api.shutdown() }
        let record = try fake.post("/fake/subscriptions", ["productId": "pro.monthly", "test": true, "priceMicros": 4_990_000, "currency": "EUR"])
        let token = record["token"] as! String
        let s = try api.subscriptionPurchase(packageName: Self.package, token: token)
        #expect(s.subscriptionState == .active && s.isTestPurchase && !s.isAcknowledged && s.orderID == record["orderId"] as? String)
        #expect(s.lineItems.first?.productID == "pro.monthly" && s.lineItems.first?.recurringPrice?.micros == 4_990_000)
        #expect(s.lineItems.first?.recurringPrice?.currencyCode == "EUR" && s.expiryTimeMillis == (record["expiryMs"] as? Int).map(Int64.init))
        #expect(s.startTimeMillis == (record["startMs"] as? Int).map(Int64.init))
        try api.acknowledgeSubscription(
            packageName: Self.package, subscriptionID: "pro.monthly", token: token, developerPayload: nil,
            externalAccountIDs: GooglePlay.ExternalAccountIDs(obfuscatedAccountID: "ord_7"))
        let acknowledged = try api.subscriptionPurchase(packageName: Self.package, token: token)
        #expect(acknowledged.isAcknowledged && acknowledged.externalAccountIdentifiers?.obfuscatedExternalAccountID == "ord_7")
        let upgraded = try fake.post("/fake/subscriptions/\(token)/change", ["productId": "pro.yearly"])
        let u = try api.subscriptionPurchase(packageName: Self.package, token: upgraded["token"] as! String)
        #expect(u.linkedPurchaseToken == token && u.lineItems.first?.productID == "pro.yearly")
        #expect(u.lineItems.first?.itemReplacement?.replacementMode == "WITH_TIME_PRORATION")
        let old = try api.subscriptionPurchase(packageName: Self.package, token: token)
        #expect(old.canceledStateContext?.initiator == .replacement)
        try fake.post("/fake/subscriptions/\(upgraded["token"] as! String)/cancel", ["by": "user"])
        let canceled = try api.subscriptionPurchase(packageName: Self.package, token: upgraded["token"] as! String)
        #expect(canceled.subscriptionState == .canceled && canceled.canceledStateContext?.initiator == .user)
    }

    @Test("voidedpurchases.list: every page followed")
    func voided() throws {
        let fake = try FakeGooglePlay()
        defer { fake.stop() }
        let api = try fake.client()
        defer { api.shutdown() }
        var tokens: [String] = []
        for _ in 0..<3 {
            let r = try fake.post("/fake/products", ["productId": "coins100"])
            tokens.append(r["token"] as! String)
            try fake.post("/fake/products/\(r["token"] as! String)/void", ["voidedReason": "chargeback", "voidedSource": "google"])
        }
        let all = try api.allVoidedPurchases(
            packageName: Self.package,
            GooglePlay.VoidedPurchasesQuery(startTimeMillis: Int64(Date().timeIntervalSince1970 * 1000) - 86_400_000, pageSize: 2))
        let mine = all.filter { tokens.contains($0.purchaseToken) }
        #expect(mine.count == 3 && mine.allSatisfy { $0.voidedReason == 7 && $0.voidedSource == 2 && $0.orderID != nil })
        #expect(try fake.calls("purchases.voidedpurchases.list").count >= 2)
    }

    @Test("faults: 503s retried, revoked tokens renewed once, a package without access unauthorized, an outage unavailable")
    func faults() throws {
        let fake = try FakeGooglePlay()
        defer { fake.stop() }
        let statuses = Mutex<[(String, Int)]>([])
        let api = try fake.client { endpoint, status, _ in statuses.withLock { $0.append((endpoint, status)) } }
        defer { api.shutdown() }
        let token = try fake.post("/fake/products", ["productId": "coins100"])["token"] as! String
        _ = try api.productPurchase(packageName: Self.package, productID: "coins100", token: token)
        try fake.post("/fake/faults", ["status": 503, "count": 2, "pathPrefix": "/androidpublisher"])
        _ = try api.productPurchase(packageName: Self.package, productID: "coins100", token: token)
        #expect(statuses.withLock { $0.suffix(3).map(\.1) } == [503, 503, 200])
        try fake.post("/fake/faults", ["status": 429, "count": 1, "retryAfter": "1", "pathPrefix": "/androidpublisher"])
        _ = try api.productPurchase(packageName: Self.package, productID: "coins100", token: token)
        try fake.post("/fake/access-tokens/revoke")
        _ = try api.productPurchase(packageName: Self.package, productID: "coins100", token: token)
        #expect(
            statuses.withLock { $0.suffix(3).map { "\($0.0) \($0.1)" } } == ["purchases.products.get 401", "oauth2.token 200", "purchases.products.get 200"])
        do {
            _ = try api.productPurchase(packageName: "com.other.app", productID: "coins100", token: token)
            Issue.record("another package answered")
        } catch {
            guard case .unauthorized(let cause) = error else { throw error }
            #expect(cause.contains("permissionDenied") && !cause.contains("ya29"))
        }
        try fake.post("/fake/down", ["down": true])
        defer { _ = try? fake.post("/fake/down", ["down": false]) }
        #expect(throws: GooglePlayAPIError.self) { try api.productPurchase(packageName: Self.package, productID: "coins100", token: token) }
        do {
            _ = try api.productPurchase(packageName: Self.package, productID: "coins100", token: token)
        } catch {
            guard case .unavailable = error else { throw error }
        }
        // Every token request the fake took carried an assertion it verified (RS256, iss, aud, scope, iat/exp).
        #expect(try fake.calls("oauth2.token").allSatisfy { $0["status"] as? Int == 200 || $0["status"] as? Int == 503 })
    }

    @Test("push tokens the fake signs: accepted with its JWKS and its PEM map; each bad variant refused")
    func pushTokens() throws {
        let env = ProcessInfo.processInfo.environment
        guard let file = env["GOOGLEPLAY_FAKE_PUSH_TOKENS"] else { return }
        let o = jsonObject(Array(try Data(contentsOf: URL(fileURLWithPath: file))))
        let audience = o["audience"] as! String
        let tokens = o["tokens"] as! [String: String]
        for path in [env["GOOGLEPLAY_FAKE_JWKS"]!, env["GOOGLEPLAY_FAKE_PEM_CERTS"]!] {
            let keys = try GoogleKeySet.parse(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
            let v = GoogleIDTokenVerifier(.init(audience: audience, serviceAccountEmail: env["GOOGLEPLAY_FAKE_PUSH_EMAIL"]!), keys: keys)
            guard case .valid(let claims) = v.verify(authorization: "Bearer " + tokens["valid"]!) else {
                Issue.record("the fake's valid push token was refused")
                continue
            }
            #expect(claims.issuer == "https://accounts.google.com" && claims.audience == audience)
            let expected: [String: String] = [
                "wrong_audience": "wrong_audience", "wrong_email": "wrong_email", "unverified_email": "wrong_email", "unknown_key": "unknown_key",
                "expired": "expired", "bad_signature": "bad_signature", "wrong_issuer": "wrong_issuer",
            ]
            for (variant, kind) in expected {
                guard case .invalid(let refusal) = v.verify(authorization: "Bearer " + tokens[variant]!) else {
                    Issue.record("\(variant) was accepted")
                    continue
                }
                #expect(refusal.kind == kind, "\(variant)")
            }
            #expect(v.verify(authorization: nil) == .invalid(.noToken))
        }
    }
}
