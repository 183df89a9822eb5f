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
}

extension Row: RowReader {}
extension PGRow: RowReader {}
extension PGConnection: SQLExecutor {}

/// `PurchaseLedger` over one connection inside its (group) transaction; the same SQL for both stores.
struct SQLLedger<DB: SQLExecutor>: PurchaseLedger {
    let db: DB
    /// PostgreSQL: lock the order row, so replicas completing one order serialize on it.
    var lockOrders = false
    /// Keeps the last database error whole (SQLSTATE, lost connection) for the batch runner.
    var lastError: ErrorBox? = nil

    static var insertEvent: String { OrderRow.insertEvent }
    static var columns: String { "transaction_id, original_transaction_id, account_id, order_id, product_id, product_kind, purchase_time_ms, expires_time_ms, revocation_time_ms, quantity, environment, app_account_token, bundle_id" }

    @discardableResult
    private func run<T>(_ body: () throws(StorageError) -> T) throws(BillingError) -> T {
        do throws(StorageError) {
            return try body()
        } catch {
            lastError?.error = error
            throw .storageUnavailable(detail: error.description)
        }
    }

    func order(id: String) throws(BillingError) -> Order? {
        try run { () throws(StorageError) in
            try db.query(OrderRow.selectByID + (lockOrders ? " FOR UPDATE" : ""), [.text(id)], { OrderRow.decode($0) }).first
        }
    }

    func owned(transactionID: String) throws(BillingError) -> OwnedTransaction? {
        try run { () throws(StorageError) in
            // PostgreSQL: lock the row, so a completion and a restore of one transaction serialize.
            try db.query("SELECT \(Self.columns) FROM transactions WHERE transaction_id = $1" + (lockOrders ? " FOR UPDATE" : ""),
                         [.text(transactionID)], { Self.decode($0) }).first
        }
    }

    func insert(_ o: OwnedTransaction) throws(BillingError) {
        let t = o.transaction
        try run { () throws(StorageError) in
            try db.update("INSERT INTO transactions (\(Self.columns)) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)", [
                .text(t.transactionID), .text(t.originalTransactionID), .text(o.accountID), o.orderID.map { .text($0) } ?? .null,
                .text(t.productID), t.productKind.map { .text($0.rawValue) } ?? .null, .int(t.purchaseTimeMs), .int(t.expiresTimeMs),
                .int(t.revocationTimeMs), .int(Int64(t.quantity)), .int(Int64(t.environment.rawValue)),
                t.appAccountToken.map { .text($0) } ?? .null, .text(t.bundleID),
            ])
        }
    }

    func reassign(transactionID: String, accountID: String, orderID: String?) throws(BillingError) {
        try run { () throws(StorageError) in
            try db.update("UPDATE transactions SET account_id = $1, order_id = $2 WHERE transaction_id = $3",
                       [.text(accountID), orderID.map { .text($0) } ?? .null, .text(transactionID)])
        }
    }

    func transfer(transactionID: String, to accountID: String) throws(BillingError) {
        try run { () throws(StorageError) in
            try db.update("UPDATE transactions SET account_id = $1 WHERE transaction_id = $2", [.text(accountID), .text(transactionID)])
        }
    }

    func complete(orderID: String, transactionID: String, environment: StoreEnvironment, nowMs: Int64) throws(BillingError) {
        let completed = try run { () throws(StorageError) -> Bool in
            let changed = try db.update(
                "UPDATE orders SET state = $1, transaction_id = $2, environment = $3, update_time_ms = $4 WHERE order_id = $5 AND state = $6", [
                .int(Int64(OrderState.completed.rawValue)), .text(transactionID), .int(Int64(environment.rawValue)), .int(nowMs),
                .text(orderID), .int(Int64(OrderState.pending.rawValue)),
            ])
            guard changed == 1 else { return false }
            try db.update(Self.insertEvent, [.text(orderID), .int(Int64(OrderState.pending.rawValue)),
                                          .int(Int64(OrderState.completed.rawValue)), .int(nowMs), .text("submit_receipt:" + transactionID)])
            return true
        }
        // Another writer changed the order after our read (a replica completed it, or expiry ran):
        // answer the state it is really in, never a COMPLETED it may not be.
        guard completed else {
            guard let current = try order(id: orderID) else { throw .orderNotFound(orderID: orderID) }
            guard current.state != .pending else { throw .storageUnavailable(detail: "order \(orderID) changed during completion; retry") }
            throw .orderNotPending(orderID: orderID, state: current.state)
        }
    }

    /// PENDING -> EXPIRED for orders created before the cutoff, with their state events.
    func expire(createdBeforeMs cutoffMs: Int64, nowMs: Int64, limit: Int) throws(BillingError) -> Int {
        try run { () throws(StorageError) -> Int in
            let ids = try db.query(
                "SELECT order_id FROM orders WHERE state = $1 AND create_time_ms < $2 ORDER BY create_time_ms LIMIT $3" + (lockOrders ? " FOR UPDATE SKIP LOCKED" : ""),
                [.int(Int64(OrderState.pending.rawValue)), .int(cutoffMs), .int(Int64(limit))], { $0.text(0) })
            for id in ids {
                try db.update("UPDATE orders SET state = $1, update_time_ms = $2 WHERE order_id = $3 AND state = $4",
                              [.int(Int64(OrderState.expired.rawValue)), .int(nowMs), .text(id), .int(Int64(OrderState.pending.rawValue))])
                try db.update(Self.insertEvent, [.text(id), .int(Int64(OrderState.pending.rawValue)), .int(Int64(OrderState.expired.rawValue)),
                                                 .int(nowMs), .text("expired")])
            }
            return ids.count
        }
    }

    func transactions(accountID: String) throws(BillingError) -> [OwnedTransaction] {
        try run { () throws(StorageError) in
            try db.query("SELECT \(Self.columns) FROM transactions WHERE account_id = $1 ORDER BY transaction_id", [.text(accountID)], { Self.decode($0) })
        }
    }

    static func decode(_ r: some RowReader) -> OwnedTransaction {
        let t = StoreTransaction(
            transactionID: r.text(0), originalTransactionID: r.text(1), productID: r.text(4),
            productKind: r.optionalText(5).flatMap(ProductKind.init(rawValue:)), purchaseTimeMs: r.int64(6),
            expiresTimeMs: r.int64(7), revocationTimeMs: r.int64(8), quantity: r.int(9),
            environment: StoreEnvironment(rawValue: r.int(10)) ?? .production, appAccountToken: r.optionalText(11), bundleID: r.text(12))
        return OwnedTransaction(transaction: t, accountID: r.text(2), orderID: r.optionalText(3))
    }
}

/// The last StorageError a ledger saw; used by one job on one thread.
final class ErrorBox {
    var error: StorageError?
}
