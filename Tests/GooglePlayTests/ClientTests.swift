import Crypto
import Foundation
import GooglePlayAPI
import GooglePlayHTTP
import Synchronization
import Testing

/// What a client under test reported: observed attempts and the backoffs it asked for.
final class Recorder: Sendable {
    let attempts = Mutex<[(String, Int)]>([])
    let sleeps = Mutex<[Int]>([])
    let clock = Atomic<Int64>(1_796_157_786)
}

@Suite("GooglePlayAPIClient against a local HTTPS server", .serialized)
struct ClientTests {
    static let app = "/androidpublisher/v3/applications/com.example.app"

    /// A client of `server` with fast, recorded backoffs and a clock the test moves.
    func client(_ server: ScriptedServer, _ recorder: Recorder, change: (inout GooglePlayAPIConfiguration) -> Void = { _ in }) throws -> GooglePlayAPIClient {
        let key = try ServiceAccountKey.parse(Array(keyFileJSON(tokenURI: server.url + "/token").utf8))
        var c = GooglePlayAPIConfiguration(serviceAccount: key)
        c.baseURL = server.url
        c.caPath = server.caPath
        c.attemptTimeoutMilliseconds = 3000
        change(&c)
        return try GooglePlayAPIClient(
            c, observe: { endpoint, status, _ in recorder.attempts.withLock { $0.append((endpoint, status)) } },
            now: { recorder.clock.load(ordering: .relaxed) }, sleep: { ms in recorder.sleeps.withLock { $0.append(ms) } })
    }

