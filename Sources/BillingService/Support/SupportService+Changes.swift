import AfterSale
public import Billing
import BillingAPI
import ProtoWire
public import RPC
import Lifecycle

extension BillingAPI.Grant {
    init(_ g: GrantRecord) {
        self.init()
        grantID = g.grantID
        accountID = g.accountID
        productID = g.productID
        startTimeMs = g.startTimeMs
        expiresTimeMs = g.expiresTimeMs
        revocationTimeMs = g.revocationTimeMs
        reason = g.reason
        operatorName = g.operatorName
    }
}

extension BillingAPI.AccessFact {
    init(_ f: AccessFactRecord) {
        self.init()
        productID = f.productID
        store = BillingAPI.Store(f.store)
        originalTransactionID = f.originalTransactionID
        transactionID = f.transactionID
        state = BillingAPI.EntitlementState(f.state)
        grantsAccess = f.grantsAccess
        reason = BillingAPI.AccessReason(rawValue: Int32(f.reason.rawValue))
        untilTimeMs = f.untilMs
        why = f.why
    }
}

extension SupportService {
    /// A required reason: 1 to 500 bytes of text.
    static func checkReason(_ reason: String) throws(BillingError) {
        try OrderService.checkText(reason, field: "reason", max: Limits.reason, required: true)
    }

    /// Runs `checks`; a refusal answers (audited) and returns false.
    func checked(_ audit: Audit, _ responder: Responder, _ checks: () throws(BillingError) -> Void) -> Bool {
        do throws(BillingError) {
            try checks()
            return true
        } catch {
            refuse(error.rpcError, audit, responder)
            return false
        }
    }

    // MARK: ExplainAccess

    func explainAccess(_ context: CallContext, _ request: ExplainAccessRequest, _ responder: Responder) {
        let account = request.accountID, product = request.productID
        let audit = makeAudit(context, "billing.v1.ExplainAccessRequest", request, account: account, target: product)
        guard
            checked(
                audit, responder,
                { () throws(BillingError) in
                    try OrderService.checkAccountID(account, required: true)
                    try OrderService.checkText(product, field: "product_id", max: OrderService.Limits.productID, required: false)
                })
        else { return }
        run(audit, context, responder) { ledger, now throws(BillingError) in
            guard try Self.known(ledger, accountID: account) else { throw .accountNotFound(accountID: account) }
            var response = ExplainAccessResponse()
            response.facts = try AccessExplanation.facts(ledger, accountID: account, productID: product, nowMs: now).map(AccessFact.init)
            response.hasAccess = response.facts.contains { $0.grantsAccess }
            return response
        }
    }

    // MARK: Grants

    func grantEntitlement(_ context: CallContext, _ request: GrantEntitlementRequest, _ responder: Responder) {
        let account = request.accountID, product = request.productID
        let audit = makeAudit(
            context, "billing.v1.GrantEntitlementRequest", request, account: account, target: product, reason: request.reason)
        let catalog = self.catalog
        var kind = ProductKind.nonConsumable
        guard
            checked(
                audit, responder,
                { () throws(BillingError) in
                    try OrderService.checkAccountID(account, required: true)
                    try OrderService.checkText(product, field: "product_id", max: OrderService.Limits.productID, required: true)
                    try Self.checkReason(request.reason)
                    try OrderService.checkText(
                        request.idempotencyKey, field: "idempotency_key", max: OrderService.Limits.idempotencyKey, required: false)
                    if request.expiresTimeMs != 0 && request.durationSeconds != 0 {
                        throw .invalidField(field: "duration_seconds", problem: "and expires_time_ms cannot both be set")
                    }
                    if request.expiresTimeMs < 0 { throw .invalidField(field: "expires_time_ms", problem: "must not be negative") }
                    if request.durationSeconds < 0 || request.durationSeconds > Limits.grantSeconds {
                        throw .invalidField(field: "duration_seconds", problem: "must be between 0 and \(Limits.grantSeconds) (100 years)")
                    }
                    if let catalog {
                        guard let p = catalog.product(product) else { throw .productNotFound(productID: product) }
                        kind = p.kind
                    }
                    if kind == .consumable {
                        throw .invalidField(field: "product_id", problem: "is a consumable: a grant gives lasting access, not units")
                    }
                })
        else { return }
        let operatorName = audit.operatorName, productKind = kind
        let key = request.idempotencyKey.isEmpty ? nil : request.idempotencyKey
        run(audit, context, responder) { ledger, now throws(BillingError) in
            let expires = request.durationSeconds > 0 ? now + request.durationSeconds * 1000 : request.expiresTimeMs
            // A retry of a grant made before its end passed answers that grant (GrantRules.grant), not this refusal.
            let retry = try key.map { k throws(BillingError) in try ledger.grant(accountID: account, idempotencyKey: k) } ?? nil
            if retry == nil && request.expiresTimeMs != 0 && request.expiresTimeMs <= now {
                throw .invalidField(field: "expires_time_ms", problem: "is not in the future")
            }
            let new = GrantRecord(
                grantID: "grant_" + OrderID.make(milliseconds: now), accountID: account, productID: product, startTimeMs: now,
                expiresTimeMs: expires, reason: request.reason, operatorName: operatorName, idempotencyKey: key)
            let (grant, record) = try GrantRules.grant(
                ledger, new, kind: productKind,
                sameRequest: { old in
                    // A retry: the same product and reason, and the same end (or, for a duration, the same length: it
                    // ran from the first call's time).
                    old.productID == product && old.reason == request.reason
                        && (request.durationSeconds > 0
                            ? old.expiresTimeMs - old.startTimeMs == request.durationSeconds * 1000
                            : old.expiresTimeMs == request.expiresTimeMs)
                },
                context: RuleContext(nowMs: now, cause: .support("GrantEntitlement"), catalog: catalog))
            var response = GrantEntitlementResponse()
            response.grant = BillingAPI.Grant(grant)
            response.entitlement = BillingAPI.Entitlement(record.entitlement(nowMs: now))
            return response
        }
    }

