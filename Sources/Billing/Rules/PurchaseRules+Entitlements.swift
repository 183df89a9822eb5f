/// The entitlement rules: one entitlement recomputed from its transactions, the events of its change.
extension PurchaseRules {
    /// Recomputes one entitlement of an account from its transactions and renewal state, stores it if it
    /// changed, and writes events: `forced` ones (a notification's own effects), else one per change seen.
    @discardableResult
    static func refresh(
        _ ledger: some PurchaseLedger, accountID: String, for t: StoreTransaction, context: RuleContext,
        transferred: Bool = false, forced: [EventKind]? = nil
    ) throws(BillingError) -> EntitlementRecord? {
        guard !accountID.isEmpty else { return nil }
        let kind = kind(of: t, catalog: context.catalog)
        guard kind != .consumable else { return nil }
        // Writers of one subscription (a restore, a proof, a notification, through any replica) compute its
        // entitlement one after the other, each from what the one before committed.
        try ledger.lockSubscription(originalTransactionID: kind == .nonConsumable ? accountID + "\u{0}" + t.productID : t.originalTransactionID)
        let key = EntitlementRecord.key(kind: kind, productID: t.productID, originalTransactionID: t.originalTransactionID)
        let all: [OwnedTransaction] =
            kind == .nonConsumable
            ? try ledger.transactions(accountID: accountID).filter {
                $0.transaction.productID == t.productID && Self.kind(of: $0.transaction, catalog: context.catalog) == .nonConsumable
            }
            : try ledger.transactions(originalTransactionID: t.originalTransactionID).filter { $0.accountID == accountID }
        let old = try ledger.entitlement(accountID: accountID, key: key)
        guard !all.isEmpty else {
            // Moved away by a restore under `transfer`: the account it left hears of it too (inactive now).
            if let gone = old {
                try ledger.deleteEntitlement(accountID: accountID, key: key)
                var snapshot = gone.entitlement(nowMs: context.nowMs)
                snapshot.active = false
                try ledger.append(
                    EventRecord(
                        kind: .entitlementTransferred, timeMs: context.nowMs, accountID: accountID,
                        entitlement: snapshot, cause: context.cause, transactionID: t.transactionID))
            }
            return nil
        }
        let latest = pickLatest(all, kind: kind, catalog: context.catalog)
        let lt = latest.transaction
        let renewal = kind == .autoRenewableSubscription ? try ledger.renewal(originalTransactionID: lt.originalTransactionID) : nil
        var expires = lt.expiresTimeMs
        if kind == .nonRenewingSubscription, expires == 0, let days = context.catalog?.product(lt.productID)?.durationDays {
            expires = lt.purchaseTimeMs + Int64(days) * 86_400_000
        }
        // The renewal info speaks for the period after the current transaction only when it was signed after it.
        let renewalIsCurrent = renewal.map { $0.signedTimeMs >= lt.signedTimeMs } ?? false
        let next = renewal?.autoRenewProductID ?? ""
        var record = EntitlementRecord(
            accountID: accountID, key: key, productID: lt.productID, productKind: kind, originalTransactionID: lt.originalTransactionID,
            latestTransactionID: lt.transactionID, purchaseTimeMs: lt.purchaseTimeMs, expiresTimeMs: expires,
            revocationTimeMs: lt.revocationTimeMs, gracePeriodExpiresTimeMs: renewal?.gracePeriodExpiresTimeMs ?? 0,
            autoRenew: renewal?.autoRenew ?? true, environment: lt.environment,
            orderID: latest.orderID ?? all.first(where: { $0.orderID != nil })?.orderID,
            ended: renewal.map { $0.endedSignedTimeMs > 0 && $0.endedSignedTimeMs >= lt.signedTimeMs } ?? false,
            upgraded: lt.upgraded, billingRetry: renewalIsCurrent && renewal?.billingRetry == true, ownership: lt.ownership,
            store: lt.store,
            subscriptionGroupID: all.lazy.map(\.transaction.subscriptionGroupID).first { !$0.isEmpty } ?? "",
            pendingProductID: !next.isEmpty && next != lt.productID && !lt.upgraded ? next : "")
        record.paused = renewalIsCurrent && renewal?.paused == true
        if record != old { try ledger.put(record) }
        let kinds = forced ?? changes(from: old, to: record, transferred: transferred, nowMs: context.nowMs)
        let snapshot = record.entitlement(nowMs: context.nowMs)
        for k in kinds {
            var order: Order?
            if k == .entitlementGranted, let id = record.orderID { order = try ledger.order(id: id) }
            try ledger.append(
                EventRecord(
                    kind: k, timeMs: context.nowMs, accountID: accountID, order: order, entitlement: snapshot,
                    cause: context.cause, transactionID: t.transactionID))
        }
        return record
    }

