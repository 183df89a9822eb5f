public import Billing
import Foundation
public import GooglePlayAPI

/// What billingd asks of the Google Play Developer API, in the billing domain's terms: a purchase token read and
/// turned into a `StoreTransaction` (or the refusal it means), Google's failures turned into `BillingError`s.
/// Every call blocks: run on a worker queue.
public final class GooglePlayLink: Sendable {
    public let api: any GooglePlayDeveloperAPI
    /// The Android package names served (`--google-play-packages`).
    public let packages: Set<String>
    /// The environments accepted (`--environments`).
    public let environments: Set<StoreEnvironment>
    public let catalog: Catalog?
    /// Called with a line for the operator when Google refuses our service account or answers nonsense.
    private let warn: @Sendable (String) -> Void
    private let now: @Sendable () -> Int64

    /// How many `linkedPurchaseToken` steps are followed to find a subscription's first purchase.
    static let maxChain = 16

    public init(
        api: any GooglePlayDeveloperAPI, packages: Set<String>, environments: Set<StoreEnvironment>, catalog: Catalog?,
        now: @escaping @Sendable () -> Int64 = SystemClock().nowMilliseconds, warn: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.api = api
        self.packages = packages
        self.environments = environments
        self.catalog = catalog
        self.now = now
        self.warn = warn
    }

    /// The purchase `token` names, read from Google now: a one-time product or a subscription, as the catalog says
    /// (a product it does not list is asked for as a one-time product first, then as a subscription).
    public func transaction(packageName: String, productID: String, token: String) -> Result<StoreTransaction, BillingError> {
        if let problem = Self.fieldProblem(packageName: packageName, productID: productID, token: token) { return .failure(problem) }
        guard packages.contains(packageName) else {
            return .failure(.wrongApp(detail: "package \(packageName) is not one this service serves (--google-play-packages)"))
        }
        let kind = catalog?.product(productID)?.kind
        let result: Result<StoreTransaction, BillingError>
        switch kind {
        case .autoRenewableSubscription?:
            result = subscription(packageName: packageName, productID: productID, token: token)
        case .some:
            result = product(packageName: packageName, productID: productID, token: token, kind: kind)
        case nil:
            switch product(packageName: packageName, productID: productID, token: token, kind: nil) {
            case .failure(.purchaseNotFound): result = subscription(packageName: packageName, productID: productID, token: token)
            case let other: result = other
            }
        }
        return result.flatMap { t in
            environments.contains(t.environment)
                ? .success(t)
                : .failure(.environmentNotAllowed(environment: t.environment == .sandbox ? "test purchases are not accepted" : "production is not accepted"))
        }
    }

    /// purchases.products.get, as a transaction.
    public func product(packageName: String, productID: String, token: String, kind: ProductKind?) -> Result<StoreTransaction, BillingError> {
        let p: GooglePlay.ProductPurchase
        do {
            p = try api.productPurchase(packageName: packageName, productID: productID, token: token)
        } catch {
            return .failure(map(error))
        }
        switch p.state {
        case .pending?: return .failure(.purchasePending(detail: "product \(productID)"))
        case .canceled?: return .failure(.purchaseCanceled(detail: "product \(productID)"))
        case .purchased?: break
        case nil: return .failure(.googlePlayUnavailable(detail: "purchaseState \(p.purchaseState) is not one Google documents"))
        }
        guard let orderID = p.orderID, !orderID.isEmpty else {
            return .failure(.googlePlayUnavailable(detail: "a purchased product without an orderId"))
        }
        var t = StoreTransaction(
            transactionID: orderID, originalTransactionID: orderID, productID: productID, productKind: kind ?? .nonConsumable,
            purchaseTimeMs: p.purchaseTimeMillis, quantity: max(1, p.quantity), environment: p.isTest ? .sandbox : .production,
            appAccountToken: p.obfuscatedExternalAccountID, bundleID: packageName, signedTimeMs: now())
        t.store = .googlePlay
        t.purchaseToken = token
        t.price = PriceFacts(storefront: p.regionCode ?? "")
        return .success(t)
    }

