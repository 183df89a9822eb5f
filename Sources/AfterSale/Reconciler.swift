public import AppStoreAPI
public import Billing
import Synchronization
import Lifecycle

/// Reconciliation: notifications the endpoint never received (an outage longer than Apple's retries; the
/// sandbox never retries) fetched from the App Store Server API's notification history and applied through
/// the same path as a delivery. Dedupe by notificationUUID makes repeats harmless, so ranges may overlap.
///
/// A run covers, per accepted environment, from `since` (or the newest recorded notification's signedDate
/// less `margin`; with none recorded, as far back as Apple keeps), clamped to what Apple keeps (180 days in
/// production, 30 in the sandbox), up to now.
///
/// Then, with a verifier, it reads Get Refund History for the customers billingd fetched by transaction id
/// (RestorePurchases with `transaction_ids`; `RefundWatch`), the least recently read first, at most
/// `maxRefundHistories` a run: each refunded transaction is verified like a proof and applied as a REFUND
/// notification carrying it would be (`PurchaseRules.applyFetchedView`), one database transaction per customer.
/// One run at a time; every call blocks its thread.
public final class Reconciler: Sendable {
    public struct Report: Sendable, Equatable {
        public var startMs: Int64 = 0
        public var endMs: Int64 = 0
        public var pages = 0
        public var applied = 0
        public var duplicate = 0
        public var ignored = 0
        public var rejected = 0
        /// Customers whose refund history was read, refunded transactions that changed billingd's record, and
        /// refunded transactions that failed verification.
        public var refundHistories = 0
        public var refundsApplied = 0
        public var refundsRejected = 0
        /// Why the run stopped early (the API or the database unavailable); nil when it finished.
        public var error: String?
        public init() {}
    }

    /// How far back Apple keeps notification history: 180 days in production, 30 in the sandbox.
    public static func historyDays(_ environment: AppStoreAPIEnvironment) -> Int64 { environment == .production ? 180 : 30 }
    /// Pages per environment per run: 20 notifications a page, so at most 100,000 notifications.
    public static let maxPages = 5000
    /// Customers whose refund history one run reads.
    public static let maxRefundHistories = 200

    private let link: AppStoreLink
    private let processor: NotificationProcessor
    private let store: any OrderStore
    private let marginMs: Int64
    private let clock: any WallClock
    private let verifier: (any ProofVerifier)?
    private let catalog: Catalog?
    private let running = Mutex(false)
    /// Per environment and result (applied, duplicate, ignored, rejected), for metrics.
    private let count: @Sendable (AppStoreAPIEnvironment, String, Int) -> Void

    /// `verifier` and `catalog`: refund-history reconciliation verifies and classifies with them (none without a verifier).
    public init(
        link: AppStoreLink, processor: NotificationProcessor, store: any OrderStore, marginSeconds: Double,
        verifier: (any ProofVerifier)? = nil, catalog: Catalog? = nil,
        clock: any WallClock = SystemClock(), count: @escaping @Sendable (AppStoreAPIEnvironment, String, Int) -> Void = { _, _, _ in }
    ) {
        self.verifier = verifier
        self.catalog = catalog
        self.link = link
        self.processor = processor
        self.store = store
        marginMs = Int64(marginSeconds * 1000)
        self.clock = clock
        self.count = count
    }

    /// Per environment, where the next scheduled run must start at the latest: the start of a range that
    /// failed (so it is read again), or the end of the last complete run less the margin. In memory: after a
    /// restart, runs start from the newest recorded notification less the margin.
    private let resumeFrom = Mutex<[AppStoreAPIEnvironment: Int64]>([:])

    /// Runs one reconciliation; `.failure` when one is already running.
    public func run(sinceMs: Int64? = nil) -> Result<Report, BillingError> {
        let free = running.withLock { busy -> Bool in
            if busy { return false }
            busy = true
            return true
        }
        guard free else { return .failure(.overloaded) }
        defer { running.withLock { $0 = false } }
        var report = Report()
        let now = clock.nowMilliseconds()
        report.endMs = now
        report.startMs = now
        var base = now - marginMs
        if let sinceMs {
            base = sinceMs
        } else {
            switch newestRecorded() {
            // Nothing recorded yet (a new deployment, or notifications never reached it): as far back as Apple
            // keeps, clamped per environment below.
            case .success(let newest): base = newest.map { $0 - marginMs } ?? 0
            case .failure(let e):
                report.error = e.description
                return .success(report)
            }
        }
        var errors: [String] = []
        for env in link.environments {
            let resume = resumeFrom.withLock { $0[env] }
            var from = sinceMs == nil ? min(base, resume ?? base) : base
            // Apple refuses a start older than it keeps (a minute of room for the request's flight).
            from = max(from, now - Self.historyDays(env) * 86_400_000 + 60_000)
            guard from < now else { continue }  // nothing to read (a start in the future, or no margin)
            report.startMs = min(report.startMs, from)
            let outcome = reconcile(env, from: from, to: now, &report)
            resumeFrom.withLock { r in
                switch outcome {
                case .complete:
                    // Scheduled runs, and on-demand runs that covered at least as much, move the mark forward.
                    if sinceMs == nil || from <= (r[env] ?? from) { r[env] = now - marginMs }
                case .stoppedAt(let signedMs, _):
                    r[env] = min(r[env] ?? signedMs, signedMs)
                case .failed:
                    r[env] = min(r[env] ?? from, from)
                }
            }
            switch outcome {
            case .complete: break
            case .stoppedAt(_, let why): errors.append(why)
            case .failed(let why): errors.append(why)
            }
        }
        if verifier != nil, let why = reconcileRefunds(&report) { errors.append(why) }
        if !errors.isEmpty { report.error = errors.joined(separator: "; ") }
        return .success(report)
    }

