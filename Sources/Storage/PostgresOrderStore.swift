public import Billing
import Foundation
import Lifecycle
import Synchronization

/// Orders in PostgreSQL, for several billingd replicas on one database.
///
/// A bounded pool of connections, each owned by its own thread. Every thread takes the jobs queued
/// while it was busy as one batch: one transaction, a savepoint per job, one COMMIT, so concurrent
/// calls share round trips and WAL flushes while `synchronous_commit` stays on. CreateOrders are batched
/// apart from other jobs, and a batch of them is written by one statement (`BulkCreate`), one round trip
/// and one WAL flush for up to 64 CreateOrders. Every money rule
/// is enforced by the database: primary keys, unique indexes, and `SELECT ... FOR UPDATE` on the
/// order being completed. Serialization failures and deadlocks retry the batch a bounded number of
/// times; a unique violation re-runs just that job, which then sees the winner's row. The batch's events are
/// inserted last, numbered in commit order from the feed counter (`FeedCursors`), so they are written once.
public final class PostgresOrderStore: OrderStore {
    struct Job: Sendable {
        let body: @Sendable (PGConnection) throws(JobFailure) -> @Sendable () -> Void
        let fail: @Sendable (BillingError) -> Void
        /// A CreateOrder, written with the batch's other new orders in one statement; `body` is the same
        /// write on its own, used when that statement fails.
        var create: BulkCreate.Request? = nil
    }

    private let pool: JobQueue<Job>
    private let health: Health
    private let prober: Worker
    public let groups = GroupStats()
    private let feedListener: FeedListener
    private let listener = FeedNotifier()
    private let revenueListener = RevenueNotifier()

    /// Whether the database answered lately; a prober keeps it current while idle.
    final class Health: Sendable {
        let reachable = Atomic<Bool>(true)
    }

    /// Connects, migrates (under an advisory lock, so replicas may start together) and starts the pool.
    public init(url: String, poolSize: Int = 8, maxQueued: Int = 10_000) throws(StorageError) {
        let setup = PGConnection(url: url)
        try setup.ensureOpen()
        try PostgresMigrations.migrate(setup)
        setup.close()
        let connections = (0..<max(1, poolSize)).map { _ in Confined(PGConnection(url: url)) }
        let health = Health()
        self.health = health
        let stats = groups
        // Every commit that writes events holds the feed counter's row to its end (`FeedCursors`), so those commits
        // follow one another and each waits for its own WAL flush: orders per second are CreateOrders per commit
        // times commits per second. CreateOrders are taken by two threads at most, so while one commits they gather
        // for the other in batches of up to 64, instead of spreading over every connection in small batches that would
        // each wait for a flush of their own (three threads: 25 us of PostgreSQL CPU per order instead of 21). Other
        // jobs use every thread, and a thread takes them first after a batch of CreateOrders.
        pool = JobQueue(
            name: "postgres", threads: connections.count, maxBatch: 64, maxQueued: maxQueued,
            gathered: { $0.create != nil }, gatheredThreads: 2,
            process: { index, batch in
                stats.record(batch.count)
                PostgresOrderStore.runBatch(batch, on: connections[index].value, health: health)
            }, onStop: { index in connections[index].value.close() })
        let listener = self.listener
        let revenueListener = self.revenueListener
        feedListener = FeedListener(url: url, onEvents: { listener.notify() }, onRevenue: { revenueListener.notify($0) })
        // Once a second, so that Health/Check answers NOT_SERVING within a second of losing the database.
        prober = Worker(name: "postgres-probe") { worker in
            let probe = PGConnection(url: url)
            repeat {
                do throws(StorageError) {
                    try probe.ensureOpen()
                    try probe.execute("SELECT 1")
                    health.reachable.store(true, ordering: .relaxed)
                } catch {
                    health.reachable.store(false, ordering: .relaxed)
                }
            } while worker.pause(.seconds(1))
            probe.close()
        }
        prober.start()
    }