    /// purchases.subscriptionsv2.get, as the transaction of its latest paid order, in the entitlement of its chain's
    /// first purchase (`linkedPurchaseToken` followed back: upgrades and resubscribes stay one subscription).
    func subscription(packageName: String, productID: String, token: String) -> Result<StoreTransaction, BillingError> {
        subscriptionView(packageName: packageName, productID: productID, token: token).map(\.transaction)
    }

    /// `subscription`, with Google's answer (its state, auto-renewal, the next product) for notifications.
    public func subscriptionView(
        packageName: String, productID: String?, token: String
    ) -> Result<(transaction: StoreTransaction, purchase: GooglePlay.SubscriptionPurchaseV2), BillingError> {
        let s: GooglePlay.SubscriptionPurchaseV2
        do {
            s = try api.subscriptionPurchase(packageName: packageName, token: token)
        } catch {
            return .failure(map(error))
        }
        let productID = productID ?? s.lineItems.first?.productID ?? ""
        if s.subscriptionState == .pending { return .failure(.purchasePending(detail: "subscription \(productID)")) }
        if s.subscriptionState == .pendingPurchaseCanceled { return .failure(.purchaseCanceled(detail: "subscription \(productID)")) }
        guard let item = s.lineItems.first(where: { $0.productID == productID }) ?? s.lineItems.first else {
            return .failure(.googlePlayUnavailable(detail: "a subscription without line items"))
        }
        guard let orderID = s.orderID, !orderID.isEmpty else {
            return .failure(.googlePlayUnavailable(detail: "a subscription without an order id"))
        }
        let original: String
        let replaced: String
        switch firstOrder(packageName: packageName, linked: s.linkedPurchaseToken, fallback: orderID) {
        case .success(let o): (original, replaced) = o
        case .failure(let e): return .failure(e)
        }
        var t = StoreTransaction(
            transactionID: orderID, originalTransactionID: original, productID: item.productID, productKind: .autoRenewableSubscription,
            purchaseTimeMs: s.startTimeMillis ?? now(), expiresTimeMs: s.expiryTimeMillis ?? 0,
            environment: s.isTestPurchase ? .sandbox : .production, appAccountToken: s.externalAccountIdentifiers?.obfuscatedExternalAccountID,
            bundleID: packageName, signedTimeMs: now())
        t.store = .googlePlay
        t.purchaseToken = token
        t.replacedTransactionID = replaced
        if let mode = item.itemReplacement?.replacementMode, mode != "DEFERRED", mode != "KEEP_EXISTING" { t.replacedAtOnce = true }
        t.subscriptionGroupID = packageName
        var price = PriceFacts(storefront: s.regionCode ?? "")
        if let money = item.recurringPrice {
            price.priceMilliunits = money.micros / 1000
            price.currency = money.currencyCode
        }
        price.offerID = item.offerDetails?.offerID ?? ""
        // A free trial's period paid nothing (Revenue counts it as a trial, not as money); an introductory price is
        // named, its amount stays the plan's recurring price (subscriptionsv2 does not give the phase's price).
        switch item.offerPhase {
        case "freeTrial":
            price.priceMilliunits = 0
            price.offerType = "FREE_TRIAL"
        case "introductoryPrice": price.offerType = "INTRODUCTORY_PRICE"
        default: break
        }
        t.price = price
        return .success((t, s))
    }

    /// The orderId of a subscription chain's first purchase, without its `..N` renewal suffix; and the latest orderId
    /// of the purchase `linked` names (the one this purchase replaced), "" when there is none.
    func firstOrder(packageName: String, linked: String?, fallback: String) -> Result<(first: String, replaced: String), BillingError> {
        var order = fallback
        var replaced = ""
        var next = linked
        var steps = 0
        while let token = next, !token.isEmpty, steps < Self.maxChain {
            steps += 1
            do {
                let older = try api.subscriptionPurchase(packageName: packageName, token: token)
                if let id = older.orderID, !id.isEmpty {
                    order = id
                    if steps == 1 { replaced = id }
                }
                next = older.linkedPurchaseToken
            } catch .notFound {
                break  // Google keeps a replaced purchase 60 days: the oldest still known starts the chain
            } catch {
                return .failure(map(error))
            }
        }
        return .success((Self.baseOrderID(order), replaced))
    }

