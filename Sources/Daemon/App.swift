import IO
import AppStore
import AppStoreAPI
import AppStoreHTTP
import Connect
public import Billing
public import BillingService
import Crypto
import Foundation
import HTTP2
import HTTPFront
import Metrics
import ProtoJSON
public import RPC
import Synchronization
import Storage
import HTTPClient
import GooglePlayHTTP
public import Webhooks
import Lifecycle

/// billingd wired together: store, domain, handlers, server. Tests start it in-process.
public final class App: Sendable {
    public let configuration: Configuration
    public let logger: Logger
    public let health: HealthState
    let store: any OrderStore
    let server: Server
    let metrics: BillingMetrics
    let metricsServer: HTTPFront?
    let notificationsServer: HTTPFront?
    let service: BillingService
    /// What runs until stop: the store, the side listeners, the background workers and the port, started in that
    /// order by `start` and stopped in reverse by `stop` (nil before `start`).
    private let services = Mutex<ServiceGroup?>(nil)
    /// The API keys in use (`--api-keys`), swapped whole by `reloadKeys` (SIGHUP); nil without keys.
    private let keyTable: KeyTable?
    /// The router's methods, against which a reloaded key file is checked.
    private let knownMethods: [String]
    /// Notification-history reconciliation, when the App Store Server API is configured.
    public let reconciler: Reconciler?
    /// Google Play (`--google-play-*`), nil without a service account.
    let googlePlay: GooglePlaySetup?
    /// The webhook sender (`--webhook-url`), nil without one.
    public let webhooks: WebhookSender?
    private let reconcileQueue = DispatchQueue(label: "billingd.reconcile")
    /// billing.v1.Revenue; its exchange rates are read again on SIGHUP.
    let revenue: RevenueService
    /// What the revenue gauges show, refreshed once a minute (`startRevenueGauges`).
    let revenueGauges = RevenueGaugeValues.Box()

