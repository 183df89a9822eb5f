public import GooglePlayAPI
public import HTTPClient
import Glibc
import ProtoWire

/// The Play Developer API v3 client: HTTPS through the shared outbound `HTTPClient` (libcurl; certificates and
/// host names verified against the system CAs plus `caPath`), OAuth 2.0 service-account access tokens (`AccessTokens`)
/// cached until 5 minutes before they expire and made anew once after a 401 or 403, retries of 429, 5xx and
/// transport failures with Retry-After or bounded backoff, a time-out per attempt, a bounded number of calls in
/// flight.
///
/// Calls block their thread: run them on a worker queue, never on an event loop. The key and the tokens appear in
/// no description, error, log line or metric (the observer sees endpoint names and statuses only).
public final class GooglePlayAPIClient: GooglePlayDeveloperAPI {
    public let configuration: GooglePlayAPIConfiguration
    private let http: HTTPClient
    private let ownsHTTP: Bool
    private let exchange: Exchange
    private let tokens: AccessTokens
    private let base: String

    /// `httpClient`: a shared client that already trusts `configuration.caPath` (nil: the client makes its own,
    /// shut down by `shutdown()`). `now` (Unix seconds) and `sleep` (milliseconds) are for tests.
    public init(
        _ configuration: GooglePlayAPIConfiguration, httpClient: HTTPClient? = nil, observe: @escaping GooglePlayAPIObserver = { _, _, _ in },
        now: (@Sendable () -> Int64)? = nil, sleep: (@Sendable (Int) -> Void)? = nil
    ) throws(GooglePlayAPIError) {
        self.configuration = configuration
        var base = configuration.baseURL
        while base.hasSuffix("/") { base.removeLast() }
        guard base.hasPrefix("https://") || (configuration.allowCleartext && base.hasPrefix("http://")) else {
            throw .unavailable("\(configuration.baseURL) is not an https:// URL")
        }
        self.base = base
        if let httpClient {
            http = httpClient
            ownsHTTP = false
        } else {
            var c = HTTPClientConfiguration()
            c.extraCAPath = configuration.caPath
            c.allowCleartext = configuration.allowCleartext
            c.maxConnections = max(2, configuration.maxInFlight + 1)
            do { http = try HTTPClient(configuration: c, name: "google-play") } catch { throw .unavailable("HTTP client: \(error)") }
            ownsHTTP = true
        }
        exchange = Exchange(
            client: http, configuration: configuration, observe: observe, sleep: sleep ?? { ms in if ms > 0 { usleep(UInt32(min(ms, 60_000)) * 1000) } })
        tokens = AccessTokens(
            key: configuration.serviceAccount, exchange: exchange, renewBefore: configuration.tokenRenewBeforeSeconds, now: now ?? { Int64(time(nil)) })
    }

    /// Shuts down the HTTP client this client made (not a shared one). Calls after it fail `unavailable`.
    public func shutdown() { if ownsHTTP { http.shutdown() } }

    // MARK: endpoints

    public func productPurchase(packageName: String, productID: String, token: String) throws(GooglePlayAPIError) -> GooglePlay.ProductPurchase {
        try GooglePlay.ProductPurchase(json: call("purchases.products.get", "GET", productPath(packageName, productID, token), token: true))
    }

    public func acknowledgeProduct(packageName: String, productID: String, token: String, developerPayload: String?) throws(GooglePlayAPIError) {
        let body = Self.object([("developerPayload", developerPayload.map(JSONString.quote))])
        _ = try call("purchases.products.acknowledge", "POST", productPath(packageName, productID, token) + ":acknowledge", body: body, token: true)
    }

    public func refundOrder(packageName: String, orderID: String, revoke: Bool) throws(GooglePlayAPIError) {
        _ = try call(
            "orders.refund", "POST", app(packageName) + "/orders/" + PathSegment.encode(orderID) + ":refund",
            query: [("revoke", revoke ? "true" : "false")])
    }

