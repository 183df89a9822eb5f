import JOSE
public import AppStoreAPI
import AppStore
import Glibc
import HTTPClient
import Lifecycle

/// The App Store Server API client on the outbound `HTTPClient` (HTTP/2 by ALPN over OpenSSL, the server's
/// certificate and host name verified, connections kept and reused on the client's event loop), ES256 bearer
/// tokens, retries of 429 and 5xx with Retry-After or bounded backoff, a bounded number of calls in flight.
///
/// Calls block their thread: run them on a worker queue, never on an event loop. Signed items in answers
/// are returned as they came; callers verify them like any proof before use.
public final class AppStoreAPIClient: AppStoreServerAPI {
    public let configuration: AppStoreAPIConfiguration
    private let token: APIToken
    private let client: HTTPClient
    private let slots: Signal
    private let bases: [AppStoreAPIEnvironment: String]
    private let observe: AppStoreAPIObserver

    public init(
        _ configuration: AppStoreAPIConfiguration, observe: @escaping AppStoreAPIObserver = { _, _, _, _ in }
    )
        throws(AppStoreAPIError)
    {
        self.configuration = configuration
        token = APIToken(configuration.credentials)
        slots = Signal(max(1, configuration.maxInFlight))
        var bases: [AppStoreAPIEnvironment: String] = [:]
        var cleartext = false
        for environment in AppStoreAPIEnvironment.allCases {
            guard let base = BaseURL(configuration.url(environment)) else {
                throw .unavailable("\(configuration.url(environment)) is not an https://HOST[:PORT][/PATH] URL")
            }
            // http:// only when the operator wrote it (a local fake); Apple's URLs are https://.
            cleartext = cleartext || !base.tls
            bases[environment] = (base.tls ? "https://" : "http://") + base.authority + base.prefix
        }
        var settings = HTTPClientConfiguration()
        settings.extraCAPath = configuration.caPath
        settings.allowCleartext = cleartext
        settings.maxConnections = max(2, min(64, configuration.maxInFlight))
        settings.maxQueued = max(1, configuration.maxInFlight) * 2
        settings.connectTimeoutMilliseconds = configuration.attemptTimeoutSeconds * 1000
        do {
            client = try HTTPClient(configuration: settings, name: "appstore-api")
        } catch {
            throw .unavailable("HTTP client: \(error)")
        }
        self.bases = bases
        self.observe = observe
    }

    deinit { client.shutdown() }

    // MARK: endpoints

    /// Get Transaction Info: the signed transaction (JWS).
    public func transactionInfo(_ transactionID: String, in environment: AppStoreAPIEnvironment) throws(AppStoreAPIError) -> String {
        let json = try call("transaction_info", environment, "GET", "/inApps/v1/transactions/" + Self.segment(transactionID))
        return try Self.string(json, "signedTransactionInfo")
    }

    /// One page of Get Transaction History (v2), oldest first.
    public func transactionHistory(
        _ transactionID: String, revision: String?, in environment: AppStoreAPIEnvironment
    )
        throws(AppStoreAPIError) -> AppStoreAPIModel.HistoryPage
    {
        var query = [("sort", "ASCENDING")]
        if let revision { query.append(("revision", revision)) }
        let json = try call("transaction_history", environment, "GET", "/inApps/v2/history/" + Self.segment(transactionID), query: query)
        return AppStoreAPIModel.HistoryPage(
            signedTransactions: try Self.strings(json, "signedTransactions"),
            revision: (try? Self.string(json, "revision")) ?? "", hasMore: Self.bool(json, "hasMore"))
    }

    /// Get All Subscription Statuses: per subscription group, the last transactions with their status.
    public func subscriptionStatuses(
        _ transactionID: String, in environment: AppStoreAPIEnvironment
    )
        throws(AppStoreAPIError) -> [AppStoreAPIModel.SubscriptionStatus]
    {
        let json = try call("subscription_statuses", environment, "GET", "/inApps/v1/subscriptions/" + Self.segment(transactionID))
        guard case .object(let top) = json, case .array(let groups)? = top["data"] else { return [] }
        var out: [AppStoreAPIModel.SubscriptionStatus] = []
        for case .object(let group) in groups {
            let groupID = group["subscriptionGroupIdentifier"].flatMap { if case .string(let s) = $0 { s } else { nil } } ?? ""
            guard case .array(let last)? = group["lastTransactions"] else { continue }
            for case .object(let item) in last {
                func text(_ k: String) -> String { if case .string(let s)? = item[k] { s } else { "" } }
                var status: Int64 = 0
                if case .integer(let n)? = item["status"] { status = n }
                out.append(
                    AppStoreAPIModel.SubscriptionStatus(
                        groupID: groupID, status: status, originalTransactionID: text("originalTransactionId"),
                        signedTransactionInfo: text("signedTransactionInfo"),
                        signedRenewalInfo: text("signedRenewalInfo")))
            }
        }
        return out
    }

