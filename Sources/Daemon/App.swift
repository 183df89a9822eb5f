import AppStore
import Billing
public import BillingService
import Crypto
import Foundation
import HTTP2
public import RPC
import Storage

/// billingd wired together: store, domain, handlers, server. Tests start it in-process.
public final class App: Sendable {
    public let configuration: Configuration
    public let logger: Logger
    public let health: HealthState
    private let store: any OrderStore
    private let server: Server

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

        let database = configuration.database
        if database.hasPrefix("sqlite:") {
            var path = String(database.dropFirst("sqlite:".count))
            if path.hasPrefix("//") { path = String(path.dropFirst(2)) }
            do {
                store = try SQLiteOrderStore(path: path)
            } catch {
                throw StartError(description: "billingd: --database: cannot open \(path): \(error)")
            }
        } else {
            do {
                store = try PostgresOrderStore(url: database, poolSize: configuration.dbPoolSize)
            } catch {
                throw StartError(description: "billingd: --database: cannot use PostgreSQL: \(error)")
            }
        }
        if configuration.apiKeys != nil {
            throw StartError(description: "billingd: --api-keys: API keys are not supported by this build yet")
        }
        if configuration.metricsListen != nil {
            throw StartError(description: "billingd: --metrics-listen: metrics are not supported by this build yet")
        }

        let store = self.store
        let health = HealthState(storeReachable: { store.isReachable() })
        self.health = health
        let orders = OrderService(store: store, catalog: catalog)
        let verifier = try App.proofVerifier(configuration, logger: logger)
        let engine = PurchaseEngine(orders: orders, verifier: verifier,
                                    restorePolicy: RestorePolicy(rawValue: configuration.restorePolicy) ?? .transfer)
        let service = BillingService(orders: orders, purchases: engine, health: health) { requestID, detail in
            logger.log(.error, "storage error", [("request_id", .string(requestID)), ("error", .string(detail))])
        }
        var router = Router()
        service.register(in: &router)

        var serverConfig = ServerConfiguration()
        serverConfig.listen = configuration.listen
        serverConfig.threads = configuration.threads
        serverConfig.maxMessageBytes = configuration.maxMessageBytes
        serverConfig.maxConcurrentStreams = configuration.maxConcurrentStreams
        if let cert = configuration.tlsCert, let key = configuration.tlsKey {
            do {
                serverConfig.tls = try TLSContext(certificatePath: cert, keyPath: key, clientCAPath: configuration.tlsClientCA)
            } catch {
                throw StartError(description: "billingd: --tls-cert: \(error)")
            }
        }
        var observer: (@Sendable (CallRecord) -> Void)?
        if logger.level <= .info {
            observer = { record in App.logCall(record, logger) }
        }
        do {
            server = try Server(configuration: serverConfig, router: router, observer: observer)
        } catch {
            throw StartError(description: "billingd: \(error)")
        }
    }

    /// The App Store verifier the flags describe; refuses every proof when none is configured.
    static func proofVerifier(_ c: Configuration, logger: Logger) throws(StartError) -> any ProofVerifier {
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
                logger.log(.warning, "DEV MODE: trusting the local test store; never run --dev in production",
                           [("test_store_root", .string(store.rootPath))])
            } catch {
                throw StartError(description: "billingd: --dev-store: \(error)")
            }
        }
        if c.bundleIDs.isEmpty && !c.dev {
            logger.log(.warning, "no --bundle-id: SubmitReceipt and RestorePurchases refuse every proof with WRONG_APP")
            return UnconfiguredProofVerifier(reason: .wrongApp(detail: "billingd serves no app: start it with --bundle-id"))
        }
        if roots.isEmpty {
            logger.log(.warning, "no --trust-root: SubmitReceipt and RestorePurchases refuse every proof with RECEIPT_UNTRUSTED")
            return UnconfiguredProofVerifier(reason: .receiptUntrusted(detail: "billingd trusts no root: start it with --trust-root"))
        }
        if environments.contains(.production) && c.appleAppID == nil && !c.bundleIDs.isEmpty && !c.dev {
            throw StartError(description: "billingd: --apple-app-id: required when production is accepted (--environments)")
        }
        let settings = VerifierSettings(anchors: TrustAnchors(roots: roots), bundleIDs: Set(c.bundleIDs), appAppleID: c.appleAppID,
                                        environments: environments, now: { SystemClock().nowMilliseconds() })
        return AppStoreProofVerifier(settings: settings)
    }

    private static func logCall(_ record: CallRecord, _ logger: Logger) {
        var fields: [(String, Logger.LogValue)] = [
            ("method", .string(record.method)), ("code", .string(record.code.description)),
        ]
        if let reason = record.reason { fields.append(("reason", .string(reason))) }
        fields.append(("duration_ms", .double(Double(record.durationNanoseconds) / 1e6)))
        fields.append(("request_id", .string(record.requestID)))
        fields.append(("peer", .string(record.peer)))
        logger.log(.info, "rpc", fields)
    }

    /// Binds and serves; returns the bound `HOST:PORT`.
    @discardableResult
    public func start() throws(StartError) -> String {
        let bound: String
        do {
            bound = try server.start()
        } catch {
            throw StartError(description: "billingd: --listen: \(error)")
        }
        logger.log(.info, "started", [
            ("listen", .string(bound)), ("tls", .bool(configuration.tlsCert != nil)),
            ("database", .string(configuration.database.hasPrefix("sqlite:") ? configuration.database : "postgres")),
            ("db_pool_size", .int(configuration.database.hasPrefix("sqlite:") ? 1 : configuration.dbPoolSize)),
            ("threads", .int(configuration.threads)), ("max_message_bytes", .int(configuration.maxMessageBytes)),
        ])
        return bound
    }

    public var port: Int { server.port }

    /// Calls answered so far with a given code (the server's own count of grpc-status).
    public func count(of code: StatusCode) -> Int { server.count(of: code) }

    /// Graceful stop: NOT_SERVING, GOAWAY, drain up to the grace period, close the database.
    public func stop() {
        logger.log(.info, "draining", [("grace_seconds", .double(configuration.shutdownGrace)),
                                       ("in_flight", .int(server.inFlightCount))])
        health.beginDraining()
        server.shutdown(graceSeconds: configuration.shutdownGrace)
        store.close()
        var counts: [(String, Logger.LogValue)] = []
        for code in StatusCode.allCases where server.count(of: code) > 0 {
            counts.append(("calls." + code.description, .int(server.count(of: code))))
        }
        logger.log(.info, "stopped", counts)
        logger.flush()
    }
}
