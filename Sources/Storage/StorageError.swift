import CSQLite

/// Errors from SQLite or PostgreSQL, with the library's code and message (never the SQL's values).
public struct StorageError: Error, CustomStringConvertible, Sendable {
    public var code: Int32
    public var message: String
    /// PostgreSQL's SQLSTATE (`23505`, `40001`, ...), when the error came from there.
    public var sqlState: String?
    /// The connection itself failed (PostgreSQL): retry after reconnecting.
    public var connectionLost = false

    public init(code: Int32, message: String, sqlState: String? = nil, connectionLost: Bool = false) {
        self.code = code
        self.message = message
        self.sqlState = sqlState
        self.connectionLost = connectionLost
    }

    public var description: String {
        if let sqlState { return "postgres error \(sqlState): \(message)" }
        if connectionLost { return "postgres connection: \(message)" }
        return "sqlite error \(code): \(message)"
    }

    /// Not a database error: a subscription lock another transaction holds, met by a job that shares its
    /// transaction with other jobs (it does not wait while holding theirs; it runs again alone after).
    static let lockBusy = "BL001"
    var isLockBusy: Bool { sqlState == Self.lockBusy }

    /// SQLITE_CONSTRAINT and its extended codes: a unique or check rule refused the write.
    public var isConstraint: Bool { code & 0xFF == SQLITE_CONSTRAINT }
}
