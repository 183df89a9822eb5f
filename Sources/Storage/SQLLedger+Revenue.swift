import Billing

// Revenue's reads (RevenueLedger): the counted transactions of an environment with their subscription's grace
// period end, the export's pages by purchase time (index transactions_purchase_time), first paid purchases.
extension SQLLedger {
    func revenueTransactions(
        environment: StoreEnvironment, _ visit: (StoreTransaction, String, Int64) -> Void
    ) throws(BillingError) {
        try run { () throws(StorageError) in
            // The rows are handed on as they are read; the array of Void the query answers takes no memory.
            _ = try db.query(RevenueSQL.counted, [.int(Int64(environment.rawValue))]) { r -> Void in
                let owned = Self.decode(r)
                visit(owned.transaction, owned.accountID, r.int64(27))
            }
        }
    }

    func exportPage(
        environment: StoreEnvironment, fromMs: Int64, toMs: Int64, after: HistoryCursor?, limit: Int
    ) throws(BillingError) -> [OwnedTransaction] {
        let cursor = after ?? HistoryCursor(purchaseTimeMs: fromMs - 1, transactionID: "")
        return try run { () throws(StorageError) in
            try db.query(
                RevenueSQL.exportPage,
                [
                    .int(Int64(environment.rawValue)), .int(fromMs), .int(toMs), .int(cursor.purchaseTimeMs), .text(cursor.transactionID),
                    .int(Int64(limit)),
                ], { Self.decode($0) })
        }
    }

    func firstPaidPurchases(originalTransactionIDs: [String]) throws(BillingError) -> [String: Int64] {
        var first: [String: Int64] = [:]
        let unique = Array(Set(originalTransactionIDs))
        var start = 0
        while start < unique.count {
            let chunk = Array(unique[start..<min(start + 500, unique.count)])
            start += chunk.count
            let sql =
                "SELECT original_transaction_id, MIN(purchase_time_ms) FROM transactions WHERE original_transaction_id IN ("
                + LedgerSQL.placeholders(chunk.count) + ") AND " + RevenueSQL.countedCondition(prefix: "")
                + " AND price_milliunits > 0 GROUP BY original_transaction_id"
            let rows = try run { () throws(StorageError) in
                try db.query(sql, chunk.map { .text($0) }, { ($0.text(0), $0.int64(1)) })
            }
            for (id, ms) in rows { first[id] = ms }
        }
        return first
    }

    func activeGrantCount(atMs: Int64) throws(BillingError) -> Int {
        try run { () throws(StorageError) in
            try db.query(RevenueSQL.activeGrants, [.int(atMs)], { $0.int(0) }).first ?? 0
        }
    }
}

enum RevenueSQL {
    /// What Revenue counts: the buyer's own store transactions, owned by an account (DESIGN "Revenue, defined").
    static func countedCondition(prefix p: String) -> String {
        "\(p)ownership = 1 AND \(p)store <> 4 AND \(p)account_id <> ''"
    }

    static let counted =
        "SELECT "
        + LedgerSQL.transactionColumns.split(separator: ",").map { "t." + $0.trimmingCharacters(in: " ") }.joined(separator: ", ")
        + ", COALESCE(r.grace_period_expires_ms, 0) FROM transactions t LEFT JOIN renewals r ON r.original_transaction_id = t.original_transaction_id"
        + " WHERE t.environment = $1 AND " + countedCondition(prefix: "t.")

    static let exportPage =
        "SELECT \(LedgerSQL.transactionColumns) FROM transactions WHERE environment = $1 AND purchase_time_ms >= $2 AND purchase_time_ms < $3"
        + " AND (purchase_time_ms > $4 OR (purchase_time_ms = $4 AND transaction_id > $5)) ORDER BY purchase_time_ms, transaction_id LIMIT $6"

    static let activeGrants =
        "SELECT COUNT(*) FROM grants WHERE start_time_ms <= $1 AND (expires_time_ms = 0 OR expires_time_ms > $1)"
        + " AND (revocation_time_ms = 0 OR revocation_time_ms > $1)"
}

extension Substring {
    fileprivate func trimmingCharacters(in set: Character) -> String {
        var s = self
        while s.first == set { s = s.dropFirst() }
        while s.last == set { s = s.dropLast() }
        return String(s)
    }
}
