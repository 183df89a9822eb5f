import Billing
import CLibPQ
import Glibc

/// One libpq connection, owned by one thread; prepared statements cached per connection.
final class PGConnection {
    private var conn: OpaquePointer?
    private var prepared: [String: String] = [:]
    let url: String
    /// Set by the batch runner while the open transaction carries more than one job (`SQLExecutor`).
    var sharesTransaction = false
    /// Set by the batch runner inside its transaction: events are kept in `pendingEvents` and inserted, numbered,
    /// just before COMMIT (`FeedCursors`). Otherwise an event is numbered as it is inserted.
    var buffersEvents = false
    /// The open transaction's events, in the order they were appended (each `SQLLedger.values`).
    var pendingEvents: [[SQLValue]] = []
    /// What the open transaction's jobs changed for Revenue, told to the other replicas at COMMIT.
    var pendingRevenue = RevenueChanges()
    /// Payloads of `billing_revenue` notices received by the LISTEN loop, taken by it after each wait.
    var revenueNotices: [String] = []

    init(url: String) {
        self.url = url
    }

    deinit { close() }

    func close() {
        if let conn { PQfinish(conn) }
        conn = nil
        prepared.removeAll()
        pendingEvents.removeAll()
    }

    /// The libpq handle, for the LISTEN loop.
    var connection: OpaquePointer? { conn }

    var isOpen: Bool { conn.map { PQstatus($0) == CONNECTION_OK } ?? false }

    /// Whether a transaction is open on this connection (in progress or failed).
    var isInTransaction: Bool {
        guard let conn else { return false }
        let status = PQtransactionStatus(conn)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR
    }

    /// Connects if not connected; a short connect timeout keeps calls from hanging while the server is down.
    func ensureOpen() throws(StorageError) {
        if isOpen { return }
        close()
        let separator = url.contains("?") ? "&" : "?"
        // tcp_user_timeout: a PostgreSQL cut off without a reset (packets dropped) fails the connection after
        // 10 s of unacknowledged data instead of hanging a pool thread until TCP gives up (minutes).
        let target =
            url + separator
            + "connect_timeout=2&application_name=billingd&keepalives=1&keepalives_idle=10&keepalives_interval=5&keepalives_count=3&tcp_user_timeout=10000"
        let c = PQconnectdb(target)
        guard let c, PQstatus(c) == CONNECTION_OK else {
            let message = c.map { String(cString: PQerrorMessage($0)) } ?? "out of memory"
            if let c { PQfinish(c) }
            throw .connectionLost(message: message.trimmingCharacters())
        }
        PostgresNotices.install(on: c)
        conn = c
        _ = try execute("SET synchronous_commit = on")
    }

    private func error(_ result: OpaquePointer?) -> StorageError {
        let lost = conn.map { PQstatus($0) != CONNECTION_OK } ?? true
        let state = result.flatMap { r -> String? in
            guard let p = PQresultErrorField(r, Int32(UInt8(ascii: "C"))) else { return nil }
            return String(cString: p)
        }
        let message =
            result.flatMap { r -> String? in
                guard let p = PQresultErrorField(r, Int32(UInt8(ascii: "M"))) else { return nil }
                return String(cString: p)
            } ?? conn.map { String(cString: PQerrorMessage($0)) } ?? "no connection"
        if lost {
            close()
            return .connectionLost(message: message.trimmingCharacters())
        }
        // Every error result carries a SQLSTATE; one without (never seen) is the generic XX000, internal_error.
        return .postgres(SQLState(rawValue: state ?? "XX000"), message: message.trimmingCharacters())
    }

    /// Runs SQL without parameters (transaction control, DDL).
    @discardableResult
    func execute(_ sql: String) throws(StorageError) -> Int {
        guard let conn else { throw .connectionLost(message: "not connected") }
        let r = PQexec(conn, sql)
        defer { PQclear(r) }
        let status = PQresultStatus(r)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else { throw error(r) }
        return Int(String(cString: PQcmdTuples(r))) ?? 0
    }

    /// COMMIT, checked: a transaction that was already aborted answers COMMIT with the tag ROLLBACK (and a
    /// success status); that is a failure, never an acknowledgement.
    func commit() throws(StorageError) {
        guard let conn else { throw .connectionLost(message: "not connected") }
        let r = PQexec(conn, "COMMIT")
        defer { PQclear(r) }
        guard PQresultStatus(r) == PGRES_COMMAND_OK else { throw error(r) }
        let tag = String(cString: PQcmdStatus(r))
        guard tag == "COMMIT" else { throw .rolledBack(tag: tag) }
    }

    /// Runs a statement with bound parameters (prepared once per connection); maps rows.
    func query<T>(_ sql: String, _ values: [SQLValue], _ row: (PGRow) -> T) throws(StorageError) -> [T] {
        let (r, _) = try run(sql, values)
        defer { PQclear(r) }
        var out: [T] = []
        let n = PQntuples(r)
        out.reserveCapacity(Int(n))
        for i in 0..<n { out.append(row(PGRow(result: r, row: i))) }
        return out
    }

