public import Billing
import Foundation
import GooglePlayAPI
import Lifecycle

/// Google Play Real-time developer notifications (`POST /googleplay/rtdn`, after the push token verified): the
/// Pub/Sub push body decoded, the purchase it names read from the Play Developer API (a notification only says
/// which purchase changed) and applied through the same rules, store and events as App Store notifications, once
/// per `messageId` (recorded as notification `rtdn:<messageId>`).
///
/// Blocks: run on a worker queue.
public final class PlayNotificationProcessor: Sendable {
    let link: GooglePlayLink
    let store: any OrderStore
    let policy: PurchaseEngine.Policy
    let now: @Sendable () -> Int64
    /// After a notification was applied: the acknowledger may have work.
    let onApplied: @Sendable () -> Void

    public init(
        link: GooglePlayLink, store: any OrderStore, policy: PurchaseEngine.Policy, now: @escaping @Sendable () -> Int64,
        onApplied: @escaping @Sendable () -> Void = {}
    ) {
        self.link = link
        self.store = store
        self.policy = policy
        self.now = now
        self.onApplied = onApplied
    }

    public struct Summary: Sendable {
        public var messageID = ""
        public var type = ""
        public var packageName = ""
        public var transactionID = ""
    }

    public enum Outcome: Sendable {
        case done(NotificationResult)
        /// Not a push message (400): `reason` for the answer, `detail` for the log.
        case rejected(reason: String, detail: String)
        /// The database or the Play Developer API is unavailable (503: Pub/Sub retries).
        case unavailable(String)
    }

    /// The subscription notification types (DeveloperNotification.subscriptionNotification.notificationType).
    static let subscriptionTypes: [Int: String] = [
        1: "SUBSCRIPTION_RECOVERED", 2: "SUBSCRIPTION_RENEWED", 3: "SUBSCRIPTION_CANCELED", 4: "SUBSCRIPTION_PURCHASED",
        5: "SUBSCRIPTION_ON_HOLD", 6: "SUBSCRIPTION_IN_GRACE_PERIOD", 7: "SUBSCRIPTION_RESTARTED", 8: "SUBSCRIPTION_PRICE_CHANGE_CONFIRMED",
        9: "SUBSCRIPTION_DEFERRED", 10: "SUBSCRIPTION_PAUSED", 11: "SUBSCRIPTION_PAUSE_SCHEDULE_CHANGED", 12: "SUBSCRIPTION_REVOKED",
        13: "SUBSCRIPTION_EXPIRED", 17: "SUBSCRIPTION_ITEMS_CHANGED", 18: "SUBSCRIPTION_CANCELLATION_SCHEDULED",
        19: "SUBSCRIPTION_PRICE_CHANGE_UPDATED", 20: "SUBSCRIPTION_PENDING_PURCHASE_CANCELED", 22: "SUBSCRIPTION_PRICE_STEP_UP_CONSENT_UPDATED",
    ]
    static let productTypes: [Int: String] = [1: "ONE_TIME_PRODUCT_PURCHASED", 2: "ONE_TIME_PRODUCT_CANCELED"]
    /// Every type name above, and the others billingd records (for bounded metric labels).
    public static let knownTypes: Set<String> = Set(subscriptionTypes.values).union(productTypes.values).union(["TEST", "VOIDED_PURCHASE"])

    public func process(body: [UInt8]) -> (Outcome, Summary) {
        var summary = Summary()
        guard let push = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any],
            let message = push["message"] as? [String: Any],
            let messageID = message["messageId"] as? String ?? message["message_id"] as? String, !messageID.isEmpty, messageID.utf8.count <= 128,
            let data = message["data"] as? String, let decoded = Data(base64Encoded: data),
            let notification = (try? JSONSerialization.jsonObject(with: decoded)) as? [String: Any]
        else {
            return (.rejected(reason: "MALFORMED_PUSH", detail: "not a Pub/Sub push message carrying a DeveloperNotification"), summary)
        }
        summary.messageID = messageID
        let packageName = notification["packageName"] as? String ?? ""
        summary.packageName = String(packageName.prefix(256))
        let eventMs = Self.int64(notification["eventTimeMillis"]) ?? now()
        let uuid = "rtdn:" + messageID

