public import Billing
import BillingAPI
import Foundation
import ProtoWire
public import RPC
import Synchronization
import Lifecycle

/// billing.v1.Revenue: the numbers finance and product ask for, computed from the transaction record by
/// DESIGN.md's definitions (Billing's `RevenueBook`; docs/REVENUE.md). Every call runs on the revenue pool: it
/// reads the environment's counted transactions in one database read, then computes off the database's threads.
/// At most `Limits.concurrent` reports are computed at once (each holds one environment's transactions in
/// memory); more are OVERLOADED. The export reads page by page and stops sending while the client is behind.
public final class RevenueService: Sendable {
    public static let getRevenueSummary = "billing.v1.Revenue/GetRevenueSummary"
    public static let getRevenueSeries = "billing.v1.Revenue/GetRevenueSeries"
    public static let exportTransactions = "billing.v1.Revenue/ExportTransactions"
    public static let methods = [getRevenueSummary, getRevenueSeries, exportTransactions]

    public enum Limits {
        /// Reports computed at once.
        public static let concurrent = 2
        /// Exports at once (apart from the reports: a long export does not hold up a dashboard).
        public static let concurrentExports = 2
        /// Rows one export page reads.
        public static let pageRows = 5000
        /// Bytes one chunk carries (about).
        public static let chunkBytes = 64 * 1024
        /// Bytes the export may leave unsent before it waits for the client.
        public static let unsentBytes = 1024 * 1024
        public static let productID = 256
    }

    let store: any OrderStore
    /// Where reports and exports run.
    let pool: WorkerPool
    let clock: any WallClock
    let settingsBox: Mutex<RevenueSettings>
    let running = Atomic<Int>(0)
    let exporting = Atomic<Int>(0)
    let index: RevenueIndex

    public init(store: any OrderStore, settings: RevenueSettings, clock: any WallClock = SystemClock(), pools: WorkerPools = WorkerPools()) {
        self.pool = pools.revenue
        self.store = store
        self.clock = clock
        self.settingsBox = Mutex(settings)
        let index = RevenueIndex()
        index.tracks.store(store.setRevenueListener { index.note($0) }, ordering: .releasing)
        self.index = index
    }

    /// The settings now (the exchange rates are replaced on SIGHUP).
    public var settings: RevenueSettings { settingsBox.withLock { $0 } }

    /// Replaces the settings (a re-read rates file); calls already running keep the ones they started with.
    public func reload(_ settings: RevenueSettings) { settingsBox.withLock { $0 = settings } }

    public func register(in router: inout Router) {
        router.register(Self.getRevenueSummary, GetRevenueSummaryRequest.self, on: .pool(pool)) { [self] context, request, responder in
            admitted(running, Limits.concurrent, responder.fail) { summary(context, request, responder) }
        }
        router.register(Self.getRevenueSeries, GetRevenueSeriesRequest.self, on: .pool(pool)) { [self] context, request, responder in
            admitted(running, Limits.concurrent, responder.fail) { series(context, request, responder) }
        }
        router.registerServerStreaming(Self.exportTransactions, ExportTransactionsRequest.self, on: .pool(pool)) {
            [self] context, request, writer in
            admitted(exporting, Limits.concurrentExports, { writer.finish($0) }) { export(context, request, writer) }
        }
    }

    /// Runs `body` when fewer than `limit` calls of its kind run (`count`), else refuses with OVERLOADED.
    func admitted(_ count: borrowing Atomic<Int>, _ limit: Int, _ refuse: (RPCError) -> Void, _ body: () -> Void) {
        guard count.add(1, ordering: .acquiringAndReleasing).newValue <= limit else {
            count.subtract(1, ordering: .acquiringAndReleasing)
            return refuse(
                RPCError(
                    code: .resourceExhausted, message: "\(limit) revenue calls of this kind are running; retry later",
                    reason: .overloaded, metadata: ["limit": String(limit)]))
        }
        defer { count.subtract(1, ordering: .acquiringAndReleasing) }
        body()
    }

    // MARK: Requests

    static func environment(_ e: BillingAPI.Environment) throws(BillingError) -> StoreEnvironment {
        switch e.rawValue {
        case 0, 1: return .production
        case 2: return .sandbox
        case 3: return .xcode
        default: throw .invalidField(field: "environment", problem: "is not a known Environment (\(e.rawValue))")
        }
    }

