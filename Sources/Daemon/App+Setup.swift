public import AfterSale
import Logging
import IO
import AppStore
import AppStoreAPI
import AppStoreHTTP
import Connect
public import Billing
import BillingService
import Crypto
import Foundation
import HTTP2
import HTTPFront
import Metrics
import ProtoJSON
import RPC
import Synchronization
import Storage
import HTTPClient
import GooglePlayHTTP
import Webhooks
import Lifecycle

/// The parts App is built of, each from its flags: the App Store link and verifier, offers, the webhook sender,
/// reconciliation.
extension App {
    /// The App Store Server API client the flags describe; nil without credentials.
    static func appStoreLink(_ c: Configuration, logger: Logger, metrics: BillingMetrics) throws(StartError) -> AppStoreLink? {
        guard let keyID = c.appStoreAPI.keyID, let issuer = c.appStoreAPI.issuerID, let keyPath = c.appStoreAPI.privateKey,
            let bundle = c.purchases.bundleIDs.first
        else { return nil }
        let key: PrivateKey
        do {
            key = try PrivateKey.parsePEM(Array(try Data(contentsOf: URL(fileURLWithPath: keyPath))))
            _ = try key.signES256([0])
        } catch {
            // Never the key's bytes: only that it could not be used.
            throw StartError(description: "billingd: --appstore-api-private-key: \(keyPath) is not an ES256 (P-256) private key in PEM (.p8)")
        }
        var api = AppStoreAPIConfiguration(credentials: APIToken.Credentials(keyID: keyID, issuerID: issuer, bundleID: bundle, privateKey: key))
        if let url = c.appStoreAPI.url {
            api.productionURL = url
            api.sandboxURL = url
        }
        if let url = c.appStoreAPI.sandboxURL { api.sandboxURL = url }
        api.caPath = c.appStoreAPI.ca
        api.attemptTimeoutSeconds = max(1, Int(c.appStoreAPI.timeout.rounded(.up)))
        let client: AppStoreAPIClient
        do {
            client = try AppStoreAPIClient(api) { endpoint, env, status, seconds in
                let label = [0, 200, 202, 400, 401, 403, 404, 429, 500, 503].contains(status) ? String(status) : (status >= 500 ? "5xx" : "other")
                metrics.appStoreAPICalls.inc([endpoint, env.rawValue, label])
                metrics.appStoreAPIDuration.observe(seconds, [endpoint])
            }
        } catch {
            throw StartError(description: "billingd: --appstore-api-url: \(error)")
        }
        // The bearer token reads every customer's history: clear text is for local tests only.
        for url in Set([api.productionURL, api.sandboxURL]) where url.hasPrefix("http://") {
            logger.log(
                .warning, "the App Store Server API URL is http://: the API token travels in clear text; use https:// outside local tests",
                [("url", .string(url))])
        }
        let environments = c.purchases.environments.compactMap { AppStoreAPIEnvironment(rawValue: $0.prefix(1).uppercased() + $0.dropFirst()) }
        logger.log(
            .info, "App Store Server API configured",
            [
                ("key_id", .string(keyID)), ("production_url", .string(api.productionURL)),
                ("sandbox_url", .string(api.sandboxURL)),
                ("environments", .string(environments.map(\.rawValue).joined(separator: ","))),
            ])
        return AppStoreLink(client: client, environments: environments) { line in
            logger.log(.error, "App Store Server API", [("error", .string(String(line.prefix(300))))])
        }
    }

