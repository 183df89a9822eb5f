import Billing

/// The transactions table: store transactions, who owns them, history pages, the subscription lock.
extension SQLLedger {
    func owned(transactionID: String) throws(BillingError) -> OwnedTransaction? {
        try run { () throws(StorageError) in
            // PostgreSQL: lock the row, so a completion and a restore of one transaction serialize.
            try db.query(
                lockOrders ? LedgerSQL.transactionByIDForUpdate : LedgerSQL.transactionByID,
                [.text(transactionID)], { Self.decode($0) }
            ).first
        }
    }

    func insert(_ o: OwnedTransaction) throws(BillingError) {
        let t = o.transaction
        log?.revenue.transactionIDs.append(t.transactionID)
        try run { () throws(StorageError) in
            try db.update(
                LedgerSQL.insertTransaction,
                [
                    .text(t.transactionID), .text(t.originalTransactionID), .text(o.accountID), o.orderID.map { .text($0) } ?? .null,
                    .text(t.productID), t.productKind.map { .text($0.rawValue) } ?? .null, .int(t.purchaseTimeMs), .int(t.expiresTimeMs),
                    .int(t.revocationTimeMs), .int(Int64(t.quantity)), .int(Int64(t.environment.rawValue)),
                    t.appAccountToken.map { .text($0) } ?? .null, .text(t.bundleID), .int(t.signedTimeMs),
                    t.revocationReason.map { .int(Int64($0)) } ?? .null, .int(Int64(t.store.rawValue)), .int(Int64(t.ownership.rawValue)),
                    .int(t.upgraded ? 1 : 0), .int(Int64(t.revocationType.rawValue)), .int(Int64(t.revocationPercentage)),
                    .int(t.price.priceMilliunits), .text(t.price.currency), .text(t.price.storefront), .text(t.price.offerID),
                    .text(t.price.offerType), .text(t.subscriptionGroupID), .text(t.purchaseToken),
                ])
        }
    }

    /// `$1, $2, ... $n`.
    static func placeholders(_ n: Int) -> String { LedgerSQL.placeholders(n) }

    func reassign(transactionID: String, accountID: String, orderID: String?) throws(BillingError) {
        log?.revenue.transactionIDs.append(transactionID)
        try run { () throws(StorageError) in
            try db.update(
                "UPDATE transactions SET account_id = $1, order_id = $2 WHERE transaction_id = $3",
                [.text(accountID), orderID.map { .text($0) } ?? .null, .text(transactionID)])
        }
    }

    func transfer(transactionID: String, to accountID: String) throws(BillingError) {
        log?.revenue.transactionIDs.append(transactionID)
        try run { () throws(StorageError) in
            try db.update("UPDATE transactions SET account_id = $1 WHERE transaction_id = $2", [.text(accountID), .text(transactionID)])
        }
    }

    func update(_ t: StoreTransaction) throws(BillingError) {
        log?.revenue.transactionIDs.append(t.transactionID)
        try run { () throws(StorageError) in
            try db.update(
                "UPDATE transactions SET expires_time_ms = $1, revocation_time_ms = $2, revocation_reason = $3, signed_time_ms = $4, "
                    + "upgraded = $5, revocation_type = $6, revocation_percentage = $7, ownership = $8, price_milliunits = $9, "
                    + "currency = $10, storefront = $11, offer_id = $12, offer_type = $13 WHERE transaction_id = $14",
                [
                    .int(t.expiresTimeMs), .int(t.revocationTimeMs), t.revocationReason.map { .int(Int64($0)) } ?? .null,
                    .int(t.signedTimeMs), .int(t.upgraded ? 1 : 0), .int(Int64(t.revocationType.rawValue)),
                    .int(Int64(t.revocationPercentage)), .int(Int64(t.ownership.rawValue)), .int(t.price.priceMilliunits),
                    .text(t.price.currency), .text(t.price.storefront), .text(t.price.offerID), .text(t.price.offerType),
                    .text(t.transactionID),
                ])
        }
    }

