import AfterSale
import Billing
import BillingService
import Endpoints
import Foundation
import GooglePlayAPI
import HTTP2
import HTTPFront
import IO
import Connect
import Logging
import Metrics
import ProtoJSON
import RPC

/// The parts App's init assembles, one builder each: what a flag names, read and checked, or a service built from
/// the parts before it.
extension App {
    /// `--catalog`, read and checked.
    static func catalog(_ c: Configuration) throws(StartError) -> Catalog? {
        guard let path = c.purchases.catalogPath else { return nil }
        do {
            return try Catalog(json: try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw StartError(description: "billingd: --catalog: \(error)")
        }
    }

    /// `--api-keys`, read and checked.
    static func apiKeys(_ c: Configuration) throws(StartError) -> APIKeys? {
        guard let path = c.server.apiKeys else { return nil }
        do {
            return try APIKeys.load(path: path)
        } catch {
            throw StartError(description: "billingd: --api-keys: \(error)")
        }
    }

    /// `--consumption-answers auto`: CONSUMPTION_REQUEST answered through Send Consumption Information.
    static func consumptionResponder(
        _ c: Configuration, appStore: AppStoreLink?, store: any OrderStore, metrics: BillingMetrics, logger: Logger
    ) -> ConsumptionResponder? {
        let responder: ConsumptionResponder? =
            c.appStoreAPI.consumptionAnswers == "auto"
            ? appStore.map { link in
                ConsumptionResponder(client: link.client, store: store) { transactionID, result, detail in
                    metrics.consumptionAnswers.inc([result])
                    logger.log(
                        result == "failed" ? .warning : .info, "consumption answer",
                        [("transaction_id", .string(transactionID)), ("result", .string(result)), ("detail", .string(String(detail.prefix(300))))])
                }
            } : nil
        if c.appStoreAPI.consumptionAnswers == "auto" && appStore == nil {
            logger.log(.warning, "--consumption-answers auto needs the App Store Server API credentials: CONSUMPTION_REQUEST stays unanswered")
        }
        return responder
    }

    /// billing.v1.Support: the operator is the key's name, else the client certificate's subject; the audit trail
    /// keeps each request as canonical proto3 JSON.
    static func supportService(
        store: any OrderStore, catalog: Catalog?, table: KeyTable?, appleOrder: (@Sendable (String) throws(BillingError) -> [String])?,
        refunder: (any StoreRefunder)?,
        pools: WorkerPools, logger: Logger
    ) throws(StartError) -> SupportService {
        let json: ProtoJSON.Registry
        do {
            json = try ProtoJSON.Registry(base64Files: BillingDescriptors.files.values)
        } catch {
            throw StartError(description: "billingd: the embedded descriptors: \(error)")
        }
        return SupportService(
            store: store, catalog: catalog,
            operatorName: { context in table?.name(for: context) ?? context.peerSubject ?? "anonymous" },
            requestJSON: { message, binary in
                (try? json.toJSON(message, binary: binary)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
            },
            appleOrder: appleOrder, refunder: refunder, pools: pools,
            log: { [logger] line in logger.log(.error, "audit", [("error", .string(line))]) })
    }

    /// billing.v1.Revenue: computed from the transactions by DESIGN's definitions (docs/REVENUE.md).
    static func revenueService(_ c: Configuration, store: any OrderStore, pools: WorkerPools) throws(StartError) -> RevenueService {
        let rates = try c.revenue.exchangeRates.map { path throws(StartError) in
            do throws(Configuration.Invalid) {
                return try Configuration.exchangeRates(path)
            } catch {
                throw StartError(description: error.description)
            }
        }
        return RevenueService(
            store: store,
            settings: RevenueSettings(reportingCurrency: c.revenue.reportingCurrency, rates: rates ?? .none, commission: c.revenue.commission),
            pools: pools)
    }

    /// `--metrics-listen`: `/metrics`, `/healthz`, `/readyz`, answered off the server's threads (readiness asks the
    /// database).
    static func metricsFront(
        _ listen: String, registry: MetricsRegistry, store: any OrderStore, health: HealthState, pools: WorkerPools
    ) throws(StartError) -> HTTPFront {
        do {
            return try HTTPFront(
                configuration: {
                    var front = HTTPFrontConfiguration(listen: listen)
                    front.threadName = "metrics"
                    return front
                }(),
                precheck: { request in
                    request.method == "GET" || request.method == "HEAD" ? nil : HTTPResponse(status: 405, contentType: "text/plain", text: "only GET\n")
                },
                handler: { request, respond in
                    pools.store.run {
                        switch request.path {
                        case "/metrics":
                            respond(HTTPResponse(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", text: registry.render()))
                        case "/healthz": respond(HTTPResponse(status: 200, contentType: "text/plain", text: "ok\n"))
                        case "/readyz":
                            let ready = store.isReachable() && health.status(of: "") == .serving
                            respond(HTTPResponse(status: ready ? 200 : 503, contentType: "text/plain", text: ready ? "ready\n" : "not ready\n"))
                        default: respond(HTTPResponse(status: 404, contentType: "text/plain", text: "not found\n"))
                        }
                    }
                })
        } catch {
            throw StartError(description: "billingd: --metrics-listen: \(error)")
        }
    }

    /// `--notifications-listen`: App Store notifications and, with `--rtdn-audience`, Google Play's push (Endpoints).
    static func notificationsFront(
        _ listen: String, configuration: Configuration, processor: NotificationProcessor?,
        rtdn: (verifier: GoogleIDTokenVerifier, fetcher: GoogleKeyFetcher?, processor: PlayNotificationProcessor)?, store: any OrderStore,
        health: HealthState, pools: WorkerPools, metrics: BillingMetrics, logger: Logger
    ) throws(StartError) -> HTTPFront {
        if processor == nil {
            logger.log(.warning, "no --bundle-id or --trust-root: the notifications endpoint refuses every notification")
        }
        let unavailable: @Sendable () -> String? = {
            if health.isDraining { return "SHUTTING_DOWN" }
            return store.isReachable() ? nil : "STORAGE_UNAVAILABLE"
        }
        let endpoint = NotificationEndpoint(
            processor: processor, logger: logger, notifications: metrics.notifications, pool: pools.verification, unavailable: unavailable,
            unconfiguredReason: configuration.purchases.bundleIDs.isEmpty && !configuration.dev ? "WRONG_APP" : "RECEIPT_UNTRUSTED")
        let push = rtdn.map { r in
            RTDNEndpoint(
                verifier: r.verifier, processor: r.processor, logger: logger, notifications: metrics.notifications, pool: pools.googlePlay,
                unavailable: unavailable)
        }
        var front = HTTPFrontConfiguration(listen: listen)
        front.threadName = "notifications"
        if let cert = configuration.notifications.tlsCert, let key = configuration.notifications.tlsKey {
            front.tls = HTTPFrontConfiguration.TLS(certificatePath: cert, keyPath: key)
        }
        front.maxBodyBytes = NotificationRoutes.maxBodyBytes
        let routes = NotificationRoutes(appStore: endpoint, rtdn: push)
        do {
            return try HTTPFront(configuration: front, precheck: routes.precheck, handler: routes.handle)
        } catch {
            throw StartError(description: "billingd: --notifications-listen: \(error)")
        }
    }

    /// The gRPC port: TLS, the call-record interceptor (metrics and the per-call line), the one call pipeline of
    /// every protocol, Connect and gRPC-Web beside gRPC; `router` must be complete but for that interceptor.
    static func port(
        _ c: Configuration, router: inout Router, metrics: BillingMetrics, logger: Logger
    ) throws(StartError) -> (ServerConfiguration, Server) {
        var serverConfig = c.serverConfiguration
        // One in-flight count and limit for the port's every protocol: gRPC here, Connect and gRPC-Web in their gateway.
        let admission = CallAdmission(limit: c.limits.maxInFlight)
        serverConfig.admission = admission
        if let cert = c.server.tlsCert, let key = c.server.tlsKey {
            do {
                serverConfig.tls = try TLSContext(certificatePath: cert, keyPath: key, clientCAPath: c.server.tlsClientCA)
            } catch {
                throw StartError(description: "billingd: --tls-cert: \(error)")
            }
        }
        // The per-call line is written at info and below (the logger's level: a test's may differ from the flags').
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
        let served = c.servedProtocols
        if served.contains(.connect) || served.contains(.grpcWeb) {
            var connect = c.connectConfiguration
            connect.admission = admission
            connect.pipeline = pipeline
            do {
                let registry = try ProtoJSON.Registry(base64Files: BillingDescriptors.files.values)
                serverConfig.http = ConnectGateway(router: router, registry: registry, configuration: connect).service
            } catch {
                throw StartError(description: "billingd: the embedded descriptors: \(error)")
            }
        }
        do {
            return (serverConfig, try Server(configuration: serverConfig, router: router))
        } catch {
            throw StartError(description: "billingd: \(error)")
        }
    }
}