    /// Runs a statement with bound parameters; answers the number of rows it touched.
    @discardableResult
    func update(_ sql: String, _ values: [SQLValue]) throws(StorageError) -> Int {
        let (r, count) = try run(sql, values)
        PQclear(r)
        return count
    }

    private func run(_ sql: String, _ values: [SQLValue]) throws(StorageError) -> (OpaquePointer?, Int) {
        guard let conn else { throw .connectionLost(message: "not connected") }
        let name: String
        if let existing = prepared[sql] {
            name = existing
        } else {
            name = "s\(prepared.count)"
            let r = PQprepare(conn, name, sql, Int32(values.count), nil)
            defer { PQclear(r) }
            guard PQresultStatus(r) == PGRES_COMMAND_OK else { throw error(r) }
            prepared[sql] = name
        }
        let r = withParameters(values) { pointers in
            PQexecPrepared(conn, name, Int32(pointers.count), pointers, nil, nil, 0)
        }
        let status = PQresultStatus(r)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            let e = error(r)
            PQclear(r)
            throw e
        }
        return (r, Int(String(cString: PQcmdTuples(r))) ?? 0)
    }
}

extension PGConnection {
    /// Waits up to `timeoutMs` for NOTIFY messages on channels this connection LISTENs to; answers whether
    /// any arrived (all pending ones are consumed). Throws when the connection is lost.
    func waitForNotifications(timeoutMs: Int32) throws(StorageError) -> Bool {
        guard let conn = connection else { throw .connectionLost(message: "not connected") }
        var pfd = pollfd(fd: PQsocket(conn), events: Int16(POLLIN), revents: 0)
        _ = poll(&pfd, 1, timeoutMs)
        guard PQconsumeInput(conn) == 1 else {
            close()
            throw .connectionLost(message: "listen connection lost")
        }
        var any = false
        while let n = PQnotifies(conn) {
            any = true
            if let relname = n.pointee.relname, String(cString: relname) == RevenueSQL.channel, let extra = n.pointee.extra {
                revenueNotices.append(String(cString: extra))
            }
            PQfreemem(n)
        }
        return any
    }

    /// Sends what this transaction changed for Revenue to the other replicas (delivered at COMMIT), once per batch.
    func notifyRevenue() throws(StorageError) {
        guard !pendingRevenue.isEmpty else { return }
        for payload in pendingRevenue.payloads {
            _ = try query("SELECT pg_notify($1, $2)", [.text(RevenueSQL.channel), .text(payload)], { _ in () })
        }
        pendingRevenue = RevenueChanges()
    }
}

/// Lends `values` as C strings (NULL for `.null`) for the duration of `body`: all of them in one buffer,
/// integers written as decimal digits in place (a batch of CreateOrders binds over a thousand values; a
/// `strdup` and a `String` per value cost more than the rest of the marshalling).
private func withParameters<R>(_ values: [SQLValue], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    var storage: [UInt8] = []
    storage.reserveCapacity(values.count * 24)
    var offsets: [Int] = []
    offsets.reserveCapacity(values.count)
    for value in values {
        switch value {
        case .text(var s):
            offsets.append(storage.count)
            s.withUTF8 { storage.append(contentsOf: $0) }
            storage.append(0)
        case .int(let n):
            offsets.append(storage.count)
            if n < 0 { storage.append(UInt8(ascii: "-")) }
            let start = storage.count
            var v = n.magnitude
            repeat {
                storage.append(UInt8(ascii: "0") + UInt8(v % 10))
                v /= 10
            } while v > 0
            storage[start...].reverse()
            storage.append(0)
        case .null:
            offsets.append(-1)
        }
    }
    return storage.withUnsafeBufferPointer { buffer in
        buffer.withMemoryRebound(to: CChar.self) { chars in
            body(offsets.map { $0 < 0 ? nil : UnsafePointer(chars.baseAddress! + $0) })
        }
    }
}

/// One row of a result; values are copied out as the caller reads them.
struct PGRow {
    let result: OpaquePointer?
    let row: Int32

    func isNull(_ c: Int32) -> Bool { PQgetisnull(result, row, c) == 1 }
    func text(_ c: Int32) -> String { String(cString: PQgetvalue(result, row, c)) }
    func optionalText(_ c: Int32) -> String? { isNull(c) ? nil : text(c) }
    func int64(_ c: Int32) -> Int64 { Int64(text(c)) ?? 0 }
    func int(_ c: Int32) -> Int { Int(text(c)) ?? 0 }
}

extension String {
    func trimmingCharacters() -> String {
        var s = Substring(self)
        while let last = s.last, last.isWhitespace { s.removeLast() }
        return String(s)
    }
}
