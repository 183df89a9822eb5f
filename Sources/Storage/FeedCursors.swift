import Billing
import Foundation
import Lifecycle
import Synchronization

/// PostgreSQL events numbered in commit order as they are inserted, once.
///
/// A sequence value taken inside a transaction is not enough: T1 takes 5, T2 takes 6, T2 commits, a reader
/// returns 6 and resumes after it, then T1 commits 5 and is never read. So a writer takes its cursors from the
/// one row of `feed_counter` (`UPDATE ... SET last = last + n RETURNING last`) as the last thing before COMMIT,
/// and inserts its events only then, numbered from it, consecutively. The row lock is held until the
/// transaction has ended: PostgreSQL releases locks after the commit is flushed and visible to new snapshots.
/// The next writer gets the row only then, so a transaction holding larger cursors commits after, and becomes
/// visible after, every transaction holding smaller ones, whichever replica (connection) wrote them: the order
/// of cursors is the order of commits. A writer that rolls back rolls its counter update back too, so cursors
/// have no gaps. The statement ends with `pg_notify('billing_events')`, sent at COMMIT, which wakes the
/// followers of every replica (`FeedListener`).
///
/// Taking the counter last keeps the time it is held short (the events' INSERT and the COMMIT): writers
/// serialize on it only for their commit, and each waits for nothing else while holding it, so no cycle of
/// waits can include it.
enum FeedCursors {
    static let channel = "billing_events"

    /// The event columns `SQLLedger.values` gives, with their types.
    static let columns =
        "event_type, time_ms, account_id, cause, notification_uuid, transaction_id, order_snapshot, entitlement_snapshot"
    static let types = ["integer", "bigint", "text", "text", "text", "text", "text", "text"]

    /// `$1` events, one array per column (`$2` ... `$9`), numbered after the counter's last value, in order.
    static let insertNumbered: String = {
        let arrays = types.enumerated().map { "$\($0.offset + 2)::\($0.element)[]" }.joined(separator: ", ")
        let names = (0..<types.count).map { "c\($0)" }
        return """
            WITH counter AS (UPDATE feed_counter SET last = last + $1::bigint RETURNING last),
            created AS (INSERT INTO events (feed_cursor, \(columns))
                SELECT counter.last - $1::bigint + u.n, \(names.map { "u.\($0)" }.joined(separator: ", "))
                FROM counter, unnest(\(arrays)) WITH ORDINALITY AS u(\(names.joined(separator: ", ")), n))
            SELECT pg_notify('\(channel)', '')
            """
    }()

    /// Inserts `events` (each `SQLLedger.values`) numbered from the counter, in one statement.
    static func insert(_ events: [[SQLValue]], on db: PGConnection) throws(StorageError) {
        guard !events.isEmpty else { return }
        var values: [SQLValue] = [.int(Int64(events.count))]
        values.reserveCapacity(types.count + 1)
        for column in 0..<types.count { values.append(.text(arrayLiteral(events.lazy.map { $0[column] }))) }
        try db.update(insertNumbered, values)
    }

    /// A PostgreSQL array literal: every element double-quoted (`"` and `\` escaped), NULL bare.
    static func arrayLiteral(_ elements: some Sequence<SQLValue>) -> String {
        var out = "{"
        var first = true
        for element in elements {
            if !first { out += "," }
            first = false
            switch element {
            case .null:
                out += "NULL"
            case .int(let n):
                out += String(n)
            case .text(let s):
                out += "\""
                for c in s.unicodeScalars {
                    if c == "\"" || c == "\\" { out.unicodeScalars.append("\\") }
                    out.unicodeScalars.append(c)
                }
                out += "\""
            }
        }
        return out + "}"
    }
}

extension PGConnection {
    /// An event of the open transaction: kept for `insertPendingEvents` inside a batch, else numbered now (the
    /// counter's row is then held from here to COMMIT: still commit order, held longer).
    func appendEvent(_ values: [SQLValue]) throws(StorageError) {
        if buffersEvents {
            pendingEvents.append(values)
        } else {
            try FeedCursors.insert([values], on: self)
        }
    }

    func renamePendingEvents(from old: String, to new: String) -> Int {
        var n = 0
        for i in pendingEvents.indices where pendingEvents[i].count > 6 {
            guard case .text(let account) = pendingEvents[i][2], account == old else { continue }
            pendingEvents[i][2] = .text(new)
            if case .text(let snapshot) = pendingEvents[i][6], var order = EventSnapshot.decodeOrder(snapshot) {
                order.accountID = new
                order.idempotencyKey = nil
                pendingEvents[i][6] = .text(EventSnapshot.encode(order))
            }
            n += 1
        }
        return n
    }

    /// The transaction's events, numbered: the last statement before COMMIT.
    func insertPendingEvents() throws(StorageError) {
        guard !pendingEvents.isEmpty else { return }
        try FeedCursors.insert(pendingEvents, on: self)
        pendingEvents.removeAll(keepingCapacity: true)
    }
}

/// One connection per process that LISTENs for `billing_events` and tells the local followers of the feed,
/// so a watcher hears commits made through any replica, its own included. Also wakes them once a second.
final class FeedListener: Sendable {
    private let worker: Worker

    init(url: String, onEvents: @escaping @Sendable () -> Void, onRevenue: @escaping @Sendable (RevenueChanges) -> Void = { _ in }) {
        worker = Worker(name: "postgres-listen") { worker in
            let db = PGConnection(url: url)
            var listening = false
            while !worker.isStopping {
                do throws(StorageError) {
                    if !listening {
                        try db.ensureOpen()
                        try db.execute("LISTEN \(FeedCursors.channel)")
                        try db.execute("LISTEN \(RevenueSQL.channel)")
                        listening = true
                        onEvents()  // anything missed while not listening
                        onRevenue(.everything)
                    }
                    _ = try db.waitForNotifications(timeoutMs: 1000)
                    for payload in db.revenueNotices { onRevenue(RevenueChanges(payload: payload)) }
                    db.revenueNotices.removeAll()
                    onEvents()
                } catch {
                    listening = false
                    worker.pause(.milliseconds(200))
                }
            }
            db.close()
        }
        worker.start()
    }

    /// Ends the LISTEN connection; waits at most 3 s (a wait for notifications lasts up to one).
    func stop() {
        worker.beginStop()
        _ = worker.waitStopped(until: Monotonic.after(.seconds(3)))
    }
}