    static func currency(_ requested: String, _ settings: RevenueSettings, field: String = "currency") throws(BillingError) -> String {
        if requested.isEmpty { return settings.reportingCurrency }
        guard CurrencyCode.isValid(requested) else {
            throw .invalidField(field: field, problem: "is not an ISO 4217 code of three capital letters")
        }
        return requested
    }

    /// The validated series request.
    struct SeriesQuery {
        var metric: Billing.RevenueMetric
        var periods: RevenuePeriods
        var dimension: Billing.RevenueDimension
        var filter: RevenueFilter
        var currency: String
        var environment: StoreEnvironment
    }

    static func query(_ r: GetRevenueSeriesRequest, _ settings: RevenueSettings) throws(BillingError) -> SeriesQuery {
        guard let metric = Billing.RevenueMetric(rawValue: Int(r.metric.rawValue)) else {
            throw .invalidField(field: "metric", problem: r.metric.rawValue == 0 ? "is required" : "is not a known RevenueMetric (\(r.metric.rawValue))")
        }
        let granularity: Billing.Granularity
        switch r.granularity.rawValue {
        case 0, 1: granularity = .day
        case 2: granularity = .week
        case 3: granularity = .month
        default: throw .invalidField(field: "granularity", problem: "is not a known Granularity (\(r.granularity.rawValue))")
        }
        guard let dimension = Billing.RevenueDimension(rawValue: Int(r.groupBy.rawValue)) else {
            throw .invalidField(field: "group_by", problem: "is not a known RevenueDimension (\(r.groupBy.rawValue))")
        }
        guard r.startTimeMs > 0 else { throw .invalidField(field: "start_time_ms", problem: "is required (milliseconds since 1970)") }
        let periods = try RevenuePeriods(startMs: r.startTimeMs, endMs: r.endTimeMs, granularity: granularity)
        var filter = RevenueFilter()
        switch r.store.rawValue {
        case 0: break
        case 1: filter.store = .appStore
        case 2: filter.store = .googlePlay
        case 3: filter.store = nil
        default: throw .invalidField(field: "store", problem: "is not a store Revenue counts (\(r.store.rawValue))")
        }
        if !r.productID.isEmpty {
            try OrderService.checkText(r.productID, field: "product_id", max: Limits.productID, required: false)
            filter.productID = r.productID
        }
        let currency = try currency(r.currency, settings)
        var q = SeriesQuery(
            metric: metric, periods: periods, dimension: dimension, filter: filter, currency: currency, environment: try environment(r.environment))
        if r.store.rawValue == 3 {
            // Stripe: no transaction of it is recorded yet; the filter matches nothing.
            q.filter.productID = "\u{0}stripe"
        }
        return q
    }

    /// Runs `body` over the environment's book, current with every commit the store has told of: read whole on
    /// first use (and whenever the store cannot say what changed), then kept by re-reading only the transactions
    /// and renewal states each commit changed. One book at a time: the refresh and the computation hold the lock.
    func withBook<R: Sendable>(
        _ environment: StoreEnvironment, _ settings: RevenueSettings, _ body: (RevenueBook) -> R
    ) -> Result<R, BillingError> {
        index.books.withLock { books -> Result<R, BillingError> in
            let changes = index.take()
            if !index.tracksChanges || changes.all { books.removeAll() }
            if books[environment] == nil {
                let loaded: Result<RevenueBook, BillingError> = Blocking.wait { done in
                    store.read(
                        { ledger throws(BillingError) -> RevenueBook in
                            var book = RevenueBook(settings: settings)
                            try ledger.revenueTransactions(environment: environment) { t, account, grace in
                                book.add(t, accountID: account, graceEndMs: grace)
                            }
                            return book
                        }, completion: done)
                }
                switch loaded {
                case .failure(let error):
                    index.putBack(changes)
                    return .failure(error)
                case .success(let book): books[environment] = book
                }
            }
            if !changes.all && !changes.isEmpty {
                let newer: Result<([(OwnedTransaction, Int64)], [String: Int64]), BillingError> = Blocking.wait { done in
                    store.read(
                        { ledger throws(BillingError) in
                            (
                                try ledger.revenueTransactions(ids: changes.transactionIDs),
                                try ledger.gracePeriods(originalTransactionIDs: changes.originalTransactionIDs)
                            )
                        }, completion: done)
                }
                switch newer {
                case .failure(let error):
                    index.putBack(changes)
                    return .failure(error)
                case .success(let (rows, grace)):
                    for environment in Array(books.keys) {
                        for (owned, graceEnd) in rows where owned.transaction.environment == environment {
                            books[environment]!.add(owned.transaction, accountID: owned.accountID, graceEndMs: graceEnd)
                        }
                        for (original, end) in grace { books[environment]!.setGrace(originalTransactionID: original, endMs: end) }
                    }
                }
            }
            books[environment]!.settings = settings
            return .success(body(books[environment]!))
        }
    }

