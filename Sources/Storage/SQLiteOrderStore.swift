public import Billing
import Foundation
import Synchronization

/// Orders in one SQLite file: WAL, `synchronous=FULL`, versioned migrations.
///
/// One writer thread commits in groups: every job queued while the previous
/// commit was syncing shares the next transaction and its fsync, each job in
/// its own savepoint so one failure does not undo the others. Callers are
/// answered only after COMMIT returns. Reads run on separate reader threads.
public final class SQLiteOrderStore: OrderStore {
    /// The schema version a file holds once opened (`PRAGMA user_version`): the number of migration steps.
    public static var schemaVersion: Int { Schema.steps(.sqlite).count }

    struct WriteJob: Sendable {
        /// Runs inside the group transaction; returns what to do once the commit is durable.
        let body: @Sendable (SQLiteConnection) throws(JobFailure) -> @Sendable () -> Void
        let fail: @Sendable (BillingError) -> Void
    }
    typealias ReadJob = @Sendable (SQLiteConnection) -> Void

    private let writer: JobQueue<WriteJob>
    private let readers: [JobQueue<ReadJob>]
    private let nextReader = Atomic<Int>(0)
    public let path: String
    /// How writes were grouped into commits (for benchmarks and metrics).
    public let groups = GroupStats()
    /// Recent orders: GetOrder answers from here without leaving the caller's thread.
    private let cache = OrderCache()
    /// Told after commits that appended events (the feed's followers).
    private let listener = FeedNotifier()
    private let revenueListener = RevenueNotifier()
    private let checkpointer: Checkpointer

    /// Opens (creating if needed) and migrates the database at `path`.
    /// At most `maxQueued` jobs wait for each connection; more are answered `overloaded`.
    public init(path: String, readers readerCount: Int = 2, maxGroup: Int = 512, maxQueued: Int = 10_000) throws(StorageError) {
        self.path = path
        let writeConnection = try SQLiteConnection(path: path)
        try writeConnection.execute("PRAGMA busy_timeout=5000")
        try writeConnection.execute("PRAGMA journal_mode=WAL")
        try writeConnection.execute("PRAGMA synchronous=FULL")
        try writeConnection.execute("PRAGMA foreign_keys=ON")
        try Self.tune(writeConnection)
        // The writer's cache is smaller than the readers': SQLite 3.40's B-tree balancing re-keys a page through a
        // page number past the end (seen: 262145, the lock page), so the commit's cache truncation no longer takes
        // its short path and walks the whole page-cache hash, whose size follows the cache. With 64 MiB that walk
        // was 2% of a notification's CPU (perf; gdb watch on the pcache's iMaxKey); 16 MiB still holds the hot
        // B-tree pages of a million-row order table, and the memory map serves the rest without a system call.
        try writeConnection.execute("PRAGMA cache_size=-16384")
        // Checkpoints run on their own thread (Checkpointer), never inside a commit of the writer (the writer checkpoints
        // between groups only when the WAL outgrew walLimitBytes or a write failed).
        try writeConnection.execute("PRAGMA wal_autocheckpoint=0")
        try writeConnection.execute("PRAGMA journal_size_limit=\(Self.walLimitBytes)")
        try SQLiteMigrations.migrate(writeConnection)
        var readerConnections: [Confined<SQLiteConnection>] = []
        for _ in 0..<max(1, readerCount) {
            let c = try SQLiteConnection(path: path)
            try c.execute("PRAGMA busy_timeout=5000")
            try Self.tune(c)
            readerConnections.append(Confined(c))
        }
        checkpointer = try Checkpointer(path: path)
        let confinedWriter = Confined(writeConnection)
        let stats = groups
        let walPolicy = Confined(WALPolicy(walPath: path + "-wal"))
        writer = JobQueue(name: "sqlite-writer", maxBatch: maxGroup, maxQueued: maxQueued) { batch in
            stats.record(batch.count)
            let committed = SQLiteOrderStore.commitGroup(batch, on: confinedWriter.value)
            // Every commit appends its pages to the WAL, which SQLite reuses only after a checkpoint copied all of it
            // while no commit was appending. The checkpointer's PASSIVE runs race the commits of a busy writer and can
            // keep missing that moment, so the WAL grows, and on a full disk a WAL that took the last free space leaves
            // a checkpoint no room to grow the database file: writes then fail for good, even after space is freed
            // elsewhere. So past `walLimitBytes` (and after a failed write) the writer checkpoints itself, between
            // groups, where nothing can append; `journal_size_limit` then gives the space back. While the disk has
            // room to spare the WAL may grow to `walRoomyLimitBytes` first (WALPolicy).
            walPolicy.value.afterGroup(committed: committed, on: confinedWriter.value)
        } onStop: {
            confinedWriter.value.close()
        }
        readers = readerConnections.enumerated().map { i, connection in
            JobQueue(name: "sqlite-reader-\(i)", maxBatch: 64, maxQueued: maxQueued) { batch in
                for job in batch { job(connection.value) }
            } onStop: {
                connection.value.close()
            }
        }
    }

