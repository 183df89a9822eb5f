public import AfterSale
import AppStore
import AppStoreAPI
import Billing
import BillingAPI
import RPC

/// The support calls of billing.admin.v1.Admin: renewal-date extensions (one subscription; every active subscriber
/// of a product, with the status of that request), Set App Account Token, app transactions. Each checks its input
/// before it calls Apple, and turns Apple's refusals into the caller's terms: 400 names the field Apple refused
/// (INVALID_FIELD), 403 (a subscription not eligible for an extension) is APPSTORE_API_REFUSED with Apple's code,
/// a 404 that Apple says may be retried is APPSTORE_API_UNAVAILABLE.
extension AdminService {
    public static let extendRenewalDate = "billing.admin.v1.Admin/ExtendRenewalDate"
    public static let extendRenewalDatesForAll = "billing.admin.v1.Admin/ExtendRenewalDatesForAll"
    public static let getExtensionStatus = "billing.admin.v1.Admin/GetExtensionStatus"
    public static let setAppAccountToken = "billing.admin.v1.Admin/SetAppAccountToken"
    public static let getAppTransaction = "billing.admin.v1.Admin/GetAppTransaction"

    /// At most this many storefronts in one mass extension (Apple has about 175).
    static let maxStorefronts = 200

    func registerSupport(in router: inout Router) {
        router.register(Self.extendRenewalDate, ExtendRenewalDateRequest.self, on: .pool(pools.appStore)) { [self] context, request, responder in
            context.note("transaction_id", String(request.originalTransactionID.prefix(32)))
            answer(responder) { () throws(BillingError) in try self.extend(request) }
        }
        router.register(Self.extendRenewalDatesForAll, ExtendRenewalDatesForAllRequest.self, on: .pool(pools.appStore)) { [self] _, request, responder in
            answer(responder) { () throws(BillingError) in try self.extendAll(request) }
        }
        router.register(Self.getExtensionStatus, GetExtensionStatusRequest.self, on: .pool(pools.appStore)) { [self] _, request, responder in
            answer(responder) { () throws(BillingError) in try self.extensionStatus(request) }
        }
        router.register(Self.setAppAccountToken, SetAppAccountTokenRequest.self, on: .pool(pools.appStore)) { [self] context, request, responder in
            context.note("transaction_id", String(request.originalTransactionID.prefix(32)))
            if let id = OrderID.canonical(request.orderID) { context.note("order_id", id) }
            answer(responder) { () throws(BillingError) in try self.setToken(request) }
        }
        router.register(Self.getAppTransaction, GetAppTransactionRequest.self, on: .pool(pools.appStore)) { [self] _, request, responder in
            answer(responder) { () throws(BillingError) in try self.appTransaction(request) }
        }
    }

    // MARK: renewal-date extensions

    /// The caller's request identifier (a UUID, lowercased), or a new one.
    static func requestIdentifier(_ raw: String) throws(BillingError) -> String {
        if raw.isEmpty { return OrderID.make() }
        guard let id = OrderID.canonical(raw) else { throw .invalidField(field: "request_identifier", problem: "is not a UUID") }
        return id
    }

    static func renewalExtension(days: Int32, reason: Int32, requestIdentifier: String) throws(BillingError) -> AppStoreAPIModel.RenewalExtension {
        guard (1...90).contains(days) else { throw .invalidField(field: "extend_by_days", problem: "must be 1 to 90") }
        guard (0...3).contains(reason) else {
            throw .invalidField(
                field: "extend_reason_code", problem: "must be 0 (undeclared), 1 (customer satisfaction), 2 (other) or 3 (service issue or outage)")
        }
        return AppStoreAPIModel.RenewalExtension(
            extendByDays: Int(days), reasonCode: Int(reason), requestIdentifier: try Self.requestIdentifier(requestIdentifier))
    }

    static func checkTransactionID(_ id: String, field: String) throws(BillingError) {
        guard AppStoreLink.isTransactionID(id) else { throw .invalidField(field: field, problem: "is not a transaction id (digits)") }
    }

