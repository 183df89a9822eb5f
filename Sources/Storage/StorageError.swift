public import Billing
import CSQLite

/// What went wrong in SQLite or PostgreSQL, with the library's own code as a typed value and its message (never
/// the SQL's values). Thrown inside Storage; it reaches the domain whole, as `InfrastructureFailure.storage(cause:)`,
/// and the store reads it back from there (a lost connection, a retryable SQLSTATE) without parsing anything.
public enum StorageError: Error, Sendable, Equatable, CustomStringConvertible, StoreFailure {
    /// SQLite answered `code` (an extended result code).
    case sqlite(SQLiteResultCode, message: String)
    /// PostgreSQL answered an error with SQLSTATE `state` on a connection that is still good.
    case postgres(SQLState, message: String)
    /// The PostgreSQL connection could not be made or was lost (the server ended it, the network failed): nothing
    /// more can be sent on it; reconnect, then retry what may be retried.
    case connectionLost(message: String)
    /// PostgreSQL answered COMMIT with `tag` (ROLLBACK): the transaction had already failed; nothing was committed.
    case rolledBack(tag: String)
    /// The database's schema is `found` steps in, newer than the `known` steps of this billingd.
    case schemaTooNew(found: Int, known: Int)
    /// Step `version` of the database is named `found`, this billingd's step of that number `expected`: the database
    /// was migrated by another build. Nothing is changed.
    case schemaMismatch(version: Int, found: String, expected: String)
    /// Not a database failure: a subscription lock another transaction holds, met by a job that shares its
    /// transaction with other jobs (it does not wait while holding theirs; it runs again alone after the batch).
    case lockBusy
    /// An order changed between the job's read and its write (another replica, or expiry): the job is rolled back;
    /// retrying reads the order as it is now.
    case orderChanged(orderID: String)
    /// An order id already names another order (never made by the service: ids are random UUIDs).
    case orderIDTaken(orderID: String)
    /// The store was closed: no more jobs are taken.
    case closed

    public var description: String {
        switch self {
        case .sqlite(let code, let message): "sqlite error \(code): \(message)"
        case .postgres(let state, let message): "postgres error \(state): \(message)"
        case .connectionLost(let message): "postgres connection: \(message)"
        case .rolledBack(let tag): "the transaction was rolled back (\(tag))"
        case .schemaTooNew(let found, let known): "database schema version \(found) is newer than this billingd (\(known))"
        case .schemaMismatch(let version, let found, let expected):
            "database schema step \(version) is '\(found.prefix(100))', this billingd's step \(version) is '\(expected)': the database was migrated by another build"
        case .lockBusy: "subscription lock held by another transaction"
        case .orderChanged(let id): "order \(id) changed during completion; retry"
        case .orderIDTaken(let id): "order id \(id) already in use"
        case .closed: "store closed"
        }
    }

    /// The SQLite result code, when SQLite answered.
    public var resultCode: SQLiteResultCode? {
        if case .sqlite(let code, _) = self { code } else { nil }
    }

    /// The SQLSTATE, when PostgreSQL answered.
    public var sqlState: SQLState? {
        if case .postgres(let state, _) = self { state } else { nil }
    }

    /// Whether the PostgreSQL connection is gone.
    public var isConnectionLost: Bool {
        if case .connectionLost = self { true } else { false }
    }

    /// A conflict between concurrent transactions that a retry of the whole transaction resolves.
    public var isRetryable: Bool { sqlState == .serializationFailure || sqlState == .deadlockDetected }

    /// SQLITE_CONSTRAINT and its extended codes: a unique or check rule refused the write.
    public var isConstraint: Bool { resultCode?.primary == .constraint }
}

/// A SQLite result code, extended (`SQLITE_CONSTRAINT_UNIQUE`) or primary (`SQLITE_CONSTRAINT`).
public struct SQLiteResultCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The primary code (the low 8 bits of an extended one).
    public var primary: SQLiteResultCode { SQLiteResultCode(rawValue: rawValue & 0xFF) }

    public static let error = SQLiteResultCode(rawValue: SQLITE_ERROR)
    public static let busy = SQLiteResultCode(rawValue: SQLITE_BUSY)
    public static let ioError = SQLiteResultCode(rawValue: SQLITE_IOERR)
    public static let full = SQLiteResultCode(rawValue: SQLITE_FULL)
    public static let cantOpen = SQLiteResultCode(rawValue: SQLITE_CANTOPEN)
    public static let constraint = SQLiteResultCode(rawValue: SQLITE_CONSTRAINT)
    public static let notADatabase = SQLiteResultCode(rawValue: SQLITE_NOTADB)

    public var description: String { String(rawValue) }
}

/// A PostgreSQL SQLSTATE: five characters, the first two its class (`23`: integrity constraint violation).
public struct SQLState: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The class: the first two characters.
    public var errorClass: Substring { rawValue.prefix(2) }

    public static let uniqueViolation = SQLState(rawValue: "23505")
    public static let checkViolation = SQLState(rawValue: "23514")
    public static let serializationFailure = SQLState(rawValue: "40001")
    public static let deadlockDetected = SQLState(rawValue: "40P01")

    public var description: String { rawValue }
}