    /// One batch in one transaction; retried whole on serialization failures and deadlocks.
    ///
    /// A batch of CreateOrders (the pool never mixes them with other jobs) is one `BulkCreate` statement, the
    /// whole transaction (no BEGIN, no COMMIT: a single statement commits on its own, durably, before its result
    /// arrives). If the statement fails for any other reason than a lost connection or a retryable conflict,
    /// the batch runs again with each CreateOrder on its own, in one transaction. Inside a transaction the jobs'
    /// events wait in `db.pendingEvents` (a job rolled back to its savepoint drops its own) and are inserted,
    /// numbered, just before COMMIT.
    private static func runBatch(_ batch: [Job], on db: PGConnection, health: Health) {
        var lastError: StorageError?
        var reconnected = false
        var bulk = batch.allSatisfy { $0.create != nil }
        defer {
            db.buffersEvents = false
            db.pendingEvents.removeAll(keepingCapacity: true)
            db.pendingRevenue = RevenueChanges()
        }
        var attempt = 0
        while attempt < 4 {
            let alone = bulk
            do throws(StorageError) {
                // The statement alone commits by itself only outside a transaction; a connection left inside one
                // (never expected) is dropped rather than trusted.
                if alone && db.isInTransaction { db.close() }
                try db.ensureOpen()
                // A job's events wait for the end of the transaction (the bulk statement numbers its own).
                db.buffersEvents = true
                db.pendingEvents.removeAll(keepingCapacity: true)
                if !alone {
                    do throws(StorageError) {
                        try db.execute("BEGIN")
                    } catch {
                        // A pooled connection that died while idle (database restarted): nothing was sent
                        // for these calls yet, so reconnect once and go on.
                        guard error.isConnectionLost, !reconnected else { throw error }
                        reconnected = true
                        db.close()
                        try db.ensureOpen()
                        try db.execute("BEGIN")
                    }
                }
                var answers: [@Sendable () -> Void] = []
                answers.reserveCapacity(batch.count)
                if alone {
                    do throws(StorageError) {
                        try BulkCreate.run(batch.compactMap(\.create), on: db, into: &answers)
                    } catch {
                        if error.isConnectionLost && !reconnected {
                            // The statement may or may not have committed before the connection went: send it once
                            // more on a new connection. Nothing is written twice (order ids and keys are unique),
                            // and an order the first try did write is found by its id and answered created.
                            reconnected = true
                            db.close()
                            continue
                        }
                        guard error.isConnectionLost || error.isRetryable else {
                            bulk = false
                            continue
                        }
                        throw error
                    }
                }
                // Jobs that met a subscription lock held elsewhere wait for it in their own transaction (below).
                var deferred: [Job] = []
                if !alone {
                    db.sharesTransaction = batch.count > 1
                    defer { db.sharesTransaction = false }
                    for job in batch {
                        if let answer = try runJob(job, on: db) {
                            answers.append(answer)
                        } else {
                            deferred.append(job)
                        }
                    }
                    try db.insertPendingEvents()
                    try db.notifyRevenue()
                    try db.commit()
                }
                health.reachable.store(true, ordering: .relaxed)
                for answer in answers { answer() }
                for job in deferred { runBatch([job], on: db, health: health) }
                return
            } catch {
                attempt += 1
                lastError = error
                if !error.isConnectionLost && !alone { _ = try? db.execute("ROLLBACK") }
                if error.isConnectionLost { health.reachable.store(false, ordering: .relaxed) }
                if error.sqlState == .deadlockDetected && batch.count > 1 {
                    // A batch holds every job's locks (subscription locks, order rows) until its COMMIT, so batches on
                    // two connections can wait on each other; retried as batches they meet again and again, each
                    // time after PostgreSQL's deadlock_timeout. Each job in its own transaction cannot form such a
                    // cycle with the others' locks: run them one by one (each still retried on its own).
                    for job in batch { runBatch([job], on: db, health: health) }
                    return
                }
                if error.isRetryable && attempt < 4 {
                    usleep(UInt32(1000 << (attempt - 1)))
                    continue
                }
                break
            }
        }
        // The loop ends with an error: every path out of a successful attempt returns.
        guard let lastError else { preconditionFailure("a batch ended without an answer") }
        for job in batch { job.fail(.storage(lastError)) }
    }

    /// One job in its savepoint. A refusal or a unique violation rolls the savepoint back; the
    /// violation re-runs the job once, now seeing the row another replica committed.
    /// Answers nil when the job met a subscription lock another transaction holds (`lockBusy`): its savepoint is
    /// rolled back and it must run again in a transaction of its own.
    private static func runJob(_ job: Job, on db: PGConnection) throws(StorageError) -> (@Sendable () -> Void)? {
        for attempt in 0..<2 {
            try db.execute("SAVEPOINT job")
            // The job's events, appended from here, go with its savepoint if it is rolled back.
            let events = db.pendingEvents.count
            let answer: @Sendable () -> Void
            do throws(JobFailure) {
                answer = try job.body(db)
            } catch {
                switch error {
                case .answered(let e):
                    db.pendingEvents.removeSubrange(events...)
                    try db.execute("ROLLBACK TO SAVEPOINT job")
                    try db.execute("RELEASE SAVEPOINT job")
                    return { job.fail(e) }
                case .storage(let e):
                    if e.isConnectionLost || e.isRetryable { throw e }
                    db.pendingEvents.removeSubrange(events...)
                    if e == .lockBusy {
                        try db.execute("ROLLBACK TO SAVEPOINT job")
                        try db.execute("RELEASE SAVEPOINT job")
                        return nil
                    }
                    try db.execute("ROLLBACK TO SAVEPOINT job")
                    try db.execute("RELEASE SAVEPOINT job")
                    if e.sqlState == .uniqueViolation && attempt == 0 { continue }
                    return { job.fail(.storage(e)) }
                }
            }
            // A failed RELEASE leaves the transaction aborted: the batch fails (and is retried), never acknowledged.
            try db.execute("RELEASE SAVEPOINT job")
            return answer
        }
        preconditionFailure("the second attempt always answers")
    }

