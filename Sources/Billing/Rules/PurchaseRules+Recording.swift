/// The recording rules: a newer view merged, an order settled, a transaction recorded, superseded or adopted.
extension PurchaseRules {

    /// Stores a newer signed view of a known transaction (newest signedDate wins; on equal dates what is
    /// stored stays). `upgraded` is sticky: once any view says so, it stays, whatever order they arrive in.
    /// A change of the revocation settles the order the transaction paid (`settle`).
    static func merge(
        _ ledger: some PurchaseLedger, _ t: StoreTransaction, into owned: OwnedTransaction,
        context: RuleContext
    ) throws(BillingError) -> OwnedTransaction {
        let old = owned.transaction
        var next = old
        if t.signedTimeMs > old.signedTimeMs {
            next.expiresTimeMs = t.expiresTimeMs
            // Google Play never reverses a revocation, and its API shows a revoked or voided purchase as merely
            // expired (or still purchased): a later read without one keeps the revocation a notification or the
            // voided list brought. (An App Store view without one is a reversal: REFUND_REVERSED.)
            let keepRevocation = t.store == .googlePlay && old.isRevoked && !t.isRevoked
            if !keepRevocation {
                next.revocationTimeMs = t.revocationTimeMs
                next.revocationReason = t.revocationReason
                next.revocationType = t.revocationType
                next.revocationPercentage = t.revocationPercentage
            }
            next.ownership = t.ownership
            next.signedTimeMs = t.signedTimeMs
        } else if t.store == .googlePlay && t.isRevoked && !old.isRevoked {
            // A revocation read before a later view without one (two notifications applied in the other order, on
            // two replicas) still counts: Google never reverses one.
            next.revocationTimeMs = t.revocationTimeMs
            next.revocationReason = t.revocationReason
            next.revocationType = t.revocationType
            next.revocationPercentage = t.revocationPercentage
        }
        next.upgraded = old.upgraded || t.upgraded
        // A view that carries price facts fills them in for a transaction first recorded without any (an app
        // receipt): what it paid then counts in Revenue. Facts already known are never rewritten.
        if old.price.priceMilliunits == 0 && old.price.offerType.isEmpty && old.price.currency.isEmpty,
            t.price.priceMilliunits > 0 || !t.price.offerType.isEmpty
        {
            next.price = t.price
        }
        guard next != old else { return owned }
        var merged = owned
        merged.transaction = next
        try ledger.update(next)
        let refundChanged =
            old.isRevoked != next.isRevoked || old.revocationType != next.revocationType
            || old.revocationPercentage != next.revocationPercentage
        if let orderID = owned.orderID, refundChanged {
            try settle(ledger, orderID: orderID, transaction: next, previous: old, context: context)
        }
        return merged
    }

    /// The order a transaction paid follows the transaction's revocation (DESIGN "Subscriptions as the stores
    /// model them", refunds):
    /// - a full refund (REFUND_FULL, a prorated one of 100%, or a revocation that does not say how): REFUNDED,
    ///   every unit refunded (ORDER_REFUNDED);
    /// - REFUND_PRORATED of a consumable order of n units: round(n * percentage / 100000) units, at least 1,
    ///   REFUNDED when that is all n (ORDER_REFUNDED), else COMPLETED with `refundedQuantity` (ORDER_PARTIALLY_REFUNDED);
    ///   of anything else: COMPLETED, ORDER_PARTIALLY_REFUNDED (the transaction's percentage says how much);
    /// - FAMILY_REVOKE: nothing (no money moved);
    /// - not revoked any more (a reversal): COMPLETED, nothing refunded (ORDER_COMPLETED).
    /// Writes an event only when the order changed (or a prorated refund of a non-consumable is new).
    static func settle(
        _ ledger: some PurchaseLedger, orderID: String, transaction t: StoreTransaction, previous: StoreTransaction?,
        context: RuleContext
    ) throws(BillingError) {
        guard t.revocationType != .familyRevoke || !t.isRevoked else { return }
        guard let order = try ledger.order(id: orderID), order.state == .completed || order.state == .refunded else { return }
        let target: (state: OrderState, refunded: Int, kind: EventKind)
        if !t.isRevoked {
            target = (.completed, 0, .orderCompleted)
        } else if t.isFullyRefunded {
            target = (.refunded, order.quantity, .orderRefunded)
        } else if kind(of: t, catalog: context.catalog) == .consumable {
            let n = order.quantity
            let units = min(n, max(1, (n * min(max(t.revocationPercentage, 0), 100_000) + 50_000) / 100_000))
            target = units == n ? (.refunded, n, .orderRefunded) : (.completed, units, .orderPartiallyRefunded)
        } else {
            target = (.completed, 0, .orderPartiallyRefunded)
        }
        let unchanged = order.state == target.state && order.refundedQuantity == target.refunded
        if unchanged {
            // A prorated refund of a subscription or non-consumable leaves the order as it is; it is reported once.
            let newPartial =
                target.kind == .orderPartiallyRefunded
                && (previous.map { !$0.isRevoked || $0.revocationPercentage != t.revocationPercentage || $0.revocationType != t.revocationType }
                    ?? true)
            guard newPartial else { return }
            try ledger.append(
                EventRecord(
                    kind: .orderPartiallyRefunded, timeMs: context.nowMs, accountID: order.accountID, order: order,
                    cause: context.cause, transactionID: t.transactionID))
            return
        }
        guard let moved = try ledger.refund(orderID: orderID, refundedQuantity: target.refunded, state: target.state, nowMs: context.nowMs)
        else { return }
        try ledger.append(
            EventRecord(
                kind: target.kind, timeMs: context.nowMs, accountID: moved.accountID, order: moved,
                cause: context.cause, transactionID: t.transactionID))
    }