        // What changed, read from Google now.
        var type = "UNKNOWN"
        var transaction: StoreTransaction?
        var renewal: RenewalFact?
        var accepted = link.packages.contains(packageName)
        if notification["testNotification"] != nil {
            type = "TEST"
        } else if let n = notification["oneTimeProductNotification"] as? [String: Any] {
            let code = Self.int64(n["notificationType"]).map(Int.init) ?? 0
            type = Self.productTypes[code] ?? "ONE_TIME_PRODUCT_\(code)"
            if accepted, let token = n["purchaseToken"] as? String, let sku = n["sku"] as? String {
                switch link.product(packageName: packageName, productID: sku, token: token, kind: link.catalog?.product(sku)?.kind) {
                case .success(let t): transaction = t
                case .failure(.purchasePending), .failure(.purchaseCanceled), .failure(.purchaseNotFound): break
                case .failure(let e): return (.unavailable(e.description), summary)
                }
            }
        } else if let n = notification["subscriptionNotification"] as? [String: Any] {
            let code = Self.int64(n["notificationType"]).map(Int.init) ?? 0
            type = Self.subscriptionTypes[code] ?? "SUBSCRIPTION_\(code)"
            if accepted, let token = n["purchaseToken"] as? String {
                switch link.subscriptionView(packageName: packageName, productID: nil, token: token) {
                case .success(let (t, s)):
                    var t = t
                    if type == "SUBSCRIPTION_REVOKED" {
                        // The API shows a revoked subscription as expired: the notification says it was revoked.
                        t.revocationTimeMs = eventMs
                        t.revocationType = .refundFull
                    }
                    transaction = t
                    // One answer of the API: the renewal facts are as current as the transaction read with them.
                    renewal = Self.renewal(t, s, signedMs: t.signedTimeMs)
                case .failure(.purchasePending), .failure(.purchaseCanceled), .failure(.purchaseNotFound): break
                case .failure(let e): return (.unavailable(e.description), summary)
                }
            }
        } else if let n = notification["voidedPurchaseNotification"] as? [String: Any] {
            type = "VOIDED_PURCHASE"
            if accepted, let orderID = n["orderId"] as? String {
                switch voided(orderID: orderID, atMs: eventMs) {
                case .success(let t): transaction = t
                case .failure(let e): return (.unavailable(e.description), summary)
                }
            }
        } else {
            accepted = false
        }
        summary.type = type
        summary.transactionID = transaction?.transactionID ?? ""
        if transaction?.environment == .sandbox && !link.environments.contains(.sandbox) { accepted = false }
        if transaction?.environment == .production && !link.environments.contains(.production) { accepted = false }