    private func submit(_ job: Job) {
        if let refusal = pool.submit(job).refusal { job.fail(refusal) }
    }

    // MARK: OrderStore

    public func create(
        _ order: NewOrder, abandoned: @escaping @Sendable () -> Bool,
        completion: @escaping @Sendable (Result<CreateOutcome, BillingError>) -> Void
    ) {
        submit(
            Job(
                body: { db throws(JobFailure) in
                    do throws(StorageError) {
                        if let key = order.idempotencyKey {
                            if let found = try db.query(OrderRow.selectByKey, [.text(order.accountID), .text(key)], { OrderRow.decode($0) }).first {
                                return { completion(.success(.existing(found))) }
                            }
                        }
                        if abandoned() { return { completion(.failure(.abandoned)) } }
                        try db.update(OrderRow.insert, OrderRow.values(order.pendingOrder))
                        try db.appendEvent(OrderRow.createdEvent(order))
                    } catch {
                        throw .storage(error)
                    }
                    let stored = order.pendingOrder
                    return { completion(.success(.created(stored))) }
                }, fail: { completion(.failure($0)) },
                create: BulkCreate.Request(order: order, abandoned: abandoned, completion: completion)))
    }

    public func order(id: String, completion: @escaping @Sendable (Result<Order?, BillingError>) -> Void) {
        submit(
            Job(
                body: { db throws(JobFailure) in
                    do throws(StorageError) {
                        let found = try db.query(OrderRow.selectByID, [.text(id)], { OrderRow.decode($0) }).first
                        return { completion(.success(found)) }
                    } catch {
                        throw .storage(error)
                    }
                }, fail: { completion(.failure($0)) }))
    }

    public func write<T: Sendable>(
        abandoned: @escaping @Sendable () -> Bool,
        _ body: @escaping @Sendable (any PurchaseLedger) throws(BillingError) -> T,
        completion: @escaping @Sendable (Result<T, BillingError>) -> Void
    ) {
        let revenueListener = self.revenueListener
        submit(
            Job(
                body: { db throws(JobFailure) in
                    let log = LedgerLog()
                    let value: T
                    do throws(BillingError) {
                        if abandoned() { throw .abandoned }
                        value = try body(SQLLedger(db: db, lockOrders: true, log: log))
                    } catch {
                        throw JobFailure(error)
                    }
                    // Other replicas hear of it through NOTIFY at the batch's COMMIT; this one before the answer.
                    let revenue = log.revenue
                    db.pendingRevenue.transactionIDs += revenue.transactionIDs
                    db.pendingRevenue.originalTransactionIDs += revenue.originalTransactionIDs
                    return {
                        revenueListener.notify(revenue)
                        completion(.success(value))
                    }
                }, fail: { completion(.failure($0)) }))
    }

    public func read<T: Sendable>(
        _ body: @escaping @Sendable (any PurchaseLedger) throws(BillingError) -> T,
        completion: @escaping @Sendable (Result<T, BillingError>) -> Void
    ) {
        submit(
            Job(
                body: { db throws(JobFailure) in
                    let result: Result<T, BillingError>
                    do throws(BillingError) {
                        result = .success(try body(SQLLedger(db: db)))
                    } catch {
                        // A database failure goes to the batch runner (reconnect, retry); anything else is the answer.
                        let failure = JobFailure(error)
                        if case .storage = failure { throw failure }
                        result = .failure(error)
                    }
                    return { completion(result) }
                }, fail: { completion(.failure($0)) }))
    }

    public func setEventListener(_ listener: @escaping @Sendable () -> Void) {
        self.listener.set(listener)
    }

    @discardableResult
    public func setRevenueListener(_ listener: @escaping @Sendable (RevenueChanges) -> Void) -> Bool {
        revenueListener.set(listener)
        return true
    }

    public func isReachable() -> Bool { health.reachable.load(ordering: .relaxed) }

    public var queuedJobs: Int { pool.queued }

    public func close() {
        prober.stop()
        pool.stop()
        feedListener.stop()
    }
}
