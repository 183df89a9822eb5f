/// SubmitReceipt and RestorePurchases: verify the proof, match it to the order, complete exactly once.
public final class PurchaseEngine: Sendable {
    /// What SubmitReceipt was handed.
    public enum Proof: Sendable, Equatable {
        case signedTransaction(String)
        case appReceipt(String)
        /// A purchase the store's own API described just now (Google Play: the Play Developer API's answer for a
        /// purchase token), already turned into a transaction. Checked like a signed transaction.
        case storeVerified(StoreTransaction)
    }

    public static let maxSignedTransactions = 100
    public static let maxTransactionIDBytes = 64

    /// Optional rules an operator turns on (`--require-account-token`, `--reject-stale-purchases`, `--clock-skew`).
    public struct Policy: Sendable, Equatable {
        /// A StoreKit 2 proof must carry `appAccountToken` equal to the order id; app receipts carry none and are exempt.
        public var requireAccountToken: Bool
        /// A transaction bought before the order was created (beyond `clockSkewMs`), or a subscription
        /// expired by then, cannot pay the order.
        public var rejectStalePurchases: Bool
        /// Allowance when comparing a purchase date with the order's creation time.
        public var clockSkewMs: Int64

        public init(requireAccountToken: Bool = false, rejectStalePurchases: Bool = false, clockSkewMs: Int64 = 300_000) {
            self.requireAccountToken = requireAccountToken
            self.rejectStalePurchases = rejectStalePurchases
            self.clockSkewMs = clockSkewMs
        }
    }

    public let orders: OrderService
    public let verifier: any ProofVerifier
    public let restorePolicy: RestorePolicy
    public let policy: Policy
    private let clock: any WallClock

    public init(
        orders: OrderService, verifier: any ProofVerifier, restorePolicy: RestorePolicy = .transfer,
        policy: Policy = Policy(), clock: any WallClock = SystemClock()
    ) {
        self.orders = orders
        self.verifier = verifier
        self.restorePolicy = restorePolicy
        self.policy = policy
        self.clock = clock
    }

    private var catalog: Catalog? { orders.catalog }

    /// What the entitlement table says the account owns now; inactive ones only when asked.
    public func entitlements(
        accountID: String, includeInactive: Bool,
        completion: @escaping @Sendable (Result<[Entitlement], BillingError>) -> Void
    ) {
        do throws(BillingError) {
            try OrderService.checkAccountID(accountID, required: true)
        } catch {
            return completion(.failure(error))
        }
        orders.store.entitlements(accountID: accountID, nowMs: clock.nowMilliseconds()) { result in
            completion(result.map { list in includeInactive ? list : list.filter(\.active) })
        }
    }

    /// The catalog's product kind wins over what the signed data says.
    private func classify(_ t: StoreTransaction) -> StoreTransaction {
        var t = t
        if let kind = catalog?.product(t.productID)?.kind { t.productKind = kind }
        return t
    }

    /// Verifies `proof` and completes `orderID` with it.
    public func submitReceipt(
        orderID rawOrderID: String, proof: Proof?, transactionID: String,
        abandoned: @escaping @Sendable () -> Bool = { false },
        completion: @escaping @Sendable (Result<CompletedPurchase, BillingError>) -> Void
    ) {
        guard !rawOrderID.isEmpty else { return completion(.failure(.invalidField(field: "order_id", problem: "is required"))) }
        guard let orderID = OrderID.canonical(rawOrderID) else {
            return completion(.failure(.invalidField(field: "order_id", problem: "is not a UUID")))
        }
        guard transactionID.utf8.count <= Self.maxTransactionIDBytes else {
            return completion(.failure(.invalidField(field: "transaction_id", problem: "is longer than \(Self.maxTransactionIDBytes) bytes")))
        }
        var candidates: [StoreTransaction]
        switch proof {
        case nil:
            return completion(.failure(.invalidField(field: "proof", problem: "is required: signed_transaction or app_receipt")))
        case .signedTransaction(let jws):
            guard !jws.isEmpty else { return completion(.failure(.invalidField(field: "signed_transaction", problem: "is empty"))) }
            switch verifier.verifySignedTransaction(jws) {
            case .success(let t): candidates = [classify(t)]
            case .failure(let e): return completion(.failure(e))
            }
        case .appReceipt(let receipt):
            guard !receipt.isEmpty else { return completion(.failure(.invalidField(field: "app_receipt", problem: "is empty"))) }
            switch verifier.verifyAppReceipt(receipt) {
            case .success(let all):
                candidates = all.map(classify)
                if !transactionID.isEmpty {
                    candidates = candidates.filter { $0.transactionID == transactionID }
                    if candidates.isEmpty {
                        return completion(.failure(.transactionNotFound(detail: "transaction \(transactionID) is not in the receipt")))
                    }
                }
                // Newest first: without a transaction_id the newest unclaimed purchase of the product pays.
                candidates.sort { ($0.purchaseTimeMs, $0.transactionID) > ($1.purchaseTimeMs, $1.transactionID) }
            case .failure(let e): return completion(.failure(e))
            }
        case .storeVerified(let t):
            candidates = [classify(t)]
        }
        if !transactionID.isEmpty, candidates.count == 1, proof != nil, !isReceipt(proof), candidates.first?.transactionID != transactionID {
            return completion(.failure(.transactionNotFound(detail: "transaction_id \(transactionID) is not the signed transaction")))
        }
        // Without a transaction_id an app receipt's other products are not candidates at all.
        var autoPick = false
        if case .appReceipt = proof, transactionID.isEmpty { autoPick = true }
        let signed = !isReceipt(proof)
        let policy = self.policy
        let check: @Sendable (Order, StoreTransaction) -> BillingError?
        if autoPick {
            check = { order, t in Self.checkPicked(order, t, policy: policy) }
        } else {
            check = { order, t in Self.check(order, t, policy: policy, signed: signed) }
        }
        orders.store.complete(
            orderID: orderID, candidates: candidates, check: check,
            context: RuleContext(nowMs: clock.nowMilliseconds(), cause: .submitReceipt, catalog: catalog),
            abandoned: abandoned, completion: completion)
    }