    /// Page cache and memory map sized for a table of millions of orders: the pages a commit touches stay
    /// in memory instead of being read back from the file.
    static func tune(_ c: SQLiteConnection) throws(StorageError) {
        try c.execute("PRAGMA cache_size=-65536")  // 64 MiB per connection
        try c.execute("PRAGMA mmap_size=268435456")
    }

    /// The WAL size past which the writer checkpoints itself (and to which a restarted WAL is truncated).
    static let walLimitBytes = 1 << 20
    /// The WAL size the writer lets pass before it checkpoints itself while the file system has room to spare.
    static let walRoomyLimitBytes = 16 << 20
    /// Free space under which the WAL is held to `walLimitBytes` (a checkpoint may need to grow the database file).
    static let roomyFreeBytes = 256 << 20

    /// Whether the file system holding `path` has `roomyFreeBytes` free.
    static func hasRoom(_ path: String) -> Bool {
        var fs = statvfs()
        guard statvfs(path, &fs) == 0 else { return false }
        return UInt64(fs.f_bavail) * UInt64(fs.f_frsize) >= UInt64(roomyFreeBytes)
    }

    static func fileSize(_ path: String) -> Int {
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_size) : 0
    }

    /// One group commit: BEGIN, a savepoint per job, COMMIT, then the answers. Answers false when the database failed.
    @discardableResult
    private static func commitGroup(_ batch: [WriteJob], on db: SQLiteConnection) -> Bool {
        do throws(StorageError) {
            try db.run(.beginImmediate)
        } catch {
            for job in batch { job.fail(.storage(error)) }
            return false
        }
        var jobFailed = false
        var answers: [@Sendable () -> Void] = []
        answers.reserveCapacity(batch.count)
        for job in batch {
            do throws(StorageError) {
                try db.run(.savepoint)
                let result: Result<@Sendable () -> Void, JobFailure>
                do throws(JobFailure) {
                    result = .success(try job.body(db))
                } catch {
                    result = .failure(error)
                }
                switch result {
                case .success(let answer):
                    try db.run(.release)
                    answers.append(answer)
                case .failure(let failure):
                    try db.run(.rollbackToSavepoint)
                    try db.run(.release)
                    switch failure {
                    case .storage(let e):
                        jobFailed = true
                        answers.append { job.fail(.storage(e)) }
                    case .answered(let e):
                        answers.append { job.fail(e) }
                    }
                }
            } catch {
                // The transaction itself is broken: give up on the whole group.
                try? db.run(.rollback)
                for job in batch { job.fail(.storage(error)) }
                return false
            }
        }
        do throws(StorageError) {
            try db.run(.commit)
        } catch {
            try? db.run(.rollback)
            for job in batch { job.fail(.storage(error)) }
            return false
        }
        for answer in answers { answer() }
        return !jobFailed
    }

    /// Queues a read; the caller answers the refusal when it was not queued.
    private func read(_ job: @escaping ReadJob) -> Submission {
        let i = nextReader.add(1, ordering: .relaxed).newValue % readers.count
        return readers[i].submit(job)
    }

    // MARK: OrderStore

    public func create(
        _ order: NewOrder, abandoned: @escaping @Sendable () -> Bool,
        completion: @escaping @Sendable (Result<CreateOutcome, BillingError>) -> Void
    ) {
        let job = WriteJob(
            body: { db throws(JobFailure) in
                do throws(StorageError) {
                    if let key = order.idempotencyKey {
                        let existing = try db.query(OrderRow.selectByKey, [.text(order.accountID), .text(key)], { OrderRow.decode($0) })
                        if let found = existing.first { return { completion(.success(.existing(found))) } }
                    }
                    if abandoned() { return { completion(.failure(.abandoned)) } }
                    try db.update(OrderRow.insert, OrderRow.values(order.pendingOrder))
                    try db.update(SQLLedger<SQLiteConnection>.insertEvent, OrderRow.createdEvent(order))
                } catch {
                    throw .storage(error)
                }
                let stored = order.pendingOrder
                let listener = self.listener
                // Not put in the read cache: a new order has no older copy to replace there, and a read fills the
                // entry on its first miss (an insert per CreateOrder, with the table's growth, was about 3% of its CPU).
                return {
                    listener.notify()
                    completion(.success(.created(stored)))
                }
            }, fail: { completion(.failure($0)) })
        if let refusal = writer.submit(job).refusal { completion(.failure(refusal)) }
    }

    public func order(id: String, completion: @escaping @Sendable (Result<Order?, BillingError>) -> Void) {
        if let hit = cache.get(id) {
            completion(.success(hit))
            return
        }
        let cache = self.cache
        let queued = read { db in
            let generation = cache.generation
            do throws(StorageError) {
                let found = try db.query(OrderRow.selectByID, [.text(id)], { OrderRow.decode($0) }).first
                if let found { cache.read(found, since: generation) }
                completion(.success(found))
            } catch {
                completion(.failure(.storage(error)))
            }
        }
        if let refusal = queued.refusal { completion(.failure(refusal)) }
    }

    public func write<T: Sendable>(
        abandoned: @escaping @Sendable () -> Bool,
        _ body: @escaping @Sendable (any PurchaseLedger) throws(BillingError) -> T,
        completion: @escaping @Sendable (Result<T, BillingError>) -> Void
    ) {
        let cache = self.cache, listener = self.listener, revenueListener = self.revenueListener
        let job = WriteJob(
            body: { db throws(JobFailure) in
                let log = LedgerLog()
                let value: T
                do throws(BillingError) {
                    if abandoned() { throw .abandoned }
                    value = try body(SQLLedger(db: db, log: log))
                } catch {
                    throw JobFailure(error)
                }
                // Once durable: every order change goes through the cache before the caller hears of it.
                let changed = log.orders, appended = log.events, revenue = log.revenue
                return {
                    for order in changed { cache.written(order) }
                    if appended > 0 { listener.notify() }
                    revenueListener.notify(revenue)
                    completion(.success(value))
                }
            }, fail: { completion(.failure($0)) })
        if let refusal = writer.submit(job).refusal { completion(.failure(refusal)) }
    }

    public func read<T: Sendable>(
        _ body: @escaping @Sendable (any PurchaseLedger) throws(BillingError) -> T,
        completion: @escaping @Sendable (Result<T, BillingError>) -> Void
    ) {
        let queued = read { db in
            do throws(BillingError) {
                completion(.success(try body(SQLLedger(db: db))))
            } catch {
                completion(.failure(error))
            }
        }
        if let refusal = queued.refusal { completion(.failure(refusal)) }
    }

    public func setEventListener(_ listener: @escaping @Sendable () -> Void) { self.listener.set(listener) }

    @discardableResult
    public func setRevenueListener(_ listener: @escaping @Sendable (RevenueChanges) -> Void) -> Bool {
        revenueListener.set(listener)
        return true
    }

    public func isReachable() -> Bool { true }

    public var queuedJobs: Int { writer.queued + readers.reduce(0) { $0 + $1.queued } }

    public func close() {
        writer.stop()
        for r in readers { r.stop() }
        checkpointer.stop()
    }
}
