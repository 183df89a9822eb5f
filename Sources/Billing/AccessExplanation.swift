/// One entitlement that could give an account access, with the fact that decides it (billing.v1.AccessFact).
public struct AccessFactRecord: Sendable, Equatable {
    public var productID: String
    public var store: Store
    /// Or the grant id.
    public var originalTransactionID: String
    /// The transaction (or grant) that decides it.
    public var transactionID: String
    public var state: EntitlementState
    public var grantsAccess: Bool
    public var reason: AccessReason
    /// Access lasts until; 0 when it has no end or gives no access.
    public var untilMs: Int64
    /// One sentence for a person, with the dates and ids that decide it.
    public var why: String
}

/// ExplainAccess: each entitlement's decision is `EntitlementRecord.access(nowMs:)`, the rule that computes its
/// state (no second copy of it); this only words it, with the deciding transaction or grant read from the ledger.
public enum AccessExplanation {
    /// The account's facts (for `productID` when not empty), the granting ones first, then by product and id.
    public static func facts(
        _ ledger: some PurchaseLedger, accountID: String, productID: String, nowMs: Int64
    ) throws(BillingError)
        -> [AccessFactRecord]
    {
        var out: [AccessFactRecord] = []
        for record in try ledger.entitlements(accountID: accountID) where productID.isEmpty || record.productID == productID {
            let decision = record.access(nowMs: nowMs)
            let grant = record.store == .grant ? try ledger.grant(id: record.originalTransactionID) : nil
            let transaction = record.store == .grant ? nil : try ledger.owned(transactionID: record.latestTransactionID)?.transaction
            out.append(
                AccessFactRecord(
                    productID: record.productID, store: record.store, originalTransactionID: record.originalTransactionID,
                    transactionID: record.latestTransactionID, state: decision.state, grantsAccess: decision.state.grantsAccess,
                    reason: decision.reason, untilMs: decision.untilMs,
                    why: why(record, decision, transaction: transaction, grant: grant)))
        }
        return out.sorted { a, b in
            (a.grantsAccess ? 0 : 1, a.productID, a.originalTransactionID) < (b.grantsAccess ? 0 : 1, b.productID, b.originalTransactionID)
        }
    }

    /// The sentence of one decision.
    public static func why(_ e: EntitlementRecord, _ d: AccessDecision, transaction t: StoreTransaction?, grant: GrantRecord?) -> String {
        let tx = "transaction \(e.latestTransactionID)"
        let by = grant.map { "by \($0.operatorName)" } ?? "by an operator"
        let reasonText = grant.map { $0.reason.isEmpty ? "" : ": " + $0.reason } ?? ""
        switch d.reason {
        case .purchased:
            if e.productKind == .nonRenewingSubscription {
                return "purchased \(UTCTime.text(e.purchaseTimeMs)) in \(tx): its term runs until \(UTCTime.text(e.expiresTimeMs))"
            }
            return "purchased \(UTCTime.text(e.purchaseTimeMs)) in \(tx)\(e.orderID.map { " (order \($0))" } ?? ""): a non-consumable gives access for good"
        case .subscriptionActive:
            let until = e.expiresTimeMs > 0 ? "until \(UTCTime.text(e.expiresTimeMs))" : "with no end date"
            return "active \(until): the current period of \(tx)" + (e.autoRenew ? ", it renews automatically" : ", auto-renew is off")
        case .familyShared:
            let until = e.expiresTimeMs > 0 && e.productKind != .nonConsumable ? " until \(UTCTime.text(e.expiresTimeMs))" : ""
            return "shared through Family Sharing\(until): \(tx) was bought by the family's organizer"
        case .gracePeriod:
            return "in the grace period until \(UTCTime.text(e.gracePeriodExpiresTimeMs)): the renewal after \(tx) failed on "
                + "\(UTCTime.text(e.expiresTimeMs)) and the store is retrying the payment"
        case .billingRetry:
            return "no access since \(UTCTime.text(e.expiresTimeMs)): the renewal after \(tx) failed and the store is retrying the payment"
        case .expired:
            if e.productKind == .nonRenewingSubscription { return "expired \(UTCTime.text(e.expiresTimeMs)): the term of \(tx) ended" }
            let why = e.ended ? "the store ended the subscription" : e.autoRenew ? "no renewal followed" : "auto-renew was off"
            return "expired \(UTCTime.text(e.expiresTimeMs)): the period of \(tx) ended, \(why)"
        case .refunded:
            let on = UTCTime.text(e.revocationTimeMs)
            switch t?.revocationType {
            case .refundProrated?:
                let pct = t.map { Double($0.revocationPercentage) / 1000 } ?? 0
                return "revoked: \(pct.formattedPercent)% refunded on \(on) (\(tx))"
            case .refundFull?: return "revoked: refunded in full on \(on) (\(tx))"
            default: return "revoked: refunded or charged back on \(on) (\(tx))"
            }
        case .familyRevoked:
            return "revoked \(UTCTime.text(e.revocationTimeMs)): the family's organizer stopped sharing \(tx) (or it was refunded to them)"
        case .upgraded:
            return "no access on this product: \(tx) was superseded by an upgrade; the access is on the new product"
        case .granted:
            let until = e.expiresTimeMs > 0 ? "until \(UTCTime.text(e.expiresTimeMs))" : "with no end"
            return "granted \(by) \(until) (grant \(e.originalTransactionID))\(reasonText)"
        case .grantRevoked:
            return "revoked \(UTCTime.text(e.revocationTimeMs)): grant \(e.originalTransactionID) \(by) was revoked"
        case .grantExpired:
            return "expired \(UTCTime.text(e.expiresTimeMs)): grant \(e.originalTransactionID) \(by) ended\(reasonText)"
        case .paused:
            return "paused by the customer: \(tx) gives no access until the subscription resumes"
        }
    }
}

extension Double {
    /// 50, 33.333: no trailing zeros.
    var formattedPercent: String {
        let thousandths = Int((self * 1000).rounded())
        let whole = thousandths / 1000, rest = thousandths % 1000
        guard rest != 0 else { return String(whole) }
        var frac = String(rest)
        while frac.count < 3 { frac = "0" + frac }
        while frac.hasSuffix("0") { frac.removeLast() }
        return "\(whole).\(frac)"
    }
}

/// "2026-11-30 12:00 UTC" from Unix milliseconds (civil from days, Howard Hinnant's algorithm).
public enum UTCTime {
    public static func text(_ ms: Int64) -> String {
        let seconds = ms >= 0 ? ms / 1000 : (ms - 999) / 1000
        var days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        days += 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let doe = days - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(year)-\(two(month))-\(two(day)) \(two(secondOfDay / 3600)):\(two(secondOfDay % 3600 / 60)) UTC"
    }
}
