import Billing

// Revenue's reads (RevenueLedger): the counted transactions of an environment with their subscription's grace
// period end, the export's pages in primary-key order, first paid purchases.
extension SQLLedger {
    func revenueTransactions(
        environment: StoreEnvironment, _ visit: (StoreTransaction, String, Int64) -> Void
    ) throws(BillingError) {
        // In pages along the primary key: PostgreSQL hands a statement's whole result over at once (a million rows
        // held at once cost about 650 MiB); each page's rows are handed on, then dropped.
        var after = ""
        while true {
            var last: String?, count = 0
            try run { () throws(StorageError) in
                _ = try db.query(RevenueSQL.countedPage, [.int(Int64(environment.rawValue)), .text(after), .int(Int64(RevenueSQL.pageRows))]) {
                    r -> Void in
                    let owned = Self.decode(r)
                    visit(owned.transaction, owned.accountID, r.int64(27))
                    last = owned.transaction.transactionID
                    count += 1
                }
            }
            guard count == RevenueSQL.pageRows, let last else { return }
            after = last
        }
    }

    func revenueTransactions(ids: [String]) throws(BillingError) -> [(OwnedTransaction, Int64)] {
        var out: [(OwnedTransaction, Int64)] = []
        for chunk in Self.chunks(Array(Set(ids))) {
            let sql = RevenueSQL.select + " WHERE t.transaction_id IN (" + LedgerSQL.placeholders(chunk.count) + ")"
            out += try run { () throws(StorageError) in
                try db.query(sql, chunk.map { .text($0) }, { (Self.decode($0), $0.int64(27)) })
            }
        }
        return out
    }

    func gracePeriods(originalTransactionIDs: [String]) throws(BillingError) -> [String: Int64] {
        var out: [String: Int64] = [:]
        for chunk in Self.chunks(Array(Set(originalTransactionIDs))) {
            let sql =
                "SELECT original_transaction_id, grace_period_expires_ms FROM renewals WHERE original_transaction_id IN ("
                + LedgerSQL.placeholders(chunk.count) + ")"
            for (id, ms) in try run({ () throws(StorageError) in try db.query(sql, chunk.map { .text($0) }, { ($0.text(0), $0.int64(1)) }) }) {
                out[id] = ms
            }
        }
        for id in originalTransactionIDs where out[id] == nil { out[id] = 0 }
        return out
    }

    /// Lists of at most 500, for `IN (...)`.
    static func chunks(_ values: [String]) -> [[String]] {
        stride(from: 0, to: values.count, by: 500).map { Array(values[$0..<min($0 + 500, values.count)]) }
    }

    func exportPage(
        environment: StoreEnvironment, fromMs: Int64, toMs: Int64, after: String, limit: Int
    ) throws(BillingError) -> [OwnedTransaction] {
        try run { () throws(StorageError) in
            try db.query(
                RevenueSQL.exportPage,
                [.text(after), .int(Int64(environment.rawValue)), .int(fromMs), .int(toMs), .int(Int64(limit))], { Self.decode($0) })
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
    /// The NOTIFY channel that tells the other replicas what a commit changed for Revenue.
    static let channel = "billing_revenue"

    /// What Revenue counts: the buyer's own store transactions, owned by an account (DESIGN "Revenue, defined").
    static func countedCondition(prefix p: String) -> String {
        "\(p)ownership = 1 AND \(p)store <> 4 AND \(p)account_id <> ''"
    }

    /// Transactions with their subscription's grace period end (column 27).
    static let select =
        "SELECT "
        + LedgerSQL.transactionColumns.split(separator: ",").map { "t." + $0.trimmingCharacters(in: " ") }.joined(separator: ", ")
        + ", COALESCE(r.grace_period_expires_ms, 0) FROM transactions t LEFT JOIN renewals r ON r.original_transaction_id = t.original_transaction_id"

    static let pageRows = 50_000
    static let countedPage =
        select + " WHERE t.environment = $1 AND " + countedCondition(prefix: "t.") + " AND t.transaction_id > $2 ORDER BY t.transaction_id LIMIT $3"

    static let exportPage =
        "SELECT \(LedgerSQL.transactionColumns) FROM transactions WHERE transaction_id > $1 AND environment = $2 AND purchase_time_ms >= $3"
        + " AND purchase_time_ms < $4 ORDER BY transaction_id LIMIT $5"

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
