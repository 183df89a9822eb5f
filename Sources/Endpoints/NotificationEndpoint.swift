package import AfterSale
package import Billing
package import BillingService
import Foundation
package import HTTP2
import HTTPFront
package import Logging
package import Metrics
package import RPC
import ProtoWire
package import Lifecycle

/// `POST /appstore/notifications` (CONFIG.md): statuses, the log line per delivery and the metric.
/// 200 only once the notification's effect (or the record that it needed none) is durable; 400 with
/// `{"error": REASON}` when the body or a signature cannot be trusted (nothing recorded); 503 while the
/// database is unreachable or the server drains; 404, 405, 413, 415 for other paths, methods, sizes, types.
package struct NotificationEndpoint: Sendable {
    package static let path = "/appstore/notifications"
    /// The types Apple documents; any other is counted as OTHER so the metric's labels stay bounded.
    static let knownTypes: Set<String> = [
        "CONSUMPTION_REQUEST", "DID_CHANGE_RENEWAL_PREF", "DID_CHANGE_RENEWAL_STATUS", "DID_FAIL_TO_RENEW", "DID_RENEW", "EXPIRED",
        "EXTERNAL_PURCHASE_TOKEN", "GRACE_PERIOD_EXPIRED", "METADATA_UPDATE", "MIGRATION", "OFFER_REDEEMED", "ONE_TIME_CHARGE",
        "PRICE_CHANGE", "PRICE_INCREASE", "REFUND", "REFUND_DECLINED", "REFUND_REVERSED", "RENEWAL_EXTENDED", "RENEWAL_EXTENSION",
        "RESCIND_CONSENT", "REVOKE", "SUBSCRIBED", "TEST",
    ]

    /// The largest body (CONFIG.md); larger ones get 413 from the front before any byte is buffered.
    package static let maxBodyBytes = 64 << 10

    /// Nil when billingd serves no app or trusts no root: every delivery is refused.
    let processor: NotificationProcessor?
    let logger: Logger
    /// `billingd_notifications_total` by type and result.
    let notifications: Counter
    /// Where HTTP/1.1 deliveries are verified: App's verification pool.
    let pool: WorkerPool
    /// Why no notification can be taken now: SHUTTING_DOWN while draining, STORAGE_UNAVAILABLE while the
    /// database is unreachable; nil when available.
    let unavailable: @Sendable () -> String?
    /// The reason every delivery gets when billingd serves no app (WRONG_APP) or trusts no root (RECEIPT_UNTRUSTED).
    let unconfiguredReason: String

    package init(
        processor: NotificationProcessor?, logger: Logger, notifications: Counter, pool: WorkerPool, unavailable: @escaping @Sendable () -> String?,
        unconfiguredReason: String
    ) {
        self.processor = processor
        self.logger = logger
        self.notifications = notifications
        self.pool = pool
        self.unavailable = unavailable
        self.unconfiguredReason = unconfiguredReason
    }

    /// `{"KEY":"VALUE"}`: keys and values here come from fixed sets (results, reasons) of plain ASCII.
    package static func json(_ status: Int, _ object: KeyValuePairs<String, String>, headers: [(String, String)] = []) -> HTTPResponse {
        var text = "{"
        for (i, (k, v)) in object.enumerated() {
            if i > 0 { text += "," }
            text += JSONString.quote(k) + ":" + JSONString.quote(v)
        }
        var response = HTTPResponse(status: status, contentType: "application/json", body: Array((text + "}").utf8))
        response.headers.append(contentsOf: headers)
        return response
    }

    /// Answers what needs no body: the path, the method, the content type, availability.
    package func precheck(_ request: HTTPRequest) -> HTTPResponse? {
        guard request.path == Self.path else { return Self.json(404, ["error": "NOT_FOUND"]) }
        guard request.method == "POST" else { return Self.json(405, ["error": "METHOD_NOT_ALLOWED"], headers: [("allow", "POST")]) }
        let type = request.header("content-type")?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
        guard type == "application/json" else { return Self.json(415, ["error": "UNSUPPORTED_MEDIA_TYPE"]) }
        if let reason = unavailable() {
            record(nil, "unavailable", status: 503, started: Monotonic.now(), peer: request.peer, reason: reason)
            return Self.json(503, ["error": reason], headers: [("retry-after", "5")])
        }
        return nil
    }

    package func handle(_ request: HTTPRequest, _ respond: @escaping @Sendable (HTTPResponse) -> Void) {
        let started = Monotonic.now()
        let body = request.body, peer = request.peer
        guard let processor else {
            record(nil, "rejected", status: 400, started: started, peer: peer, reason: unconfiguredReason)
            return respond(Self.json(400, ["error": unconfiguredReason]))
        }
        // Verification costs two or three ES256 checks. An HTTP/2 connection has a thread of its own: verify there.
        // HTTP/1.1 connections share the library's one polling thread: verify elsewhere.
        let run: (@escaping @Sendable () -> Void) -> Void =
            request.httpVersion == "HTTP/2"
            ? { $0() } : { [pool] in pool.run($0) }
        run { [self] in
            processor.process(body: body) { outcome, summary in
                switch outcome {
                case .done(let result):
                    record(summary, result.rawValue, status: 200, started: started, peer: peer)
                    respond(Self.json(200, ["result": result.rawValue]))
                case .rejected(let reason, let detail):
                    record(summary, "rejected", status: 400, started: started, peer: peer, reason: reason, detail: detail)
                    respond(Self.json(400, ["error": reason]))
                case .unavailable(let detail):
                    record(summary, "unavailable", status: 503, started: started, peer: peer, detail: detail)
                    respond(Self.json(503, ["error": "STORAGE_UNAVAILABLE"], headers: [("retry-after", "5")]))
                }
            }
        }
    }

    /// One log line (never the payload) and the metric.
    private func record(
        _ s: NotificationProcessor.Summary?, _ result: String, status: Int, started: UInt64, peer: String,
        reason: String? = nil, detail: String? = nil
    ) {
        let type = s.map { Self.knownTypes.contains($0.type) ? $0.type : ($0.type.isEmpty ? "UNKNOWN" : "OTHER") } ?? "UNKNOWN"
        notifications.inc([type, result])
        var fields: [(String, Logger.LogValue)] = [("status", .int(status)), ("result", .string(result))]
        if let s {
            if !s.uuid.isEmpty { fields.append(("notification_uuid", .string(s.uuid))) }
            if !s.type.isEmpty { fields.append(("type", .string(String(s.type.prefix(64))))) }
            if !s.subtype.isEmpty { fields.append(("subtype", .string(String(s.subtype.prefix(64))))) }
            if !s.environment.isEmpty { fields.append(("environment", .string(String(s.environment.prefix(32))))) }
            if !s.transactionID.isEmpty { fields.append(("transaction_id", .string(String(s.transactionID.prefix(32))))) }
        }
        if let reason { fields.append(("reason", .string(reason))) }
        if let detail { fields.append(("error", .string(String(detail.prefix(300))))) }
        fields.append(("duration_ms", .millis(Monotonic.nanoseconds(since: started))))
        fields.append(("peer", .string(peer)))
        logger.log(status == 200 ? .info : .warning, "notification", fields)
    }
}
