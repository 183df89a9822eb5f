import Billing

/// The after-sale tables: refund watches, the webhook cursor, Google Play acknowledgements.
extension SQLLedger {
    func watchRefunds(_ w: RefundWatch) throws(BillingError) {
        try run { () throws(StorageError) in
            // Another replica may note the same customer at once: the first row stays.
            try db.update(
                "INSERT INTO refund_watches (environment, transaction_id, account_id, added_time_ms, checked_time_ms) "
                    + "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (environment, transaction_id) DO NOTHING",
                [.int(Int64(w.environment.rawValue)), .text(w.transactionID), .text(w.accountID), .int(w.addedTimeMs), .int(w.checkedTimeMs)])
        }
    }

    func refundWatches(limit: Int) throws(BillingError) -> [RefundWatch] {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT environment, transaction_id, account_id, added_time_ms, checked_time_ms FROM refund_watches "
                    + "ORDER BY checked_time_ms, environment, transaction_id LIMIT $1",
                [.int(Int64(limit))],
                { r in
                    RefundWatch(
                        transactionID: r.text(1), environment: StoreEnvironment(rawValue: r.int(0)) ?? .production, accountID: r.text(2),
                        addedTimeMs: r.int64(3), checkedTimeMs: r.int64(4))
                })
        }
    }

    func refundWatchChecked(transactionID: String, environment: StoreEnvironment, nowMs: Int64) throws(BillingError) {
        try run { () throws(StorageError) in
            try db.update(
                "UPDATE refund_watches SET checked_time_ms = $1 WHERE environment = $2 AND transaction_id = $3",
                [.int(nowMs), .int(Int64(environment.rawValue)), .text(transactionID)])
        }
    }

    func webhookCursor() throws(BillingError) -> WebhookCursor? {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT delivered_cursor, holder, lease_until_ms, failures, last_error, last_attempt_ms, last_delivery_ms FROM webhook_cursor WHERE id = 1", [],
                { r in
                    WebhookCursor(
                        position: UInt64(max(0, r.int64(0))), holder: r.text(1), leaseUntilMs: r.int64(2), failures: r.int(3), lastError: r.text(4),
                        lastAttemptMs: r.int64(5), lastDeliveryMs: r.int64(6))
                }
            ).first
        }
    }

    func ensureWebhookCursor() throws(BillingError) {
        try run { () throws(StorageError) in
            _ = try db.update("INSERT INTO webhook_cursor (id) VALUES (1) ON CONFLICT (id) DO NOTHING", [])
        }
    }

    func takeWebhookLease(holder: String, nowMs: Int64, untilMs: Int64) throws(BillingError) -> Bool {
        try run { () throws(StorageError) in
            try db.update(
                "UPDATE webhook_cursor SET holder = $1, lease_until_ms = $2 WHERE id = 1 AND (holder = $1 OR holder = '' OR lease_until_ms < $3)",
                [.text(holder), .int(untilMs), .int(nowMs)]) == 1
        }
    }

    func advanceWebhook(
        holder: String, from expected: UInt64, to position: UInt64, nowMs: Int64, untilMs: Int64, delivered: Bool
    ) throws(BillingError)
        -> Bool
    {
        try run { () throws(StorageError) in
            try db.update(
                "UPDATE webhook_cursor SET delivered_cursor = $1, lease_until_ms = $2, failures = 0, last_error = '', "
                    + "last_attempt_ms = CASE WHEN $3 = 1 THEN $4 ELSE last_attempt_ms END, "
                    + "last_delivery_ms = CASE WHEN $3 = 1 THEN $4 ELSE last_delivery_ms END "
                    + "WHERE id = 1 AND holder = $5 AND delivered_cursor = $6",
                [.int(Int64(position)), .int(untilMs), .int(delivered ? 1 : 0), .int(nowMs), .text(holder), .int(Int64(expected))]) == 1
        }
    }

    func webhookFailed(holder: String, error: String, nowMs: Int64, untilMs: Int64) throws(BillingError) -> Bool {
        try run { () throws(StorageError) in
            try db.update(
                "UPDATE webhook_cursor SET failures = failures + 1, last_error = $1, last_attempt_ms = $2, lease_until_ms = $3 "
                    + "WHERE id = 1 AND holder = $4",
                [.text(error), .int(nowMs), .int(untilMs), .text(holder)]) == 1
        }
    }

    func setWebhookPosition(_ position: UInt64) throws(BillingError) {
        try run { () throws(StorageError) in
            _ = try db.update("UPDATE webhook_cursor SET delivered_cursor = $1, failures = 0, last_error = '' WHERE id = 1", [.int(Int64(position))])
        }
    }

    func queueAcknowledgement(_ a: PlayAcknowledgement) throws(BillingError) {
        try run { () throws(StorageError) in
            _ = try db.update(
                "INSERT INTO play_acknowledgements (purchase_token, package_name, product_id, subscription, consume, transaction_id, account_id, "
                    + "created_ms, attempts, next_attempt_ms, last_error, acknowledged_ms, consumed_ms) "
                    + "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (purchase_token) DO NOTHING",
                Self.values(a))
        }
    }

    func claimAcknowledgements(nowMs: Int64, untilMs: Int64, limit: Int) throws(BillingError) -> [PlayAcknowledgement] {
        try run { () throws(StorageError) in
            try db.query(
                "UPDATE play_acknowledgements SET next_attempt_ms = $1 WHERE done = 0 AND next_attempt_ms <= $2 AND purchase_token IN "
                    + "(SELECT purchase_token FROM play_acknowledgements WHERE done = 0 AND next_attempt_ms <= $2 "
                    + "ORDER BY next_attempt_ms, purchase_token LIMIT $3) "
                    + "RETURNING purchase_token, package_name, product_id, subscription, consume, transaction_id, account_id, created_ms, attempts, "
                    + "next_attempt_ms, last_error, acknowledged_ms, consumed_ms",
                [.int(untilMs), .int(nowMs), .int(Int64(limit))],
                { r in
                    PlayAcknowledgement(
                        purchaseToken: r.text(0), packageName: r.text(1), productID: r.text(2), subscription: r.int(3) != 0, consume: r.int(4) != 0,
                        transactionID: r.text(5), accountID: r.text(6), createdMs: r.int64(7), attempts: r.int(8), nextAttemptMs: r.int64(9),
                        lastError: r.text(10), acknowledgedMs: r.int64(11), consumedMs: r.int64(12))
                })
        }
    }

    func updateAcknowledgement(_ a: PlayAcknowledgement) throws(BillingError) {
        try run { () throws(StorageError) in
            _ = try db.update(
                "UPDATE play_acknowledgements SET attempts = $1, next_attempt_ms = $2, last_error = $3, acknowledged_ms = $4, consumed_ms = $5, "
                    + "done = $6 WHERE purchase_token = $7",
                [
                    .int(Int64(a.attempts)), .int(a.nextAttemptMs), .text(String(a.lastError.prefix(500))), .int(a.acknowledgedMs), .int(a.consumedMs),
                    .int(a.isDone ? 1 : 0), .text(a.purchaseToken),
                ])
        }
    }

    func unacknowledgedCount(createdBeforeMs: Int64) throws(BillingError) -> Int {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT COUNT(*) FROM play_acknowledgements WHERE acknowledged_ms = 0 AND created_ms < $1", [.int(createdBeforeMs)], { $0.int(0) }
            ).first ?? 0
        }
    }
}