    func extend(_ request: ExtendRenewalDateRequest) throws(BillingError) -> ExtendRenewalDateResponse {
        let link = try needLink("ExtendRenewalDate")
        let original = request.originalTransactionID
        try Self.checkTransactionID(original, field: "original_transaction_id")
        let ext = try Self.renewalExtension(days: request.extendByDays, reason: request.extendReasonCode, requestIdentifier: request.requestIdentifier)
        let known = try read { ledger throws(BillingError) in try ledger.transactions(originalTransactionID: original) }
        let (result, env) = try onApple(link, recorded: known.first?.transaction.environment, id: original, field: "original_transaction_id") {
            env throws(AppStoreAPIError) in
            try link.client.extendRenewalDate(original, ext, in: env)
        }
        var r = ExtendRenewalDateResponse()
        r.originalTransactionID = result.originalTransactionID
        r.webOrderLineItemID = result.webOrderLineItemID
        r.success = result.success
        r.effectiveTimeMs = result.effectiveDateMs
        r.requestIdentifier = ext.requestIdentifier
        r.environment = env == .production ? .production : .sandbox
        r.accountID = known.first { !$0.accountID.isEmpty }?.accountID ?? ""
        r.currentExpiresTimeMs = known.map(\.transaction.expiresTimeMs).max() ?? 0
        return r
    }

