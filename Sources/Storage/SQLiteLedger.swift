import Billing

/// `PurchaseLedger` over the writer's connection, inside its group transaction.
struct SQLiteLedger: PurchaseLedger {
    let db: SQLiteConnection

    static let insertEvent = "INSERT INTO order_events (order_id, from_state, to_state, time_ms, cause) VALUES (?, ?, ?, ?, ?)"
    static let columns = "transaction_id, original_transaction_id, account_id, order_id, product_id, product_kind, purchase_time_ms, expires_time_ms, revocation_time_ms, quantity, environment, app_account_token, bundle_id"

    private func run<T>(_ body: () throws(StorageError) -> T) throws(BillingError) -> T {
        do throws(StorageError) {
            return try body()
        } catch {
            throw .storageUnavailable(detail: error.description)
        }
    }

    func order(id: String) throws(BillingError) -> Order? {
        try run { () throws(StorageError) in try db.query(OrderRow.selectByID, [.text(id)], OrderRow.decode).first }
    }

    func owned(transactionID: String) throws(BillingError) -> OwnedTransaction? {
        try run { () throws(StorageError) in
            try db.query("SELECT \(Self.columns) FROM transactions WHERE transaction_id = ?", [.text(transactionID)], Self.decode).first
        }
    }

    func insert(_ o: OwnedTransaction) throws(BillingError) {
        let t = o.transaction
        try run { () throws(StorageError) in
            try db.run("INSERT INTO transactions (\(Self.columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
                .text(t.transactionID), .text(t.originalTransactionID), .text(o.accountID), o.orderID.map { .text($0) } ?? .null,
                .text(t.productID), t.productKind.map { .text($0.rawValue) } ?? .null, .int(t.purchaseTimeMs), .int(t.expiresTimeMs),
                .int(t.revocationTimeMs), .int(Int64(t.quantity)), .int(Int64(t.environment.rawValue)),
                t.appAccountToken.map { .text($0) } ?? .null, .text(t.bundleID),
            ])
        }
    }

    func reassign(transactionID: String, accountID: String, orderID: String?) throws(BillingError) {
        try run { () throws(StorageError) in
            try db.run("UPDATE transactions SET account_id = ?, order_id = ? WHERE transaction_id = ?",
                       [.text(accountID), orderID.map { .text($0) } ?? .null, .text(transactionID)])
        }
    }

    func complete(orderID: String, transactionID: String, environment: StoreEnvironment, nowMs: Int64) throws(BillingError) {
        try run { () throws(StorageError) in
            try db.run("UPDATE orders SET state = ?, transaction_id = ?, environment = ?, update_time_ms = ? WHERE order_id = ? AND state = ?", [
                .int(Int64(OrderState.completed.rawValue)), .text(transactionID), .int(Int64(environment.rawValue)), .int(nowMs),
                .text(orderID), .int(Int64(OrderState.pending.rawValue)),
            ])
            try db.run(Self.insertEvent, [.text(orderID), .int(Int64(OrderState.pending.rawValue)),
                                          .int(Int64(OrderState.completed.rawValue)), .int(nowMs), .text("submit_receipt:" + transactionID)])
        }
    }

    func transactions(accountID: String) throws(BillingError) -> [OwnedTransaction] {
        try run { () throws(StorageError) in
            try db.query("SELECT \(Self.columns) FROM transactions WHERE account_id = ? ORDER BY transaction_id", [.text(accountID)], Self.decode)
        }
    }

    static func decode(_ r: Row) -> OwnedTransaction {
        let t = StoreTransaction(
            transactionID: r.text(0), originalTransactionID: r.text(1), productID: r.text(4),
            productKind: r.optionalText(5).flatMap(ProductKind.init(rawValue:)), purchaseTimeMs: r.int64(6),
            expiresTimeMs: r.int64(7), revocationTimeMs: r.int64(8), quantity: r.int(9),
            environment: StoreEnvironment(rawValue: r.int(10)) ?? .production, appAccountToken: r.optionalText(11), bundleID: r.text(12))
        return OwnedTransaction(transaction: t, accountID: r.text(2), orderID: r.optionalText(3))
    }
}
