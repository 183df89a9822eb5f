import AfterSale
import Endpoints
import Logging
import IO
import AppStore
import AppStoreAPI
import AppStoreHTTP
import Connect
import Billing
import BillingService
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
import Webhooks
import Lifecycle

/// Start and stop (the service group), SIGHUP's reloads, the per-call log line.
extension App {
    static func logCall(_ record: CallRecord, _ logger: Logger) {
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
        let server = self.server, store = self.store, grace = configuration.server.shutdownGrace
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
                ("listen", .string(bound.withLock { $0 })), ("tls", .bool(configuration.server.tlsCert != nil)),
                ("mutual_tls", .bool(configuration.server.tlsClientCA != nil)), ("api_keys", .bool(configuration.server.apiKeys != nil)),
                ("metrics", .string(metricsServer?.address ?? "off")), ("notifications", .string(notificationsServer?.address ?? "off")),
                ("version", .string(Daemon.version)),
                ("database", .string(configuration.store.database.description)),
                ("db_pool_size", .int(configuration.store.database.isSQLite ? 1 : configuration.store.poolSize)),
                ("threads", .int(configuration.server.threads)), ("max_message_bytes", .int(configuration.limits.maxMessageBytes)),
                ("max_connections", .int(configuration.limits.maxConnections)), ("max_in_flight", .int(configuration.limits.maxInFlight)),
            ])
        return bound.withLock { $0 }
    }

    public var port: Int { server.port }

    /// SIGHUP: reads `--exchange-rates` again. A file that does not load changes nothing: the rates in use stay.
    public func reloadExchangeRates() {
        guard let path = configuration.revenue.exchangeRates else { return }
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
        guard let table = keyTable, let path = configuration.server.apiKeys else {
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
                ("grace_seconds", .double(configuration.server.shutdownGrace)),
                ("in_flight", .int(server.inFlightCount)),
            ])
        health.beginDraining()
        service.feed.shutdown()
        let group = services.withLock { $0 }
        let deadline = Duration.milliseconds(Int((configuration.server.shutdownGrace + 20) * 1000))
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