    func extendAll(_ request: ExtendRenewalDatesForAllRequest) throws(BillingError) -> ExtendRenewalDatesForAllResponse {
        let link = try needLink("ExtendRenewalDatesForAll")
        try checkSubscriptionProduct(request.productID)
        let ext = try Self.renewalExtension(days: request.extendByDays, reason: request.extendReasonCode, requestIdentifier: request.requestIdentifier)
        guard request.storefrontCountryCodes.count <= Self.maxStorefronts else {
            throw .invalidField(field: "storefront_country_codes", problem: "holds more than \(Self.maxStorefronts)")
        }
        for (i, code) in request.storefrontCountryCodes.enumerated()
        where code.utf8.count != 3 || !code.utf8.allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) {
            throw .invalidField(field: "storefront_country_codes", problem: "entry \(i) is not an ISO 3166-1 alpha-3 code (three capital letters)")
        }
        let env = try Self.environment(request.environment, field: "environment")
        var r = ExtendRenewalDatesForAllResponse()
        do {
            r.requestIdentifier = try link.client.extendRenewalDatesForAll(
                productID: request.productID, ext, storefrontCountryCodes: request.storefrontCountryCodes, in: env)
        } catch {
            throw Self.map(error, link, field: "product_id")
        }
        if r.requestIdentifier.isEmpty { r.requestIdentifier = ext.requestIdentifier }
        r.environment = env == .production ? .production : .sandbox
        return r
    }

    func extensionStatus(_ request: GetExtensionStatusRequest) throws(BillingError) -> GetExtensionStatusResponse {
        let link = try needLink("GetExtensionStatus")
        try OrderService.checkText(request.productID, field: "product_id", max: OrderService.Limits.productID, required: true)
        guard let id = OrderID.canonical(request.requestIdentifier) else {
            throw .invalidField(field: "request_identifier", problem: "is not a UUID (the one ExtendRenewalDatesForAll answered)")
        }
        let env = try Self.environment(request.environment, field: "environment")
        let status: AppStoreAPIModel.MassExtensionStatus
        do {
            status = try link.client.extensionStatus(productID: request.productID, requestIdentifier: id, in: env)
        } catch .notFound(let code, _) where !Self.isRetryable(notFound: code) {
            throw .invalidField(field: "request_identifier", problem: "names no mass extension of \(request.productID) in \(env.rawValue)")
        } catch {
            throw Self.map(error, link, field: "request_identifier")
        }
        var r = GetExtensionStatusResponse()
        r.requestIdentifier = status.requestIdentifier.isEmpty ? id : status.requestIdentifier
        r.complete = status.complete
        r.completeTimeMs = status.completeDateMs
        r.succeededCount = status.succeededCount
        r.failedCount = status.failedCount
        return r
    }

    /// A product id as CreateOrder takes it; with a catalog, one of its auto-renewable subscriptions.
    func checkSubscriptionProduct(_ productID: String) throws(BillingError) {
        try OrderService.checkText(productID, field: "product_id", max: OrderService.Limits.productID, required: true)
        guard let catalog else { return }
        guard let product = catalog.product(productID) else { throw .productNotFound(productID: productID) }
        guard product.kind == .autoRenewableSubscription else {
            throw .invalidField(field: "product_id", problem: "is not an auto-renewable subscription in the catalog")
        }
    }

    // MARK: Set App Account Token

    func setToken(_ request: SetAppAccountTokenRequest) throws(BillingError) -> SetAppAccountTokenResponse {
        let link = try needLink("SetAppAccountToken")
        let original = request.originalTransactionID
        try Self.checkTransactionID(original, field: "original_transaction_id")
        guard !request.orderID.isEmpty else { throw .invalidField(field: "order_id", problem: "is required") }
        guard let orderID = OrderID.canonical(request.orderID) else { throw .invalidField(field: "order_id", problem: "is not a UUID") }
        // What needs no call to Apple is refused first: an unknown order, a purchase another account owns.
        let known = try read { ledger throws(BillingError) in
            if let refusal = try PurchaseRules.attachRefusal(ledger, originalTransactionID: original, fetched: [], orderID: orderID) {
                throw refusal
            }
            return try ledger.transactions(originalTransactionID: original)
        }
        if let own = known.first(where: { $0.transaction.transactionID == original }), own.transaction.ownership == .familyShared {
            throw .invalidField(field: "original_transaction_id", problem: "is a Family Sharing grant: Apple sets tokens on purchases only")
        }
        // A purchase billingd never recorded: Get Transaction Info, verified like any proof.
        var fetched: [StoreTransaction] = []
        let env: AppStoreAPIEnvironment
        if let recorded = known.first?.transaction.environment {
            guard let e = AppStoreLink.apiEnvironment(recorded) else {
                throw .invalidField(field: "original_transaction_id", problem: "is an Xcode transaction, which the App Store Server API does not know")
            }
            env = e
        } else {
            guard let verifier else { throw .receiptUntrusted(detail: "billingd trusts no root to verify Apple's answer with") }
            let (jws, found) = try onApple(link, recorded: nil, id: original, field: "original_transaction_id") { env throws(AppStoreAPIError) in
                try link.client.transactionInfo(original, in: env)
            }
            var t = try verifier.verifySignedTransaction(jws).get()
            if let kind = catalog?.product(t.productID)?.kind { t.productKind = kind }
            guard t.originalTransactionID == original else {
                throw .invalidField(
                    field: "original_transaction_id", problem: "is not an original transaction id (it belongs to \(t.originalTransactionID))")
            }
            guard t.ownership != .familyShared else {
                throw .invalidField(field: "original_transaction_id", problem: "is a Family Sharing grant: Apple sets tokens on purchases only")
            }
            fetched = [t]
            env = found
            // Its token may name another account's order: refused before Apple changes anything.
            let view = fetched
            try read { ledger throws(BillingError) in
                if let refusal = try PurchaseRules.attachRefusal(ledger, originalTransactionID: original, fetched: view, orderID: orderID) {
                    throw refusal
                }
            }
        }
        // Apple's side first: a refusal there changes nothing here.
        do {
            try link.client.setAppAccountToken(original, appAccountToken: orderID, in: env)
        } catch {
            throw Self.map(error, link, field: "original_transaction_id")
        }
        // billingd's side, the ownership rules checked again inside the database transaction.
        let catalog = self.catalog
        let now = SystemClock().nowMilliseconds()
        let views = fetched
        let attached = try write { ledger throws(BillingError) in
            try PurchaseRules.attach(
                ledger, originalTransactionID: original, fetched: views, orderID: orderID,
                context: RuleContext(nowMs: now, cause: .setAppAccountToken, catalog: catalog))
        }
        var r = SetAppAccountTokenResponse()
        r.order = BillingAPI.Order(attached.order)
        r.transactions = attached.transactions.map { BillingAPI.Transaction($0.transaction, catalog: catalog) }
        r.environment = env == .production ? .production : .sandbox
        r.orderCompleted = attached.completedOrder
        return r
    }

    // MARK: app transactions

    func appTransaction(_ request: GetAppTransactionRequest) throws(BillingError) -> GetAppTransactionResponse {
        let link = try needLink("GetAppTransaction")
        let id = request.transactionID
        try Self.checkTransactionID(id, field: "transaction_id")
        guard let processor else { throw .receiptUntrusted(detail: "billingd trusts no root to verify Apple's answer with") }
        let recorded = try read { ledger throws(BillingError) in try ledger.owned(transactionID: id)?.transaction.environment }
        let (jws, env) = try onApple(link, recorded: recorded, id: id, field: "transaction_id") { env throws(AppStoreAPIError) in
            try link.client.appTransactionInfo(id, in: env)
        }
        let p = try processor.verifyAppTransaction(jws).get()
        var r = GetAppTransactionResponse()
        r.environment = env == .production ? .production : .sandbox
        r.bundleID = p.bundleID ?? ""
        r.appAppleID = p.appAppleID ?? 0
        r.applicationVersion = p.applicationVersion ?? ""
        r.originalApplicationVersion = p.originalApplicationVersion ?? ""
        r.originalPurchaseTimeMs = p.originalPurchaseDate ?? 0
        r.originalPlatform = p.originalPlatform ?? ""
        r.appTransactionID = p.appTransactionID ?? ""
        r.signedAppTransaction = jws
        return r
    }

    // MARK: calling Apple

    /// Runs `body` in the environment billingd recorded the purchase in; for one it never recorded, in each accepted
    /// environment (production first) until one knows the id.
    func onApple<T>(
        _ link: AppStoreLink, recorded: StoreEnvironment?, id: String, field: String,
        _ body: (AppStoreAPIEnvironment) throws(AppStoreAPIError) -> T
    ) throws(BillingError) -> (T, AppStoreAPIEnvironment) {
        let environments: [AppStoreAPIEnvironment]
        if let recorded {
            guard let e = AppStoreLink.apiEnvironment(recorded) else {
                throw .invalidField(field: field, problem: "is an Xcode transaction, which the App Store Server API does not know")
            }
            environments = [e]
        } else {
            environments = link.environments
        }
        for env in environments {
            do {
                return (try body(env), env)
            } catch .notFound(let code, let message) {
                if Self.isRetryable(notFound: code) { throw .appStoreAPIUnavailable(detail: "\(code) \(message)") }
                // 4040019: the customer is known, their app transaction is not.
                if code == 4_040_019 { throw .transactionNotFound(detail: "the App Store holds no app transaction for the customer of \(id)") }
                continue
            } catch {
                throw Self.map(error, link, field: field)
            }
        }
        throw .appStoreTransactionUnknown(transactionID: id)
    }

    /// Apple's 404 codes that Apple says may succeed later (account, app, original transaction "retryable").
    static func isRetryable(notFound code: Int64) -> Bool { [4_040_002, 4_040_004, 4_040_006].contains(code) }

    /// Apple's refusals in the caller's terms.
    static func map(_ error: AppStoreAPIError, _ link: AppStoreLink, field: String) -> BillingError {
        switch error {
        case .rejected(400, let code, let message):
            return .invalidField(
                field: appleField[code] ?? field, problem: "is refused by the App Store (\(code)\(message.isEmpty ? "" : ": " + message))")
        case .rejected(403, let code, let message):
            return .appStoreAPIRefused(code: code, detail: message.isEmpty ? "forbidden" : message)
        case .notFound(let code, let message) where isRetryable(notFound: code):
            return .appStoreAPIUnavailable(detail: "\(code) \(message)")
        case .notFound:
            return .transactionNotFound(detail: "the App Store knows no such \(field)")
        default:
            return link.map(error, transactionID: nil)
        }
    }

    /// The request field each of Apple's 400 codes is about.
    static let appleField: [Int64: String] = [
        4_000_008: "original_transaction_id", 4_000_009: "extend_by_days",
        4_000_010: "extend_reason_code", 4_000_011: "request_identifier", 4_000_023: "product_id",
        4_000_027: "storefront_country_codes", 4_000_028: "storefront_country_codes", 4_000_183: "order_id",
        4_000_185: "original_transaction_id", 4_000_187: "original_transaction_id",
    ]
}