        let n = VerifiedNotification(
            uuid: uuid, type: type, subtype: nil, signedTimeMs: eventMs, environment: transaction?.environment, accepted: accepted,
            transaction: transaction, renewal: renewal, signedPayload: String(decoding: body.prefix(64 << 10), as: UTF8.self))
        switch apply(n) {
        case .success(let r):
            if r == .applied { onApplied() }
            return (.done(r), summary)
        case .failure(let e):
            return (.unavailable(e.description), summary)
        }
    }

    /// What a voided-purchases reconciliation did.
    public struct VoidedReport: Sendable {
        public var read = 0
        public var applied = 0
        public var duplicate = 0
        /// Voided purchases billingd never recorded (nothing to change).
        public var unknown = 0
        public var error: String?
    }

    /// Reads `purchases.voidedpurchases.list` (one-time products and subscriptions) of every package served for the
    /// last 30 days (Google keeps no more) and revokes what billingd recorded and RTDN did not: refunds and
    /// chargebacks whose notification was lost. Each voided purchase applies once (recorded as `voided:<orderId>`).
    public func reconcileVoided() -> VoidedReport {
        var report = VoidedReport()
        let since = now() - 30 * 86_400_000 + 60_000
        for package in link.packages.sorted() {
            let list: [GooglePlay.VoidedPurchase]
            do {
                list = try link.api.allVoidedPurchases(packageName: package, GooglePlay.VoidedPurchasesQuery(startTimeMillis: since, type: 1))
            } catch {
                report.error = error.description
                return report
            }
            report.read += list.count
            for v in list {
                guard let orderID = v.orderID, !orderID.isEmpty else { continue }
                let t: StoreTransaction?
                switch voided(orderID: orderID, atMs: v.voidedTimeMillis) {
                case .success(let found): t = found
                case .failure(let e):
                    report.error = e.description
                    return report
                }
                guard let t else {
                    report.unknown += 1
                    continue
                }
                let n = VerifiedNotification(
                    uuid: "voided:\(orderID)", type: "VOIDED_PURCHASE", subtype: nil, signedTimeMs: v.voidedTimeMillis, environment: t.environment,
                    accepted: true, transaction: t, renewal: nil, signedPayload: "")
                switch apply(n) {
                case .success(.duplicate): report.duplicate += 1
                case .success: report.applied += 1
                case .failure(let e):
                    report.error = e.description
                    return report
                }
            }
        }
        return report
    }

    /// Applies a Google notification (or a voided purchase) once, in one write, through the notification rules.
    private func apply(_ notification: VerifiedNotification) -> Result<NotificationResult, BillingError> {
        var n = notification
        n.source = .googlePlay
        let nowMs = now()
        let catalog = link.catalog
        let policy = self.policy
        return Blocking.wait { done in store.apply(n, nowMs: nowMs, catalog: catalog, policy: policy, completion: done) }
    }

    /// A voided purchase (refund, chargeback): billingd's transaction of that order id, revoked at `atMs`; nil when
    /// billingd never recorded it.
    func voided(orderID: String, atMs: Int64) -> Result<StoreTransaction?, BillingError> {
        let found: Result<OwnedTransaction?, BillingError> = Blocking.wait { done in
            store.read({ ledger throws(BillingError) in try ledger.owned(transactionID: orderID) }, completion: done)
        }
        return found.map { owned in
            guard var t = owned?.transaction, t.store == .googlePlay else { return nil }
            if !t.isRevoked {
                t.revocationTimeMs = atMs
                t.revocationType = .refundFull
            }
            t.signedTimeMs = max(t.signedTimeMs + 1, now())
            return t
        }
    }

    /// The subscription's renewal facts from Google's answer: auto-renewal, account hold (billing retry), the grace
    /// period, and the product of the next renewal.
    static func renewal(_ t: StoreTransaction, _ s: GooglePlay.SubscriptionPurchaseV2, signedMs: Int64) -> RenewalFact {
        let item = s.lineItems.first { $0.productID == t.productID } ?? s.lineItems.first
        var fact = RenewalFact(
            originalTransactionID: t.originalTransactionID, autoRenew: item?.autoRenewEnabled ?? false,
            gracePeriodExpiresTimeMs: s.subscriptionState == .inGracePeriod ? (item?.expiryTimeMillis ?? t.expiresTimeMs) : nil, signedTimeMs: signedMs,
            billingRetry: s.subscriptionState == .onHold, autoRenewProductID: item?.deferredReplacementProductID ?? item?.productID)
        fact.paused = s.subscriptionState == .paused
        // Google's word that it ended (SUBSCRIPTION_EXPIRED, or any later read): as of this read, like the transaction.
        fact.ended = s.subscriptionState == .expired
        return fact
    }

    static func int64(_ v: Any?) -> Int64? {
        if let s = v as? String { return Int64(s) }
        if let n = v as? NSNumber { return n.int64Value }
        return nil
    }
}
