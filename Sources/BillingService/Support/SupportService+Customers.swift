public import Billing
import BillingAPI
import ProtoWire
public import RPC
import Synchronization

/// FindCustomers and GetCustomer: any id a customer quotes, to the account and its summary.
extension SupportService {
    public static let findCustomers = "billing.v1.Support/FindCustomers"
    public static let getCustomer = "billing.v1.Support/GetCustomer"
    public static let listAuditEntries = "billing.v1.Support/ListAuditEntries"
    public static let explainAccess = "billing.v1.Support/ExplainAccess"
    public static let grantEntitlement = "billing.v1.Support/GrantEntitlement"
    public static let revokeGrant = "billing.v1.Support/RevokeGrant"
    public static let transferPurchases = "billing.v1.Support/TransferPurchases"
    public static let refundPurchase = "billing.v1.Support/RefundPurchase"
    public static let deleteCustomer = "billing.v1.Support/DeleteCustomer"
    public static let methods = [
        findCustomers, getCustomer, explainAccess, grantEntitlement, revokeGrant, transferPurchases, refundPurchase, deleteCustomer,
        listAuditEntries,
    ]

    func findCustomers(_ context: CallContext, _ request: FindCustomersRequest, _ responder: Responder) {
        let query = Self.trimmed(request.query)
        let audit = makeAudit(context, "billing.v1.FindCustomersRequest", request, account: "", target: query)
        do throws(BillingError) {
            try OrderService.checkText(query, field: "query", max: Limits.query, required: true)
        } catch {
            return refuse(error.rpcError, audit, responder)
        }
        // The App Store Order ID on a customer's invoice: Apple names its transactions (a blocking call, on the
        // App Store pool: `register` put this call there).
        var appleTransactions: [String] = []
        if let appleOrder, Self.mayBeAppleOrderID(query) {
            do throws(BillingError) {
                appleTransactions = try appleOrder(query)
            } catch {
                if case .invalidField = error {
                    // Not an order id Apple knows the shape of: no Apple match.
                } else {
                    return refuse(error.rpcError, audit, responder)
                }
            }
        }
        let found = appleTransactions
        run(audit, context, responder) { ledger, now throws(BillingError) in
            var matches: [(account: String, kind: CustomerMatchKind)] = []
            func add(_ account: String, _ kind: CustomerMatchKind) {
                guard !account.isEmpty, !matches.contains(where: { $0.account == account }) else { return }
                matches.append((account, kind))
            }
            if Self.isAccountID(query), try Self.known(ledger, accountID: query) { add(query, .accountID) }
            if let id = OrderID.canonical(query) {
                if let order = try ledger.order(id: id) { add(order.accountID, .orderID) }
                // billingd's order ids are the appAccountTokens apps pass to StoreKit.
                for account in try ledger.accounts(appAccountToken: id) { add(account, .appAccountToken) }
            }
            if query.utf8.count <= BillingService.maxLookupIDBytes {
                if let owned = try ledger.owned(transactionID: query) { add(owned.accountID, .transactionID) }
                for owned in try ledger.transactions(originalTransactionID: query) { add(owned.accountID, .originalTransactionID) }
                if let owned = try ledger.transaction(purchaseToken: query) {
                    // Every account that held a transaction of the token's subscription.
                    for t in try ledger.transactions(originalTransactionID: owned.transaction.originalTransactionID) {
                        add(t.accountID, .purchaseToken)
                    }
                    add(owned.accountID, .purchaseToken)
                }
            }
            if query.hasPrefix("grant_"), let grant = try ledger.grant(id: query) { add(grant.accountID, .grantID) }
            for id in found {
                if let owned = try ledger.owned(transactionID: id) { add(owned.accountID, .appleOrderID) }
            }
            var response = FindCustomersResponse()
            for m in matches {
                guard let summary = try Self.summary(ledger, accountID: m.account, nowMs: now) else { continue }
                var match = CustomerMatch()
                match.customer = summary
                match.matched = m.kind.rawValue
                response.matches.append(match)
            }
            return response
        }
    }

    /// An App Store customer's Order ID as the invoice shows it (letters and digits, e.g. MK5TTTVWJH).
    static func mayBeAppleOrderID(_ s: String) -> Bool {
        s.utf8.count >= 6 && s.utf8.count <= 32
            && s.utf8.allSatisfy { ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || ($0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z")) }
            && s.utf8.contains { $0 >= UInt8(ascii: "A") }
    }

    func getCustomer(_ context: CallContext, _ request: GetCustomerRequest, _ responder: Responder) {
        let account = request.accountID
        let audit = makeAudit(context, "billing.v1.GetCustomerRequest", request, account: account, target: "")
        do throws(BillingError) {
            try OrderService.checkAccountID(account, required: true)
        } catch {
            return refuse(error.rpcError, audit, responder)
        }
        run(audit, context, responder) { ledger, now throws(BillingError) in
            guard let summary = try Self.summary(ledger, accountID: account, nowMs: now) else {
                throw .accountNotFound(accountID: account)
            }
            var response = GetCustomerResponse()
            response.customer = summary
            response.entitlements = try ledger.entitlements(accountID: account).map { $0.entitlement(nowMs: now) }
                .sorted { ($0.productID, $0.originalTransactionID) < ($1.productID, $1.originalTransactionID) }
                .map(BillingAPI.Entitlement.init)
            response.grants = try ledger.grants(accountID: account).map(BillingAPI.Grant.init)
            return response
        }
    }

    static func isAccountID(_ s: String) -> Bool {
        do throws(BillingError) {
            try OrderService.checkAccountID(s, required: true)
            return true
        } catch {
            return false
        }
    }

    static func known(_ ledger: any PurchaseLedger, accountID: String) throws(BillingError) -> Bool {
        try AccountRules.known(ledger, accountID: accountID)
    }

    static func summary(_ ledger: any PurchaseLedger, accountID: String, nowMs: Int64) throws(BillingError) -> BillingAPI.CustomerSummary? {
        let entitlements = try ledger.entitlements(accountID: accountID).map { $0.entitlement(nowMs: nowMs) }
        let orders = try ledger.orders(accountID: accountID)
        let transactions = try ledger.transactions(accountID: accountID)
        let grants = try ledger.grants(accountID: accountID)
        guard
            let s = AccountSummary.of(
                accountID: accountID, orders: orders, transactions: transactions, entitlements: entitlements, grants: grants)
        else { return nil }
        var out = BillingAPI.CustomerSummary()
        out.accountID = s.accountID
        out.firstSeenTimeMs = s.firstSeenTimeMs
        out.lastSeenTimeMs = s.lastSeenTimeMs
        out.activeEntitlements = Int32(clamping: s.activeEntitlements)
        out.orders = Int32(clamping: s.orders)
        out.transactions = Int32(clamping: s.transactions)
        out.refundedTransactions = Int32(clamping: s.refundedTransactions)
        out.spent = s.spent.map { Money(currency: $0.currency, milliunits: $0.milliunits) }
        out.stores = s.stores.map { BillingAPI.Store(rawValue: Int32($0.rawValue)) }
        out.deleted = Pseudonym.isPseudonym(accountID)
        return out
    }
}
