public import AfterSale
import Endpoints
public import Logging
import IO
import AppStore
import AppStoreAPI
import AppStoreHTTP
import Connect
public import Billing
public import BillingService
import Crypto
import Foundation
public import HTTP2
import HTTPFront
import Metrics
import ProtoJSON
import RPC
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
    /// The gRPC port's complete configuration (pipeline, Connect's service, limits): what a test's in-memory
    /// transport serves the same calls with (`BillingTesting.InMemoryApp`), no port bound.
    public let portConfiguration: ServerConfiguration
    let metrics: BillingMetrics
    let metricsServer: HTTPFront?
    let notificationsServer: HTTPFront?
    let service: BillingService
    /// What runs until stop: the store, the side listeners, the background workers and the port, started in that
    /// order by `start` and stopped in reverse by `stop` (nil before `start`).
    let services = Mutex<ServiceGroup?>(nil)
    /// The API keys in use (`--api-keys`), swapped whole by `reloadKeys` (SIGHUP); nil without keys.
    let keyTable: KeyTable?
    /// The router's methods, against which a reloaded key file is checked.
    let knownMethods: [String]
    /// Notification-history reconciliation, when the App Store Server API is configured.
    public let reconciler: Reconciler?
    /// Google Play (`--google-play-*`), nil without a service account.
    let googlePlay: GooglePlaySetup?
    /// The webhook sender (`--webhook-url`), nil without one.
    public let webhooks: WebhookSender?
    let reconcileQueue = DispatchQueue(label: "billingd.reconcile")
    /// billing.v1.Revenue; its exchange rates are read again on SIGHUP.
    let revenue: RevenueService
    /// What the revenue gauges show, refreshed once a minute (`startRevenueGauges`).
    let revenueGauges = RevenueGaugeValues.Box()

    /// Why billingd could not start: one line for the operator.
    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    /// billingd as the flags describe it, on the store `--database` names.
    public convenience init(configuration: Configuration, logger: Logger) throws(StartError) {
        try self.init(configuration: configuration, logger: logger, store: App.openStore(configuration, logger: logger))
    }

    /// The store `--database` names: SQLite's file, or a PostgreSQL pool.
    public static func openStore(_ configuration: Configuration, logger: Logger) throws(StartError) -> any OrderStore {
        switch configuration.store.database {
        case .sqlite(let path):
            do {
                // Work queued for the database counts against --max-in-flight: a call that gave up
                // (deadline) leaves its job queued, so the queues have the same bound.
                return try SQLiteOrderStore(path: path, maxQueued: configuration.limits.maxInFlight)
            } catch {
                throw StartError(description: "billingd: --database: cannot open \(path): \(error)")
            }
        case .postgres(let url):
            // libpq's notices never reach stderr as raw lines: NOTICEs are dropped, warnings and asynchronous
            // errors (a FATAL as the server terminates a connection) become JSON log lines.
            PostgresNotices.route { severity, message in
                logger.log(.warning, "postgresql notice", [("pg.severity", .string(severity)), ("error", .string(message))])
            }
            do {
                return try PostgresOrderStore(url: url, poolSize: configuration.store.poolSize, maxQueued: configuration.limits.maxInFlight)
            } catch {
                throw StartError(description: "billingd: --database: cannot use PostgreSQL: \(error)")
            }
        }
    }

    /// billingd on a store of the caller's (an `InMemoryOrderStore` in tests, a wrapped store): everything else as the
    /// flags describe it. The App closes the store when it stops.
    public init(configuration: Configuration, logger: Logger, store rawStore: any OrderStore) throws(StartError) {
        self.configuration = configuration
        self.logger = logger

        let catalog = try App.catalog(configuration)

        let metrics = BillingMetrics(version: Daemon.version)
        self.metrics = metrics
        store = MeasuredOrderStore(rawStore, histogram: metrics.db)
        let apiKeys = try App.apiKeys(configuration)

        let store = self.store
        let health = HealthState(storeReachable: { store.isReachable() })
        self.health = health
        let orders = OrderService(store: store, catalog: catalog)
        let (verifier, verifierSettings) = try App.proofVerifier(configuration, logger: logger, metrics: metrics)
        let engine = PurchaseEngine(
            orders: orders, verifier: verifier,
            restorePolicy: RestorePolicy(rawValue: configuration.purchases.restorePolicy) ?? .transfer,
            policy: PurchaseEngine.Policy(
                requireAccountToken: configuration.purchases.requireAccountToken,
                rejectStalePurchases: configuration.purchases.rejectStalePurchases,
                clockSkewMs: Int64(configuration.purchases.clockSkew * 1000)))
        let appStore = try App.appStoreLink(configuration, logger: logger, metrics: metrics)
        let consumption = App.consumptionResponder(configuration, appStore: appStore, store: store, metrics: metrics, logger: logger)
        let processor = verifierSettings.map {
            NotificationProcessor(settings: $0, store: store, catalog: catalog, policy: engine.policy) { summary, result in
                if result == .applied, summary.type == "CONSUMPTION_REQUEST", let consumption {
                    consumption.answer(transactionID: summary.transactionID, environment: summary.environment)
                }
            }
        }
        if let appStore, let processor {
            reconciler = Reconciler(
                link: appStore, processor: processor, store: store, marginSeconds: configuration.appStoreAPI.reconcileMargin, verifier: verifier,
                catalog: catalog
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
            apiKeys != nil ? .apiKey : configuration.server.tlsClientCA != nil ? .certificateSubject : .peerAddress
        let service = BillingService(
            orders: orders, purchases: engine, appStore: appStore, offers: offers,
            googlePlay: googlePlay?.link, onPlayPurchaseRecorded: { acknowledger?.poke() },
            feedLimits: EventFeed.Limits(maxWatchers: configuration.limits.maxWatchers, maxWatchersPerKey: configuration.limits.maxWatchersPerKey),
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
        let support = try App.supportService(
            store: store, catalog: catalog, table: table, appleOrder: admin.appleOrderLookup, refunder: googlePlay?.link, pools: pools, logger: logger)
        support.register(in: &router)
        for (method, request) in SupportService.auditedAdminMethods {
            router.wrap(method) { support.auditing(request, $0) }
        }
        // billing.v1.Revenue: computed from the transactions by DESIGN's definitions (docs/REVENUE.md).
        revenue = try App.revenueService(configuration, store: store, pools: pools)
        revenue.register(in: &router)
        if let apiKeys, let table {
            if let problem = App.unknownMethodProblem(apiKeys, methods: router.methods, path: configuration.server.apiKeys ?? "") {
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

        (portConfiguration, server) = try App.port(configuration, router: &router, metrics: metrics, logger: logger)
        App.registerGauges(
            metrics.registry, server: server, store: store, logger: logger, revenue: revenueGauges, currency: configuration.revenue.reportingCurrency)
        metricsServer = try configuration.observability.metricsListen.map { listen throws(StartError) in
            try App.metricsFront(listen, registry: metrics.registry, store: store, health: health, pools: pools)
        }
        self.service = service
        notificationsServer = try configuration.notifications.listen.map { listen throws(StartError) in
            try App.notificationsFront(
                listen, configuration: configuration, processor: processor, rtdn: googlePlay?.rtdn, store: store, health: health, pools: pools,
                metrics: metrics, logger: logger)
        }
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
