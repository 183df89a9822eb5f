/// The kinds of change the event feed reports (billing.v1.EventType).
public enum EventKind: Int, Sendable, Equatable, CaseIterable {
    case orderCreated = 1
    case orderCompleted = 2
    case orderRefunded = 3
    case orderExpired = 4
    case entitlementGranted = 5
    case entitlementRenewed = 6
    case entitlementRevoked = 7
    case entitlementReinstated = 8
    case entitlementExpired = 9
    case entitlementTransferred = 10
    case renewalStatusChanged = 11
    case billingIssue = 12
    /// Part of an order refunded (the order's refunded quantity, the transaction's revocation percentage).
    case orderPartiallyRefunded = 13
    /// An upgrade or crossgrade took effect, or a scheduled downgrade renewed: the entitlement's product is new.
    case entitlementProductChanged = 14
    /// The product of the next renewal changed (the entitlement's pending product).
    case renewalProductChanged = 15
}

/// What caused a change: the cause string of billing.proto and, for notifications, their UUID.
public struct EventCause: Sendable, Equatable {
    public var text: String
    public var notificationUUID: String?

    public init(_ text: String, notificationUUID: String? = nil) {
        self.text = text
        self.notificationUUID = notificationUUID
    }

    public static let createOrder = EventCause("create_order")
    public static let submitReceipt = EventCause("submit_receipt")
    public static let restorePurchases = EventCause("restore_purchases")
    public static let orderExpiry = EventCause("order_expiry")
    public static func notification(_ type: String, uuid: String) -> EventCause { EventCause("notification:" + type, notificationUUID: uuid) }
}

/// One committed change, as the feed keeps it. `cursor` is assigned by the store at commit.
public struct EventRecord: Sendable, Equatable {
    public var cursor: UInt64
    public var kind: EventKind
    public var timeMs: Int64
    public var accountID: String
    public var order: Order?
    public var entitlement: Entitlement?
    public var cause: String
    public var notificationUUID: String?
    public var transactionID: String?

