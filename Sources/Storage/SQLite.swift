import CSQLite

/// One SQLite connection, owned by exactly one thread; frees its handle and statements.
final class SQLiteConnection: SQLExecutor {
    private let db: OpaquePointer
    private var statements: [String: Statement] = [:]
    /// The same statements by the address of their SQL text (the ledger's statements are built once and live
    /// for the process): a lookup hashes an address, not a 600-byte string (SipHash over the SQL text was
    /// about 0.4% of a notification's instructions). An entry is used only when its text equals the caller's.
    private var byAddress: [Int: (sql: String, statement: Statement)] = [:]
    /// Transaction control statements, prepared on first use (indexed by `TransactionControl`).
    private var controls: [Statement?] = Array(repeating: nil, count: TransactionControl.allCases.count)
    private var isClosed = false

    init(path: String, readOnly: Bool = false) throws(StorageError) {
        var handle: OpaquePointer?
        let flags = (readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            if let handle { sqlite3_close_v2(handle) }
            throw .sqlite(SQLiteResultCode(rawValue: rc), message: "\(message) (\(path))")
        }
        db = handle
        sqlite3_extended_result_codes(db, 1)
    }

    deinit { close() }

    /// Finalizes every statement and closes the handle; the connection is unusable afterwards.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        byAddress.removeAll()
        statements.removeAll()
        controls = []
        sqlite3_close_v2(db)
    }

    private func error(_ rc: Int32) -> StorageError {
        .sqlite(SQLiteResultCode(rawValue: sqlite3_extended_errcode(db)), message: String(cString: sqlite3_errmsg(db)))
    }

    /// Runs SQL without parameters (pragmas, DDL, transaction control).
    func execute(_ sql: String) throws(StorageError) {
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(rc) }
    }

    /// Transaction control as statements prepared once: `execute` parses its text on every call
    /// (sqlite3_exec cost about 4,000 instructions a statement, and a write job ran four of them).
    func run(_ control: TransactionControl) throws(StorageError) {
        let s: Statement
        if let known = controls[control.rawValue] {
            s = known
        } else {
            var handle: OpaquePointer?
            let rc = sqlite3_prepare_v3(db, control.sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &handle, nil)
            guard rc == SQLITE_OK, let handle else { throw error(rc) }
            s = Statement(handle: handle, connection: self)
            controls[control.rawValue] = s
        }
        let rc = sqlite3_step(s.handle)
        let failure = rc == SQLITE_DONE ? nil : error(rc)
        sqlite3_reset(s.handle)
        if let failure { throw failure }
    }

    /// A prepared statement, cached for the connection's life.
    func statement(_ sql: String) throws(StorageError) -> Statement {
        // Small strings live inline (no stable address); only long ones take the address path.
        let address = sql.utf8.count > 15 ? sql.utf8.withContiguousStorageIfAvailable { Int(bitPattern: $0.baseAddress) } ?? nil : nil
        if let address, let hit = byAddress[address], hit.sql == sql { return hit.statement }
        let s: Statement
        if let known = statements[sql] {
            s = known
        } else {
            var handle: OpaquePointer?
            let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &handle, nil)
            guard rc == SQLITE_OK, let handle else { throw error(rc) }
            s = Statement(handle: handle, connection: self)
            statements[sql] = s
        }
        // Bounded: statements are a fixed set, but a caller building SQL per call must not grow this without end.
        if let address, byAddress.count < 256 { byAddress[address] = (sql, s) }
        return s
    }

    /// Runs a parameterised statement that returns no rows; answers the rows it changed.
    @discardableResult
    func update(_ sql: String, _ values: [SQLValue]) throws(StorageError) -> Int {
        let s = try statement(sql)
        defer { s.reset() }
        try s.bind(values)
        let rc = sqlite3_step(s.handle)
        guard rc == SQLITE_DONE else { throw error(rc) }
        return Int(sqlite3_changes(db))
    }

    /// Runs a query and maps each row.
    func query<T>(_ sql: String, _ values: [SQLValue], _ row: (Row) -> T) throws(StorageError) -> [T] {
        let s = try statement(sql)
        defer { s.reset() }
        try s.bind(values)
        var out: [T] = []
        while true {
            let rc = sqlite3_step(s.handle)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw error(rc) }
            out.append(row(Row(handle: s.handle)))
        }
        return out
    }

    func userVersion() throws(StorageError) -> Int {
        try query("PRAGMA user_version", []) { $0.int(0) }.first ?? 0
    }

    fileprivate func bindError(_ rc: Int32) -> StorageError { error(rc) }
}

/// The transaction control statements a connection keeps prepared (`SQLiteConnection.run`).
enum TransactionControl: Int, CaseIterable {
    case beginImmediate, commit, rollback, savepoint, release, rollbackToSavepoint

    var sql: String {
        switch self {
        case .beginImmediate: "BEGIN IMMEDIATE"
        case .commit: "COMMIT"
        case .rollback: "ROLLBACK"
        case .savepoint: "SAVEPOINT job"
        case .release: "RELEASE job"
        case .rollbackToSavepoint: "ROLLBACK TO job"
        }
    }
}

/// A value bound to a `?` parameter.
enum SQLValue {
    case text(String)
    case int(Int64)
    case null
}

/// A prepared statement; reset after each use by its owner.
final class Statement {
    let handle: OpaquePointer
    private unowned let connection: SQLiteConnection

    init(handle: OpaquePointer, connection: SQLiteConnection) {
        self.handle = handle
        self.connection = connection
    }

    deinit { sqlite3_finalize(handle) }

    func bind(_ values: [SQLValue]) throws(StorageError) {
        for (i, value) in values.enumerated() {
            let index = Int32(i + 1)
            let rc: Int32
            switch value {
            case .text(let s): rc = sqlite3_bind_text(handle, index, s, -1, csqlite_transient())
            case .int(let n): rc = sqlite3_bind_int64(handle, index, n)
            case .null: rc = sqlite3_bind_null(handle, index)
            }
            guard rc == SQLITE_OK else { throw connection.bindError(rc) }
        }
    }

    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }
}

/// The current row of a query; values are copied out before the next step.
struct Row {
    let handle: OpaquePointer

    func int(_ column: Int32) -> Int { Int(sqlite3_column_int64(handle, column)) }
    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }
    func text(_ column: Int32) -> String {
        guard let p = sqlite3_column_text(handle, column) else { return "" }
        let n = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
    }
    func optionalText(_ column: Int32) -> String? { isNull(column) ? nil : text(column) }
}