    public func revokeSubscription(packageName: String, token: String) throws(GooglePlayAPIError) {
        _ = try call(
            "purchases.subscriptionsv2.revoke", "POST", app(packageName) + "/purchases/subscriptionsv2/tokens/" + PathSegment.encode(token) + ":revoke",
            body: #"{"revocationContext":{"fullRefund":{}}}"#, token: true)
    }

    public func consumeProduct(packageName: String, productID: String, token: String) throws(GooglePlayAPIError) {
        _ = try call("purchases.products.consume", "POST", productPath(packageName, productID, token) + ":consume", token: true)
    }

    public func subscriptionPurchase(packageName: String, token: String) throws(GooglePlayAPIError) -> GooglePlay.SubscriptionPurchaseV2 {
        try GooglePlay.SubscriptionPurchaseV2(
            json: call("purchases.subscriptionsv2.get", "GET", app(packageName) + "/purchases/subscriptionsv2/tokens/" + PathSegment.encode(token), token: true)
        )
    }

    public func acknowledgeSubscription(
        packageName: String, subscriptionID: String, token: String, developerPayload: String?, externalAccountIDs: GooglePlay.ExternalAccountIDs?
    ) throws(GooglePlayAPIError) {
        let ids = externalAccountIDs.map { ids in
            Self.object([
                ("obfuscatedAccountId", ids.obfuscatedAccountID.map(JSONString.quote)), ("obfuscatedProfileId", ids.obfuscatedProfileID.map(JSONString.quote)),
            ])
        }
        let body = Self.object([("developerPayload", developerPayload.map(JSONString.quote)), ("externalAccountIds", ids)])
        let path = app(packageName) + "/purchases/subscriptions/" + PathSegment.encode(subscriptionID) + "/tokens/" + PathSegment.encode(token) + ":acknowledge"
        _ = try call("purchases.subscriptions.acknowledge", "POST", path, body: body, token: true)
    }

    public func voidedPurchases(packageName: String, _ query: GooglePlay.VoidedPurchasesQuery) throws(GooglePlayAPIError) -> GooglePlay.VoidedPurchasesPage {
        try GooglePlay.VoidedPurchasesPage(
            json: call("purchases.voidedpurchases.list", "GET", app(packageName) + "/purchases/voidedpurchases", query: query.parameters))
    }

    // MARK: the call

    private func app(_ packageName: String) -> String { "/androidpublisher/v3/applications/" + PathSegment.encode(packageName) }

    private func productPath(_ packageName: String, _ productID: String, _ token: String) -> String {
        app(packageName) + "/purchases/products/" + PathSegment.encode(productID) + "/tokens/" + PathSegment.encode(token)
    }

    /// A JSON object of already-encoded values; nil values are left out.
    private static func object(_ fields: [(String, String?)]) -> String {
        "{" + fields.compactMap { k, v in v.map { JSONString.quote(k) + ":" + $0 } }.joined(separator: ",") + "}"
    }

    /// One API call: its attempts, one more with a fresh token after a 401 or 403, and Google's errors mapped.
    /// `token`: the path names a purchase token, so 400, 404 and 410 mean Google does not know it.
    private func call(
        _ endpoint: String, _ method: String, _ path: String, query: [(String, String)] = [], body: String? = nil, token: Bool = false
    ) throws(GooglePlayAPIError) -> [UInt8] {
        var url = base + path
        if !query.isEmpty { url += "?" + query.map { PathSegment.encode($0) + "=" + PathSegment.encode($1) }.joined(separator: "&") }
        var refreshed = false
        while true {
            let bearer = try tokens.token()
            var headers: [(name: String, value: String)] = [("authorization", "Bearer " + bearer), ("accept", "application/json")]
            if body != nil { headers.append(("content-type", "application/json")) }
            let answer = try exchange.run(endpoint) { _ in
                HTTPClientRequest(method: method, url: url, headers: headers, body: Array((body ?? "").utf8))
            }
            let (reason, message) = GoogleError.read(answer.body)
            switch answer.status {
            case 200..<300:
                return answer.body
            case 401 where !refreshed, 403 where !refreshed:
                // A token revoked or expired early, or a key rotated: one more try with a token made now.
                refreshed = true
                tokens.invalidate(bearer)
            case 401, 403:
                throw .unauthorized(
                    "\(endpoint): HTTP \(answer.status) \(reason) \(message) (the service account \(configuration.serviceAccount.clientEmail) "
                        + "lacks access to the app, or its key is wrong)")
            case 429, 500..<600:
                throw .unavailable("\(endpoint): HTTP \(answer.status) \(reason)")
            case 400 where token && reason != "invalidPurchaseState", 404 where token, 410 where token:
                throw .notFound(status: answer.status, reason: reason, message: message)
            default:
                throw .rejected(status: answer.status, reason: reason, message: message)
            }
        }
    }
}