    /// `GPA.1234-5678-9012-34567..3` -> `GPA.1234-5678-9012-34567`: renewals keep their first purchase's id.
    public static func baseOrderID(_ orderID: String) -> String {
        guard let range = orderID.range(of: "..", options: .backwards) else { return orderID }
        let suffix = orderID[range.upperBound...]
        guard !suffix.isEmpty, suffix.allSatisfy(\.isNumber) else { return orderID }
        return String(orderID[..<range.lowerBound])
    }

    /// Google's failures in the domain's terms; refusals of our credentials are logged for the operator.
    func map(_ error: GooglePlayAPIError) -> BillingError {
        switch error {
        case .notFound(let status, let reason, _): return .purchaseNotFound(detail: "HTTP \(status) \(reason)")
        case .unauthorized(let cause):
            warn("Google Play refused the service account: \(cause) (does it have access to the app in Play Console, is its key current?)")
            return .googlePlayUnavailable(detail: cause)
        case .unavailable(let detail): return .googlePlayUnavailable(detail: detail)
        case .invalidAnswer(let detail):
            warn("Google Play answered what billingd cannot read: \(detail)")
            return .googlePlayUnavailable(detail: detail)
        case .rejected(let status, let reason, _): return .purchaseNotFound(detail: "HTTP \(status) \(reason)")
        }
    }

    /// Package, product and token as Google spells them (bounded, no control characters).
    static func fieldProblem(packageName: String, productID: String, token: String) -> BillingError? {
        for (field, value, limit) in [
            ("google_play.package_name", packageName, 256), ("google_play.product_id", productID, 256), ("google_play.purchase_token", token, 4096),
        ] {
            if value.isEmpty { return .invalidField(field: field, problem: "is required") }
            if value.utf8.count > limit { return .invalidField(field: field, problem: "is longer than \(limit) bytes") }
            if value.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7F }) {
                return .invalidField(field: field, problem: "holds a space or a control character")
            }
        }
        return nil
    }
}

extension GooglePlayLink: StoreRefunder {
    /// RefundPurchase's Google half: the newest transaction of a subscription whose access is to end,
    /// purchases.subscriptionsv2.revoke with a full refund (Google refunds its latest charge, that one, and ends it
    /// now); anything else (an earlier period too) orders.refund of that order, `revoke` as asked. An order Google
    /// refunded already (in the Play Console, or by an earlier call whose answer was lost) is recorded as refunded.
    /// Answers the transaction revoked now, as billingd records a voided purchase (voidedpurchases.list lists the
    /// refund either way). Google's refusal of the request (an order refunded elsewhere, a window passed) is
    /// STORE_REFUSED with Google's words; an API that does not answer, GOOGLE_PLAY_UNAVAILABLE.
    public func refund(_ t: StoreTransaction, revokeAccess: Bool, latest: Bool) throws(BillingError) -> StoreTransaction {
        let package = t.bundleID
        guard packages.contains(package) else {
            throw .wrongApp(detail: "package \(package) is not one this service serves (--google-play-packages)")
        }
        let subscription = PurchaseRules.kind(of: t, catalog: catalog) == .autoRenewableSubscription
        do throws(GooglePlayAPIError) {
            if subscription && revokeAccess && latest && !t.purchaseToken.isEmpty {
                try api.revokeSubscription(packageName: package, token: t.purchaseToken)
            } else {
                try api.refundOrder(packageName: package, orderID: t.transactionID, revoke: revokeAccess)
            }
        } catch {
            switch error {
            case .rejected(_, let reason, let message)
            where reason == "orderAlreadyRefunded" || (message.lowercased().contains("already") && message.lowercased().contains("refund")):
                break  // Google has the refund: record it as such.
            case .rejected(let status, let reason, let message), .notFound(let status, let reason, let message):
                throw .storeRefused(storeError: "HTTP \(status) \(reason): \(String(message.prefix(200)))")
            default: throw map(error)
            }
        }
        var refunded = t
        let at = now()
        refunded.revocationTimeMs = at
        refunded.revocationType = .refundFull
        refunded.signedTimeMs = max(t.signedTimeMs + 1, at)
        return refunded
    }
}