    func history(accountID: String, after: HistoryCursor?, limit: Int) throws(BillingError) -> [OwnedTransaction] {
        try run { () throws(StorageError) in
            guard let after else {
                return try db.query(
                    LedgerSQL.historyFirst,
                    [.text(accountID), .int(Int64(limit))], { Self.decode($0) })
            }
            return try db.query(
                LedgerSQL.historyNext,
                [.text(accountID), .int(after.purchaseTimeMs), .text(after.transactionID), .int(Int64(limit))],
                { Self.decode($0) })
        }
    }

    func transactions(accountID: String) throws(BillingError) -> [OwnedTransaction] {
        try run { () throws(StorageError) in
            try db.query(LedgerSQL.transactionsByAccount, [.text(accountID)], { Self.decode($0) })
        }
    }

    func transactions(originalTransactionID: String) throws(BillingError) -> [OwnedTransaction] {
        try run { () throws(StorageError) in
            try db.query(
                LedgerSQL.transactionsByOriginal,
                [.text(originalTransactionID)], { Self.decode($0) })
        }
    }

    func transaction(purchaseToken: String) throws(BillingError) -> OwnedTransaction? {
        guard !purchaseToken.isEmpty else { return nil }
        return try run { () throws(StorageError) in
            try db.query(LedgerSQL.transactionByPurchaseToken, [.text(purchaseToken)], { Self.decode($0) }).first
        }
    }

    /// PostgreSQL: a transaction-scoped advisory lock on (namespace "subs", hash of the id); the two-key form
    /// never collides with the one-key lock of migrations (nor the previous version's event sequencer).
    ///
    /// Inside a batch (`sharesTransaction`) the lock is only tried: waiting for it while holding the other jobs'
    /// locks is how two batches deadlock. If another transaction holds it, the job fails with `lockBusy`, its
    /// savepoint is rolled back, and it runs again alone once the batch has committed, where waiting is safe.
    func lockSubscription(originalTransactionID: String) throws(BillingError) {
        guard lockOrders else { return }
        if db.sharesTransaction {
            let locked = try run { () throws(StorageError) in
                try db.query(
                    "SELECT pg_try_advisory_xact_lock(\(Self.subscriptionLockSpace), hashtext($1))",
                    [.text(originalTransactionID)], { $0.text(0) == "t" }
                ).first ?? false
            }
            if locked { return }
            throw .storage(.lockBusy)
        }
        try run { () throws(StorageError) in
            _ = try db.query(
                "SELECT pg_advisory_xact_lock(\(Self.subscriptionLockSpace), hashtext($1))",
                [.text(originalTransactionID)], { _ in 0 })
        }
    }

    static var subscriptionLockSpace: Int32 { 0x7375_6273 }  // "subs"

    static func decode(_ r: some RowReader) -> OwnedTransaction {
        let t = StoreTransaction(
            transactionID: r.text(0), originalTransactionID: r.text(1), productID: r.text(4),
            productKind: r.optionalText(5).flatMap(ProductKind.init(rawValue:)), purchaseTimeMs: r.int64(6),
            expiresTimeMs: r.int64(7), revocationTimeMs: r.int64(8), quantity: r.int(9),
            environment: StoreEnvironment(rawValue: r.int(10)) ?? .production, appAccountToken: r.optionalText(11), bundleID: r.text(12),
            signedTimeMs: r.int64(13), revocationReason: r.isNull(14) ? nil : r.int(14))
        var x = t
        x.store = Store(rawValue: r.int(15)) ?? .appStore
        x.ownership = Ownership(rawValue: r.int(16)) ?? .purchased
        x.upgraded = r.int(17) != 0
        x.revocationType = RevocationType(rawValue: r.int(18)) ?? .unspecified
        x.revocationPercentage = r.int(19)
        x.price = PriceFacts(priceMilliunits: r.int64(20), currency: r.text(21), storefront: r.text(22), offerID: r.text(23), offerType: r.text(24))
        x.subscriptionGroupID = r.text(25)
        x.purchaseToken = r.text(26)
        return OwnedTransaction(transaction: x, accountID: r.text(2), orderID: r.optionalText(3))
    }
}
