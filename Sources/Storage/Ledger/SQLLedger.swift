import Billing

/// Rows as both databases hand them out.
protocol RowReader {
    func text(_ column: Int32) -> String
    func optionalText(_ column: Int32) -> String?
    func int64(_ column: Int32) -> Int64
    func int(_ column: Int32) -> Int
    func isNull(_ column: Int32) -> Bool
}

/// What the ledger needs from a connection: parameterised queries and updates. Statements use
/// `$1, $2, ...` in order of appearance, which both SQLite and PostgreSQL bind by position.
protocol SQLExecutor {
    associatedtype Reader: RowReader
    func query<T>(_ sql: String, _ values: [SQLValue], _ row: (Reader) -> T) throws(StorageError) -> [T]
    @discardableResult
    func update(_ sql: String, _ values: [SQLValue]) throws(StorageError) -> Int
    /// The current transaction carries other jobs too (a PostgreSQL batch): a lock held elsewhere is not waited for.
    var sharesTransaction: Bool { get }
    /// Appends one event (`SQLLedger.values`) to the feed in the current transaction. SQLite inserts it (its rowid
    /// is the cursor); PostgreSQL numbers it from the feed counter, last before COMMIT (`FeedCursors`).
    func appendEvent(_ values: [SQLValue]) throws(StorageError)
    /// Erasure: the account of events appended in this transaction but not yet inserted (a PostgreSQL batch), and the
    /// order snapshots they carry, rewritten; answers how many. Nothing waits anywhere else (SQLite inserts at once).
    func renamePendingEvents(from old: String, to new: String) -> Int
}

extension SQLExecutor {
    var sharesTransaction: Bool { false }

    func renamePendingEvents(from old: String, to new: String) -> Int { 0 }

    func appendEvent(_ values: [SQLValue]) throws(StorageError) {
        try update(LedgerSQL.insertEvent, values)
    }
}

extension Row: RowReader {}
extension PGRow: RowReader {}
extension PGConnection: SQLExecutor {}

/// `PurchaseLedger` over one connection inside its (group) transaction; the same SQL for both stores.
struct SQLLedger<DB: SQLExecutor>: PurchaseLedger {
    let db: DB
    /// PostgreSQL: lock the order row, so replicas completing one order serialize on it.
    var lockOrders = false
    /// What the job changed, for the store to act on after COMMIT (order cache, feed followers).
    var log: LedgerLog? = nil

    // The statements are built once (LedgerSQL): building a 26-column INSERT and its placeholders per call cost
    // about 46,000 instructions per notification (callgrind).
    static var columns: String { LedgerSQL.transactionColumns }
    static var entitlementColumns: String { LedgerSQL.entitlementColumns }
    static var eventColumns: String { LedgerSQL.eventColumns }
    static var insertEvent: String { LedgerSQL.insertEvent }

    @discardableResult
    func run<T>(_ body: () throws(StorageError) -> T) throws(BillingError) -> T {
        do throws(StorageError) {
            return try body()
        } catch {
            // Whole, as itself: the store reads its code back (JobFailure), the log gets its description.
            throw .storage(error)
        }
    }

    var forUpdate: String { lockOrders ? " FOR UPDATE" : "" }
}

/// What one job's ledger changed: orders (for the SQLite order cache) and how many events it appended.
final class LedgerLog {
    var orders: [Order] = []
    var events = 0
    /// What Revenue reads that the job changed.
    var revenue = RevenueChanges()
}

/// The ledger's statements, built once (a generic type cannot hold stored statics). Values are always bound.
enum LedgerSQL {
    static let transactionColumns =
        "transaction_id, original_transaction_id, account_id, order_id, product_id, product_kind, purchase_time_ms, expires_time_ms, "
        + "revocation_time_ms, quantity, environment, app_account_token, bundle_id, signed_time_ms, revocation_reason, "
        + "store, ownership, upgraded, revocation_type, revocation_percentage, price_milliunits, currency, storefront, offer_id, "
        + "offer_type, subscription_group_id, purchase_token"
    static let entitlementColumns =
        "account_id, entitlement_key, product_id, product_kind, original_transaction_id, latest_transaction_id, "
        + "purchase_time_ms, expires_time_ms, revocation_time_ms, grace_period_expires_ms, auto_renew, environment, order_id, ended, "
        + "upgraded, billing_retry, ownership, store, subscription_group_id, pending_product_id, paused"
    static let eventColumns =
        "feed_cursor, event_type, time_ms, account_id, cause, notification_uuid, transaction_id, order_snapshot, entitlement_snapshot"
    static let insertEvent =
        "INSERT INTO events (event_type, time_ms, account_id, cause, notification_uuid, transaction_id, order_snapshot, "
        + "entitlement_snapshot) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"

    static let grantColumns =
        "grant_id, account_id, product_id, start_time_ms, expires_time_ms, revocation_time_ms, reason, operator, idempotency_key, expiry_noted"
    static let transactionByID = "SELECT \(transactionColumns) FROM transactions WHERE transaction_id = $1"
    static let transactionByIDForUpdate = transactionByID + " FOR UPDATE"
    static let insertTransaction = "INSERT INTO transactions (\(transactionColumns)) VALUES (\(placeholders(27)))"
    static let historyFirst =
        "SELECT \(transactionColumns) FROM transactions WHERE account_id = $1 ORDER BY purchase_time_ms DESC, transaction_id DESC LIMIT $2"
    /// A row value, so that both planners seek the history index to the cursor (an OR of the two conditions
    /// scanned every earlier page's rows: +60 us a page on SQLite, a filter on PostgreSQL's generic plan).
    static let historyNext =
        "SELECT \(transactionColumns) FROM transactions WHERE account_id = $1 AND (purchase_time_ms, transaction_id) < ($2, $3) "
        + "ORDER BY purchase_time_ms DESC, transaction_id DESC LIMIT $4"
    /// `purchase_token <> ''` lets both planners use the partial index.
    static let transactionByPurchaseToken =
        "SELECT \(transactionColumns) FROM transactions WHERE purchase_token = $1 AND purchase_token <> '' "
        + "ORDER BY purchase_time_ms DESC, transaction_id DESC LIMIT 1"
    static let transactionsByAccount = "SELECT \(transactionColumns) FROM transactions WHERE account_id = $1 ORDER BY transaction_id"
    static let transactionsByOriginal =
        "SELECT \(transactionColumns) FROM transactions WHERE original_transaction_id = $1 ORDER BY transaction_id"
    static let entitlement = "SELECT \(entitlementColumns) FROM entitlements WHERE account_id = $1 AND entitlement_key = $2"
    static let entitlementForUpdate = entitlement + " FOR UPDATE"
    static let entitlementsByAccount = "SELECT \(entitlementColumns) FROM entitlements WHERE account_id = $1 ORDER BY entitlement_key"
    static let insertEntitlement = "INSERT INTO entitlements (\(entitlementColumns)) VALUES (\(placeholders(21)))"
    static let eventsByAccount =
        "SELECT \(eventColumns) FROM events WHERE account_id = $1 AND feed_cursor > $2 ORDER BY feed_cursor LIMIT $3"
    static let events = "SELECT \(eventColumns) FROM events WHERE feed_cursor > $1 ORDER BY feed_cursor LIMIT $2"

    /// `$1, $2, ... $n`.
    static func placeholders(_ n: Int) -> String { (1...n).map { "$\($0)" }.joined(separator: ", ") }
}
