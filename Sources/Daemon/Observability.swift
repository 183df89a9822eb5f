import Billing
import Foundation
import HTTP2
import Metrics
import RPC
import Lifecycle

/// The Prometheus metrics CONFIG.md names, fed by call records, the store and the verifiers.
final class BillingMetrics: Sendable {
    let registry = MetricsRegistry()
    let calls: CallMetrics
    /// Calls by wire protocol (`grpc`, `connect`, `grpc-web`) and code: at most 3 x 17 series, indexed.
    let byProtocol: IndexedCounter
    static let protocols = ["grpc", "connect", "grpc-web"]
    /// `StatusCode.allCases.count`, read once (the getter builds the array on every call).
    static let statusCodes = StatusCode.allCases.count
    let db: Histogram
    let verifications: Counter
    let notifications: Counter
    let appStoreAPICalls: Counter
    let appStoreAPIDuration: Histogram
    let reconciled: Counter
    let reconcileRuns: Counter
    let consumptionAnswers: Counter
    let webhookDeliveries: Counter
    let googlePlayAPICalls: Counter
    let googlePlayAPIDuration: Histogram
    let googlePlayAcknowledgements: Counter

    init(version: String) {
        calls = registry.callMetrics(prefix: "billingd_rpc", reasons: Self.reasons)
        byProtocol = registry.indexedCounter(
            "billingd_rpc_protocol_calls_total", help: "Calls answered, by wire protocol (grpc, connect, grpc-web) and code.",
            labels: ["protocol", "code"], rows: Self.protocols.flatMap { p in StatusCode.allCases.map { [p, $0.description] } })
        db = registry.histogram("billingd_db_duration_seconds", help: "Database operation latency, queueing included.", labels: ["op"])
        verifications = registry.counter(
            "billingd_verifications_total", help: "Proof verifications, by kind and result.",
            labels: ["kind", "result"])
        notifications = registry.counter(
            "billingd_notifications_total",
            help: "App Store Server Notifications received, by type and result.", labels: ["type", "result"])
        appStoreAPICalls = registry.counter(
            "billingd_appstore_api_calls_total",
            help: "App Store Server API attempts, by endpoint, environment and HTTP status (0: no answer).",
            labels: ["endpoint", "environment", "status"])
        appStoreAPIDuration = registry.histogram(
            "billingd_appstore_api_duration_seconds", help: "App Store Server API attempt latency.",
            labels: ["endpoint"])
        reconcileRuns = registry.counter(
            "billingd_reconcile_runs_total", help: "Notification-history reconciliations, by result.",
            labels: ["result"])
        reconciled = registry.counter(
            "billingd_reconcile_notifications_total",
            help: "Notifications fetched by reconciliation, by environment and result.", labels: ["environment", "result"])
        consumptionAnswers = registry.counter(
            "billingd_consumption_answers_total",
            help: "CONSUMPTION_REQUEST answers sent to Apple, by result.", labels: ["result"])
        googlePlayAPICalls = registry.counter(
            "billingd_google_play_api_calls_total",
            help: "Play Developer API and token endpoint attempts, by endpoint (Google's method name) and HTTP status (0: no answer).",
            labels: ["endpoint", "status"])
        googlePlayAPIDuration = registry.histogram(
            "billingd_google_play_api_duration_seconds", help: "Play Developer API attempt latency.", labels: ["endpoint"])
        googlePlayAcknowledgements = registry.counter(
            "billingd_google_play_acknowledgements_total",
            help: "Google Play acknowledgement attempts, by result (acknowledged, consumed, failed).", labels: ["result"])
        webhookDeliveries = registry.counter(
            "billingd_webhook_deliveries_total",
            help: "Webhook attempts, by result: delivered (2xx), rejected (another status), timeout, failed (no answer), skipped (--webhook-events).",
            labels: ["result"])
        registry.gauge("billingd_build_info", help: "Build information; the value is always 1.", labels: [("version", version)]) { 1 }
    }

    /// Every ErrorInfo reason billingd answers: the error table (`ErrorReason`, which docs/ERRORS.md lists); a reason
    /// from anywhere else (none is made) would count as OTHER.
    static let reasons = Set(ErrorReason.allCases.map(\.rawValue))

    func record(_ r: CallRecord) {
        // gRPC first: most calls, and one compare of two small strings' bits.
        let p = r.wireProtocol == "grpc" ? 0 : r.wireProtocol == "connect" ? 1 : r.wireProtocol == "grpc-web" ? 2 : 0
        byProtocol.inc(p * Self.statusCodes + Int(r.code.rawValue))
        calls.record(
            method: r.method, known: r.knownMethod, code: r.code.description, reason: r.reason,
            seconds: Double(r.durationNanoseconds) / 1e9)
    }
}

/// Times every store operation into `billingd_db_duration_seconds{op}`.
final class MeasuredOrderStore: OrderStore {
    let inner: any OrderStore
    let histogram: Histogram

    init(_ inner: any OrderStore, histogram: Histogram) {
        self.inner = inner
        self.histogram = histogram
    }

    /// The `op` label of each operation, built once (a literal `[op]` allocated an array per call).
    private enum Op {
        static let createOrder = ["create_order"], getOrder = ["get_order"], write = ["write"], read = ["read"]
        static let listEvents = ["list_events"]
    }

    private func timed<T: Sendable>(_ op: [String], _ completion: @escaping @Sendable (T) -> Void) -> @Sendable (T) -> Void {
        let start = Monotonic.now()
        let histogram = histogram
        return { value in
            histogram.observe(Monotonic.seconds(since: start), op)
            completion(value)
        }
    }

    func create(
        _ order: NewOrder, abandoned: @escaping @Sendable () -> Bool,
        completion: @escaping @Sendable (Result<CreateOutcome, BillingError>) -> Void
    ) {
        inner.create(order, abandoned: abandoned, completion: timed(Op.createOrder, completion))
    }

    func order(id: String, completion: @escaping @Sendable (Result<Order?, BillingError>) -> Void) {
        inner.order(id: id, completion: timed(Op.getOrder, completion))
    }

    func write<T: Sendable>(
        abandoned: @escaping @Sendable () -> Bool,
        _ body: @escaping @Sendable (any PurchaseLedger) throws(BillingError) -> Result<T, BillingError>,
        completion: @escaping @Sendable (Result<T, BillingError>) -> Void
    ) {
        inner.write(abandoned: abandoned, body, completion: timed(Op.write, completion))
    }

    func read<T: Sendable>(
        _ body: @escaping @Sendable (any PurchaseLedger) throws(BillingError) -> T,
        completion: @escaping @Sendable (Result<T, BillingError>) -> Void
    ) {
        inner.read(body, completion: timed(Op.read, completion))
    }

    func events(
        after cursor: UInt64, limit: Int, accountID: String?,
        completion: @escaping @Sendable (Result<[EventRecord], BillingError>) -> Void
    ) {
        inner.events(after: cursor, limit: limit, accountID: accountID, completion: timed(Op.listEvents, completion))
    }

    func setEventListener(_ listener: @escaping @Sendable () -> Void) { inner.setEventListener(listener) }

    func setRevenueListener(_ listener: @escaping @Sendable (RevenueChanges) -> Void) -> Bool { inner.setRevenueListener(listener) }

    func isReachable() -> Bool { inner.isReachable() }
    var queuedJobs: Int { inner.queuedJobs }
    func close() { inner.close() }
}
