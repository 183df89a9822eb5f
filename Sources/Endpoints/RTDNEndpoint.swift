package import AfterSale
package import Billing
package import BillingService
import Foundation
package import GooglePlayAPI
package import HTTP2
import HTTPClient
package import Logging
package import Metrics
import Synchronization
package import Lifecycle
package import RPC

/// `POST /googleplay/rtdn` on `--notifications-listen` (CONFIG.md "Google Play"): Pub/Sub push deliveries of
/// Google Play Real-time developer notifications. 401 without a push token that verifies (RS256 with Google's keys
/// or `--rtdn-certs`, `aud` = `--rtdn-audience`, Google's issuer, `email` = `--rtdn-service-account`, verified,
/// not expired); 400 for a body that is not a push message; 200 once applied (or recorded as a duplicate
/// `messageId`) and durable; 503 while the database or the Play Developer API is unavailable (Pub/Sub retries).
package struct RTDNEndpoint: Sendable {
    package static let path = "/googleplay/rtdn"
    let verifier: GoogleIDTokenVerifier
    let processor: PlayNotificationProcessor
    let logger: Logger
    /// `billingd_notifications_total` by type and result.
    let notifications: Counter
    /// Where a delivery is applied (it waits on Google): App's Google Play pool.
    let pool: WorkerPool
    let unavailable: @Sendable () -> String?

    package init(
        verifier: GoogleIDTokenVerifier, processor: PlayNotificationProcessor, logger: Logger, notifications: Counter, pool: WorkerPool,
        unavailable: @escaping @Sendable () -> String?
    ) {
        self.verifier = verifier
        self.processor = processor
        self.logger = logger
        self.notifications = notifications
        self.pool = pool
        self.unavailable = unavailable
    }

    package func precheck(_ request: HTTPRequest) -> HTTPResponse? {
        guard request.method == "POST" else {
            return NotificationEndpoint.json(405, ["error": "METHOD_NOT_ALLOWED"], headers: [("allow", "POST")])
        }
        if let reason = unavailable() {
            return NotificationEndpoint.json(503, ["error": reason], headers: [("retry-after", "5")])
        }
        return nil
    }

    package func handle(_ request: HTTPRequest, _ respond: @escaping @Sendable (HTTPResponse) -> Void) {
        let started = Monotonic.now()
        let peer = request.peer
        if case .invalid(let refusal) = verifier.verify(authorization: request.header("authorization")) {
            log(nil, "unauthenticated", status: 401, started: started, peer: peer, detail: refusal.description)
            return respond(NotificationEndpoint.json(401, ["error": "UNAUTHENTICATED"]))
        }
        let body = request.body
        // Reading the purchase waits on Google: never on the front's loop.
        pool.run { [self] in
            let (outcome, summary) = processor.process(body: body)
            switch outcome {
            case .done(let result):
                log(summary, result.rawValue, status: 200, started: started, peer: peer)
                respond(NotificationEndpoint.json(200, ["result": result.rawValue]))
            case .rejected(let reason, let detail):
                log(summary, "rejected", status: 400, started: started, peer: peer, detail: detail)
                respond(NotificationEndpoint.json(400, ["error": reason]))
            case .unavailable(let detail):
                log(summary, "unavailable", status: 503, started: started, peer: peer, detail: detail)
                respond(NotificationEndpoint.json(503, ["error": "UNAVAILABLE"], headers: [("retry-after", "10")]))
            }
        }
    }

    /// One log line (never the body or the token) and the notifications metric (types from a fixed set).
    private func log(_ s: PlayNotificationProcessor.Summary?, _ result: String, status: Int, started: UInt64, peer: String, detail: String? = nil) {
        let type = s.map { PlayNotificationProcessor.knownTypes.contains($0.type) ? $0.type : "OTHER" } ?? "UNKNOWN"
        notifications.inc([type, result])
        var fields: [(String, Logger.LogValue)] = [("source", .string("rtdn")), ("status", .int(status)), ("result", .string(result))]
        if let s {
            if !s.messageID.isEmpty { fields.append(("message_id", .string(String(s.messageID.prefix(128))))) }
            fields.append(("type", .string(type)))
            if !s.packageName.isEmpty { fields.append(("package", .string(s.packageName))) }
            if !s.transactionID.isEmpty { fields.append(("transaction_id", .string(String(s.transactionID.prefix(64))))) }
        }
        if let detail { fields.append(("error", .string(String(detail.prefix(300))))) }
        fields.append(("duration_ms", .millis(Monotonic.nanoseconds(since: started))))
        fields.append(("peer", .string(peer)))
        logger.log(status == 200 ? .info : .warning, "notification", fields)
    }
}