    public init(
        cursor: UInt64 = 0, kind: EventKind, timeMs: Int64, accountID: String, order: Order? = nil,
        entitlement: Entitlement? = nil, cause: EventCause, transactionID: String? = nil
    ) {
        self.cursor = cursor
        self.kind = kind
        self.timeMs = timeMs
        self.accountID = accountID
        self.order = order
        self.entitlement = entitlement
        self.cause = cause.text
        self.notificationUUID = cause.notificationUUID
        self.transactionID = transactionID
    }
}

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

    /// Where it stands at `nowMs`: REVOKED when its current transaction is revoked; a non-consumable is ACTIVE
    /// otherwise; a subscription whose transaction an upgrade superseded is EXPIRED; else ACTIVE until its
    /// expiry, then GRACE_PERIOD until the grace period ends, then BILLING_RETRY while the store retries, else
    /// EXPIRED. When the store said it ended (EXPIRED, GRACE_PERIOD_EXPIRED), only the last two remain.
    public func state(nowMs: Int64) -> EntitlementState {
        if revocationTimeMs > 0 { return .revoked }
        guard productKind == .autoRenewableSubscription || productKind == .nonRenewingSubscription else { return .active }
        if upgraded { return .expired }
        if !ended {
            if expiresTimeMs == 0 || expiresTimeMs > nowMs { return .active }
            if gracePeriodExpiresTimeMs > nowMs { return .gracePeriod }
        }
        if billingRetry && productKind == .autoRenewableSubscription { return .billingRetry }
        return .expired
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

/// What the App Store last said about a subscription's renewal, per original transaction.
public struct RenewalState: Sendable, Equatable {
    public var originalTransactionID: String
    public var autoRenew: Bool
    public var gracePeriodExpiresTimeMs: Int64
    /// The renewal info's own signedDate: the newest wins for auto-renew and grace period.
    public var signedTimeMs: Int64
    /// The newest signedDate of an EXPIRED / GRACE_PERIOD_EXPIRED notification; 0 if none.
    public var endedSignedTimeMs: Int64
    /// The renewal info's isInBillingRetryPeriod.
    public var billingRetry = false
    /// The renewal info's autoRenewProductId: the product of the next renewal; empty when unknown.
    public var autoRenewProductID = ""

    public init(
        originalTransactionID: String, autoRenew: Bool = true, gracePeriodExpiresTimeMs: Int64 = 0,
        signedTimeMs: Int64 = 0, endedSignedTimeMs: Int64 = 0, billingRetry: Bool = false, autoRenewProductID: String = ""
    ) {
        self.billingRetry = billingRetry
        self.autoRenewProductID = autoRenewProductID
        self.originalTransactionID = originalTransactionID
        self.autoRenew = autoRenew
        self.gracePeriodExpiresTimeMs = gracePeriodExpiresTimeMs
        self.signedTimeMs = signedTimeMs
        self.endedSignedTimeMs = endedSignedTimeMs
    }
}

/// Verified signed renewal info (`signedRenewalInfo`).
public struct RenewalFact: Sendable, Equatable {
    public var originalTransactionID: String
    public var autoRenew: Bool?
    public var gracePeriodExpiresTimeMs: Int64?
    public var signedTimeMs: Int64
    /// isInBillingRetryPeriod, when the renewal info says.
    public var billingRetry: Bool?
    /// autoRenewProductId, when the renewal info says.
    public var autoRenewProductID: String?

    public init(
        originalTransactionID: String, autoRenew: Bool?, gracePeriodExpiresTimeMs: Int64?, signedTimeMs: Int64,
        billingRetry: Bool? = nil, autoRenewProductID: String? = nil
    ) {
        self.billingRetry = billingRetry
        self.autoRenewProductID = autoRenewProductID
        self.originalTransactionID = originalTransactionID
        self.autoRenew = autoRenew
        self.gracePeriodExpiresTimeMs = gracePeriodExpiresTimeMs
        self.signedTimeMs = signedTimeMs
    }
}

/// An App Store Server Notification whose outer and nested signatures verified.
public struct VerifiedNotification: Sendable, Equatable {
    public var uuid: String
    public var type: String
    public var subtype: String?
    public var signedTimeMs: Int64
    public var environment: StoreEnvironment?
    /// False when the environment is not one this service accepts: recorded as ignored, no effect.
    public var accepted: Bool
    public var transaction: StoreTransaction?
    public var renewal: RenewalFact?
    /// The whole signed payload, kept for audit.
    public var signedPayload: String

    public init(
        uuid: String, type: String, subtype: String?, signedTimeMs: Int64, environment: StoreEnvironment?, accepted: Bool,
        transaction: StoreTransaction?, renewal: RenewalFact?, signedPayload: String
    ) {
        self.uuid = uuid
        self.type = type
        self.subtype = subtype
        self.signedTimeMs = signedTimeMs
        self.environment = environment
        self.accepted = accepted
        self.transaction = transaction
        self.renewal = renewal
        self.signedPayload = signedPayload
    }
}

/// What became of a notification (the `result` label of billingd_notifications_total).
public enum NotificationResult: String, Sendable, Equatable, CaseIterable {
    /// Its effects (possibly none, for types without effect) are committed.
    case applied
    /// Its notificationUUID was seen before: nothing changed.
    case duplicate
    /// Recorded without effect: an environment this service does not accept.
    case ignored
}

/// The record of one notification, by notificationUUID.
public struct NotificationRecord: Sendable, Equatable {
    public var uuid: String
    public var type: String
    public var subtype: String?
    public var signedTimeMs: Int64
    public var result: NotificationResult
    public var appliedTimeMs: Int64
    public var transactionID: String?
    public var signedPayload: String
}

/// The answer to a notification: its result and the events it wrote.
public struct NotificationOutcome: Sendable, Equatable {
    public var result: NotificationResult
    public var events: Int
    public init(result: NotificationResult, events: Int) {
        self.result = result
        self.events = events
    }
}

/// The text form of the order and entitlement snapshots an event keeps: length-prefixed fields, so
/// no value (product ids come from signed data) can break the framing.
public enum EventSnapshot {
    /// Each field as its UTF-8 length in decimal, a colon, and its bytes; built as bytes (string
    /// concatenation cost about 1,500 instructions a field, and this runs for every event written).
    static func join(_ fields: [String]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(fields.reduce(0) { $0 + $1.utf8.count + 4 })
        for var f in fields {
            f.withUTF8 { bytes in
                appendDecimal(bytes.count, to: &out)
                out.append(UInt8(ascii: ":"))
                out.append(contentsOf: bytes)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `n` (not negative) in decimal.
    static func appendDecimal(_ n: Int, to out: inout [UInt8]) {
        let start = out.count
        var v = n
        repeat {
            out.append(UInt8(ascii: "0") + UInt8(v % 10))
            v /= 10
        } while v > 0
        out[start...].reverse()
    }

    static func split(_ text: String) -> [String]? {
        var fields: [String] = []
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {
            var n = 0
            while i < bytes.count, bytes[i] != UInt8(ascii: ":") {
                guard bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9"), n < 1 << 24 else { return nil }
                n = n * 10 + Int(bytes[i] - UInt8(ascii: "0"))
                i += 1
            }
            i += 1
            guard i + n <= bytes.count else { return nil }
            fields.append(String(decoding: bytes[i..<(i + n)], as: UTF8.self))
            i += n
        }
        return fields
    }

    public static func encode(_ o: Order) -> String {
        join([
            o.id, o.accountID, o.productID, String(o.quantity), String(o.state.rawValue), o.idempotencyKey ?? "",
            String(o.createTimeMs), String(o.updateTimeMs), o.transactionID ?? "", String(o.environment?.rawValue ?? 0),
            String(o.refundedQuantity), String(o.store?.rawValue ?? 0),
        ])
    }

    /// Snapshots written before schema step 7 have the first 10 fields.
    public static func decodeOrder(_ text: String) -> Order? {
        guard let f = split(text), f.count == 10 || f.count >= 12, let q = Int(f[3]),
            let s = Int(f[4]).flatMap(OrderState.init(rawValue:)), let c = Int64(f[6]), let u = Int64(f[7]), let e = Int(f[9])
        else { return nil }
        let refunded = f.count >= 12 ? Int(f[10]) ?? 0 : (s == .refunded ? q : 0)
        let store = f.count >= 12 ? Int(f[11]).flatMap(Store.init(rawValue:)) : (f[8].isEmpty ? nil : .appStore)
        return Order(
            id: f[0], accountID: f[1], productID: f[2], quantity: q, state: s, idempotencyKey: f[5].isEmpty ? nil : f[5],
            createTimeMs: c, updateTimeMs: u, transactionID: f[8].isEmpty ? nil : f[8],
            environment: StoreEnvironment(rawValue: e), refundedQuantity: refunded, store: store)
    }

    public static func encode(_ e: Entitlement) -> String {
        join([
            e.productID, e.productKind.rawValue, e.originalTransactionID, e.latestTransactionID, String(e.purchaseTimeMs),
            String(e.expiresTimeMs), e.active ? "1" : "0", e.orderID ?? "", String(e.revocationTimeMs),
            String(e.gracePeriodExpiresTimeMs), e.autoRenew ? "1" : "0", String(e.environment?.rawValue ?? 0),
            String(e.state.rawValue), String(e.ownership.rawValue), String(e.store.rawValue), e.subscriptionGroupID,
            e.pendingProductID,
        ])
    }

    /// Snapshots written before schema step 7 have the first 12 fields; their state is derived from `active`.
    public static func decodeEntitlement(_ text: String) -> Entitlement? {
        guard let f = split(text), f.count == 12 || f.count >= 17, let kind = ProductKind(rawValue: f[1]), let p = Int64(f[4]),
            let x = Int64(f[5]), let r = Int64(f[8]), let g = Int64(f[9]), let env = Int(f[11])
        else { return nil }
        var e = Entitlement(
            productID: f[0], productKind: kind, originalTransactionID: f[2], latestTransactionID: f[3],
            purchaseTimeMs: p, expiresTimeMs: x, active: f[6] == "1", orderID: f[7].isEmpty ? nil : f[7],
            revocationTimeMs: r, gracePeriodExpiresTimeMs: g, autoRenew: f[10] == "1",
            environment: StoreEnvironment(rawValue: env))
        if f.count >= 17 {
            e.state = Int(f[12]).flatMap(EntitlementState.init(rawValue:)) ?? (e.active ? .active : .expired)
            e.ownership = Int(f[13]).flatMap(Ownership.init(rawValue:)) ?? .purchased
            e.store = Int(f[14]).flatMap(Store.init(rawValue:)) ?? .appStore
            e.subscriptionGroupID = f[15]
            e.pendingProductID = f[16]
        } else {
            e.state = r > 0 ? .revoked : e.active ? .active : .expired
        }
        return e
    }
}