    static func money(_ unconverted: [String: Int64]) -> [Money] {
        unconverted.keys.sorted().map { Money(currency: $0, milliunits: unconverted[$0]!) }
    }

    // MARK: GetRevenueSeries

    func series(_ context: CallContext, _ request: GetRevenueSeriesRequest, _ responder: Responder) {
        let settings = self.settings
        let q: SeriesQuery
        do throws(BillingError) {
            q = try Self.query(request, settings)
        } catch {
            return responder.fail(error.rpcError)
        }
        let now = clock.nowMilliseconds()
        let answer = withBook(q.environment, settings) { book in
            book.series(q.metric, periods: q.periods, dimension: q.dimension, filter: q.filter, currency: q.currency, nowMs: now)
        }
        switch answer {
        case .failure(let error): responder.fail(error.rpcError)
        case .success(let result):
            guard !context.isExpired else { return responder.fail(RPCError(code: .deadlineExceeded, message: "deadline exceeded")) }
            responder.succeed(Self.response(result, q.periods))
        }
    }

    static func response(_ result: RevenueSeriesResult, _ periods: RevenuePeriods) -> GetRevenueSeriesResponse {
        var answer = GetRevenueSeriesResponse()
        answer.currency = result.currency
        answer.series = result.series.map { s in
            var out = Series()
            out.group = s.group
            out.points = s.values.enumerated().map { SeriesPoint(startTimeMs: periods.bounds[$0.offset], value: $0.element) }
            return out
        }
        answer.unconverted = money(result.unconverted)
        return answer
    }

    // MARK: GetRevenueSummary

    func summary(_ context: CallContext, _ request: GetRevenueSummaryRequest, _ responder: Responder) {
        let settings = self.settings
        let environment: StoreEnvironment, currency: String
        do throws(BillingError) {
            environment = try Self.environment(request.environment)
            currency = try Self.currency(request.currency, settings)
            guard request.asOfTimeMs >= 0 else { throw .invalidField(field: "as_of_time_ms", problem: "must not be negative") }
        } catch {
            return responder.fail(error.rpcError)
        }
        let now = clock.nowMilliseconds()
        let asOf = request.asOfTimeMs == 0 ? now : request.asOfTimeMs
        switch summary(environment: environment, currency: currency, asOfMs: asOf, nowMs: now, settings: settings) {
        case .failure(let error): responder.fail(error.rpcError)
        case .success(let s): responder.succeed(Self.response(s))
        }
    }

    /// The summary (also the Prometheus gauges' source).
    public func summary(
        environment: StoreEnvironment, currency: String? = nil, asOfMs: Int64, nowMs: Int64, settings: RevenueSettings? = nil
    ) -> Result<RevenueSummary, BillingError> {
        let settings = settings ?? self.settings
        let grants: Result<Int, BillingError> = Blocking.wait { done in
            store.read({ ledger throws(BillingError) in try ledger.activeGrantCount(atMs: asOfMs) }, completion: done)
        }
        return grants.flatMap { count in
            withBook(environment, settings) { book in book.summary(asOfMs: asOfMs, nowMs: nowMs, currency: currency, activeGrants: count) }
        }
    }

    /// The summary's per-store split for the gauges: active subscriptions and trials of each store now.
    public func activeByStore(environment: StoreEnvironment, nowMs: Int64) -> Result<[(store: String, subscriptions: Int64, trials: Int64)], BillingError> {
        let settings = self.settings
        return withBook(environment, settings) { book in
            let periods = try! RevenuePeriods(startMs: nowMs, endMs: nowMs + 1, granularity: .day)
            var rows: [(String, Int64, Int64)] = []
            let subs = book.series(.activeSubscriptions, periods: periods, dimension: .store, nowMs: nowMs)
            let trials = book.series(.activeTrials, periods: periods, dimension: .store, nowMs: nowMs)
            for store in [Billing.Store.appStore, .googlePlay] {
                let name = RevenueBook.storeName(store)
                rows.append(
                    (
                        name, subs.series.first { $0.group == name }?.values.last ?? 0,
                        trials.series.first { $0.group == name }?.values.last ?? 0
                    ))
            }
            return rows
        }
    }