    /// Get Refund History for the customers restored by transaction id; nil when it finished, else why it stopped.
    private func reconcileRefunds(_ report: inout Report) -> String? {
        guard let verifier else { return nil }
        let watches: [RefundWatch]
        let read: Result<[RefundWatch], BillingError> = Blocking.wait { done in
            store.read({ ledger throws(BillingError) in try ledger.refundWatches(limit: Self.maxRefundHistories) }, completion: done)
        }
        switch read {
        case .success(let w): watches = w
        case .failure(let e): return "storage unavailable: \(e.description) (refund history)"
        }
        for w in watches {
            guard let env = AppStoreLink.apiEnvironment(w.environment) else { continue }
            let signed: [String]
            do {
                signed = try link.client.fullRefundHistory(w.transactionID, in: env)
            } catch .notFound, .tooLarge, .rejected(status: 400, code: _, message: _) {
                // Apple no longer knows the id, refuses it, or holds more than one call takes: nothing is read, and it
                // is marked read, so that it never holds up the customers after it.
                signed = []
            } catch {
                return link.map(error, transactionID: nil).description + " (refund history, \(env.rawValue))"
            }
            report.refundHistories += 1
            var views: [StoreTransaction] = []
            for jws in signed {
                switch verifier.verifySignedTransaction(jws) {
                case .success(var t):
                    if let kind = catalog?.product(t.productID)?.kind { t.productKind = kind }
                    views.append(t)
                case .failure: report.refundsRejected += 1
                }
            }
            let context = RuleContext(nowMs: clock.nowMilliseconds(), cause: .refundHistory, catalog: catalog)
            let applied = views
            let result: Result<Int, BillingError> = Blocking.wait { done in
                store.write(
                    abandoned: { false },
                    { ledger throws(BillingError) in
                        var changed = 0
                        for t in applied where try PurchaseRules.applyFetchedView(ledger, t, context: context) { changed += 1 }
                        try ledger.refundWatchChecked(transactionID: w.transactionID, environment: w.environment, nowMs: context.nowMs)
                        return .success(changed)
                    }, completion: done)
            }
            switch result {
            case .success(let n): report.refundsApplied += n
            case .failure(let e): return "storage unavailable: \(e.description) (refund history)"
            }
        }
        return nil
    }

    enum Outcome {
        case complete
        /// The page limit: the next run continues from the newest signedDate applied.
        case stoppedAt(Int64, String)
        case failed(String)
    }

    private func newestRecorded() -> Result<Int64?, BillingError> {
        Blocking.wait { done in store.read({ ledger throws(BillingError) in try ledger.newestNotificationSignedMs() }, completion: done) }
    }

    /// One environment's pages.
    private func reconcile(_ env: AppStoreAPIEnvironment, from start: Int64, to end: Int64, _ report: inout Report) -> Outcome {
        var token: String?
        var seen = Set<String>()
        var newestApplied = start
        for _ in 0..<Self.maxPages {
            let page: AppStoreAPIModel.NotificationPage
            do {
                page = try link.client.notificationHistory(startMs: start, endMs: end, paginationToken: token, in: env)
            } catch {
                return .failed(link.map(error, transactionID: nil).description + " (\(env.rawValue))")
            }
            report.pages += 1
            for signed in page.signedPayloads {
                let (outcome, summary) = applyOne(signed)
                switch outcome {
                case .done(.applied): report.applied += 1; count(env, "applied", 1)
                case .done(.duplicate): report.duplicate += 1; count(env, "duplicate", 1)
                case .done(.ignored): report.ignored += 1; count(env, "ignored", 1)
                case .rejected: report.rejected += 1; count(env, "rejected", 1)
                case .unavailable(let detail): return .failed("storage unavailable: \(detail) (\(env.rawValue))")
                }
                if case .done = outcome { newestApplied = max(newestApplied, summary.signedTimeMs) }
            }
            guard page.hasMore, let next = page.paginationToken, seen.insert(next).inserted else { return .complete }
            token = next
        }
        return .stoppedAt(newestApplied, "stopped after \(Self.maxPages) pages in \(env.rawValue); the next run continues")
    }

    private func applyOne(_ signed: String) -> (NotificationProcessor.Outcome, NotificationProcessor.Summary) {
        Blocking.wait { done in processor.process(signedPayload: signed) { outcome, summary in done((outcome, summary)) } }
    }
}
