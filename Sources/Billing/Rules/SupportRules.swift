/// A customer whose App Store history billingd fetched by a transaction id (RestorePurchases with
/// `transaction_ids`): reconciliation reads that customer's refund history (Get Refund History) for refunds
/// whose notifications never arrived. One per environment and transaction id.
public struct RefundWatch: Sendable, Equatable {
    /// The id the history was fetched by (any transaction of the customer).
    public var transactionID: String
    public var environment: StoreEnvironment
    /// The account that restored by it (for the operator; refunds apply to whoever owns each purchase).
    public var accountID: String
    public var addedTimeMs: Int64
    /// When its refund history was last read through; 0: never.
    public var checkedTimeMs: Int64

    public init(transactionID: String, environment: StoreEnvironment, accountID: String, addedTimeMs: Int64, checkedTimeMs: Int64 = 0) {
        self.transactionID = transactionID
        self.environment = environment
        self.accountID = accountID
        self.addedTimeMs = addedTimeMs
        self.checkedTimeMs = checkedTimeMs
    }
}

extension EventCause {
    /// A change found by reconciliation in Get Refund History.
    public static let refundHistory = EventCause("refund_history")
    /// billing.admin.v1.Admin/SetAppAccountToken attached a purchase to an order's account.
    public static let setAppAccountToken = EventCause("set_app_account_token")
}

/// What SetAppAccountToken left behind: the order (completed by the purchase when it could pay it) and the
/// purchase's transactions, now the order's account's.
public struct AttachedPurchase: Sendable, Equatable {
    public var order: Order
    public var transactions: [OwnedTransaction]
    /// The purchase completed the order now.
    public var completedOrder: Bool

    public init(order: Order, transactions: [OwnedTransaction], completedOrder: Bool) {
        self.order = order
        self.transactions = transactions
        self.completedOrder = completedOrder
    }
}

extension PurchaseRules {
    /// A newer signed view of a transaction that billingd fetched itself (Get Refund History), applied exactly as
    /// a notification carrying it (REFUND) is: recorded under whoever owns it, else whoever owns its
    /// subscription, else the account of the order its appAccountToken names (else nobody); merged, so a
    /// revocation settles the order it paid; that account's entitlement refreshed. Answers whether the
    /// transaction as stored changed (or was new).
    public static func applyFetchedView(_ ledger: some PurchaseLedger, _ t: StoreTransaction, context: RuleContext) throws(BillingError) -> Bool {
        try ledger.lockSubscription(originalTransactionID: t.originalTransactionID)
        let before = try ledger.owned(transactionID: t.transactionID)
        var owner = before?.accountID ?? ""
        if owner.isEmpty {
            owner = try ledger.transactions(originalTransactionID: t.originalTransactionID).first { !$0.accountID.isEmpty }?.accountID ?? ""
        }
        if owner.isEmpty, let token = t.appAccountToken, let id = OrderID.canonical(token), let order = try ledger.order(id: id) {
            owner = order.accountID
        }
        let (stored, _) = try record(ledger, t, owner: owner, transfer: false, context: context)
        if !stored.accountID.isEmpty { owner = stored.accountID }
        if !owner.isEmpty { try refresh(ledger, accountID: owner, for: stored.transaction, context: context) }
        return before?.transaction != stored.transaction
    }

    /// Why `attach` would refuse, read without writing anything (so that it is checked before Apple is asked, and
    /// again inside the transaction that attaches): ORDER_NOT_FOUND, or TRANSACTION_ALREADY_CLAIMED when another
    /// account owns a transaction of the purchase or a token it carries names another account's order.
    public static func attachRefusal(
        _ ledger: some PurchaseLedger, originalTransactionID: String, fetched: [StoreTransaction], orderID: String
    ) throws(BillingError) -> BillingError? {
        guard let order = try ledger.order(id: orderID) else { return .orderNotFound(orderID: orderID) }
        let known = try ledger.transactions(originalTransactionID: originalTransactionID)
        if let other = known.first(where: { !$0.accountID.isEmpty && $0.accountID != order.accountID }) {
            return .transactionAlreadyClaimed(transactionID: other.transaction.transactionID)
        }
        for t in known.map(\.transaction) + fetched {
            if let token = t.appAccountToken, let named = OrderID.canonical(token), named != order.id,
                let namedOrder = try ledger.order(id: named), namedOrder.accountID != order.accountID
            {
                return .transactionAlreadyClaimed(transactionID: t.transactionID)
            }
        }
        return nil
    }

    /// SetAppAccountToken, billingd's half: the purchase `originalTransactionID` (what billingd recorded of it, and
    /// `fetched`, verified views of it from the App Store) attached to the account of `orderID`, by the ownership
    /// rules of a restore by transaction id: refused (TRANSACTION_ALREADY_CLAIMED) when another account owns it or
    /// any of its transactions, or when an appAccountToken it carries names another account's order; anything
    /// nobody owns becomes the account's. When the order is PENDING and the purchase's first transaction can pay it
    /// (product, quantity, not a Family Sharing grant, not revoked, paying no other order), it completes the order
    /// as SubmitReceipt would, whatever token the transaction was signed with (Apple now holds the order id).
    public static func attach(
        _ ledger: some PurchaseLedger, originalTransactionID: String, fetched: [StoreTransaction], orderID: String,
        context: RuleContext
    ) throws(BillingError) -> Result<AttachedPurchase, BillingError> {
        try ledger.lockSubscription(originalTransactionID: originalTransactionID)
        if let refusal = try attachRefusal(ledger, originalTransactionID: originalTransactionID, fetched: fetched, orderID: orderID) {
            return .failure(refusal)
        }
        guard let order = try ledger.order(id: orderID) else { return .failure(.orderNotFound(orderID: orderID)) }
        for t in fetched where t.originalTransactionID == originalTransactionID {
            _ = try record(ledger, t, owner: order.accountID, transfer: false, context: context)
        }
        try adoptUnowned(ledger, originalTransactionID: originalTransactionID, owner: order.accountID)
        var all = try ledger.transactions(originalTransactionID: originalTransactionID)
        func purchased(_ o: OwnedTransaction) -> (Int64, String) { (o.transaction.purchaseTimeMs, o.transaction.transactionID) }
        guard let newest = all.max(by: { purchased($0) < purchased($1) }) else {
            return .failure(.transactionNotFound(detail: "billingd knows no transaction of \(originalTransactionID)"))
        }
        var result = order
        var completed = false
        let first = all.first { $0.transaction.transactionID == originalTransactionID } ?? all.min { purchased($0) < purchased($1) }
        if order.state == .pending, let first, first.orderID == nil {
            // Apple holds the order id as the token now: the token the transaction was signed with is not held against it.
            let check: (Order, StoreTransaction) -> BillingError? = { order, t in
                var tokened = t
                tokened.appAccountToken = order.id
                return PurchaseEngine.check(order, tokened)
            }
            if check(order, first.transaction) == nil,
                case .success(let done) = try complete(
                    ledger, orderID: order.id, candidates: [first.transaction], check: check, context: context, refreshEntitlement: false)
            {
                result = done.order
                completed = !done.alreadyProcessed
            }
            all = try ledger.transactions(originalTransactionID: originalTransactionID)
        }
        try refresh(ledger, accountID: order.accountID, for: newest.transaction, context: context)
        return .success(AttachedPurchase(order: result, transactions: all, completedOrder: completed))
    }
}