    static func response(_ s: RevenueSummary) -> GetRevenueSummaryResponse {
        var r = GetRevenueSummaryResponse()
        r.currency = s.currency
        r.mrrMilliunits = s.mrr
        r.arrMilliunits = s.mrr * 12
        r.activeSubscriptions = Int32(clamping: s.activeSubscriptions)
        r.activeTrials = Int32(clamping: s.activeTrials)
        r.activeGrants = Int32(clamping: s.activeGrants)
        r.grossLast30DaysMilliunits = s.grossLast30Days
        r.netLast30DaysMilliunits = s.netLast30Days
        r.unconverted = money(s.unconverted)
        return r
    }

    // MARK: ExportTransactions

    func export(_ context: CallContext, _ request: ExportTransactionsRequest, _ writer: StreamWriter) {
        let settings = self.settings
        let environment: StoreEnvironment, currency: String, format: RevenueExport.Format
        do throws(BillingError) {
            environment = try Self.environment(request.environment)
            currency = try Self.currency(request.currency, settings)
            guard let f = RevenueExport.Format(rawValue: request.format.isEmpty ? "csv" : request.format) else {
                throw .invalidField(field: "format", problem: "must be \"csv\" or \"jsonl\"")
            }
            format = f
            guard request.startTimeMs >= 0 else { throw .invalidField(field: "start_time_ms", problem: "must not be negative") }
            guard request.endTimeMs > request.startTimeMs else { throw .invalidField(field: "end_time_ms", problem: "must be after start_time_ms") }
        } catch {
            return writer.finish(error.rpcError)
        }
        var out: [UInt8] = []
        out.reserveCapacity(Limits.chunkBytes + 4096)
        if format == .csv { out.append(contentsOf: RevenueExport.csvHeader.utf8) }
        var after = ""
        while true {
            if writer.isDone { return }
            if context.isExpired { return writer.finish(RPCError(code: .deadlineExceeded, message: "deadline exceeded")) }
            let cursor = after
            let page: Result<([OwnedTransaction], [String: Int64]), BillingError> = Blocking.wait { done in
                store.read(
                    { ledger throws(BillingError) in
                        let rows = try ledger.exportPage(
                            environment: environment, fromMs: request.startTimeMs, toMs: request.endTimeMs, after: cursor, limit: Limits.pageRows)
                        let subscriptions = rows.filter { $0.transaction.productKind == .autoRenewableSubscription }
                        let first = try ledger.firstPaidPurchases(originalTransactionIDs: subscriptions.map(\.transaction.originalTransactionID))
                        return (rows, first)
                    }, completion: done)
            }
            guard case .success(let (rows, firstPaid)) = page else {
                if case .failure(let error) = page { writer.finish(error.rpcError) }
                return
            }
            for owned in rows {
                let cells = RevenueExport.row(
                    owned, firstPaidMs: firstPaid[owned.transaction.originalTransactionID], settings: settings, currency: currency)
                if format == .csv { RevenueExport.csvLine(cells, into: &out) } else { RevenueExport.jsonLine(cells, into: &out) }
                if out.count >= Limits.chunkBytes {
                    guard send(&out, writer, context) else { return }
                }
            }
            guard rows.count == Limits.pageRows, let last = rows.last else { break }
            after = last.transaction.transactionID
        }
        if !out.isEmpty { guard send(&out, writer, context) else { return } }
        writer.finish()
    }

    /// Sends the chunk once the client has taken all but `Limits.unsentBytes`; false when the call is over.
    func send(_ out: inout [UInt8], _ writer: StreamWriter, _ context: CallContext) -> Bool {
        var waitedMs = 0
        while writer.bufferedBytes > Limits.unsentBytes {
            if writer.isDone { return false }
            if context.isExpired {
                writer.abort(RPCError(code: .deadlineExceeded, message: "deadline exceeded"))
                return false
            }
            usleep(UInt32(min(1 + waitedMs / 10, 20)) * 1000)
            waitedMs += 1
        }
        if writer.isDone { return false }
        _ = writer.send(ExportTransactionsChunk(data: out))
        out.removeAll(keepingCapacity: true)
        return true
    }
}
