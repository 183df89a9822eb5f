import Billing

/// The orders table: an order's row, its state moves, refunds, the pending ones.
extension SQLLedger {
    func order(id: String) throws(BillingError) -> Order? {
        try run { () throws(StorageError) in
            try db.query(OrderRow.selectByID + forUpdate, [.text(id)], { OrderRow.decode($0) }).first
        }
    }

    func complete(_ order: Order) throws(BillingError) {
        let changed = try run { () throws(StorageError) -> Int in
            try db.update(
                "UPDATE orders SET state = $1, transaction_id = $2, environment = $3, update_time_ms = $4, store = $5 WHERE order_id = $6 AND state = $7",
                [
                    .int(Int64(OrderState.completed.rawValue)), order.transactionID.map { .text($0) } ?? .null,
                    order.environment.map { .int(Int64($0.rawValue)) } ?? .null, .int(order.updateTimeMs),
                    order.store.map { .int(Int64($0.rawValue)) } ?? .null, .text(order.id), .int(Int64(OrderState.pending.rawValue)),
                ])
        }
        // Another writer changed the order after our read (a replica completed it, or expiry ran):
        // answer the state it is really in, never a COMPLETED it may not be.
        guard changed == 1 else {
            guard let current = try self.order(id: order.id) else { throw .orderNotFound(orderID: order.id) }
            guard current.state != .pending else { throw .storage(.orderChanged(orderID: order.id)) }
            throw .orderNotPending(orderID: order.id, state: current.state)
        }
        log?.orders.append(order)
    }

    func move(orderID: String, from: OrderState, to: OrderState, nowMs: Int64) throws(BillingError) -> Order? {
        let changed = try run { () throws(StorageError) -> Int in
            try db.update(
                "UPDATE orders SET state = $1, update_time_ms = $2, refunded_quantity = CASE WHEN $3 = 1 THEN quantity ELSE 0 END "
                    + "WHERE order_id = $4 AND state = $5",
                [.int(Int64(to.rawValue)), .int(nowMs), .int(to == .refunded ? 1 : 0), .text(orderID), .int(Int64(from.rawValue))])
        }
        guard changed == 1, let moved = try order(id: orderID) else { return nil }
        log?.orders.append(moved)
        return moved
    }

    func refund(orderID: String, refundedQuantity: Int, state: OrderState, nowMs: Int64) throws(BillingError) -> Order? {
        let changed = try run { () throws(StorageError) -> Int in
            try db.update(
                "UPDATE orders SET state = $1, refunded_quantity = $2, update_time_ms = $3 WHERE order_id = $4 AND state IN ($5, $6)",
                [
                    .int(Int64(state.rawValue)), .int(Int64(refundedQuantity)), .int(nowMs), .text(orderID),
                    .int(Int64(OrderState.completed.rawValue)), .int(Int64(OrderState.refunded.rawValue)),
                ])
        }
        guard changed == 1, let moved = try order(id: orderID) else { return nil }
        log?.orders.append(moved)
        return moved
    }

    func pendingOrders(createdBeforeMs cutoffMs: Int64, limit: Int) throws(BillingError) -> [String] {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT order_id FROM orders WHERE state = $1 AND create_time_ms < $2 ORDER BY create_time_ms LIMIT $3"
                    + (lockOrders ? " FOR UPDATE SKIP LOCKED" : ""),
                [.int(Int64(OrderState.pending.rawValue)), .int(cutoffMs), .int(Int64(limit))], { $0.text(0) })
        }
    }

    func orders(accountID: String) throws(BillingError) -> [Order] {
        try run { () throws(StorageError) in
            try db.query(OrderRow.selectByAccount, [.text(accountID)], { OrderRow.decode($0) })
        }
    }
}
