/// Access an operator gave without a purchase (Support.GrantEntitlement): an entitlement of STORE_GRANT whose
/// original transaction id is the grant id, active from its start until its expiry (0: for good) or revocation.
public struct GrantRecord: Sendable, Equatable {
    /// "grant_" + a lowercase UUID.
    public var grantID: String
    public var accountID: String
    public var productID: String
    public var startTimeMs: Int64
    /// 0: no end.
    public var expiresTimeMs: Int64
    /// 0 unless revoked.
    public var revocationTimeMs: Int64 = 0
    public var reason: String
    /// Who granted it (the audit entry's operator).
    public var operatorName: String
    /// Scoped to the account; nil when the caller gave none.
    public var idempotencyKey: String?
    /// The expiry sweep wrote its ENTITLEMENT_EXPIRED event.
    public var expiryNoted = false

    public init(
        grantID: String, accountID: String, productID: String, startTimeMs: Int64, expiresTimeMs: Int64, revocationTimeMs: Int64 = 0,
        reason: String, operatorName: String, idempotencyKey: String?, expiryNoted: Bool = false
    ) {
        self.grantID = grantID
        self.accountID = accountID
        self.productID = productID
        self.startTimeMs = startTimeMs
        self.expiresTimeMs = expiresTimeMs
        self.revocationTimeMs = revocationTimeMs
        self.reason = reason
        self.operatorName = operatorName
        self.idempotencyKey = idempotencyKey
        self.expiryNoted = expiryNoted
    }

    /// The entitlement table's key of a grant: one entitlement per grant, beside any store entitlement of the product.
    public static func entitlementKey(_ grantID: String) -> String { "g:" + grantID }

    /// The grant as the entitlement table keeps it.
    public func entitlement(kind: ProductKind) -> EntitlementRecord {
        EntitlementRecord(
            accountID: accountID, key: Self.entitlementKey(grantID), productID: productID, productKind: kind,
            originalTransactionID: grantID, latestTransactionID: grantID, purchaseTimeMs: startTimeMs, expiresTimeMs: expiresTimeMs,
            revocationTimeMs: revocationTimeMs, gracePeriodExpiresTimeMs: 0, autoRenew: false, environment: .production, orderID: nil,
            ended: false, store: .grant)
    }
}

extension EventCause {
    /// Support.GrantEntitlement, Support.RevokeGrant, Support.TransferPurchases, Support.DeleteCustomer.
    public static func support(_ method: String) -> EventCause { EventCause("support:" + method) }
    /// The expiry sweep found a grant past its end.
    public static let grantExpiry = EventCause("grant_expiry")
}

/// The grant rules, written once over a ledger.
public enum GrantRules {
    /// A new grant (its entitlement and ENTITLEMENT_GRANTED event), unless the account already used its idempotency
    /// key: then that grant, unchanged, when the request was the same (product, end, reason), else
    /// IDEMPOTENCY_KEY_REUSED. `kind` is the product's kind (never a consumable: the caller refused those).
    public static func grant(
        _ ledger: some PurchaseLedger, _ new: GrantRecord, kind: ProductKind, sameRequest: (GrantRecord) -> Bool, context: RuleContext
    ) throws(BillingError) -> (GrantRecord, EntitlementRecord) {
        if let key = new.idempotencyKey, let old = try ledger.grant(accountID: new.accountID, idempotencyKey: key) {
            guard sameRequest(old) else { throw .idempotencyKeyReused(key: key) }
            let entitlement = try ledger.entitlement(accountID: old.accountID, key: GrantRecord.entitlementKey(old.grantID))
            return (old, entitlement ?? old.entitlement(kind: kind))
        }
        try ledger.insertGrant(new)
        let record = new.entitlement(kind: kind)
        try ledger.put(record)
        try ledger.append(
            EventRecord(
                kind: .entitlementGranted, timeMs: context.nowMs, accountID: new.accountID,
                entitlement: record.entitlement(nowMs: context.nowMs), cause: context.cause, transactionID: new.grantID))
        return (new, record)
    }

    /// Ends a grant now: ENTITLEMENT_REVOKED. A revoked grant answers unchanged (no event). A grant past its end
    /// whose expiry the sweep has not noted yet gets its ENTITLEMENT_EXPIRED first (every expiry is told once).
    /// The grant's row is read for update (PostgreSQL), so a concurrent revoke, sweep or erasure waits for this one.
    public static func revoke(_ ledger: some PurchaseLedger, grantID: String, context: RuleContext) throws(BillingError) -> (GrantRecord, EntitlementRecord) {
        guard var grant = try ledger.grant(id: grantID) else { throw .grantNotFound(grantID: grantID) }
        let key = GrantRecord.entitlementKey(grantID)
        var record = try ledger.entitlement(accountID: grant.accountID, key: key) ?? grant.entitlement(kind: .nonConsumable)
        guard grant.revocationTimeMs == 0 else { return (grant, record) }
        if grant.expiresTimeMs > 0 && grant.expiresTimeMs <= context.nowMs, try ledger.noteGrantExpired(grantID: grantID) {
            try ledger.append(
                EventRecord(
                    kind: .entitlementExpired, timeMs: context.nowMs, accountID: grant.accountID,
                    entitlement: record.entitlement(nowMs: context.nowMs), cause: .grantExpiry, transactionID: grantID))
        }
        grant.revocationTimeMs = context.nowMs
        try ledger.updateGrant(grant)
        record.revocationTimeMs = context.nowMs
        try ledger.put(record)
        try ledger.append(
            EventRecord(
                kind: .entitlementRevoked, timeMs: context.nowMs, accountID: grant.accountID,
                entitlement: record.entitlement(nowMs: context.nowMs), cause: context.cause, transactionID: grantID))
        return (grant, record)
    }

    /// The expiry sweep: each grant past its end (not revoked, not yet noted) writes ENTITLEMENT_EXPIRED once,
    /// whichever replica sweeps (`noteGrantExpired` answers true to one). Answers how many it wrote; at most `limit`.
    public static func expireDue(_ ledger: some PurchaseLedger, context: RuleContext, limit: Int) throws(BillingError) -> Int {
        var written = 0
        for due in try ledger.dueGrants(nowMs: context.nowMs, limit: limit) {
            guard try ledger.noteGrantExpired(grantID: due.grantID) else { continue }
            // Read again once its row is this writer's: an erasure or a revoke committed meanwhile is seen.
            guard let grant = try ledger.grant(id: due.grantID) else { continue }
            let record =
                try ledger.entitlement(accountID: grant.accountID, key: GrantRecord.entitlementKey(grant.grantID))
                ?? grant.entitlement(kind: .nonConsumable)
            try ledger.append(
                EventRecord(
                    kind: .entitlementExpired, timeMs: context.nowMs, accountID: grant.accountID,
                    entitlement: record.entitlement(nowMs: context.nowMs), cause: context.cause, transactionID: grant.grantID))
            written += 1
        }
        return written
    }
}