    /// SignOffer's key, read and checked now (a P-256 key that signs); nil without `--offer-signing-key`.
    /// The webhook sender, its client, metrics and log lines (nil without --webhook-url).
    static func webhookSender(
        _ c: Configuration, store: any OrderStore, feed: EventFeed, metrics: BillingMetrics, logger: Logger
    ) throws(StartError) -> WebhookSender? {
        guard let settings = c.webhook else { return nil }
        var clientSettings = HTTPClientConfiguration()
        clientSettings.extraCAPath = settings.caPath
        clientSettings.allowCleartext = settings.allowCleartext
        clientSettings.maxConnections = 4
        clientSettings.userAgent = "billingd/\(Daemon.version) webhooks"
        let client: HTTPClient
        let registry: ProtoJSON.Registry
        do {
            client = try HTTPClient(configuration: clientSettings, name: "webhooks")
            registry = try ProtoJSON.Registry(base64Files: BillingDescriptors.files.values)
        } catch {
            throw StartError(description: "billingd: --webhook-url: \(error)")
        }
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, 255)
        let holder = "\(String(cString: host))/\(getpid())/\(UInt32.random(in: 0...UInt32.max))"
        let deliveries = metrics.webhookDeliveries
        let sender = WebhookSender(
            configuration: settings, store: store, client: client, registry: registry, holder: holder,
            now: { Int64(Date().timeIntervalSince1970 * 1000) }
        ) { attempt in
            deliveries.inc([attempt.result.rawValue])
            guard attempt.result != .delivered, attempt.result != .skipped else { return }
            logger.log(
                .warning, "webhook delivery failed",
                [
                    ("cursor", .int(Int(attempt.cursor))), ("type", .string(attempt.type)), ("result", .string(attempt.result.rawValue)),
                    ("status", .int(attempt.status)), ("error", .string(attempt.error)), ("failures", .int(attempt.failures)),
                    ("retry_in_ms", .int(Int(attempt.retryInMilliseconds))), ("duration_ms", .int(Int(attempt.durationMilliseconds))),
                ])
        }
        feed.onCommit { sender.poke() }
        metrics.registry.gauge("billingd_webhook_lag_events", help: "Events committed and not yet delivered to --webhook-url (cursor distance).") {
            Double(sender.lastStatus.lagEvents)
        }
        metrics.registry.gauge(
            "billingd_webhook_oldest_undelivered_age_seconds", help: "Age of the oldest event not yet delivered to --webhook-url; 0 when none waits."
        ) { Double(sender.lastStatus.oldestUndeliveredAgeMs) / 1000 }
        logger.log(
            .info, "webhooks on",
            [
                ("url", .string(settings.url)), ("holder", .string(holder)),
                ("events", .string(settings.events.map { $0.map(\.typeName).sorted().joined(separator: ",") } ?? "all")),
            ])
        return sender
    }

    static func offerSigning(_ c: Configuration, logger: Logger) throws(StartError) -> OfferSigning? {
        guard let keyID = c.offers.keyID, let keyPath = c.offers.key else { return nil }
        let key: PrivateKey
        do {
            key = try PrivateKey.parsePEM(Array(try Data(contentsOf: URL(fileURLWithPath: keyPath))))
            guard key.isP256 else { throw CryptoError.malformed("not P-256") }
            _ = try key.signES256([0])
        } catch {
            // Never the key's bytes: only that it could not be used.
            throw StartError(description: "billingd: --offer-signing-key: \(keyPath) is not an ES256 (P-256) private key in PEM (.p8)")
        }
        let issuer = c.offers.issuerID ?? c.appStoreAPI.issuerID
        let apps: [String]? = c.purchases.bundleIDs.isEmpty && c.dev ? nil : c.purchases.bundleIDs
        if issuer == nil {
            logger.log(
                .warning,
                "no --offer-signing-issuer-id or --appstore-api-issuer-id: SignOffer signs PROMOTIONAL only; the JWS kinds answer OFFER_SIGNING_NOT_CONFIGURED"
            )
        }
        if apps?.isEmpty == true {
            logger.log(.warning, "no --bundle-id: SignOffer refuses every offer with WRONG_APP")
        }
        logger.log(
            .info, "offer signing configured",
            [("key_id", .string(keyID)), ("jws_kinds", .bool(issuer != nil)), ("bundle_ids", .string(apps?.joined(separator: ",") ?? "any (--dev)"))])
        return OfferSigning(signer: OfferSigner(keyID: keyID, issuerID: issuer, privateKey: key), bundleIDs: apps)
    }

    /// Runs a reconciliation now (on its queue) and logs its report.
    @discardableResult
    public func reconcile(sinceMs: Int64? = nil) -> Result<Reconciler.Report, BillingError>? {
        App.reconcile(reconciler, on: reconcileQueue, sinceMs: sinceMs, metrics: metrics, logger: logger)
    }

    static func reconcile(
        _ reconciler: Reconciler?, on queue: DispatchQueue, sinceMs: Int64?, metrics: BillingMetrics,
        logger: Logger
    ) -> Result<Reconciler.Report, BillingError>? {
        guard let reconciler else { return nil }
        let result = queue.sync { reconciler.run(sinceMs: sinceMs) }
        switch result {
        case .success(let r):
            metrics.reconcileRuns.inc([r.error == nil ? "ok" : "incomplete"])
            logger.log(
                r.error == nil ? .info : .warning, "reconciliation",
                [
                    ("start_ms", .int(Int(r.startMs))), ("end_ms", .int(Int(r.endMs))), ("pages", .int(r.pages)), ("applied", .int(r.applied)),
                    ("duplicate", .int(r.duplicate)), ("ignored", .int(r.ignored)), ("rejected", .int(r.rejected)),
                    ("refund_histories", .int(r.refundHistories)), ("refunds_applied", .int(r.refundsApplied)),
                    ("refunds_rejected", .int(r.refundsRejected)),
                    ("error", .string(r.error ?? "")),
                ])
        case .failure(let e):
            metrics.reconcileRuns.inc(["busy"])
            logger.log(.info, "reconciliation skipped", [("error", .string(e.description))])
        }
        return result
    }

    /// The App Store verifier the flags describe; refuses every proof when none is configured.
    static func proofVerifier(
        _ c: Configuration, logger: Logger,
        metrics: BillingMetrics
    ) throws(StartError) -> (any ProofVerifier, VerifierSettings?) {
        var roots: [Certificate] = []
        for path in c.purchases.trustRoots {
            do {
                roots.append(try Certificate.load(path: path))
            } catch {
                throw StartError(description: "billingd: --trust-root: \(path): \(error)")
            }
        }
        var environments = Set(c.purchases.environments.compactMap(AppStoreEnvironment.init(configName:)))
        if c.dev {
            do {
                let store = try TestStore.open(directory: c.devStore, create: true)
                roots.append(store.root)
                environments.insert(.xcode)
                logger.log(
                    .warning, "DEV MODE: trusting the local test store; never run --dev in production",
                    [("test_store_root", .string(store.rootPath))])
            } catch {
                throw StartError(description: "billingd: --dev-store: \(error)")
            }
        }
        if c.purchases.bundleIDs.isEmpty && !c.dev {
            logger.log(.warning, "no --bundle-id: SubmitReceipt and RestorePurchases refuse every proof with WRONG_APP")
            return (UnconfiguredProofVerifier(reason: .wrongApp(detail: "billingd serves no app: start it with --bundle-id")), nil)
        }
        if roots.isEmpty {
            logger.log(.warning, "no --trust-root: SubmitReceipt and RestorePurchases refuse every proof with RECEIPT_UNTRUSTED")
            return (UnconfiguredProofVerifier(reason: .receiptUntrusted(detail: "billingd trusts no root: start it with --trust-root")), nil)
        }
        if environments.contains(.production) && c.purchases.appleAppID == nil && !c.purchases.bundleIDs.isEmpty && !c.dev {
            throw StartError(description: "billingd: --apple-app-id: required when production is accepted (--environments)")
        }
        let settings = VerifierSettings(
            anchors: TrustAnchors(roots: roots), bundleIDs: Set(c.purchases.bundleIDs), appAppleID: c.purchases.appleAppID,
            environments: environments, now: { SystemClock().nowMilliseconds() })
        return (AppStoreProofVerifier(settings: settings) { kind, result in metrics.verifications.inc([kind, result]) }, settings)
    }

    /// The gauges and counters read at each scrape: calls in flight, connections, the revenue gauges' last values,
    /// queued database jobs, dropped log lines, refused connections.
    static func registerGauges(
        _ registry: MetricsRegistry, server: Server, store: any OrderStore, logger: Logger, revenue gauges: RevenueGaugeValues.Box,
        currency: String
    ) {
        registry.gauge("billingd_rpc_in_flight", help: "Calls being handled, over every protocol (gRPC, Connect, gRPC-Web).") { Double(server.inFlightCount) }
        registry.gauge("billingd_connections", help: "Open HTTP/2 connections.") { Double(server.connectionCount) }
        let revenueStores = ["APP_STORE", "GOOGLE_PLAY"]
        registry.gauges(
            "billingd_active_subscriptions", help: "Paid-active subscriptions in production (Revenue's definition), refreshed each minute.",
            labels: ["store"]
        ) { gauges.values.withLock { g in revenueStores.map { ([$0], Double(g.subscriptions[$0] ?? 0)) } } }
        registry.gauges(
            "billingd_active_trials", help: "Subscriptions in a free trial in production, refreshed each minute.", labels: ["store"]
        ) { gauges.values.withLock { g in revenueStores.map { ([$0], Double(g.trials[$0] ?? 0)) } } }
        registry.gauge(
            "billingd_mrr_milliunits", help: "Monthly recurring revenue in production, milliunits of --reporting-currency, refreshed each minute.",
            labels: [("currency", currency)]
        ) { Double(gauges.values.withLock { $0.mrr }) }
        registry.gauge("billingd_db_queued_jobs", help: "Database jobs waiting for a connection (at most --max-in-flight per queue).") {
            Double(store.queuedJobs)
        }
        registry.counter("billingd_log_lines_dropped_total", help: "Log lines dropped because stdout did not keep up.") {
            Double(logger.droppedLines)
        }
        registry.counter("billingd_connections_refused_total", help: "Connections closed at accept (--max-connections).") {
            Double(server.refusedConnectionCount)
        }
    }
}
