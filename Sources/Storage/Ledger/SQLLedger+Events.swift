import Billing

/// The events and notifications tables: the feed in commit order, notifications seen.
extension SQLLedger {
    func notification(uuid: String) throws(BillingError) -> NotificationResult? {
        try run { () throws(StorageError) in
            try db.query(
                "SELECT result FROM notifications WHERE notification_uuid = $1", [.text(uuid)],
                {
                    NotificationResult(rawValue: $0.text(0)) ?? .applied
                }
            ).first
        }
    }

    func newestNotificationSignedMs() throws(BillingError) -> Int64? {
        try run { () throws(StorageError) in
            try db.query("SELECT signed_time_ms FROM notifications ORDER BY signed_time_ms DESC LIMIT 1", [], { $0.int64(0) }).first
        }
    }

    /// Records a notification; its JWS header goes to `jws_headers` once (by digest), the row keeps the rest.
    func record(_ n: NotificationRecord) throws(BillingError) {
        try run { () throws(StorageError) in
            var payload = n.signedPayload
            var headerDigest = SQLValue.null
            if let split = JWSHeaders.split(n.signedPayload) {
                let utf8 = n.signedPayload.utf8
                let known = try db.query("SELECT 1 FROM jws_headers WHERE digest = $1", [.text(split.digest)], { $0.int(0) })
                if known.isEmpty, let header = String(utf8.prefix(split.headerLength)) {
                    // Another replica may insert the same header at once: the first one stays.
                    try db.update(
                        "INSERT INTO jws_headers (digest, header) VALUES ($1, $2) ON CONFLICT (digest) DO NOTHING",
                        [.text(split.digest), .text(header)])
                }
                if let rest = String(utf8.dropFirst(split.headerLength)) {
                    payload = rest
                    headerDigest = .text(split.digest)
                }
            }
            try db.update(
                "INSERT INTO notifications (notification_uuid, notification_type, subtype, signed_time_ms, result, applied_time_ms, transaction_id, signed_payload, header_digest) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                [
                    .text(n.uuid), .text(n.type), n.subtype.map { .text($0) } ?? .null, .int(n.signedTimeMs), .text(n.result.rawValue),
                    .int(n.appliedTimeMs), n.transactionID.map { .text($0) } ?? .null, .text(payload), headerDigest,
                ])
        }
    }

    func append(_ e: EventRecord) throws(BillingError) {
        try run { () throws(StorageError) in
            try db.appendEvent(Self.values(e))
        }
        log?.events += 1
    }

    static func values(_ e: EventRecord) -> [SQLValue] {
        [
            .int(Int64(e.kind.rawValue)), .int(e.timeMs), .text(e.accountID), .text(e.cause), e.notificationUUID.map { .text($0) } ?? .null,
            e.transactionID.map { .text($0) } ?? .null, e.order.map { .text(EventSnapshot.encode($0)) } ?? .null,
            e.entitlement.map { .text(EventSnapshot.encode($0)) } ?? .null,
        ]
    }

    func events(after cursor: UInt64, limit: Int, accountID: String?) throws(BillingError) -> [EventRecord] {
        try run { () throws(StorageError) in
            if let accountID {
                return try db.query(
                    LedgerSQL.eventsByAccount,
                    [.text(accountID), .int(Int64(clamping: cursor)), .int(Int64(limit))], { Self.decodeEvent($0) })
            }
            return try db.query(
                LedgerSQL.events,
                [.int(Int64(clamping: cursor)), .int(Int64(limit))], { Self.decodeEvent($0) })
        }
    }

    static func values(_ a: PlayAcknowledgement) -> [SQLValue] {
        [
            .text(a.purchaseToken), .text(a.packageName), .text(a.productID), .int(a.subscription ? 1 : 0), .int(a.consume ? 1 : 0),
            .text(a.transactionID), .text(a.accountID), .int(a.createdMs), .int(Int64(a.attempts)), .int(a.nextAttemptMs), .text(a.lastError),
            .int(a.acknowledgedMs), .int(a.consumedMs),
        ]
    }

    func lastCursor() throws(BillingError) -> UInt64 {
        try run { () throws(StorageError) in
            UInt64(max(0, try db.query("SELECT COALESCE(MAX(feed_cursor), 0) FROM events", [], { $0.int64(0) }).first ?? 0))
        }
    }

    static func decodeEvent(_ r: some RowReader) -> EventRecord {
        var e = EventRecord(
            kind: EventKind(rawValue: r.int(1)) ?? .orderCreated, timeMs: r.int64(2), accountID: r.text(3),
            order: r.optionalText(7).flatMap(EventSnapshot.decodeOrder),
            entitlement: r.optionalText(8).flatMap(EventSnapshot.decodeEntitlement),
            cause: EventCause(r.text(4), notificationUUID: r.optionalText(5)), transactionID: r.optionalText(6))
        e.cursor = UInt64(max(0, r.int64(0)))
        return e
    }
}
