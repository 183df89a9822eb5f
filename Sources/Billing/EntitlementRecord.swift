/// An entitlement as the entitlement table keeps it: the inputs of `active`, which depends on the clock.
public struct EntitlementRecord: Sendable, Equatable {
    public var accountID: String
    /// `p:` + product id for non-consumables, `s:` + original transaction id for subscriptions.
    public var key: String
    public var productID: String
    public var productKind: ProductKind
    public var originalTransactionID: String
    public var latestTransactionID: String
    public var purchaseTimeMs: Int64
    public var expiresTimeMs: Int64
    public var revocationTimeMs: Int64
    public var gracePeriodExpiresTimeMs: Int64
    public var autoRenew: Bool
    public var environment: StoreEnvironment
    public var orderID: String?
    /// The App Store said the subscription expired (EXPIRED, GRACE_PERIOD_EXPIRED) after its latest transaction.
    public var ended: Bool
    /// The current transaction was superseded by an upgrade: it grants no access.
    public var upgraded = false
    /// A renewal failed and the store is retrying (after the current transaction was signed).
    public var billingRetry = false
    /// Google Play: paused by the user: PAUSED, no access until it resumes.
    public var paused = false
    public var ownership: Ownership = .purchased
    public var store: Store = .appStore
    public var subscriptionGroupID = ""
    public var pendingProductID = ""

    public init(
        accountID: String, key: String, productID: String, productKind: ProductKind, originalTransactionID: String,
        latestTransactionID: String, purchaseTimeMs: Int64, expiresTimeMs: Int64, revocationTimeMs: Int64,
        gracePeriodExpiresTimeMs: Int64, autoRenew: Bool, environment: StoreEnvironment, orderID: String?, ended: Bool,
        upgraded: Bool = false, billingRetry: Bool = false, ownership: Ownership = .purchased, store: Store = .appStore,
        subscriptionGroupID: String = "", pendingProductID: String = ""
    ) {
        self.upgraded = upgraded
        self.billingRetry = billingRetry
        self.ownership = ownership
        self.store = store
        self.subscriptionGroupID = subscriptionGroupID
        self.pendingProductID = pendingProductID
        self.accountID = accountID
        self.key = key
        self.productID = productID
        self.productKind = productKind
        self.originalTransactionID = originalTransactionID
        self.latestTransactionID = latestTransactionID
        self.purchaseTimeMs = purchaseTimeMs
        self.expiresTimeMs = expiresTimeMs
        self.revocationTimeMs = revocationTimeMs
        self.gracePeriodExpiresTimeMs = gracePeriodExpiresTimeMs
        self.autoRenew = autoRenew
        self.environment = environment
        self.orderID = orderID
        self.ended = ended
    }

    public static func key(kind: ProductKind, productID: String, originalTransactionID: String) -> String {
        kind == .nonConsumable ? "p:" + productID : "s:" + originalTransactionID
    }

    /// Where it stands at `nowMs` (the state of `access(nowMs:)`).
    public func state(nowMs: Int64) -> EntitlementState { access(nowMs: nowMs).state }

    /// The entitlement rule, once: where it stands at `nowMs`, the reason that decides it, and until when it gives
    /// access. REVOKED when its current transaction (or grant) is revoked; a grant is ACTIVE until its expiry (none:
    /// for good); a non-consumable is ACTIVE otherwise; a subscription whose transaction an upgrade superseded is
    /// EXPIRED; else ACTIVE until its expiry, then GRACE_PERIOD until the grace period ends, then BILLING_RETRY
    /// while the store retries, else EXPIRED. When the store said it ended (EXPIRED, GRACE_PERIOD_EXPIRED), only
    /// the last two remain. ExplainAccess answers from this, never from a copy of it.
    public func access(nowMs: Int64) -> AccessDecision {
        let shared = ownership == .familyShared
        if revocationTimeMs > 0 {
            return AccessDecision(.revoked, store == .grant ? .grantRevoked : shared ? .familyRevoked : .refunded)
        }
        if store == .grant {
            if expiresTimeMs == 0 || expiresTimeMs > nowMs { return AccessDecision(.active, .granted, until: expiresTimeMs) }
            return AccessDecision(.expired, .grantExpired)
        }
        let renewing = productKind == .autoRenewableSubscription
        guard renewing || productKind == .nonRenewingSubscription else {
            return AccessDecision(.active, shared ? .familyShared : .purchased)
        }
        if upgraded { return AccessDecision(.expired, .upgraded) }
        if paused && renewing { return AccessDecision(.paused, .paused) }
        if !ended {
            if expiresTimeMs == 0 || expiresTimeMs > nowMs {
                return AccessDecision(.active, shared ? .familyShared : renewing ? .subscriptionActive : .purchased, until: expiresTimeMs)
            }
            if gracePeriodExpiresTimeMs > nowMs { return AccessDecision(.gracePeriod, .gracePeriod, until: gracePeriodExpiresTimeMs) }
        }
        if billingRetry && renewing { return AccessDecision(.billingRetry, .billingRetry) }
        return AccessDecision(.expired, .expired)
    }

    /// ACTIVE or GRACE_PERIOD at `nowMs`.
    public func isActive(nowMs: Int64) -> Bool { state(nowMs: nowMs).grantsAccess }

    /// The entitlement as callers see it at `nowMs`.
    public func entitlement(nowMs: Int64) -> Entitlement {
        Entitlement(
            productID: productID, productKind: productKind, originalTransactionID: originalTransactionID,
            latestTransactionID: latestTransactionID, purchaseTimeMs: purchaseTimeMs, expiresTimeMs: expiresTimeMs,
            active: isActive(nowMs: nowMs), orderID: orderID, revocationTimeMs: revocationTimeMs,
            gracePeriodExpiresTimeMs: gracePeriodExpiresTimeMs,
            autoRenew: productKind == .autoRenewableSubscription && autoRenew, environment: environment,
            state: state(nowMs: nowMs), ownership: ownership, store: store, subscriptionGroupID: subscriptionGroupID,
            pendingProductID: pendingProductID)
    }
}

/// Why an entitlement stands where it does (billing.v1.AccessReason).
public enum AccessReason: Int, Sendable, Equatable, CaseIterable {
    case purchased = 1
    case subscriptionActive = 2
    case gracePeriod = 3
    case billingRetry = 4
    case expired = 5
    case refunded = 6
    case familyShared = 7
    case familyRevoked = 8
    case upgraded = 9
    case granted = 10
    case grantRevoked = 11
    case grantExpired = 12
    case paused = 13
}

/// What the entitlement rule decided at one instant: the state, its reason, and until when access lasts (0 when
/// it has no end or gives no access).
public struct AccessDecision: Sendable, Equatable {
    public var state: EntitlementState
    public var reason: AccessReason
    public var untilMs: Int64

    public init(_ state: EntitlementState, _ reason: AccessReason, until untilMs: Int64 = 0) {
        self.state = state
        self.reason = reason
        self.untilMs = state.grantsAccess ? untilMs : 0
    }
}
