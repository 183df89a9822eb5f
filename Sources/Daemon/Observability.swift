import Billing
import Foundation
import HTTP2
import Metrics
import RPC

/// The Prometheus metrics CONFIG.md names, fed by call records, the store and the verifiers.
final class BillingMetrics: Sendable {
    let registry = MetricsRegistry()
    let calls: Counter
    let errors: Counter
    let duration: Histogram
    let db: Histogram
    let verifications: Counter

    init(version: String) {
        calls = registry.counter("billingd_rpc_calls_total", help: "Calls answered, by method and gRPC code.", labels: ["method", "code"])
        errors = registry.counter("billingd_rpc_errors_total", help: "Failed calls, by method and ErrorInfo reason.", labels: ["method", "reason"])
        duration = registry.histogram("billingd_rpc_duration_seconds", help: "Call latency from request headers to answer.", labels: ["method"])
        db = registry.histogram("billingd_db_duration_seconds", help: "Database operation latency, queueing included.", labels: ["op"])
        verifications = registry.counter("billingd_verifications_total", help: "Proof verifications, by kind and result.",
                                         labels: ["kind", "result"])
        registry.gauge("billingd_build_info", help: "Build information; the value is always 1.", labels: [("version", version)]) { 1 }
    }

    func record(_ r: CallRecord) {
        calls.inc([r.method, r.code.description])
        if let reason = r.reason { errors.inc([r.method, reason]) }
        duration.observe(Double(r.durationNanoseconds) / 1e9, [r.method])
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

    private func timed<T: Sendable>(_ op: String, _ completion: @escaping @Sendable (T) -> Void) -> @Sendable (T) -> Void {
        let start = DispatchTime.now().uptimeNanoseconds
        let histogram = histogram
        return { value in
            histogram.observe(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9, [op])
            completion(value)
        }
    }

    func create(_ order: NewOrder, abandoned: @escaping @Sendable () -> Bool,
                completion: @escaping @Sendable (Result<CreateOutcome, BillingError>) -> Void) {
        inner.create(order, abandoned: abandoned, completion: timed("create_order", completion))
    }

    func order(id: String, completion: @escaping @Sendable (Result<Order?, BillingError>) -> Void) {
        inner.order(id: id, completion: timed("get_order", completion))
    }

    func complete(orderID: String, candidates: [StoreTransaction], check: @escaping @Sendable (Order, StoreTransaction) -> BillingError?,
                  nowMs: Int64, abandoned: @escaping @Sendable () -> Bool,
                  completion: @escaping @Sendable (Result<CompletedPurchase, BillingError>) -> Void) {
        inner.complete(orderID: orderID, candidates: candidates, check: check, nowMs: nowMs, abandoned: abandoned,
                       completion: timed("complete_order", completion))
    }

    func restore(accountID: String, transactions: [StoreTransaction], policy: RestorePolicy,
                 completion: @escaping @Sendable (Result<[OwnedTransaction], BillingError>) -> Void) {
        inner.restore(accountID: accountID, transactions: transactions, policy: policy, completion: timed("restore", completion))
    }

    func isReachable() -> Bool { inner.isReachable() }
    func close() { inner.close() }
}
