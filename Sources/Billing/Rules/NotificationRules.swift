/// How App Store Server Notifications change orders and entitlements (DESIGN "After the sale"), over a ledger,
/// in the one database transaction that also records the notification's UUID.
public enum NotificationRules {
    /// Whether a notification reports a purchase: with an appAccountToken naming a PENDING order of its product,
    /// it completes that order. ONE_TIME_CHARGE, SUBSCRIBED (INITIAL_BUY or RESUBSCRIBE), and OFFER_REDEEMED
    /// when the offer was redeemed to buy (INITIAL_BUY, RESUBSCRIBE), not to change a running subscription.
    static func isPurchase(_ type: String, _ subtype: String?) -> Bool {
        switch type {
        case "ONE_TIME_CHARGE", "SUBSCRIBED", "ONE_TIME_PRODUCT_PURCHASED", "SUBSCRIPTION_PURCHASED": true
        case "OFFER_REDEEMED": subtype == "INITIAL_BUY" || subtype == "RESUBSCRIBE"
        default: false
        }
    }

    /// Applies one verified notification exactly once (by UUID) and records it.
    public static func apply(
        _ ledger: some PurchaseLedger, _ n: VerifiedNotification, nowMs: Int64,
        catalog: Catalog?, policy: PurchaseEngine.Policy = PurchaseEngine.Policy()
    ) throws(BillingError) -> NotificationResult {
        // Notifications of one subscription, through any replica, apply one after the other: without this,
        // two of them read the renewal state or entitlement before either committed, and the later commit
        // overwrote the other's change (auto-renew or an expiry lost under a storm on PostgreSQL).
        if let original = n.transaction?.originalTransactionID ?? n.renewal?.originalTransactionID {
            try ledger.lockSubscription(originalTransactionID: original)
        }
        if try ledger.notification(uuid: n.uuid) != nil { return .duplicate }
        let result: NotificationResult = n.accepted ? .applied : .ignored
        try ledger.record(
            NotificationRecord(
                uuid: n.uuid, type: n.type, subtype: n.subtype, signedTimeMs: n.signedTimeMs,
                result: result, appliedTimeMs: nowMs, transactionID: n.transaction?.transactionID,
                signedPayload: n.signedPayload))
        // Every type is recorded; what it changes follows from the signed data it carries (a transaction, renewal
        // info), merged newest-first, and the events from what changed. TEST, summaries, RESCIND_CONSENT and
        // external purchase tokens carry neither: recorded, no effect.
        guard n.accepted else { return result }
        let cause: EventCause = n.source == .googlePlay ? EventCause("rtdn:" + n.type, notificationUUID: n.uuid) : .notification(n.type, uuid: n.uuid)
        let context = RuleContext(nowMs: nowMs, cause: cause, catalog: catalog)
        let original = n.transaction?.originalTransactionID ?? n.renewal?.originalTransactionID
        guard let original else { return result }

        var renewal = n.renewal
        if n.type == "DID_FAIL_TO_RENEW" {
            // A failed renewal starts billing retry, whatever renewal info came with it (or none).
            var r = renewal ?? RenewalFact(originalTransactionID: original, autoRenew: nil, gracePeriodExpiresTimeMs: nil, signedTimeMs: n.signedTimeMs)
            if r.billingRetry == nil { r.billingRetry = true }
            renewal = r
        }
        if let r = renewal { try mergeRenewal(ledger, r, original: original) }
        if n.type == "EXPIRED" || n.type == "GRACE_PERIOD_EXPIRED" || n.type == "SUBSCRIPTION_EXPIRED" {
            var state = try ledger.renewal(originalTransactionID: original) ?? RenewalState(originalTransactionID: original)
            if n.signedTimeMs > state.endedSignedTimeMs {
                state.endedSignedTimeMs = n.signedTimeMs
                try ledger.put(state)
            }
        }

        // The account: whoever owns the notified transaction itself; else whoever owns another transaction of
        // the subscription or purchase; else the order its token names.
        let family = try ledger.transactions(originalTransactionID: original)
        var account: String?
        if let t = n.transaction, let own = family.first(where: { $0.transaction.transactionID == t.transactionID }), !own.accountID.isEmpty {
            account = own.accountID
        }
        if account == nil { account = family.first { !$0.accountID.isEmpty }?.accountID }
        var tokenOrder: Order?
        if let token = n.transaction?.appAccountToken, let id = OrderID.canonical(token) {
            tokenOrder = try ledger.order(id: id)
        }
        if account == nil { account = tokenOrder?.accountID }
        var owner = account ?? ""

        var subject = n.transaction
        if let t = n.transaction {
            var completed = false
            if isPurchase(n.type, n.subtype), let order = tokenOrder, order.accountID == owner, order.state == .pending,
                order.productID == t.productID
            {
                // Paid even if the app never reported it, under SubmitReceipt's rules and unique key; a refund
                // already known for it then settles the order at once.
                let check: (Order, StoreTransaction) -> BillingError? = { order, t in payable(order, t, policy) }
                let outcome = try PurchaseRules.complete(
                    ledger, orderID: order.id, candidates: [t], check: check,
                    context: context, refreshEntitlement: false)
                if case .success(let done) = outcome {
                    completed = true
                    subject = done.transaction
                    if done.transaction.isRevoked {
                        try PurchaseRules.settle(ledger, orderID: order.id, transaction: done.transaction, previous: nil, context: context)
                    }
                }
            }
            if !completed {
                let (stored, _) = try PurchaseRules.record(ledger, t, owner: owner, transfer: false, context: context)
                subject = stored.transaction
                // The entitlement to update is the one of the account the transaction belongs to.
                if !stored.accountID.isEmpty { owner = stored.accountID }
            }
        } else if let any = family.first(where: { $0.accountID == owner }) {
            subject = any.transaction
        }
        if let subject, !owner.isEmpty {
            try PurchaseRules.refresh(ledger, accountID: owner, for: subject, context: context)
        }
        return result
    }

    /// A notification pays an order under SubmitReceipt's rules (product, quantity and, with
    /// `--reject-stale-purchases`, the purchase date); a revocation is settled afterwards instead of refusing.
    static func payable(_ order: Order, _ t: StoreTransaction, _ policy: PurchaseEngine.Policy) -> BillingError? {
        var unrevoked = t
        unrevoked.revocationTimeMs = 0
        return PurchaseEngine.check(order, unrevoked, policy: policy, signed: false)
    }

    /// Renewal info: the newest signedDate wins for auto-renew and the grace period.
    static func mergeRenewal(_ ledger: some PurchaseLedger, _ r: RenewalFact, original: String) throws(BillingError) {
        var state = try ledger.renewal(originalTransactionID: original) ?? RenewalState(originalTransactionID: original)
        guard r.signedTimeMs > state.signedTimeMs else { return }
        if let auto = r.autoRenew { state.autoRenew = auto }
        state.gracePeriodExpiresTimeMs = r.gracePeriodExpiresTimeMs ?? 0
        state.billingRetry = r.billingRetry ?? false
        if let next = r.autoRenewProductID { state.autoRenewProductID = next }
        state.paused = r.paused ?? false
        if r.ended && r.signedTimeMs > state.endedSignedTimeMs { state.endedSignedTimeMs = r.signedTimeMs }
        state.signedTimeMs = r.signedTimeMs
        try ledger.put(state)
    }
}