    /// Why billingd could not start: one line for the operator.
    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    public init(configuration: Configuration, logger: Logger) throws(StartError) {
        self.configuration = configuration
        self.logger = logger

        var catalog: Catalog?
        if let path = configuration.catalogPath {
            do {
                catalog = try Catalog(json: try Data(contentsOf: URL(fileURLWithPath: path)))
            } catch {
                throw StartError(description: "billingd: --catalog: \(error)")
            }
        }

        let metrics = BillingMetrics(version: Daemon.version)
        self.metrics = metrics
        let rawStore: any OrderStore
        let database = configuration.database
        if database.hasPrefix("sqlite:") {
            var path = String(database.dropFirst("sqlite:".count))
            if path.hasPrefix("//") { path = String(path.dropFirst(2)) }
            do {
                // Work queued for the database counts against --max-in-flight: a call that gave up
                // (deadline) leaves its job queued, so the queues have the same bound.
                rawStore = try SQLiteOrderStore(path: path, maxQueued: configuration.maxInFlight)
            } catch {
                throw StartError(description: "billingd: --database: cannot open \(path): \(error)")
            }
        } else {
            // libpq's notices never reach stderr as raw lines: NOTICEs are dropped, warnings and asynchronous
            // errors (a FATAL as the server terminates a connection) become JSON log lines.
            PostgresNotices.route { severity, message in
                logger.log(.warning, "postgresql notice", [("pg.severity", .string(severity)), ("error", .string(message))])
            }
            do {
                rawStore = try PostgresOrderStore(
                    url: database, poolSize: configuration.dbPoolSize,
                    maxQueued: configuration.maxInFlight)
            } catch {
                throw StartError(description: "billingd: --database: cannot use PostgreSQL: \(error)")
            }
        }
        store = MeasuredOrderStore(rawStore, histogram: metrics.db)
        var apiKeys: APIKeys?
        if let path = configuration.apiKeys {
            do {
                apiKeys = try APIKeys.load(path: path)
            } catch {
                throw StartError(description: "billingd: --api-keys: \(error)")
            }
        }

        let store = self.store
        let health = HealthState(storeReachable: { store.isReachable() })
        self.health = health
        let orders = OrderService(store: store, catalog: catalog)
        let (verifier, verifierSettings) = try App.proofVerifier(configuration, logger: logger, metrics: metrics)
        let engine = PurchaseEngine(
            orders: orders, verifier: verifier,
            restorePolicy: RestorePolicy(rawValue: configuration.restorePolicy) ?? .transfer,
            policy: PurchaseEngine.Policy(
                requireAccountToken: configuration.requireAccountToken,
                rejectStalePurchases: configuration.rejectStalePurchases,
                clockSkewMs: Int64(configuration.clockSkew * 1000)))
        let appStore = try App.appStoreLink(configuration, logger: logger, metrics: metrics)
        let consumption: ConsumptionResponder? =
            configuration.consumptionAnswers == "auto"
            ? appStore.map { link in
                ConsumptionResponder(client: link.client, store: store) { transactionID, result, detail in
                    metrics.consumptionAnswers.inc([result])
                    logger.log(
                        result == "failed" ? .warning : .info, "consumption answer",
                        [("transaction_id", .string(transactionID)), ("result", .string(result)), ("detail", .string(String(detail.prefix(300))))])
                }
            } : nil
        if configuration.consumptionAnswers == "auto" && appStore == nil {
            logger.log(.warning, "--consumption-answers auto needs the App Store Server API credentials: CONSUMPTION_REQUEST stays unanswered")
        }
        let processor = verifierSettings.map {
            NotificationProcessor(settings: $0, store: store, catalog: catalog, policy: engine.policy) { summary, result in
                if result == .applied, summary.type == "CONSUMPTION_REQUEST", let consumption {
                    consumption.answer(transactionID: summary.transactionID, environment: summary.environment)
                }
            }
        }
        if let appStore, let processor {
            reconciler = Reconciler(
                link: appStore, processor: processor, store: store, marginSeconds: configuration.reconcileMargin, verifier: verifier, catalog: catalog
            ) { env, result, n in
                metrics.reconciled.inc([env.rawValue, result], by: Double(n))
            }
        } else {
            reconciler = nil
        }
        let offers = try App.offerSigning(configuration, logger: logger)
        let googlePlay = try GooglePlaySetup.make(configuration, store: store, catalog: catalog, policy: engine.policy, metrics: metrics, logger: logger)
        self.googlePlay = googlePlay
        let acknowledger = googlePlay?.acknowledger
        // One set of worker pools for every service, owned here (none is a process global).
        let pools = WorkerPools()
        let watchersKeyedBy: BillingService.WatcherKey =
            apiKeys != nil ? .apiKey : configuration.tlsClientCA != nil ? .certificateSubject : .peerAddress
        let service = BillingService(
            orders: orders, purchases: engine, appStore: appStore, offers: offers,
            googlePlay: googlePlay?.link, onPlayPurchaseRecorded: { acknowledger?.poke() },
            feedLimits: EventFeed.Limits(maxWatchers: configuration.maxWatchers, maxWatchersPerKey: configuration.maxWatchersPerKey),
            watchersKeyedBy: watchersKeyedBy, pools: pools
        ) { requestID, detail in
            logger.log(.error, "storage error", [("request_id", .string(requestID)), ("error", .string(detail))])
        }
        webhooks = try App.webhookSender(configuration, store: store, feed: service.feed, metrics: metrics, logger: logger)
        var router = Router()
        // Three services side by side: billing.v1.Billing, grpc.health.v1.Health, gRPC reflection (and the
        // admin service below).
        service.register(in: &router)
        HealthService(state: health).register(in: &router)
        Reflection.register(in: &router)
        let reconciler = self.reconciler, reconcileQueue = self.reconcileQueue
        let admin = AdminService(
            link: appStore, store: store, verifier: verifierSettings == nil ? nil : verifier, processor: processor, catalog: catalog,
            pools: pools
        ) { since in
            App.reconcile(reconciler, on: reconcileQueue, sinceMs: since, metrics: metrics, logger: logger)
        }
        admin.register(in: &router)
        WebhookAdmin.register(in: &router, sender: webhooks, pool: pools.store)
        // billing.v1.Support: the operator is the key's name, else the client certificate's subject.
        let table = apiKeys.map(KeyTable.init)
        let json: ProtoJSON.Registry
        do {
            json = try ProtoJSON.Registry(base64Files: BillingDescriptors.files.values)
        } catch {
            throw StartError(description: "billingd: the embedded descriptors: \(error)")
        }
        let support = SupportService(
            store: store, catalog: catalog,
            operatorName: { context in table?.name(for: context) ?? context.peerSubject ?? "anonymous" },
            requestJSON: { message, binary in
                (try? json.toJSON(message, binary: binary)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
            },
            appleOrder: admin.appleOrderLookup, refunder: googlePlay?.link, pools: pools,
            log: { [logger] line in logger.log(.error, "audit", [("error", .string(line))]) })
        support.register(in: &router)
        for (method, request) in SupportService.auditedAdminMethods {
            router.wrap(method) { support.auditing(request, $0) }
        }
        // billing.v1.Revenue: computed from the transactions by DESIGN's definitions (docs/REVENUE.md).
        let rates = try configuration.exchangeRates.map { path throws(StartError) in
            do throws(Configuration.Invalid) {
                return try Configuration.exchangeRates(path)
            } catch {
                throw StartError(description: error.description)
            }
        }
        revenue = RevenueService(
            store: store,
            settings: RevenueSettings(
                reportingCurrency: configuration.reportingCurrency, rates: rates ?? .none, commission: configuration.commission),
            pools: pools)
        revenue.register(in: &router)
        if let apiKeys, let table {
            if let problem = App.unknownMethodProblem(apiKeys, methods: router.methods, path: configuration.apiKeys ?? "") {
                throw StartError(description: "billingd: --api-keys: \(problem)")
            }
            keyTable = table
            knownMethods = router.methods
            router.authenticate { context in
                let refusal = table.check(context)
                // A Support call (or an audited Admin call) refused here is in the audit trail too (DESIGN: refused
                // calls are audited).
                if let refusal, SupportService.isAudited(context.method) { support.auditRefusal(context, refusal) }
                return refusal
            }
        } else {
            keyTable = nil
            knownMethods = []
        }

        var serverConfig = ServerConfiguration()
        serverConfig.listen = configuration.listen
        serverConfig.threads = configuration.threads
        serverConfig.maxMessageBytes = configuration.maxMessageBytes
        serverConfig.maxConcurrentStreams = configuration.maxConcurrentStreams
        serverConfig.maxConnections = configuration.maxConnections
        serverConfig.maxInFlight = configuration.maxInFlight
        // One in-flight count and limit for the port's every protocol: gRPC here, Connect and gRPC-Web in their gateway.
        let admission = CallAdmission(limit: configuration.maxInFlight)
        serverConfig.admission = admission
        serverConfig.maxHeaderListBytes = configuration.maxHeaderListBytes
        serverConfig.maxConnectionBufferBytes = configuration.maxConnectionBufferBytes
        serverConfig.maxDeadlineNanoseconds = Int64(configuration.maxDeadline * 1e9)
        serverConfig.idleTimeoutNanoseconds = Int64(configuration.idleTimeout * 1e9)
        if let cert = configuration.tlsCert, let key = configuration.tlsKey {
            do {
                serverConfig.tls = try TLSContext(certificatePath: cert, keyPath: key, clientCAPath: configuration.tlsClientCA)
            } catch {
                throw StartError(description: "billingd: --tls-cert: \(error)")
            }
        }
        let logCalls = logger.level <= .info
        serverConfig.keepsCallNotes = logCalls
        // Metrics and the per-call log line see every call, unknown methods and refused calls included.
        router.intercept(
            ServerInterceptor(finished: { record in
                metrics.record(record)
                if logCalls { App.logCall(record, logger) }
            }))
        // One call pipeline for the port's every protocol (request ids, interceptors, the deadline rule, the
        // in-flight count): the router is complete here.
        let pipeline = CallPipeline(
            router: router, admission: admission, maxDeadlineNanoseconds: serverConfig.maxDeadlineNanoseconds, keepsNotes: logCalls)
        serverConfig.pipeline = pipeline
        // Connect and gRPC-Web on the same port, from the same pipeline (its interceptors included).
        let served = Set(configuration.protocols.compactMap(WireProtocol.init(rawValue:)))
        if served.contains(.connect) || served.contains(.grpcWeb) {
            var connect = ConnectConfiguration()
            connect.protocols = served
            connect.corsOrigins = configuration.corsOrigins
            connect.maxMessageBytes = configuration.maxMessageBytes
            connect.maxDeadlineNanoseconds = serverConfig.maxDeadlineNanoseconds
            connect.maxInFlight = configuration.maxInFlight
            connect.admission = admission
            connect.pipeline = pipeline
            do {
                let registry = try ProtoJSON.Registry(base64Files: BillingDescriptors.files.values)
                serverConfig.http = ConnectGateway(router: router, registry: registry, configuration: connect).service
            } catch {
                throw StartError(description: "billingd: the embedded descriptors: \(error)")
            }
        }
        serverConfig.servesGRPC = served.contains(.grpc)
        do {
            server = try Server(configuration: serverConfig, router: router)
        } catch {
            throw StartError(description: "billingd: \(error)")
        }
        let server = self.server
        let storeForReady = store
        let registry = metrics.registry
        registry.gauge("billingd_rpc_in_flight", help: "Calls being handled, over every protocol (gRPC, Connect, gRPC-Web).") { Double(server.inFlightCount) }
        registry.gauge("billingd_connections", help: "Open HTTP/2 connections.") { Double(server.connectionCount) }
        let gauges = revenueGauges
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
            labels: [("currency", configuration.reportingCurrency)]
        ) { Double(gauges.values.withLock { $0.mrr }) }
        registry.gauge("billingd_db_queued_jobs", help: "Database jobs waiting for a connection (at most --max-in-flight per queue).") {
            Double(storeForReady.queuedJobs)
        }
        registry.counter("billingd_log_lines_dropped_total", help: "Log lines dropped because stdout did not keep up.") {
            Double(logger.droppedLines)
        }
        registry.counter("billingd_connections_refused_total", help: "Connections closed at accept (--max-connections).") {
            Double(server.refusedConnectionCount)
        }
        if let listen = configuration.metricsListen {
            do {
                metricsServer = try HTTPFront(
                    configuration: {
                        var front = HTTPFrontConfiguration(listen: listen)
                        front.threadName = "metrics"
                        return front
                    }(),
                    precheck: { request in
                        request.method == "GET" || request.method == "HEAD" ? nil : HTTPResponse(status: 405, contentType: "text/plain", text: "only GET\n")
                    },
                    handler: { request, respond in
                        // Off the server's threads: readiness asks the database.
                        pools.store.run {
                            switch request.path {
                            case "/metrics":
                                respond(HTTPResponse(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", text: registry.render()))
                            case "/healthz": respond(HTTPResponse(status: 200, contentType: "text/plain", text: "ok\n"))
                            case "/readyz":
                                let ready = storeForReady.isReachable() && health.status(of: "") == .serving
                                respond(HTTPResponse(status: ready ? 200 : 503, contentType: "text/plain", text: ready ? "ready\n" : "not ready\n"))
                            default: respond(HTTPResponse(status: 404, contentType: "text/plain", text: "not found\n"))
                            }
                        }
                    })
            } catch {
                throw StartError(description: "billingd: --metrics-listen: \(error)")
            }
        } else {
            metricsServer = nil
        }
        self.service = service
        if let listen = configuration.notificationsListen {
            if processor == nil {
                logger.log(.warning, "no --bundle-id or --trust-root: the notifications endpoint refuses every notification")
            }
            let endpoint = NotificationEndpoint(
                processor: processor, logger: logger, metrics: metrics, pool: pools.verification,
                unavailable: {
                    if health.isDraining { return "SHUTTING_DOWN" }
                    return storeForReady.isReachable() ? nil : "STORAGE_UNAVAILABLE"
                },
                unconfiguredReason: configuration.bundleIDs.isEmpty && !configuration.dev ? "WRONG_APP" : "RECEIPT_UNTRUSTED")
            let rtdn = googlePlay?.rtdn.map { r in
                RTDNEndpoint(
                    verifier: r.verifier, processor: r.processor, logger: logger, metrics: metrics, pool: pools.googlePlay,
                    unavailable: {
                        if health.isDraining { return "SHUTTING_DOWN" }
                        return storeForReady.isReachable() ? nil : "STORAGE_UNAVAILABLE"
                    })
            }
            var front = HTTPFrontConfiguration(listen: listen)
            front.threadName = "notifications"
            if let cert = configuration.notificationsTLSCert, let key = configuration.notificationsTLSKey {
                front.tls = HTTPFrontConfiguration.TLS(certificatePath: cert, keyPath: key)
            }
            front.maxBodyBytes = NotificationEndpoint.maxBodyBytes
            do {
                notificationsServer = try HTTPFront(
                    configuration: front,
                    precheck: { request in
                        guard request.path == RTDNEndpoint.path else { return endpoint.precheck(request) }
                        // Without --rtdn-audience the path is not served.
                        guard let rtdn else { return NotificationEndpoint.json(404, ["error": "NOT_FOUND"]) }
                        return rtdn.precheck(request)
                    },
                    handler: { request, respond in
                        if request.path == RTDNEndpoint.path, let rtdn { return rtdn.handle(request, respond) }
                        endpoint.handle(request, respond)
                    })
            } catch {
                throw StartError(description: "billingd: --notifications-listen: \(error)")
            }
        } else {
            notificationsServer = nil
        }
    }

    /// The App Store Server API client the flags describe; nil without credentials.
    static func appStoreLink(_ c: Configuration, logger: Logger, metrics: BillingMetrics) throws(StartError) -> AppStoreLink? {
        guard let keyID = c.appStoreAPIKeyID, let issuer = c.appStoreAPIIssuerID, let keyPath = c.appStoreAPIPrivateKey,
            let bundle = c.bundleIDs.first
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
        if let url = c.appStoreAPIURL {
            api.productionURL = url
            api.sandboxURL = url
        }
        if let url = c.appStoreAPISandboxURL { api.sandboxURL = url }
        api.caPath = c.appStoreAPICA
        api.attemptTimeoutSeconds = max(1, Int(c.appStoreAPITimeout.rounded(.up)))
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
        let environments = c.environments.compactMap { AppStoreAPIEnvironment(rawValue: $0.prefix(1).uppercased() + $0.dropFirst()) }
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
        guard let keyID = c.offerSigningKeyID, let keyPath = c.offerSigningKey else { return nil }
        let key: PrivateKey
        do {
            key = try PrivateKey.parsePEM(Array(try Data(contentsOf: URL(fileURLWithPath: keyPath))))
            guard key.isP256 else { throw CryptoError.malformed("not P-256") }
            _ = try key.signES256([0])
        } catch {
            // Never the key's bytes: only that it could not be used.
            throw StartError(description: "billingd: --offer-signing-key: \(keyPath) is not an ES256 (P-256) private key in PEM (.p8)")
        }
        let issuer = c.offerSigningIssuerID ?? c.appStoreAPIIssuerID
        let apps: [String]? = c.bundleIDs.isEmpty && c.dev ? nil : c.bundleIDs
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
        for path in c.trustRoots {
            do {
                roots.append(try Certificate.load(path: path))
            } catch {
                throw StartError(description: "billingd: --trust-root: \(path): \(error)")
            }
        }
        var environments = Set(c.environments.compactMap(AppStoreEnvironment.init(configName:)))
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
        if c.bundleIDs.isEmpty && !c.dev {
            logger.log(.warning, "no --bundle-id: SubmitReceipt and RestorePurchases refuse every proof with WRONG_APP")
            return (UnconfiguredProofVerifier(reason: .wrongApp(detail: "billingd serves no app: start it with --bundle-id")), nil)
        }
        if roots.isEmpty {
            logger.log(.warning, "no --trust-root: SubmitReceipt and RestorePurchases refuse every proof with RECEIPT_UNTRUSTED")
            return (UnconfiguredProofVerifier(reason: .receiptUntrusted(detail: "billingd trusts no root: start it with --trust-root")), nil)
        }
        if environments.contains(.production) && c.appleAppID == nil && !c.bundleIDs.isEmpty && !c.dev {
            throw StartError(description: "billingd: --apple-app-id: required when production is accepted (--environments)")
        }
        let settings = VerifierSettings(
            anchors: TrustAnchors(roots: roots), bundleIDs: Set(c.bundleIDs), appAppleID: c.appleAppID,
            environments: environments, now: { SystemClock().nowMilliseconds() })
        return (AppStoreProofVerifier(settings: settings) { kind, result in metrics.verifications.inc([kind, result]) }, settings)
    }

    private static func logCall(_ record: CallRecord, _ logger: Logger) {
        var fields: [(String, Logger.LogValue)] = [
            ("method", .string(record.method)), ("code", .string(record.code.description)),
        ]
        if let reason = record.reason { fields.append(("reason", .string(reason))) }
        fields.append(("duration_ms", .millis(record.durationNanoseconds)))
        fields.append(("request_id", .string(record.requestID)))
        fields.append(("peer", .string(record.peer)))
        if record.wireProtocol != "grpc" { fields.append(("protocol", .string(record.wireProtocol))) }
        if let subject = record.peerSubject { fields.append(("peer_subject", .string(subject))) }
        for (key, value) in record.notes { fields.append((key, .string(value))) }
        logger.log(.info, "rpc", fields)
    }

    /// Starts the service group (store, side listeners, workers, then the port: what starts later may use what
    /// started before); returns the bound `HOST:PORT`.
    @discardableResult
    public func start() throws(StartError) -> String {
        let bound = Mutex("")
        let server = self.server, store = self.store, grace = configuration.shutdownGrace
        var parts: [any Service] = [StoppedBy("store") { store.close() }]
        if let front = metricsServer { parts.append(StoppedBy("metrics-listen") { front.stop() }) }
        if let front = notificationsServer { parts.append(StoppedBy("notifications-listen") { front.stop() }) }
        if let client = googlePlay?.client { parts.append(StoppedBy("google-play-client") { client.shutdown() }) }
        let workers: [Worker?] = [
            orderExpiryWorker(), grantExpiryWorker(), reconciliationWorker(), voidedReconciliationWorker(),
            metricsServer != nil ? revenueGaugesWorker() : nil,
        ]
        parts += workers.compactMap { $0 }
        // Before the store closes: an attempt in flight is ended, its event sent again after the restart.
        if let sender = webhooks { parts.append(StoppedBy("webhook-sender", start: { sender.start() }) { sender.stop() }) }
        if let ack = googlePlay?.acknowledger { parts.append(StoppedBy("play-ack", start: { ack.start() }) { ack.stop() }) }
        if let certs = googlePlay?.rtdn?.fetcher { parts.append(StoppedBy("google-certs", start: { certs.start() }) { certs.stop() }) }
        parts.append(
            StoppedBy("listen", start: { try bound.withLock { $0 = try server.start() } }) {
                server.shutdown(graceSeconds: grace)
            })
        let logger = self.logger
        let group = ServiceGroup(parts) { event in
            switch event {
            case .started(let name): logger.log(.debug, "service started", [("service", .string(name))])
            case .stopped(let name, let ms): logger.log(.debug, "service stopped", [("service", .string(name)), ("duration_ms", .int(ms))])
            case .stuck(let name): logger.log(.error, "service stuck", [("service", .string(name)), ("detail", .string("did not stop in time; left running"))])
            case .failed(let name, let error): logger.log(.debug, "service not started", [("service", .string(name)), ("error", .string(error))])
            }
        }
        services.withLock { $0 = group }
        do {
            try group.start(stopDeadline: .seconds(10))
        } catch {
            throw StartError(description: "billingd: --listen: \(error)")
        }
        logger.log(
            .info, "started",
            [
                ("listen", .string(bound.withLock { $0 })), ("tls", .bool(configuration.tlsCert != nil)),
                ("mutual_tls", .bool(configuration.tlsClientCA != nil)), ("api_keys", .bool(configuration.apiKeys != nil)),
                ("metrics", .string(metricsServer?.address ?? "off")), ("notifications", .string(notificationsServer?.address ?? "off")),
                ("version", .string(Daemon.version)),
                ("database", .string(configuration.database.hasPrefix("sqlite:") ? configuration.database : "postgres")),
                ("db_pool_size", .int(configuration.database.hasPrefix("sqlite:") ? 1 : configuration.dbPoolSize)),
                ("threads", .int(configuration.threads)), ("max_message_bytes", .int(configuration.maxMessageBytes)),
                ("max_connections", .int(configuration.maxConnections)), ("max_in_flight", .int(configuration.maxInFlight)),
            ])
        return bound.withLock { $0 }
    }

    public var port: Int { server.port }

    /// SIGHUP: reads `--exchange-rates` again. A file that does not load changes nothing: the rates in use stay.
    public func reloadExchangeRates() {
        guard let path = configuration.exchangeRates else { return }
        do throws(Configuration.Invalid) {
            let rates = try Configuration.exchangeRates(path)
            var settings = revenue.settings
            settings.rates = rates
            revenue.reload(settings)
            logger.log(.info, "exchange rates reloaded", [("days", .int(rates.dayCount)), ("currencies", .int(rates.currencies.count))])
        } catch {
            logger.log(.error, "exchange rates not reloaded; the rates in use stay", [("error", .string(error.description))])
        }
    }

    /// Calls answered so far with a given code (the server's own count of grpc-status).
    public func count(of code: StatusCode) -> Int { server.count(of: code) }

    /// Graceful stop: NOT_SERVING, GOAWAY, drain up to the grace period, close the database.
    /// A key file's key that names a method the router does not have, as one line; nil when every pattern is known.
    static func unknownMethodProblem(_ keys: APIKeys, methods: [String], path: String) -> String? {
        guard let (key, pattern) = keys.unknownMethod(known: methods) else { return nil }
        let services = Set(methods.compactMap { $0.split(separator: "/").first }).sorted().map { "\($0)/*" }
        let example = methods.first { $0.hasPrefix("billing.v1.") } ?? ""
        return "\(path): key \(key) names an unknown method '\(pattern)'; "
            + "methods are spelled \(services.joined(separator: ", ")), a full name such as \(example), or *"
    }

    /// SIGHUP: reads `--api-keys` again. A file that does not load (or names an unknown method) changes nothing:
    /// the keys in use stay, and the reason is logged. Calls in flight are not touched.
    public func reloadKeys() {
        guard let table = keyTable, let path = configuration.apiKeys else {
            logger.log(.info, "SIGHUP: no --api-keys to reload")
            return
        }
        do {
            let keys = try APIKeys.load(path: path)
            if let problem = App.unknownMethodProblem(keys, methods: knownMethods, path: path) {
                logger.log(.error, "api keys not reloaded; the keys in use stay", [("error", .string(problem))])
                return
            }
            table.replace(keys)
            logger.log(.info, "api keys reloaded", [("keys", .string(keys.keys.map(\.name).joined(separator: ",")))])
        } catch {
            logger.log(.error, "api keys not reloaded; the keys in use stay", [("error", .string(error.description))])
        }
    }

    /// Graceful stop: NOT_SERVING, the feed's watchers ended, then the service group in reverse: GOAWAY and drain up
    /// to the grace period, the workers joined, the side listeners closed, the database closed last. A part that
    /// has not stopped 20 s after the grace period is logged ("service stuck") and left behind.
    public func stop() {
        logger.log(
            .info, "draining",
            [
                ("grace_seconds", .double(configuration.shutdownGrace)),
                ("in_flight", .int(server.inFlightCount)),
            ])
        health.beginDraining()
        service.feed.shutdown()
        let group = services.withLock { $0 }
        let deadline = Duration.milliseconds(Int((configuration.shutdownGrace + 20) * 1000))
        let stuck = group?.stop(deadline: deadline) ?? []
        if group == nil { store.close() }
        var counts: [(String, Logger.LogValue)] = []
        for code in StatusCode.allCases where server.count(of: code) > 0 {
            counts.append(("calls." + code.description, .int(server.count(of: code))))
        }
        if !stuck.isEmpty { counts.append(("stuck", .string(stuck.joined(separator: ",")))) }
        logger.stop()
        // The threads still running besides the caller's: the log writer has stopped, so this line is written at once.
        counts.append(("threads_left", .string(App.threadNames().joined(separator: ","))))
        logger.log(.info, "stopped", counts)
    }

    /// The names of this process's threads but the calling one (Linux: /proc/self/task), sorted.
    static func threadNames() -> [String] {
        let me = ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")) ?? "").split(separator: "/").last.map(String.init)
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { $0 != me }.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
            .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.sorted()
    }
}

/// The revenue gauges' values (production).
struct RevenueGaugeValues: Sendable {
    final class Box: Sendable {
        let values = Mutex<RevenueGaugeValues>(RevenueGaugeValues())
    }
    var mrr: Int64 = 0
    var subscriptions: [String: Int64] = [:]
    var trials: [String: Int64] = [:]
}