    /// One page of Get Notification History: the signed payloads (oldest first) and the next page's token.
    /// `startMs` / `endMs`: the range of the notifications' first send attempts (Apple keeps 180 days).
    public func notificationHistory(
        startMs: Int64, endMs: Int64, paginationToken: String?, in environment: AppStoreAPIEnvironment
    )
        throws(AppStoreAPIError) -> AppStoreAPIModel.NotificationPage
    {
        let body = JSONText.object([("startDate", String(startMs)), ("endDate", String(endMs))])
        let json = try call(
            "notification_history", environment, "POST", "/inApps/v1/notifications/history",
            query: paginationToken.map { [("paginationToken", $0)] } ?? [], body: Array(body.utf8))
        var payloads: [String] = []
        if case .object(let top) = json, case .array(let items)? = top["notificationHistory"] {
            for case .object(let item) in items {
                if case .string(let s)? = item["signedPayload"] { payloads.append(s) }
            }
        }
        let next = try? Self.string(json, "paginationToken")
        return AppStoreAPIModel.NotificationPage(
            signedPayloads: payloads, paginationToken: next?.isEmpty == false ? next : nil, hasMore: Self.bool(json, "hasMore"))
    }

    /// Send Consumption Information (v2).
    public func sendConsumption(
        _ transactionID: String, _ information: AppStoreAPIModel.ConsumptionInformation, in environment: AppStoreAPIEnvironment
    )
        throws(AppStoreAPIError)
    {
        _ = try call(
            "send_consumption", environment, "PUT", "/inApps/v2/transactions/consumption/" + Self.segment(transactionID),
            body: Array(information.json.utf8), expectJSON: false)
    }

    /// The older Send Consumption Information (v1, `PUT /inApps/v1/transactions/consumption/{id}`), for a server
    /// that does not know v2: the same facts, every field v1 requires, "undeclared" (0) where billingd knows
    /// nothing. `deliveryStatus` 0 means delivered and working.
    public func sendConsumptionV1(
        _ transactionID: String, _ information: AppStoreAPIModel.ConsumptionInformation, appAccountToken: String,
        in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) {
        let delivery = information.deliveryStatus == "DELIVERED" ? 0 : 5
        let body = JSONText.object([
            ("customerConsented", String(information.customerConsented)), ("consumptionStatus", "0"), ("platform", "1"),
            ("sampleContentProvided", String(information.sampleContentProvided)), ("deliveryStatus", String(delivery)),
            ("appAccountToken", JSONText.quote(appAccountToken)), ("accountTenure", "0"), ("playTime", "0"),
            ("lifetimeDollarsRefunded", "0"), ("lifetimeDollarsPurchased", "0"), ("userStatus", "0"),
        ])
        _ = try call(
            "send_consumption", environment, "PUT", "/inApps/v1/transactions/consumption/" + Self.segment(transactionID),
            body: Array(body.utf8), expectJSON: false)
    }

    /// Look Up Order ID: the signed transactions of the order id on a customer's receipt email; nil when
    /// Apple does not know the order id (status 1).
    public func lookUpOrder(_ orderID: String, in environment: AppStoreAPIEnvironment) throws(AppStoreAPIError) -> [String]? {
        let json = try call("look_up_order", environment, "GET", "/inApps/v1/lookup/" + Self.segment(orderID))
        guard case .object(let top) = json, case .integer(let status)? = top["status"] else {
            throw .malformedAnswer("lookup answer without status")
        }
        if status != 0 { return nil }
        return try Self.strings(json, "signedTransactions")
    }

    /// Request a Test Notification: the token to ask its status with.
    public func requestTestNotification(in environment: AppStoreAPIEnvironment) throws(AppStoreAPIError) -> String {
        let json = try call("request_test_notification", environment, "POST", "/inApps/v1/notifications/test")
        return try Self.string(json, "testNotificationToken")
    }

    /// Get Test Notification Status: the signed TEST notification and each send attempt's result.
    public func testNotificationStatus(
        _ token: String, in environment: AppStoreAPIEnvironment
    )
        throws(AppStoreAPIError) -> (signedPayload: String, attempts: [String])
    {
        let json = try call("test_notification_status", environment, "GET", "/inApps/v1/notifications/test/" + Self.segment(token))
        var attempts: [String] = []
        if case .object(let top) = json, case .array(let items)? = top["sendAttempts"] {
            for case .object(let item) in items {
                if case .string(let s)? = item["sendAttemptResult"] { attempts.append(s) }
            }
        }
        return (try Self.string(json, "signedPayload"), attempts)
    }

    // MARK: the call

