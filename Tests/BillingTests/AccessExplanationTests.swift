import Billing
import Testing

/// ExplainAccess's words for each AccessReason: the decision is `EntitlementRecord.access`, the rule the entitlement
/// state comes from; each sentence names the deciding transaction (or grant) and its date.
@Suite("ExplainAccess: one reason per case of the entitlement rule")
struct AccessExplanationTests {
    static let now: Int64 = 1_796_040_000_000  // 2026-11-30 12:00 UTC
    static let day: Int64 = 86_400_000

    static func record(
        _ kind: ProductKind, store: Store = .appStore, expires: Int64 = 0, revoked: Int64 = 0, grace: Int64 = 0, ended: Bool = false,
        upgraded: Bool = false, retry: Bool = false, paused: Bool = false, shared: Bool = false, autoRenew: Bool = true
    ) -> EntitlementRecord {
        var e = EntitlementRecord(
            accountID: "ann", key: "k", productID: "p", productKind: kind, originalTransactionID: "2000000000000040",
            latestTransactionID: "2000000000000042", purchaseTimeMs: now - 31 * day, expiresTimeMs: expires, revocationTimeMs: revoked,
            gracePeriodExpiresTimeMs: grace, autoRenew: autoRenew, environment: .production, orderID: nil, ended: ended, upgraded: upgraded,
            billingRetry: retry, ownership: shared ? .familyShared : .purchased, store: store)
        e.paused = paused
        return e
    }

    static let sub = ProductKind.autoRenewableSubscription
    static let cases: [(EntitlementRecord, AccessReason, EntitlementState, until: Int64, mentions: String)] = [
        (record(.nonConsumable), .purchased, .active, 0, "purchased 2026-10-30 12:00 UTC in transaction 2000000000000042"),
        (record(.nonRenewingSubscription, expires: now + day), .purchased, .active, now + day, "runs until 2026-12-01 12:00 UTC"),
        (record(sub, expires: now + day), .subscriptionActive, .active, now + day, "active until 2026-12-01 12:00 UTC"),
        (record(sub, expires: now - day, grace: now + day), .gracePeriod, .gracePeriod, now + day, "grace period until 2026-12-01 12:00 UTC"),
        (record(sub, expires: now - day, retry: true), .billingRetry, .billingRetry, 0, "no access since 2026-11-29 12:00 UTC"),
        (
            record(sub, expires: now - day, autoRenew: false), .expired, .expired, 0,
            "expired 2026-11-29 12:00 UTC: the period of transaction 2000000000000042 ended, auto-renew was off"
        ),
        (record(sub, expires: now + day, ended: true), .expired, .expired, 0, "the store ended the subscription"),
        (record(sub, expires: now + day, revoked: now - day), .refunded, .revoked, 0, "refunded or charged back on 2026-11-29 12:00 UTC"),
        (record(sub, expires: now + day, shared: true), .familyShared, .active, now + day, "Family Sharing until 2026-12-01 12:00 UTC"),
        (record(.nonConsumable, revoked: now - day, shared: true), .familyRevoked, .revoked, 0, "revoked 2026-11-29 12:00 UTC"),
        (record(sub, expires: now + day, upgraded: true), .upgraded, .expired, 0, "superseded by an upgrade"),
        (record(sub, expires: now + day, paused: true), .paused, .paused, 0, "paused by the customer"),
        (record(.nonConsumable, store: .grant, expires: now + day), .granted, .active, now + day, "granted by support-alice until 2026-12-01 12:00 UTC"),
        (record(.nonConsumable, store: .grant), .granted, .active, 0, "granted by support-alice with no end"),
        (
            record(.nonConsumable, store: .grant, expires: now + day, revoked: now - day), .grantRevoked, .revoked, 0,
            "revoked 2026-11-29 12:00 UTC: grant 2000000000000040 by support-alice"
        ),
        (record(.nonConsumable, store: .grant, expires: now - day), .grantExpired, .expired, 0, "expired 2026-11-29 12:00 UTC: grant 2000000000000040"),
    ]

    @Test("each reason: the state the entitlement shows, until when, and a sentence with the deciding id and date")
    func everyReason() {
        let grant = GrantRecord(
            grantID: "2000000000000040", accountID: "ann", productID: "p", startTimeMs: Self.now - Self.day, expiresTimeMs: 0,
            reason: "a week while the refund is sorted out", operatorName: "support-alice", idempotencyKey: nil)
        for (record, reason, state, until, mentions) in Self.cases {
            let d = record.access(nowMs: Self.now)
            #expect(d.reason == reason && d.state == state && d.untilMs == until, "\(reason)")
            #expect(record.state(nowMs: Self.now) == d.state && record.entitlement(nowMs: Self.now).active == state.grantsAccess)
            let why = AccessExplanation.why(record, d, transaction: nil, grant: record.store == .grant ? grant : nil)
            #expect(why.contains(mentions), "\(reason): \(why)")
            #expect(why.contains(record.store == .grant ? record.originalTransactionID : record.latestTransactionID), "\(reason): \(why)")
        }
        #expect(Set(Self.cases.map(\.1)) == Set(AccessReason.allCases))
    }

    @Test("a refund's sentence says how much: in full, or the prorated share")
    func refunds() {
        let e = Self.record(Self.sub, expires: Self.now + Self.day, revoked: Self.now - Self.day)
        var t = StoreTransaction(
            transactionID: "2000000000000042", originalTransactionID: "2000000000000040", productID: "p", productKind: Self.sub,
            purchaseTimeMs: Self.now - Self.day, environment: .production, bundleID: "b")
        t.revocationTimeMs = Self.now - Self.day
        t.revocationType = .refundFull
        #expect(
            AccessExplanation.why(e, e.access(nowMs: Self.now), transaction: t, grant: nil)
                == "revoked: refunded in full on 2026-11-29 12:00 UTC (transaction 2000000000000042)")
        t.revocationType = .refundProrated
        t.revocationPercentage = 33_333
        #expect(AccessExplanation.why(e, e.access(nowMs: Self.now), transaction: t, grant: nil).hasPrefix("revoked: 33.333% refunded on"))
    }

    @Test("UTC times: days, leap years, before 1970")
    func times() {
        #expect(UTCTime.text(0) == "1970-01-01 00:00 UTC")
        #expect(UTCTime.text(951_782_400_000) == "2000-02-29 00:00 UTC")
        #expect(UTCTime.text(Self.now) == "2026-11-30 12:00 UTC")
        #expect(UTCTime.text(-60_000) == "1969-12-31 23:59 UTC")
    }
}