    private func isReceipt(_ proof: Proof?) -> Bool {
        if case .appReceipt = proof { return true }
        return false
    }

    /// Whether `t` may pay `order`: same product and quantity, the order's account token (required of a
    /// signed transaction under `requireAccountToken`), not revoked, not stale (under `rejectStalePurchases`).
    static func check(_ order: Order, _ t: StoreTransaction, policy: Policy = Policy(), signed: Bool = false) -> BillingError? {
        // A Family Sharing grant: the family member's copy of someone else's purchase. No money moved for it.
        if t.ownership == .familyShared { return .notPurchasedByAccount(transactionID: t.transactionID) }
        if t.productID != order.productID { return .productMismatch(orderProduct: order.productID, proofProduct: t.productID) }
        // One payment for one unit must not complete an order for a thousand.
        if t.quantity != order.quantity { return .quantityMismatch(orderQuantity: order.quantity, proofQuantity: t.quantity) }
        if let token = t.appAccountToken, !token.isEmpty {
            if OrderID.canonical(token) != order.id { return .accountTokenMismatch(orderID: order.id) }
        } else if signed && policy.requireAccountToken {
            return .accountTokenMismatch(orderID: order.id)
        }
        if t.isRevoked { return .transactionRevoked(transactionID: t.transactionID) }
        if policy.rejectStalePurchases {
            // Saturating: a huge skew must not wrap around and reject everything.
            let (earliest, overflow) = order.createTimeMs.subtractingReportingOverflow(max(0, policy.clockSkewMs))
            if !overflow && t.purchaseTimeMs < earliest { return .transactionPredatesOrder(transactionID: t.transactionID) }
            if t.expiresTimeMs > 0 && t.expiresTimeMs <= order.createTimeMs {
                return .transactionPredatesOrder(transactionID: t.transactionID)
            }
        }
        return nil
    }

    /// `check` for a receipt record picked by product: another product is not a mismatch, just not a candidate.
    static func checkPicked(_ order: Order, _ t: StoreTransaction, policy: Policy = Policy()) -> BillingError? {
        if t.productID != order.productID {
            return .transactionNotFound(detail: "the receipt holds no unclaimed transaction of product \(order.productID)")
        }
        return check(order, t, policy: policy)
    }

    /// Verifies what the account proves it owns, records it, and answers its entitlements.
    /// `fetched`: signed transactions billingd fetched itself (App Store Server API history by transaction id),
    /// verified like the others but not counted against the caller's limit; they only update what the account
    /// owns or attach what names its orders (PurchaseRules.mayAttachByID).
    /// `watch`: the customers (a transaction id and its environment) whose histories were fetched, noted for
    /// refund-history reconciliation with the restore.
    public func restorePurchases(
        accountID: String, appReceipt: String, signedTransactions: [String], fetched: [String] = [],
        watch: [(transactionID: String, environment: StoreEnvironment)] = [], storeVerified: [StoreTransaction] = [],
        completion: @escaping @Sendable (Result<[Entitlement], BillingError>) -> Void
    ) {
        do throws(BillingError) {
            try OrderService.checkAccountID(accountID, required: true)
        } catch {
            return completion(.failure(error))
        }
        guard !appReceipt.isEmpty || !signedTransactions.isEmpty || !fetched.isEmpty || !storeVerified.isEmpty else {
            return completion(.failure(.invalidField(field: "proof", problem: "is required: app_receipt or signed_transactions")))
        }
        guard signedTransactions.count <= Self.maxSignedTransactions else {
            return completion(.failure(.invalidField(field: "signed_transactions", problem: "holds more than \(Self.maxSignedTransactions)")))
        }
        var proven: [StoreTransaction] = []
        if !appReceipt.isEmpty {
            switch verifier.verifyAppReceipt(appReceipt) {
            case .success(let all): proven += all.map(classify)
            case .failure(let e): return completion(.failure(e))
            }
        }
        for (i, jws) in signedTransactions.enumerated() {
            guard !jws.isEmpty else {
                return completion(.failure(.invalidField(field: "signed_transactions", problem: "entry \(i) is empty")))
            }
            switch verifier.verifySignedTransaction(jws) {
            case .success(let t): proven.append(classify(t))
            case .failure(let e): return completion(.failure(e))
            }
        }
        // Purchases the store's own API described just now for tokens the caller holds (Google Play): proofs of
        // possession like signed transactions.
        proven += storeVerified.map(classify)
        var byID: [StoreTransaction] = []
        for jws in fetched {
            switch verifier.verifySignedTransaction(jws) {
            case .success(let t): byID.append(classify(t))
            case .failure(let e): return completion(.failure(e))
            }
        }
        // A transaction id is no proof of possession (ids are sequential; anyone can type one): what was fetched
        // by id follows PurchaseRules.mayAttachByID, the caller's own proofs --restore-policy.
        let now = clock.nowMilliseconds()
        let watches = watch.map { RefundWatch(transactionID: $0.transactionID, environment: $0.environment, accountID: accountID, addedTimeMs: now) }
        orders.store.restore(
            accountID: accountID, transactions: proven, byID: byID, watch: watches, policy: restorePolicy,
            context: RuleContext(nowMs: clock.nowMilliseconds(), cause: .restorePurchases, catalog: catalog),
            completion: completion)
    }
}
