import Billing
import BillingService
import Foundation
import GooglePlayAPI
import HTTP2
import HTTPClient
import Metrics
import Synchronization
import Lifecycle
import RPC

/// `POST /googleplay/rtdn` on `--notifications-listen` (CONFIG.md "Google Play"): Pub/Sub push deliveries of
/// Google Play Real-time developer notifications. 401 without a push token that verifies (RS256 with Google's keys
/// or `--rtdn-certs`, `aud` = `--rtdn-audience`, Google's issuer, `email` = `--rtdn-service-account`, verified,
/// not expired); 400 for a body that is not a push message; 200 once applied (or recorded as a duplicate
/// `messageId`) and durable; 503 while the database or the Play Developer API is unavailable (Pub/Sub retries).
struct RTDNEndpoint: Sendable {
    static let path = "/googleplay/rtdn"
    let verifier: GoogleIDTokenVerifier
    let processor: PlayNotificationProcessor
    let logger: Logger
    let metrics: BillingMetrics
    /// Where a delivery is applied (it waits on Google): App's Google Play pool.
    let pool: WorkerPool
    let unavailable: @Sendable () -> String?

    func precheck(_ request: HTTPRequest) -> HTTPResponse? {
        guard request.method == "POST" else {
            return NotificationEndpoint.json(405, ["error": "METHOD_NOT_ALLOWED"], headers: [("allow", "POST")])
        }
        if let reason = unavailable() {
            return NotificationEndpoint.json(503, ["error": reason], headers: [("retry-after", "5")])
        }
        return nil
    }

    func handle(_ request: HTTPRequest, _ respond: @escaping @Sendable (HTTPResponse) -> Void) {
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
        metrics.notifications.inc([type, result])
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

/// Google's push-token keys, fetched from `https://www.googleapis.com/oauth2/v3/certs` at start and every hour
/// (every minute while a fetch fails), handed to the verifier. Not used with `--rtdn-certs`.
final class GoogleKeyFetcher: Sendable {
    static let url = "https://www.googleapis.com/oauth2/v3/certs"
    private let verifier: GoogleIDTokenVerifier
    private let client: HTTPClient
    private let logger: Logger
    private let worker = Worker(name: "google-certs")

    init(verifier: GoogleIDTokenVerifier, logger: Logger) throws {
        self.verifier = verifier
        self.logger = logger
        client = try HTTPClient(name: "google-certs")
    }

    func start() {
        // Hourly, every minute after a failure.
        worker.start { [self] worker in
            var ok = true
            repeat { ok = fetch() } while worker.pause(.seconds(ok ? 3600 : 60))
        }
    }

    /// Ends the loop; the client's shutdown answers a fetch in flight at once.
    func stop() {
        worker.beginStop()
        client.shutdown()
        _ = worker.waitStopped(until: Monotonic.after(.seconds(5)))
    }

    private func fetch() -> Bool {
        switch client.sendAndWait(HTTPClientRequest(url: Self.url, timeoutMilliseconds: 10_000)) {
        case .success(let r) where r.status == 200:
            do {
                verifier.replaceKeys(try GoogleKeySet.parse(r.body))
                return true
            } catch {
                logger.log(.warning, "Google's push-token keys not understood", [("error", .string(error.description))])
            }
        case .success(let r):
            logger.log(.warning, "Google's push-token keys not fetched", [("status", .int(r.status))])
        case .failure(let e):
            logger.log(.warning, "Google's push-token keys not fetched", [("error", .string(e.description))])
        }
        return false
    }
}
