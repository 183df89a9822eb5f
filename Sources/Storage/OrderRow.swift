import Billing

/// How an order maps to the `orders` table.
enum OrderRow {
    /// What a new order writes (`values`); refunded_quantity and store keep their defaults (0, NULL).
    static let columns = "order_id, account_id, product_id, quantity, state, idempotency_key, create_time_ms, update_time_ms, transaction_id, environment"
    /// What a read decodes: the insert's columns, then refunded_quantity and store (schema step 7).
    static let readColumns = columns + ", refunded_quantity, store"
    static let selectByID = "SELECT \(readColumns) FROM orders WHERE order_id = $1"
    static let selectByAccount = "SELECT \(readColumns) FROM orders WHERE account_id = $1 ORDER BY create_time_ms, order_id"
    static let selectByKey = "SELECT \(readColumns) FROM orders WHERE account_id = $1 AND idempotency_key = $2"
    static let insert = "INSERT INTO orders (\(columns)) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"

    /// The ORDER_CREATED event of a new order.
    static func createdEvent(_ order: NewOrder) -> [SQLValue] {
        SQLLedger<SQLiteConnection>.values(
            EventRecord(
                kind: .orderCreated, timeMs: order.createTimeMs, accountID: order.accountID,
                order: order.pendingOrder, cause: .createOrder))
    }

    static func values(_ o: Order) -> [SQLValue] {
        [
            .text(o.id), .text(o.accountID), .text(o.productID), .int(Int64(o.quantity)), .int(Int64(o.state.rawValue)),
            o.idempotencyKey.map { .text($0) } ?? .null, .int(o.createTimeMs), .int(o.updateTimeMs),
            o.transactionID.map { .text($0) } ?? .null, o.environment.map { .int(Int64($0.rawValue)) } ?? .null,
        ]
    }

    static func decode(_ row: some RowReader) -> Order {
        Order(
            id: row.text(0), accountID: row.text(1), productID: row.text(2), quantity: row.int(3),
            state: OrderState(rawValue: row.int(4)) ?? .pending, idempotencyKey: row.optionalText(5),
            createTimeMs: row.int64(6), updateTimeMs: row.int64(7), transactionID: row.optionalText(8),
            environment: row.isNull(9) ? nil : StoreEnvironment(rawValue: row.int(9)), refundedQuantity: row.int(10),
            store: row.isNull(11) ? nil : Store(rawValue: row.int(11)))
    }
}
