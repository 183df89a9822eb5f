import Billing

/// The entitlements and renewal_states tables.
extension SQLLedger {
    func entitlement(accountID: String, key: String) throws(BillingError) -> EntitlementRecord? {
        try run { () throws(StorageError) in
            try db.query(
                lockOrders ? LedgerSQL.entitlementForUpdate : LedgerSQL.entitlement,
                [.text(accountID), .text(key)], { Self.decodeEntitlement($0) }
            ).first ?? nil
        }
    }

    func entitlements(accountID: String) throws(BillingError) -> [EntitlementRecord] {
        try run { () throws(StorageError) in
            try db.query(
                LedgerSQL.entitlementsByAccount,
                [.text(accountID)], { Self.decodeEntitlement($0) }
            ).compactMap { $0 }
        }
    }

    func put(_ e: EntitlementRecord) throws(BillingError) {
        try run { () throws(StorageError) in
            try db.update("DELETE FROM entitlements WHERE account_id = $1 AND entitlement_key = $2", [.text(e.accountID), .text(e.key)])
            try db.update(
                LedgerSQL.insertEntitlement,
                [
                    .text(e.accountID), .text(e.key), .text(e.productID), .text(e.productKind.rawValue), .text(e.originalTransactionID),
                    .text(e.latestTransactionID), .int(e.purchaseTimeMs), .int(e.expiresTimeMs), .int(e.revocationTimeMs),
                    .int(e.gracePeriodExpiresTimeMs), .int(e.autoRenew ? 1 : 0), .int(Int64(e.environment.rawValue)),
                    e.orderID.map { .text($0) } ?? .null, .int(e.ended ? 1 : 0), .int(e.upgraded ? 1 : 0), .int(e.billingRetry ? 1 : 0),
                    .int(Int64(e.ownership.rawValue)), .int(Int64(e.store.rawValue)), .text(e.subscriptionGroupID), .text(e.pendingProductID),
                    .int(e.paused ? 1 : 0),
                ])
        }
    }

    func deleteEntitlement(accountID: String, key: String) throws(BillingError) {
        try run { () throws(StorageError) in
            try db.update("DELETE FROM entitlements WHERE account_id = $1 AND entitlement_key = $2", [.text(accountID), .text(key)])
        }
    }

    func renewal(originalTransactionID: String) throws(BillingError) -> RenewalState? {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT original_transaction_id, auto_renew, grace_period_expires_ms, signed_time_ms, ended_signed_time_ms, billing_retry, "
                    + "auto_renew_product_id, paused FROM renewals WHERE original_transaction_id = $1" + forUpdate,
                [.text(originalTransactionID)],
                { r in
                    var state = RenewalState(
                        originalTransactionID: r.text(0), autoRenew: r.int(1) != 0, gracePeriodExpiresTimeMs: r.int64(2),
                        signedTimeMs: r.int64(3), endedSignedTimeMs: r.int64(4), billingRetry: r.int(5) != 0, autoRenewProductID: r.text(6))
                    state.paused = r.int(7) != 0
                    return state
                }
            ).first
        }
    }

    func put(_ r: RenewalState) throws(BillingError) {
        log?.revenue.originalTransactionIDs.append(r.originalTransactionID)
        try run { () throws(StorageError) in
            try db.update("DELETE FROM renewals WHERE original_transaction_id = $1", [.text(r.originalTransactionID)])
            try db.update(
                "INSERT INTO renewals (original_transaction_id, auto_renew, grace_period_expires_ms, signed_time_ms, ended_signed_time_ms, "
                    + "billing_retry, auto_renew_product_id, paused) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                [
                    .text(r.originalTransactionID), .int(r.autoRenew ? 1 : 0), .int(r.gracePeriodExpiresTimeMs), .int(r.signedTimeMs),
                    .int(r.endedSignedTimeMs), .int(r.billingRetry ? 1 : 0), .text(r.autoRenewProductID), .int(r.paused ? 1 : 0),
                ])
        }
    }

    /// After an upgrade from before schema step 7 (from before step 3, when the table did not exist, too): every
    /// entitlement computed from the transactions with the subscription model, without events.
    func recomputeEntitlements() throws(StorageError) {
        do throws(BillingError) {
            _ = try PurchaseRules.backfillEntitlements(
                self, context: RuleContext(nowMs: SystemClock().nowMilliseconds(), cause: .restorePurchases, catalog: nil))
        } catch {
            // The ledger throws nothing but database failures here (the rules refuse nothing in a backfill).
            switch JobFailure(error) {
            case .storage(let e): throw e
            case .answered(let e): preconditionFailure("entitlement recompute refused: \(e)")
            }
        }
    }

    static func decodeEntitlement(_ r: some RowReader) -> EntitlementRecord? {
        guard let kind = ProductKind(rawValue: r.text(3)) else { return nil }
        var e = EntitlementRecord(
            accountID: r.text(0), key: r.text(1), productID: r.text(2), productKind: kind, originalTransactionID: r.text(4),
            latestTransactionID: r.text(5), purchaseTimeMs: r.int64(6), expiresTimeMs: r.int64(7), revocationTimeMs: r.int64(8),
            gracePeriodExpiresTimeMs: r.int64(9), autoRenew: r.int(10) != 0, environment: StoreEnvironment(rawValue: r.int(11)) ?? .production,
            orderID: r.optionalText(12), ended: r.int(13) != 0, upgraded: r.int(14) != 0, billingRetry: r.int(15) != 0,
            ownership: Ownership(rawValue: r.int(16)) ?? .purchased, store: Store(rawValue: r.int(17)) ?? .appStore,
            subscriptionGroupID: r.text(18), pendingProductID: r.text(19))
        e.paused = r.int(20) != 0
        return e
    }
}