    /// Records a verified transaction: new ones are inserted (owned by `owner`, possibly nobody), known ones
    /// merged. A known one nobody owns attaches to `owner`; one owned elsewhere moves only when `transfer`.
    /// Answers the stored transaction and, when it moved, the account it left.
    static func record(
        _ ledger: some PurchaseLedger, _ t: StoreTransaction, owner: String, transfer: Bool,
        context: RuleContext
    ) throws(BillingError) -> (OwnedTransaction, movedFrom: String?) {
        try supersede(ledger, replacedBy: t, context: context)
        guard let known = try ledger.owned(transactionID: t.transactionID) else {
            let owned = OwnedTransaction(transaction: t, accountID: owner, orderID: nil)
            try ledger.insert(owned)
            try PlayAcknowledgementRules.queueIfDue(ledger, t, accountID: owner, nowMs: context.nowMs)
            try adoptUnowned(ledger, originalTransactionID: t.originalTransactionID, owner: owner)
            return (owned, nil)
        }
        var owned = try merge(ledger, t, into: known, context: context)
        guard !owner.isEmpty, owned.accountID != owner, owned.accountID.isEmpty || transfer else {
            if owned.accountID == owner { try adoptUnowned(ledger, originalTransactionID: t.originalTransactionID, owner: owner) }
            // A newer signed view (a revocation, a later expiry) of a purchase that stays with another account:
            // that account's entitlement follows it now, not at its next notification.
            if !owned.accountID.isEmpty, owned.accountID != owner, owned.transaction != known.transaction {
                try refresh(ledger, accountID: owned.accountID, for: owned.transaction, context: context)
            }
            return (owned, nil)
        }
        let previous = owned.accountID
        try ledger.transfer(transactionID: t.transactionID, to: owner)
        owned.accountID = owner
        // A subscription moves whole: its other transactions that the previous owner held go with it, so it is
        // never split across two accounts (and later notifications find one owner).
        if !previous.isEmpty && kind(of: t, catalog: context.catalog) != .nonConsumable {
            for sibling in try ledger.transactions(originalTransactionID: t.originalTransactionID)
            where sibling.accountID == previous && sibling.transaction.transactionID != t.transactionID {
                try ledger.transfer(transactionID: sibling.transaction.transactionID, to: owner)
            }
        }
        try adoptUnowned(ledger, originalTransactionID: t.originalTransactionID, owner: owner)
        if !previous.isEmpty {
            try refresh(ledger, accountID: previous, for: owned.transaction, context: context)
            return (owned, previous)
        }
        return (owned, nil)
    }

    /// Google Play: the purchase a new one replaced through `linkedPurchaseToken` is `upgraded` (as Apple marks the
    /// transaction an upgrade supersedes) when the replacement cut its paid period short: Google said it took effect
    /// at once, or the replaced period still ran when the new one was bought. A resubscribe after a lapse and a
    /// deferred downgrade supersede nothing. Sticky, like Apple's isUpgraded (`merge`).
    static func supersede(_ ledger: some PurchaseLedger, replacedBy t: StoreTransaction, context: RuleContext) throws(BillingError) {
        guard t.store == .googlePlay, !t.replacedTransactionID.isEmpty, t.replacedTransactionID != t.transactionID,
            let old = try ledger.owned(transactionID: t.replacedTransactionID), old.transaction.store == .googlePlay,
            !old.transaction.upgraded, !old.transaction.isRevoked
        else { return }
        guard t.replacedAtOnce || old.transaction.expiresTimeMs > t.purchaseTimeMs else { return }
        var superseded = old.transaction
        superseded.upgraded = true
        try ledger.update(superseded)
    }

    /// Transactions of the same original transaction that nobody owns yet (kept from notifications that came
    /// before anyone proved the purchase) belong to the account that now owns one of them, so that the newest
    /// signed data wins whatever order the notifications and proofs arrived in.
    static func adoptUnowned(_ ledger: some PurchaseLedger, originalTransactionID: String, owner: String) throws(BillingError) {
        guard !owner.isEmpty else { return }
        for sibling in try ledger.transactions(originalTransactionID: originalTransactionID) where sibling.accountID.isEmpty {
            try ledger.transfer(transactionID: sibling.transaction.transactionID, to: owner)
        }
    }
}