    /// One call with its retries. `expectJSON: false` for endpoints that answer 202 without a body.
    func call(
        _ name: String, _ environment: AppStoreAPIEnvironment, _ method: String, _ path: String,
        query: [(String, String)] = [], body: [UInt8] = [], expectJSON: Bool = true
    ) throws(AppStoreAPIError) -> JSONValue {
        let base = bases[environment]!
        guard slots.wait(timeout: .seconds(configuration.attemptTimeoutSeconds)) else {
            throw .unavailable("\(configuration.maxInFlight) calls already in flight")
        }
        defer { slots.signal() }
        var target = base + path
        if !query.isEmpty { target += "?" + query.map { Self.percent($0) + "=" + Self.percent($1) }.joined(separator: "&") }
        var last = AppStoreAPIError.unavailable("no attempt made")
        var renewedToken = false
        var attempt = 0
        while attempt < max(1, configuration.maxAttempts) {
            attempt += 1
            let started = Monotonic.now()
            let bearer: String
            do { bearer = try token.token() } catch { throw .rejected(status: 0, code: 0, message: "cannot sign the API token: \(error)") }
            var headers = [("authorization", "Bearer " + bearer), ("accept", "application/json"), ("user-agent", "billingd")]
            if !body.isEmpty { headers.append(("content-type", "application/json")) }
            let request = HTTPClientRequest(
                method: method, url: target, headers: headers, body: body, timeoutMilliseconds: configuration.attemptTimeoutSeconds * 1000)
            let answer: HTTPClientResponse
            switch client.sendAndWait(request) {
            case .success(let response):
                answer = response
            case .failure(let error):
                observe(name, environment, 0, Monotonic.seconds(since: started))
                last = .unavailable("\(base): \(error)")
                if attempt < configuration.maxAttempts { backoff(attempt: attempt, retryAfter: nil) }
                continue
            }
            observe(name, environment, answer.status, Monotonic.seconds(since: started))
            let status = answer.status
            switch status {
            case 200..<300:
                if !expectJSON { return .null }
                do { return try JSONReader.parse(answer.body) } catch { throw .malformedAnswer("\(name): HTTP \(status) body is not JSON") }
            case 401 where !renewedToken:
                // A token made just before a clock step, or a rotated key: one more try with a new token.
                renewedToken = true
                token.invalidate()
                last = Self.refusal(status, answer.body)
                attempt -= 1
                continue
            case 429, 500..<600:
                last = .unavailable("\(name): HTTP \(status)")
                if attempt < configuration.maxAttempts {
                    backoff(attempt: attempt, retryAfter: answer.header("retry-after").flatMap { Int($0) })
                }
                continue
            case 404:
                let (code, message) = Self.appleError(answer.body)
                throw .notFound(code: code, message: message)
            default:
                throw Self.refusal(status, answer.body)
            }
        }
        throw last
    }

    private func backoff(attempt: Int, retryAfter: Int?) {
        let cap = Double(max(0, configuration.maxBackoffSeconds))
        var seconds = retryAfter.map(Double.init) ?? (0.25 * Double(1 << min(attempt - 1, 10)) * Double.random(in: 0.5...1.0))
        seconds = min(max(0, seconds), cap)
        if seconds > 0 { usleep(UInt32(seconds * 1_000_000)) }
    }

    static func refusal(_ status: Int, _ body: [UInt8]) -> AppStoreAPIError {
        let (code, message) = appleError(body)
        return .rejected(status: status, code: code, message: message)
    }

    /// Apple's error body, `{"errorCode": 4040010, "errorMessage": "..."}`; (0, "") when there is none.
    static func appleError(_ body: [UInt8]) -> (Int64, String) {
        guard let json = try? JSONReader.parse(body), case .object(let o) = json else { return (0, "") }
        var code: Int64 = 0
        if case .integer(let n)? = o["errorCode"] { code = n }
        var message = ""
        if case .string(let s)? = o["errorMessage"] { message = String(s.prefix(200)) }
        return (code, message)
    }

    static func string(_ json: JSONValue, _ key: String) throws(AppStoreAPIError) -> String {
        guard case .object(let o) = json, case .string(let s)? = o[key] else { throw .malformedAnswer("no \(key)") }
        return s
    }

    static func strings(_ json: JSONValue, _ key: String) throws(AppStoreAPIError) -> [String] {
        guard case .object(let o) = json else { throw .malformedAnswer("not an object") }
        guard case .array(let items)? = o[key] else { return [] }
        var out: [String] = []
        for item in items {
            guard case .string(let s) = item else { throw .malformedAnswer("\(key) holds a non-string") }
            out.append(s)
        }
        return out
    }

    static func bool(_ json: JSONValue, _ key: String) -> Bool {
        if case .object(let o) = json, case .bool(let b)? = o[key] { return b }
        return false
    }

    /// A path segment from an id: ids are digits (transactions) or letters and digits (order ids, tokens);
    /// anything else is percent-encoded so it cannot change the path.
    static func segment(_ id: String) -> String { percent(id) }

    static func percent(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(b))
            default:
                let hex = String(b, radix: 16, uppercase: true)
                out += "%" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return out
    }
}

extension AppStoreAPIModel.ConsumptionInformation {
    /// The body of Send Consumption Information (v2).
    var json: String {
        JSONText.object([
            ("customerConsented", String(customerConsented)), ("sampleContentProvided", String(sampleContentProvided)),
            ("deliveryStatus", JSONText.quote(deliveryStatus)), ("consumptionPercentage", consumptionPercentage.map(String.init)),
            ("refundPreference", refundPreference.map(JSONText.quote)),
        ])
    }
}