    @Test("a token from the token endpoint (form-encoded RS256 assertion), reused; Google's paths, bodies and query")
    func endToEnd() throws {
        let server = try ScriptedServer()
        defer { server.stop() }
        let recorder = Recorder()
        let api = try client(server, recorder)
        defer { api.shutdown() }
        server.plan(Self.app + "/purchases/products/coins100/tokens/", status: 200, body: Fixtures.product)
        let p = try api.productPurchase(packageName: "com.example.app", productID: "coins100", token: "tok/en:1?#")
        #expect(p.orderID == "GPA.3312-5545-1280-01234" && p.quantity == 3)
        server.plan(Self.app + "/purchases/products/coins100/tokens/", status: 200, body: "", count: 2)
        try api.acknowledgeProduct(packageName: "com.example.app", productID: "coins100", token: "t1", developerPayload: "ord_1")
        try api.consumeProduct(packageName: "com.example.app", productID: "coins100", token: "t1")
        server.plan(Self.app + "/purchases/subscriptionsv2/tokens/", status: 200, body: Fixtures.subscription)
        #expect(try api.subscriptionPurchase(packageName: "com.example.app", token: "s1").subscriptionState == .active)
        server.plan(Self.app + "/purchases/subscriptions/", status: 200, body: "")
        try api.acknowledgeSubscription(
            packageName: "com.example.app", subscriptionID: "pro.monthly", token: "s1", developerPayload: nil,
            externalAccountIDs: GooglePlay.ExternalAccountIDs(obfuscatedAccountID: "ord_9"))
        server.plan(Self.app + "/purchases/voidedpurchases", status: 200, body: Fixtures.voided)
        server.plan(Self.app + "/purchases/voidedpurchases", status: 200, body: #"{"voidedPurchases": []}"#)
        let voided = try api.allVoidedPurchases(
            packageName: "com.example.app", GooglePlay.VoidedPurchasesQuery(startTimeMillis: 1_764_000_000_000, pageSize: 2))
        #expect(voided.count == 2)

        let log = server.log().requests
        let paths = log.map { ($0["method"] as! String) + " " + ($0["path"] as! String) }
        #expect(
            paths == [
                "POST /token",
                "GET \(Self.app)/purchases/products/coins100/tokens/tok%2Fen%3A1%3F%23",
                "POST \(Self.app)/purchases/products/coins100/tokens/t1:acknowledge",
                "POST \(Self.app)/purchases/products/coins100/tokens/t1:consume",
                "GET \(Self.app)/purchases/subscriptionsv2/tokens/s1",
                "POST \(Self.app)/purchases/subscriptions/pro.monthly/tokens/s1:acknowledge",
                "GET \(Self.app)/purchases/voidedpurchases?type=1&startTime=1764000000000&maxResults=2",
                "GET \(Self.app)/purchases/voidedpurchases?type=1&startTime=1764000000000&maxResults=2&token=page-2",
            ])
        // The token request: form-encoded JWT-bearer grant with an RS256 assertion the service account's key signed.
        let tokenRequest = log[0]
        #expect((tokenRequest["headers"] as! [String: String])["content-type"] == "application/x-www-form-urlencoded")
        let form = Dictionary(
            uniqueKeysWithValues: (tokenRequest["body"] as! String).split(separator: "&").map { pair in
                let kv = pair.split(separator: "=", maxSplits: 1)
                return (String(kv[0]), String(kv[1]).removingPercentEncoding!)
            })
        #expect(form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer")
        let parts = form["assertion"]!.split(separator: ".")
        #expect(suiteKey.publicKey.verifyRS256(signature: unb64url(parts[2]), message: Array((parts[0] + "." + parts[1]).utf8)))
        let claims = jsonObject(unb64url(parts[1]))
        #expect(claims["aud"] as? String == server.url + "/token" && claims["scope"] as? String == "https://www.googleapis.com/auth/androidpublisher")
        #expect(claims["exp"] as? Int == 1_796_157_786 + 3600)
        for request in log.dropFirst() {
            #expect((request["headers"] as! [String: String])["authorization"] == "Bearer ya29.token-1")
        }
        #expect(log[2]["body"] as? String == #"{"developerPayload":"ord_1"}"#)
        #expect(log[3]["body"] as? String == "")
        #expect(log[5]["body"] as? String == #"{"externalAccountIds":{"obfuscatedAccountId":"ord_9"}}"#)
        let endpoints = recorder.attempts.withLock { $0.map(\.0) }
        #expect(
            endpoints == [
                "oauth2.token", "purchases.products.get", "purchases.products.acknowledge", "purchases.products.consume", "purchases.subscriptionsv2.get",
                "purchases.subscriptions.acknowledge", "purchases.voidedpurchases.list", "purchases.voidedpurchases.list",
            ])
    }

    @Test("Google's errors: 400/404/410 for a token are notFound, invalidPurchaseState and others rejected, junk invalidAnswer")
    func errorMapping() throws {
        let server = try ScriptedServer()
        defer { server.stop() }
        let api = try client(server, Recorder())
        defer { api.shutdown() }
        let path = Self.app + "/purchases/products/coins100/tokens/"
        func get() throws(GooglePlayAPIError) { _ = try api.productPurchase(packageName: "com.example.app", productID: "coins100", token: "t") }
        let cases: [(Int, String, GooglePlayAPIError)] = [
            (400, ScriptedServer.googleError(400, "invalid", "Invalid Value"), .notFound(status: 400, reason: "invalid", message: "Invalid Value")),
            (
                400, ScriptedServer.googleError(400, "purchaseTokenDoesNotMatchProductId", "m"),
                .notFound(status: 400, reason: "purchaseTokenDoesNotMatchProductId", message: "m")
            ),
            (404, ScriptedServer.googleError(404, "notFound", "m"), .notFound(status: 404, reason: "notFound", message: "m")),
            (
                410, ScriptedServer.googleError(410, "subscriptionPurchaseNoLongerAvailable", "m"),
                .notFound(status: 410, reason: "subscriptionPurchaseNoLongerAvailable", message: "m")
            ),
            (400, ScriptedServer.googleError(400, "invalidPurchaseState", "m"), .rejected(status: 400, reason: "invalidPurchaseState", message: "m")),
            (409, ScriptedServer.googleError(409, "conflict", "m"), .rejected(status: 409, reason: "conflict", message: "m")),
        ]
        for (status, body, expected) in cases {
            server.plan(path, status: status, body: body)
            #expect(throws: expected) { try get() }
        }
        server.plan(path, status: 200, body: "<html>")
        #expect(throws: GooglePlayAPIError.invalidAnswer("ProductPurchase: not a JSON object")) { try get() }
        server.plan(
            Self.app + "/purchases/voidedpurchases", status: 400, body: ScriptedServer.googleError(400, "invalid", "startTime must not be older than 30 days."))
        #expect(throws: GooglePlayAPIError.rejected(status: 400, reason: "invalid", message: "startTime must not be older than 30 days.")) {
            _ = try api.voidedPurchases(packageName: "com.example.app", .init(startTimeMillis: 1))
        }
    }

    @Test("401 and 403: one retry with a fresh token; a second refusal is unauthorized; the token endpoint's refusal too; no secret in any text")
    func authorization() throws {
        let server = try ScriptedServer()
        defer { server.stop() }
        let recorder = Recorder()
        let api = try client(server, recorder)
        defer { api.shutdown() }
        let path = Self.app + "/purchases/subscriptionsv2/tokens/"
        server.plan(path, [(401, [:], ScriptedServer.googleError(401, "authError", "Invalid Credentials"), 0), (200, [:], Fixtures.subscription, 0)])
        _ = try api.subscriptionPurchase(packageName: "com.example.app", token: "s")
        var log = server.log().requests
        #expect(log.filter { $0["path"] as? String == "/token" }.count == 2)
        #expect((log.last!["headers"] as! [String: String])["authorization"] == "Bearer ya29.token-2")
        server.plan(path, status: 403, body: ScriptedServer.googleError(403, "permissionDenied", "The current user has insufficient permissions"), count: 2)
        var texts: [String] = []
        do {
            _ = try api.subscriptionPurchase(packageName: "com.example.app", token: "s")
            Issue.record("403 twice answered")
        } catch {
            guard case .unauthorized(let cause) = error else { throw error }
            #expect(cause.contains("permissionDenied") && cause.contains("billingd@fake-project.iam.gserviceaccount.com"))
            texts.append(error.description)
        }
        log = server.log().requests
        #expect(log.filter { $0["path"] as? String == "/token" }.count == 3)
        // The token endpoint refuses the account.
        server.plan(path, status: 401, body: ScriptedServer.googleError(401, "authError", "Invalid Credentials"))
        server.plan("/token", status: 400, body: #"{"error": "invalid_grant", "error_description": "Invalid JWT Signature."}"#)
        do {
            _ = try api.subscriptionPurchase(packageName: "com.example.app", token: "s")
            Issue.record("a refused grant answered")
        } catch {
            #expect(
                error
                    == .unauthorized("the token endpoint refused billingd@fake-project.iam.gserviceaccount.com: HTTP 400 invalid_grant Invalid JWT Signature."))
            texts.append(error.description)
        }
        for text in texts {
            #expect(!text.contains("ya29") && !text.contains("PRIVATE") && !text.contains("eyJ"))
        }
    }

    @Test("429 and 5xx retried with backoff and Retry-After, then unavailable; a token endpoint outage too")
    func retries() throws {
        let server = try ScriptedServer()
        defer { server.stop() }
        let recorder = Recorder()
        let api = try client(server, recorder)
        defer { api.shutdown() }
        let path = Self.app + "/purchases/products/coins100/tokens/"
        server.plan(
            path,
            [
                (503, [:], ScriptedServer.googleError(503, "backendError"), 0),
                (429, ["Retry-After": "3"], ScriptedServer.googleError(429, "rateLimitExceeded"), 0),
                (200, [:], Fixtures.product, 0),
            ])
        _ = try api.productPurchase(packageName: "com.example.app", productID: "coins100", token: "t")
        let sleeps = recorder.sleeps.withLock { $0 }
        #expect(sleeps.count == 2 && (125...250).contains(sleeps[0]) && sleeps[1] == 3000)
        #expect(recorder.attempts.withLock { $0.map(\.1) } == [200, 503, 429, 200])
        server.plan(path, status: 500, body: ScriptedServer.googleError(500, "backendError"), count: 4)
        #expect(throws: GooglePlayAPIError.unavailable("purchases.products.get: HTTP 500 backendError")) {
            try api.productPurchase(packageName: "com.example.app", productID: "coins100", token: "t")
        }
        #expect(recorder.sleeps.withLock { $0.count } == 2 + 3)
        // Retry-After beyond the cap waits the cap.
        server.plan(path, [(503, ["Retry-After": "120"], "", 0), (200, [:], Fixtures.product, 0)])
        _ = try api.productPurchase(packageName: "com.example.app", productID: "coins100", token: "t")
        #expect(recorder.sleeps.withLock { $0.last } == 8000)

        // The token endpoint: 503 then a token; after the cached token's renewal time a new one is fetched.
        recorder.clock.add(3599 - 300 + 1, ordering: .relaxed)
        server.plan("/token", status: 503, body: #"{"error": "internal_failure"}"#)
        server.plan(path, status: 200, body: Fixtures.product)
        _ = try api.productPurchase(packageName: "com.example.app", productID: "coins100", token: "t")
        let tokens = server.log().requests.filter { $0["path"] as? String == "/token" }
        #expect(tokens.count == 3)
        server.plan("/token", status: 503, body: "", count: 4)
        recorder.clock.add(3600, ordering: .relaxed)
        #expect(throws: GooglePlayAPIError.unavailable("oauth2.token: HTTP 503")) {
            try api.productPurchase(packageName: "com.example.app", productID: "coins100", token: "t")
        }
    }

    @Test("time-outs and refused connections are unavailable after every attempt")
    func transport() throws {
        let server = try ScriptedServer()
        defer { server.stop() }
        let recorder = Recorder()
        let api = try client(server, recorder) {
            $0.attemptTimeoutMilliseconds = 400
            $0.maxAttempts = 2
        }
        defer { api.shutdown() }
        _ = try? api.subscriptionPurchase(packageName: "com.example.app", token: "warm")  // a token first
        let path = Self.app + "/purchases/subscriptionsv2/tokens/"
        server.plan(path, status: 200, body: Fixtures.subscription, delay: 1.5, count: 2)
        do {
            _ = try api.subscriptionPurchase(packageName: "com.example.app", token: "slow")
            Issue.record("a slow answer was waited for")
        } catch {
            guard case .unavailable(let why) = error else { throw error }
            #expect(why.contains("timed out"))
        }
        #expect(recorder.attempts.withLock { $0.suffix(2).map(\.1) } == [0, 0])
        // Nothing listens there.
        let closed = try client(server, Recorder()) {
            $0.baseURL = "https://127.0.0.1:1"
            $0.maxAttempts = 2
        }
        defer { closed.shutdown() }
        #expect(throws: GooglePlayAPIError.self) { try closed.consumeProduct(packageName: "com.example.app", productID: "p", token: "t") }
        // A cleartext token_uri is refused by the HTTP client before anything is sent: one attempt, no retry.
        let refused = Recorder()
        let cleartext = try GooglePlayAPIClient(
            GooglePlayAPIConfiguration(serviceAccount: try ServiceAccountKey.parse(Array(keyFileJSON(tokenURI: "http://127.0.0.1:1/token").utf8))),
            observe: { endpoint, status, _ in refused.attempts.withLock { $0.append((endpoint, status)) } })
        defer { cleartext.shutdown() }
        do {
            try cleartext.consumeProduct(packageName: "com.example.app", productID: "p", token: "t")
            Issue.record("a cleartext token endpoint was used")
        } catch {
            guard case .unavailable(let why) = error else { throw error }
            #expect(why.contains("http:// URLs are refused"))
        }
        #expect(refused.attempts.withLock { $0.map(\.0) } == ["oauth2.token"])
    }

    @Test("at most maxInFlight calls at once; callers that find no token wait for one refresh")
    func boundedInFlight() throws {
        let server = try ScriptedServer()
        defer { server.stop() }
        let api = try client(server, Recorder()) { $0.maxInFlight = 2 }
        defer { api.shutdown() }
        let path = Self.app + "/purchases/products/coins100/tokens/"
        server.plan("/token", status: 200, body: #"{"access_token": "ya29.slow", "expires_in": 3599}"#, delay: 0.3)
        server.plan(path, status: 200, body: Fixtures.product, count: 2)
        DispatchQueue.concurrentPerform(iterations: 2) { _ in
            _ = try? api.productPurchase(packageName: "com.example.app", productID: "coins100", token: "t")
        }
        #expect(server.log().requests.filter { $0["path"] as? String == "/token" }.count == 1)
        server.plan(path, status: 200, body: Fixtures.product, delay: 0.3, count: 6)
        let failures = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 6) { _ in
            do { _ = try api.productPurchase(packageName: "com.example.app", productID: "coins100", token: "t") } catch { failures.add(1, ordering: .relaxed) }
        }
        #expect(failures.load(ordering: .relaxed) == 0)
        #expect(server.log().maxInFlight == 2)
    }
}