    /// The transaction an entitlement shows. A non-consumable: the newest purchase not revoked (one the account
    /// bought before a Family Sharing grant), else the newest. A subscription: the one purchased last (Apple's
    /// lastTransaction: renewals, resubscribes, upgrades and crossgrades each replace it, a late older one never
    /// does). An upgrade's transaction is purchased after the one it supersedes, so it wins once known; until
    /// then the superseded one is current and, being `upgraded`, grants nothing (never an older renewal instead).
    static func pickLatest(_ all: [OwnedTransaction], kind: ProductKind, catalog: Catalog?) -> OwnedTransaction {
        if kind == .nonConsumable {
            func rank(_ o: OwnedTransaction) -> (Int, Int, Int64, String) {
                let t = o.transaction
                return (t.isRevoked ? 0 : 1, t.ownership == .purchased ? 1 : 0, t.purchaseTimeMs, t.transactionID)
            }
            return all.max { rank($0) < rank($1) }!
        }
        return all.max { a, b in
            (a.transaction.purchaseTimeMs, a.transaction.transactionID) < (b.transaction.purchaseTimeMs, b.transaction.transactionID)
        }!
    }

    /// The events a change from `old` to `new` means: each says what changed, and its snapshot (taken at
    /// `nowMs`) agrees with it. GRANTED once per account and entitlement (a first sight that grants no access
    /// is REVOKED or EXPIRED instead); RENEWED only when the expiry moved forward; PRODUCT_CHANGED when the
    /// product the customer has changed (an upgrade or crossgrade, or a scheduled downgrade renewing);
    /// RENEWAL_PRODUCT_CHANGED when the product of the next renewal changed; BILLING_ISSUE when a renewal
    /// failed (billing retry began, or a grace period was set or moved). Nothing when nothing changed.
    static func changes(from old: EntitlementRecord?, to new: EntitlementRecord, transferred: Bool, nowMs: Int64) -> [EventKind] {
        guard let old else {
            if new.revocationTimeMs > 0 { return [.entitlementRevoked] }
            if transferred { return [.entitlementTransferred] }
            return [new.isActive(nowMs: nowMs) ? .entitlementGranted : .entitlementExpired]
        }
        var kinds: [EventKind] = []
        if transferred { kinds.append(.entitlementTransferred) }
        if (old.revocationTimeMs > 0) != (new.revocationTimeMs > 0) {
            kinds.append(new.revocationTimeMs > 0 ? .entitlementRevoked : .entitlementReinstated)
        }
        if old.productID != new.productID { kinds.append(.entitlementProductChanged) }
        if new.expiresTimeMs > old.expiresTimeMs && new.revocationTimeMs == 0 && !new.upgraded { kinds.append(.entitlementRenewed) }
        if (!old.ended && new.ended) || (!old.upgraded && new.upgraded && old.productID == new.productID) {
            if new.revocationTimeMs == 0 { kinds.append(.entitlementExpired) }
        }
        if old.autoRenew != new.autoRenew { kinds.append(.renewalStatusChanged) }
        // Google Play: a pause takes access away until the subscription resumes (its renewal then moves the expiry:
        // ENTITLEMENT_RENEWED).
        if !old.paused && new.paused && new.revocationTimeMs == 0 && !kinds.contains(.entitlementExpired) { kinds.append(.entitlementExpired) }
        if old.pendingProductID != new.pendingProductID && !(new.pendingProductID.isEmpty && old.pendingProductID == new.productID) {
            kinds.append(.renewalProductChanged)
        }
        if (!old.billingRetry && new.billingRetry) || (new.gracePeriodExpiresTimeMs > old.gracePeriodExpiresTimeMs && new.gracePeriodExpiresTimeMs > 0) {
            kinds.append(.billingIssue)
        }
        return kinds
    }

    /// The catalog's word first; then the signed data's; then a guess from the expiry (receipts).
    public static func kind(of t: StoreTransaction, catalog: Catalog?) -> ProductKind {
        if let k = catalog?.product(t.productID)?.kind { return k }
        if let k = t.productKind { return k }
        return t.expiresTimeMs > 0 ? .autoRenewableSubscription : .nonConsumable
    }
}