    func revokeGrant(_ context: CallContext, _ request: RevokeGrantRequest, _ responder: Responder) {
        let id = request.grantID
        let audit = makeAudit(context, "billing.v1.RevokeGrantRequest", request, account: "", target: id, reason: request.reason)
        guard
            checked(
                audit, responder,
                { () throws(BillingError) in
                    try OrderService.checkText(id, field: "grant_id", max: Limits.query, required: true)
                    try Self.checkReason(request.reason)
                })
        else { return }
        // The entry names the grant's account once it is known (a refusal for an unknown grant names none).
        let catalog = self.catalog
        run(
            audit, context, responder, adjust: { entry, response in entry.accountID = response.grant?.accountID ?? "" }
        ) { ledger, now throws(BillingError) in
            let (grant, record) = try GrantRules.revoke(
                ledger, grantID: id, context: RuleContext(nowMs: now, cause: .support("RevokeGrant"), catalog: catalog))
            var response = RevokeGrantResponse()
            response.grant = BillingAPI.Grant(grant)
            response.entitlement = BillingAPI.Entitlement(record.entitlement(nowMs: now))
            return response
        }
    }

    // MARK: TransferPurchases

    func transferPurchases(_ context: CallContext, _ request: TransferPurchasesRequest, _ responder: Responder) {
        let from = request.fromAccountID, to = request.toAccountID
        let audit = makeAudit(context, "billing.v1.TransferPurchasesRequest", request, account: from, target: to, reason: request.reason)
        guard
            checked(
                audit, responder,
                { () throws(BillingError) in
                    try OrderService.checkAccountID(from, required: true)
                    do throws(BillingError) {
                        try OrderService.checkAccountID(to, required: true)
                    } catch {
                        if case .invalidField(_, let problem) = error { throw .invalidField(field: "to_account_id", problem: problem) }
                        throw error
                    }
                    if from == to { throw .invalidField(field: "to_account_id", problem: "is from_account_id: a transfer needs another account") }
                    try Self.checkReason(request.reason)
                    if request.originalTransactionIDs.count > Limits.transferIDs {
                        throw .invalidField(field: "original_transaction_ids", problem: "names more than \(Limits.transferIDs) purchases")
                    }
                    for id in request.originalTransactionIDs {
                        try OrderService.checkText(id, field: "original_transaction_ids", max: BillingService.maxLookupIDBytes, required: true)
                    }
                })
        else { return }
        let catalog = self.catalog
        run(audit, context, responder) { ledger, now throws(BillingError) in
            let outcome = try AccountRules.transfer(
                ledger, from: from, to: to, originals: request.originalTransactionIDs,
                context: RuleContext(nowMs: now, cause: .support("TransferPurchases"), catalog: catalog))
            var response = TransferPurchasesResponse()
            response.transferred = Int32(clamping: outcome.transferred)
            response.entitlements = outcome.entitlements.map { $0.entitlement(nowMs: now) }
                .sorted { ($0.productID, $0.originalTransactionID) < ($1.productID, $1.originalTransactionID) }
                .map(BillingAPI.Entitlement.init)
            return response
        }
    }

    // MARK: DeleteCustomer

    func deleteCustomer(_ context: CallContext, _ request: DeleteCustomerRequest, _ responder: Responder) {
        let account = request.accountID
        var audit = makeAudit(context, "billing.v1.DeleteCustomerRequest", request, account: account, target: "", reason: request.reason)
        guard
            checked(
                audit, responder,
                { () throws(BillingError) in
                    try OrderService.checkAccountID(account, required: true)
                    try Self.checkReason(request.reason)
                })
        else { return }
        let catalog = self.catalog
        let erasing = audit
        // An id erased before (or never known) is not written to the trail by its refusal either: afterwards the old
        // id finds nothing anywhere, the audit trail included.
        audit.accountID = ""
        audit.requestJSON = AuditText.replacing(account, with: "[no record]", in: audit.requestJSON)
        let refusal = audit
        let clock = self.clock
        store.write(
            abandoned: { context.isExpired },
            { ledger throws(BillingError) in
                let now = clock.nowMilliseconds()
                let pseudonym = Pseudonym.make(nowMs: now)
                let counts = try AccountRules.erase(
                    ledger, accountID: account, pseudonym: pseudonym,
                    context: RuleContext(nowMs: now, cause: .support("DeleteCustomer"), catalog: catalog))
                var entry = erasing
                entry.accountID = pseudonym
                entry.requestJSON = AuditText.replacing(account, with: pseudonym, in: entry.requestJSON)
                try ledger.appendAudit(entry.record(outcome: "OK", timeMs: now))
                var response = DeleteCustomerResponse()
                response.pseudonym = pseudonym
                response.orders = Int32(clamping: counts.orders)
                response.transactions = Int32(clamping: counts.transactions)
                response.events = Int32(clamping: counts.events)
                return response
            }
        ) { [self] result in
            switch result {
            case .success(let answer): responder.succeed(answer)
            case .failure(let error): refuse(error.rpcError, refusal, responder)
            }
        }
    }

