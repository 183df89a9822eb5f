import Billing

/// Support's tables: accounts across tables, the audit trail, grants, erasure.
extension SQLLedger {
    func accounts(after account: String, limit: Int) throws(BillingError) -> [String] {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT DISTINCT account_id FROM transactions WHERE account_id > $1 ORDER BY account_id LIMIT $2",
                [.text(account), .int(Int64(limit))], { $0.text(0) })
        }
    }

    func accounts(appAccountToken: String) throws(BillingError) -> [String] {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT DISTINCT account_id FROM transactions WHERE app_account_token = $1 AND account_id <> '' ORDER BY account_id",
                [.text(appAccountToken)], { $0.text(0) })
        }
    }

    func appendAudit(_ e: AuditRecord) throws(BillingError) {
        try run { () throws(StorageError) in
            try db.update(
                "INSERT INTO audit_entries (audit_id, time_ms, operator, method, account_id, target, reason, outcome, request_json) "
                    + "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                [
                    .text(e.auditID), .int(e.timeMs), .text(e.operatorName), .text(e.method), .text(e.accountID), .text(e.target),
                    .text(e.reason), .text(e.outcome), .text(e.requestJSON),
                ])
        }
    }

    /// One condition per filter field set. With an account, the planner seeks `audit_entries_account` (account, time,
    /// id); without one it walks the primary key newest first: an audit id is "audit_" + a UUID v7 whose leading 48
    /// bits are the entry's time_ms (AuditID), so `audit_id` order is (time_ms, audit_id) order, and a time bound is a
    /// bound on the id too.
    func auditEntries(_ filter: AuditFilter, after: AuditCursor?, limit: Int) throws(BillingError) -> [AuditRecord] {
        var conditions: [String] = []
        var values: [SQLValue] = []
        func add(_ condition: (Int) -> String, _ value: SQLValue) {
            values.append(value)
            conditions.append(condition(values.count))
        }
        if !filter.accountID.isEmpty { add({ "account_id = $\($0)" }, .text(filter.accountID)) }
        if !filter.operatorName.isEmpty { add({ "operator = $\($0)" }, .text(filter.operatorName)) }
        if !filter.method.isEmpty { add({ "method = $\($0)" }, .text(filter.method)) }
        let byAccount = !filter.accountID.isEmpty
        if filter.sinceTimeMs > 0 {
            add({ "time_ms >= $\($0)" }, .int(filter.sinceTimeMs))
            if !byAccount { add({ "audit_id >= $\($0)" }, .text(Self.auditIDFloor(filter.sinceTimeMs))) }
        }
        if filter.untilTimeMs > 0 {
            add({ "time_ms <= $\($0)" }, .int(filter.untilTimeMs))
            if !byAccount && filter.untilTimeMs < (1 << 48) - 1 {
                add({ "audit_id < $\($0)" }, .text(Self.auditIDFloor(filter.untilTimeMs + 1)))
            }
        }
        if let after {
            if byAccount {
                values.append(.int(after.timeMs))
                values.append(.text(after.auditID))
                conditions.append("(time_ms, audit_id) < ($\(values.count - 1), $\(values.count))")
            } else {
                add({ "audit_id < $\($0)" }, .text(after.auditID))
            }
        }
        values.append(.int(Int64(limit)))
        let sql =
            "SELECT audit_id, time_ms, operator, method, account_id, target, reason, outcome, request_json FROM audit_entries"
            + (conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND "))
            + (byAccount ? " ORDER BY time_ms DESC, audit_id DESC" : " ORDER BY audit_id DESC") + " LIMIT $\(values.count)"
        return try run { () throws(StorageError) in
            try db.query(
                sql, values,
                { r in
                    AuditRecord(
                        auditID: r.text(0), timeMs: r.int64(1), operatorName: r.text(2), method: r.text(3), accountID: r.text(4),
                        target: r.text(5), reason: r.text(6), outcome: r.text(7), requestJSON: r.text(8))
                })
        }
    }

    // MARK: Grants

    static var grantColumns: String { LedgerSQL.grantColumns }

    static func decodeGrant(_ r: some RowReader) -> GrantRecord {
        GrantRecord(
            grantID: r.text(0), accountID: r.text(1), productID: r.text(2), startTimeMs: r.int64(3), expiresTimeMs: r.int64(4),
            revocationTimeMs: r.int64(5), reason: r.text(6), operatorName: r.text(7), idempotencyKey: r.optionalText(8),
            expiryNoted: r.int(9) != 0)
    }

    func insertGrant(_ g: GrantRecord) throws(BillingError) {
        try run { () throws(StorageError) in
            try db.update(
                "INSERT INTO grants (\(Self.grantColumns)) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                [
                    .text(g.grantID), .text(g.accountID), .text(g.productID), .int(g.startTimeMs), .int(g.expiresTimeMs),
                    .int(g.revocationTimeMs), .text(g.reason), .text(g.operatorName), g.idempotencyKey.map { .text($0) } ?? .null,
                    .int(g.expiryNoted ? 1 : 0),
                ])
        }
    }

    func grant(id: String) throws(BillingError) -> GrantRecord? {
        try run { () throws(StorageError) in
            // PostgreSQL: the row locked to the end of the transaction (revoke, sweep and erasure serialize on it).
            try db.query(
                "SELECT \(Self.grantColumns) FROM grants WHERE grant_id = $1" + forUpdate, [.text(id)], { Self.decodeGrant($0) }
            ).first
        }
    }

    func grant(accountID: String, idempotencyKey: String) throws(BillingError) -> GrantRecord? {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT \(Self.grantColumns) FROM grants WHERE account_id = $1 AND idempotency_key = $2", [.text(accountID), .text(idempotencyKey)],
                { Self.decodeGrant($0) }
            ).first
        }
    }

    func grants(accountID: String) throws(BillingError) -> [GrantRecord] {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT \(Self.grantColumns) FROM grants WHERE account_id = $1 ORDER BY start_time_ms, grant_id", [.text(accountID)],
                { Self.decodeGrant($0) })
        }
    }

    func updateGrant(_ g: GrantRecord) throws(BillingError) {
        try run { () throws(StorageError) in
            try db.update(
                "UPDATE grants SET revocation_time_ms = $1, expires_time_ms = $2 WHERE grant_id = $3",
                [.int(g.revocationTimeMs), .int(g.expiresTimeMs), .text(g.grantID)])
        }
    }

    /// The conditions of the partial index `grants_due`, so that both planners read only grants still to be noted.
    func dueGrants(nowMs: Int64, limit: Int) throws(BillingError) -> [GrantRecord] {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT \(Self.grantColumns) FROM grants WHERE expiry_noted = 0 AND revocation_time_ms = 0 AND expires_time_ms > 0 "
                    + "AND expires_time_ms <= $1 ORDER BY expires_time_ms, grant_id LIMIT $2",
                [.int(nowMs), .int(Int64(limit))], { Self.decodeGrant($0) })
        }
    }

    /// PostgreSQL: a second replica's UPDATE waits for the first's row lock, then re-checks `expiry_noted` and
    /// changes nothing: one event per expiry.
    func noteGrantExpired(grantID: String) throws(BillingError) -> Bool {
        try run { () throws(StorageError) in
            try db.update(
                "UPDATE grants SET expiry_noted = 1 WHERE grant_id = $1 AND expiry_noted = 0 AND revocation_time_ms = 0", [.text(grantID)]) == 1
        }
    }

    // MARK: Erasure

    func renameAccount(_ old: String, to new: String) throws(BillingError) -> ErasureCounts {
        let log = self.log
        return try run { () throws(StorageError) in
            var c = ErasureCounts()
            if lockOrders {
                // PostgreSQL: the account's grants locked first, so a revoke or an expiry of one of them commits
                // wholly before the rename reads anything, or waits and then finds the pseudonym.
                _ = try db.query("SELECT grant_id FROM grants WHERE account_id = $1 FOR UPDATE", [.text(old)], { $0.text(0) })
            }
            // Events earlier jobs of this batch appended, not yet inserted (a PostgreSQL batch numbers them last).
            c.events += db.renamePendingEvents(from: old, to: new)
            // SQLite numbers `$n` parameters in order of appearance: each statement names them in that order.
            let ids: [SQLValue] = [.text(new), .text(old)]
            c.idempotencyKeys =
                (try db.query(
                    "SELECT COUNT(*) FROM orders WHERE account_id = $1 AND idempotency_key IS NOT NULL", [.text(old)], { $0.int(0) }
                ).first ?? 0)
                + (try db.query(
                    "SELECT COUNT(*) FROM grants WHERE account_id = $1 AND idempotency_key IS NOT NULL", [.text(old)], { $0.int(0) }
                ).first ?? 0)
            c.orders = try db.update("UPDATE orders SET account_id = $1, idempotency_key = NULL WHERE account_id = $2", ids)
            if c.orders > 0, let log {
                // The SQLite order cache learns the rewritten orders after COMMIT, as it learns every order change.
                log.orders += try db.query(OrderRow.selectByAccount, [.text(new)], { OrderRow.decode($0) })
            }
            c.transactions = try db.update("UPDATE transactions SET account_id = $1 WHERE account_id = $2", ids)
            c.entitlements = try db.update("UPDATE entitlements SET account_id = $1 WHERE account_id = $2", ids)
            c.grants = try db.update("UPDATE grants SET account_id = $1, idempotency_key = NULL WHERE account_id = $2", ids)
            // The feed keeps its cursors; an order snapshot names its account too.
            let snapshots = try db.query(
                "SELECT feed_cursor, order_snapshot FROM events WHERE account_id = $1 AND feed_cursor IS NOT NULL AND order_snapshot IS NOT NULL",
                [.text(old)], { ($0.int64(0), $0.text(1)) })
            for (cursor, text) in snapshots {
                guard var order = EventSnapshot.decodeOrder(text) else { continue }
                order.accountID = new
                order.idempotencyKey = nil
                try db.update("UPDATE events SET order_snapshot = $1 WHERE feed_cursor = $2", [.text(EventSnapshot.encode(order)), .int(cursor)])
            }
            c.events += try db.update("UPDATE events SET account_id = $1 WHERE account_id = $2 AND feed_cursor IS NOT NULL", ids)
            try db.update("UPDATE audit_entries SET account_id = $1 WHERE account_id = $2", ids)
            try db.update("UPDATE audit_entries SET target = $1 WHERE target = $2", ids)
            let entries = try db.query(
                "SELECT audit_id, request_json FROM audit_entries WHERE account_id = $1 OR target = $1", [.text(new)], { ($0.text(0), $0.text(1)) })
            c.auditEntries = entries.count
            for (id, json) in entries {
                let rewritten = AuditText.replacing(old, with: new, in: json)
                if rewritten != json {
                    try db.update("UPDATE audit_entries SET request_json = $1 WHERE audit_id = $2", [.text(rewritten), .text(id)])
                }
            }
            try db.update("UPDATE refund_watches SET account_id = $1 WHERE account_id = $2", ids)
            try db.update("UPDATE play_acknowledgements SET account_id = $1 WHERE account_id = $2", ids)
            return c
        }
    }

    /// The smallest audit id of millisecond `ms`: "audit_" and the UUID v7's time fields (48 bits, as 8 + 4 lowercase
    /// hex digits around the first hyphen).
    static func auditIDFloor(_ ms: Int64) -> String {
        let hex = Array("0123456789abcdef".utf8)
        var out = Array("audit_".utf8)
        let v = UInt64(max(0, min(ms, (1 << 48) - 1)))
        for shift in stride(from: 44, through: 0, by: -4) {
            if shift == 12 { out.append(UInt8(ascii: "-")) }
            out.append(hex[Int((v >> UInt64(shift)) & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
