import Foundation
import Synchronization

/// Gives PostgreSQL events their feed cursors in commit order, across replicas.
///
/// A sequence value taken inside a transaction does not give commit order: two transactions can commit
/// in the other order than their numbers, and a reader that resumed after the larger one would miss the
/// smaller. So writers insert events without a cursor, and after they commit a sequencer numbers every
/// committed, unnumbered event under a transaction-scoped advisory lock, continuing from the largest
/// cursor. Sequencer runs (on any replica) are serialized by the lock, and each sees every earlier run's
/// cursors, so a cursor is only ever given after every smaller one is visible. One run numbers all the
/// events of a commit together, ordered by transaction id, so they stay consecutive. The run ends with
/// `NOTIFY billing_events`, which wakes the followers of every replica (`FeedListener`).
final class EventSequencer: Sendable {
    static let lockKey: Int64 = 0x6269_6C6C_6665_6564  // "billfeed"
    static let channel = "billing_events"
    static let number = """
        UPDATE events e SET feed_cursor = n.c
        FROM (SELECT id, (SELECT COALESCE(MAX(feed_cursor), 0) FROM events) + row_number() OVER (ORDER BY txid, id) AS c
              FROM events WHERE feed_cursor IS NULL) n
        WHERE e.id = n.id
        """

    private let wake = DispatchSemaphore(value: 0)
    private let state = Mutex<(requested: UInt64, done: UInt64, waiters: [(UInt64, DispatchSemaphore)])>((0, 0, []))
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    init(url: String) {
        let thread = Thread { [self] in
            let db = PGConnection(url: url)
            while !stopped.load(ordering: .relaxed) {
                // A local commit asks at once; every 250 ms the rows a crashed replica left are numbered too.
                _ = wake.wait(timeout: .now() + .milliseconds(250))
                let target = state.withLock { $0.requested }
                do throws(StorageError) {
                    try run(db)
                } catch {
                    usleep(50_000)
                    continue
                }
                let ready = state.withLock { s -> [DispatchSemaphore] in
                    s.done = max(s.done, target)
                    let due = s.waiters.filter { $0.0 <= s.done }.map(\.1)
                    s.waiters.removeAll { $0.0 <= s.done }
                    return due
                }
                for w in ready { w.signal() }
            }
            db.close()
            finished.signal()
        }
        thread.name = "postgres-sequencer"
        thread.start()
    }

    /// Numbers what is committed and unnumbered, if anything is.
    private func run(_ db: PGConnection) throws(StorageError) {
        try db.ensureOpen()
        let pending = try db.query("SELECT 1 FROM events WHERE feed_cursor IS NULL LIMIT 1", [], { _ in true })
        guard !pending.isEmpty else { return }
        try db.execute("BEGIN")
        do throws(StorageError) {
            try db.execute("SELECT pg_advisory_xact_lock(\(Self.lockKey))")
            if try db.execute(Self.number) > 0 { try db.execute("NOTIFY \(Self.channel)") }
            try db.execute("COMMIT")
        } catch {
            if !error.isConnectionLost { _ = try? db.execute("ROLLBACK") }
            throw error
        }
    }

    /// Asks for a run soon (after a commit that appended events).
    func signal() {
        state.withLock { $0.requested &+= 1 }
        wake.signal()
    }

    /// Waits (up to `timeout`) for a run that starts after this call: every event committed before it is numbered then.
    func flush(timeout: DispatchTimeInterval = .seconds(2)) {
        let done = DispatchSemaphore(value: 0)
        state.withLock { s in
            s.requested &+= 1
            s.waiters.append((s.requested, done))
        }
        wake.signal()
        _ = done.wait(timeout: .now() + timeout)
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        wake.signal()
        _ = finished.wait(timeout: .now() + 3)
    }
}

/// One connection per process that LISTENs for `billing_events` and tells the local followers of the feed,
/// so a watcher on one replica hears commits made through another. Also wakes them once a second.
final class FeedListener: Sendable {
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    init(url: String, onEvents: @escaping @Sendable () -> Void) {
        let thread = Thread { [self] in
            let db = PGConnection(url: url)
            var listening = false
            while !stopped.load(ordering: .relaxed) {
                do throws(StorageError) {
                    if !listening {
                        try db.ensureOpen()
                        try db.execute("LISTEN \(EventSequencer.channel)")
                        listening = true
                        onEvents()  // anything missed while not listening
                    }
                    _ = try db.waitForNotifications(timeoutMs: 1000)
                    onEvents()
                } catch {
                    listening = false
                    usleep(200_000)
                }
            }
            db.close()
            finished.signal()
        }
        thread.name = "postgres-listen"
        thread.start()
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        _ = finished.wait(timeout: .now() + 3)
    }
}