    // MARK: RefundPurchase

    func refundPurchase(_ context: CallContext, _ request: RefundPurchaseRequest, _ responder: Responder) {
        let id = request.transactionID
        var audit = makeAudit(context, "billing.v1.RefundPurchaseRequest", request, account: "", target: id, reason: request.reason)
        guard
            checked(
                audit, responder,
                { () throws(BillingError) in
                    try OrderService.checkText(id, field: "transaction_id", max: BillingService.maxLookupIDBytes, required: true)
                    try Self.checkReason(request.reason)
                })
        else { return }
        // What billingd recorded of it (a blocking read: this call runs on the Google Play pool when one is configured).
        let found = Blocking.wait { done in
            store.read(
                { ledger throws(BillingError) -> (OwnedTransaction, Bool)? in
                    guard let owned = try Self.refundTarget(ledger, id) else { return nil }
                    let t = owned.transaction
                    let newest = try ledger.transactions(originalTransactionID: t.originalTransactionID).allSatisfy {
                        ($0.transaction.purchaseTimeMs, $0.transaction.transactionID) <= (t.purchaseTimeMs, t.transactionID)
                    }
                    return (owned, newest)
                }, completion: done)
        }
        let target: OwnedTransaction
        let latest: Bool
        switch found {
        case .failure(let error): return refuse(error.rpcError, audit, responder)
        case .success(nil):
            return refuse(BillingError.transactionUnknown(transactionID: id).rpcError, audit, responder)
        case .success(let (owned, newest)?): (target, latest) = (owned, newest)
        }
        audit.accountID = target.accountID
        let t = target.transaction
        switch t.store {
        case .appStore:
            return refuse(
                BillingError.refundNotSupported(
                    detail: "App Store purchases are refunded by Apple at the customer's request (reportaproblem.apple.com); "
                        + "billingd records the refund when Apple's REFUND notification arrives"
                ).rpcError, audit, responder)
        case .grant:
            return refuse(
                BillingError.refundNotSupported(detail: "a grant paid nothing: revoke it with RevokeGrant").rpcError, audit, responder)
        case .googlePlay:
            break
        }
        // Refunding a refunded purchase answers it.
        var refunded = t
        if !t.isRevoked {
            guard let refunder else { return refuse(BillingError.googlePlayNotConfigured.rpcError, audit, responder) }
            do throws(BillingError) {
                refunded = try refunder.refund(t, revokeAccess: request.revokeAccess, latest: latest)
            } catch {
                return refuse(error.rpcError, audit, responder)
            }
        }
        let catalog = self.catalog
        let view = refunded
        // Once the store has refunded, the record is written even if the caller has gone (its deadline passed while
        // the store answered): a refund the store made is never left unrecorded by billingd.
        run(audit, context, responder, abandonable: false) { ledger, now throws(BillingError) in
            _ = try PurchaseRules.applyFetchedView(
                ledger, view, context: RuleContext(nowMs: now, cause: .support("RefundPurchase"), catalog: catalog))
            guard let after = try ledger.owned(transactionID: view.transactionID) else {
                throw .transactionUnknown(transactionID: view.transactionID)
            }
            var response = RefundPurchaseResponse()
            response.transaction = BillingAPI.Transaction(after.transaction, catalog: catalog)
            if let orderID = after.orderID, let order = try ledger.order(id: orderID) { response.order = BillingAPI.Order(order) }
            return response
        }
    }

    /// The transaction a refund names: by its own id (a Google Play orderId), else the newest of its purchase token.
    static func refundTarget(_ ledger: any PurchaseLedger, _ id: String) throws(BillingError) -> OwnedTransaction? {
        if let owned = try ledger.owned(transactionID: id) { return owned }
        if id.hasPrefix("grant_"), let grant = try ledger.grant(id: id) {
            var t = StoreTransaction(
                transactionID: grant.grantID, originalTransactionID: grant.grantID, productID: grant.productID, productKind: nil,
                purchaseTimeMs: grant.startTimeMs, environment: .production, bundleID: "")
            t.store = .grant
            return OwnedTransaction(transaction: t, accountID: grant.accountID, orderID: nil)
        }
        return try ledger.transaction(purchaseToken: id)
    }
}
