import Glibc
import Synchronization

/// The in-memory twin of the Play Developer API, for Swift tests: purchases and subscriptions you add, answered with
/// Google's rules and errors (the same rules `IntegrationTests/googleplay_fake.py` keeps, which Google's own client
/// checks): an unknown token is 400 `invalid`, a token of another product 400 `purchaseTokenDoesNotMatchProductId`,
/// a package not served `unauthorized`; acknowledging or consuming a purchase that is not PURCHASED, or consuming
/// twice, 400 `invalidPurchaseState`; consuming acknowledges. Every call is recorded; `failNext` fails the next call
/// of an endpoint.
public final class InMemoryGooglePlayAPI: GooglePlayDeveloperAPI {
    /// One call as the twin saw it: the endpoint (Google's method name, as the HTTP client reports it), the package,
    /// the product or subscription id, the token and what else matters.
    public struct Call: Sendable, Equatable {
        public var endpoint: String
        public var packageName: String
        public var productID: String
        public var token: String
        public var detail: String
    }

    private struct Voided {
        var purchase: GooglePlay.VoidedPurchase
        var subscription: Bool
    }

    private struct State {
        var products: [String: GooglePlay.ProductPurchase] = [:]
        var subscriptions: [String: GooglePlay.SubscriptionPurchaseV2] = [:]
        var voided: [String: [Voided]] = [:]
        var failures: [String: [GooglePlayAPIError]] = [:]
        var calls: [Call] = []
    }

    /// The endpoints' names.
    public static let endpoints = [
        "purchases.products.get", "purchases.products.acknowledge", "purchases.products.consume", "purchases.subscriptionsv2.get",
        "purchases.subscriptions.acknowledge", "purchases.voidedpurchases.list", "orders.refund", "purchases.subscriptionsv2.revoke",
    ]

    private let state = Mutex(State())
    /// The packages the service account may see.
    public let packages: Set<String>
    /// voidedpurchases.list's page size when the query names none (Google: 1000).
    public let defaultPageSize: Int

    public init(packages: Set<String> = ["com.example.app"], defaultPageSize: Int = 1000) {
        self.packages = packages
        self.defaultPageSize = max(1, defaultPageSize)
    }

    // MARK: seeding and inspection

    /// Adds (or replaces) a one-time purchase of `packageName`; its `productID` and `purchaseToken` must be set.
    public func add(_ purchase: GooglePlay.ProductPurchase, packageName: String = "com.example.app") {
        guard let token = purchase.purchaseToken, purchase.productID != nil else {
            preconditionFailure("InMemoryGooglePlayAPI.add takes a purchase with productID and purchaseToken")
        }
        state.withLock { $0.products[packageName + "/" + token] = purchase }
    }

    /// Adds (or replaces) a subscription purchase under `token`.
    public func add(_ subscription: GooglePlay.SubscriptionPurchaseV2, token: String, packageName: String = "com.example.app") {
        state.withLock { $0.subscriptions[packageName + "/" + token] = subscription }
    }

    /// Adds a voided purchase to voidedpurchases.list (`subscription`: listed only with `type` 1).
    public func addVoided(_ purchase: GooglePlay.VoidedPurchase, subscription: Bool = false, packageName: String = "com.example.app") {
        state.withLock { $0.voided[packageName, default: []].append(Voided(purchase: purchase, subscription: subscription)) }
    }

    /// The one-time purchase as it is now (acknowledged, consumed).
    public func product(_ token: String, packageName: String = "com.example.app") -> GooglePlay.ProductPurchase? {
        state.withLock { $0.products[packageName + "/" + token] }
    }

    /// The subscription as it is now.
    public func subscription(_ token: String, packageName: String = "com.example.app") -> GooglePlay.SubscriptionPurchaseV2? {
        state.withLock { $0.subscriptions[packageName + "/" + token] }
    }

    /// The next call of `endpoint` (Google's method name, `purchases.products.get`, ...) fails with `error`.
    public func failNext(_ endpoint: String, with error: GooglePlayAPIError) {
        state.withLock { $0.failures[endpoint, default: []].append(error) }
    }

    /// Every call so far, oldest first.
    public var calls: [Call] { state.withLock { $0.calls } }

    /// The calls of one endpoint.
    public func calls(_ endpoint: String) -> [Call] { calls.filter { $0.endpoint == endpoint } }

    // MARK: the endpoints

    public func productPurchase(packageName: String, productID: String, token: String) throws(GooglePlayAPIError) -> GooglePlay.ProductPurchase {
        try begin("purchases.products.get", packageName, productID, token)
        return try product(packageName, productID, token)
    }

    public func acknowledgeProduct(packageName: String, productID: String, token: String, developerPayload: String?) throws(GooglePlayAPIError) {
        try begin("purchases.products.acknowledge", packageName, productID, token, developerPayload ?? "")
        var p = try product(packageName, productID, token)
        guard p.state == .purchased else { throw Self.invalidState }
        p.acknowledgementState = 1
        if let developerPayload { p.developerPayload = developerPayload }
        store(p, packageName, token)
    }

    public func consumeProduct(packageName: String, productID: String, token: String) throws(GooglePlayAPIError) {
        try begin("purchases.products.consume", packageName, productID, token)
        var p = try product(packageName, productID, token)
        guard p.state == .purchased, !p.isConsumed else { throw Self.invalidState }
        p.consumptionState = 1
        p.acknowledgementState = 1
        store(p, packageName, token)
    }

    public func subscriptionPurchase(packageName: String, token: String) throws(GooglePlayAPIError) -> GooglePlay.SubscriptionPurchaseV2 {
        try begin("purchases.subscriptionsv2.get", packageName, "", token)
        return try subscription(packageName, token)
    }

    public func acknowledgeSubscription(
        packageName: String, subscriptionID: String, token: String, developerPayload: String?, externalAccountIDs: GooglePlay.ExternalAccountIDs?
    ) throws(GooglePlayAPIError) {
        try begin("purchases.subscriptions.acknowledge", packageName, subscriptionID, token, externalAccountIDs?.obfuscatedAccountID ?? "")
        var s = try subscription(packageName, token)
        guard s.lineItems.contains(where: { $0.productID == subscriptionID }) else {
            throw .notFound(status: 400, reason: "purchaseTokenDoesNotMatchSubscriptionId", message: "The purchase token does not match the subscription ID.")
        }
        guard [.active, .inGracePeriod, .canceled].contains(s.subscriptionState) else { throw Self.invalidState }
        s.acknowledgementState = .acknowledged
        if let ids = externalAccountIDs {
            var known = s.externalAccountIdentifiers ?? GooglePlay.ExternalAccountIdentifiers()
            if known.obfuscatedExternalAccountID == nil { known.obfuscatedExternalAccountID = ids.obfuscatedAccountID }
            if known.obfuscatedExternalProfileID == nil { known.obfuscatedExternalProfileID = ids.obfuscatedProfileID }
            s.externalAccountIdentifiers = known
        }
        state.withLock { $0.subscriptions[packageName + "/" + token] = s }
    }

    /// Voids the order (it joins voidedpurchases.list); `revoke` cancels the one-time purchase or expires the
    /// subscription. An order voided before, or one no purchase has: 400, as Google refuses them.
    public func refundOrder(packageName: String, orderID: String, revoke: Bool) throws(GooglePlayAPIError) {
        try begin("orders.refund", packageName, "", "", "\(orderID) revoke=\(revoke)")
        try state.withLock { s throws(GooglePlayAPIError) in
            if (s.voided[packageName] ?? []).contains(where: { $0.purchase.orderID == orderID }) {
                throw .rejected(status: 400, reason: "orderAlreadyRefunded", message: "The order has already been refunded.")
            }
            let prefix = packageName + "/"
            if let (key, p) = s.products.first(where: { $0.key.hasPrefix(prefix) && $0.value.orderID == orderID }) {
                var p = p
                if revoke { p.purchaseState = GooglePlay.ProductPurchase.PurchaseState.canceled.rawValue }
                s.products[key] = p
                s.voided[packageName, default: []].append(
                    Voided(
                        purchase: GooglePlay.VoidedPurchase(
                            purchaseToken: String(key.dropFirst(prefix.count)), orderID: orderID,
                            voidedTimeMillis: Self.nowMs(), voidedSource: 1, voidedReason: 0), subscription: false))
                return
            }
            if let (key, sub) = s.subscriptions.first(where: { $0.key.hasPrefix(prefix) && $0.value.orderID == orderID }) {
                var sub = sub
                if revoke { sub.subscriptionState = .expired }
                s.subscriptions[key] = sub
                s.voided[packageName, default: []].append(
                    Voided(
                        purchase: GooglePlay.VoidedPurchase(
                            purchaseToken: String(key.dropFirst(prefix.count)), orderID: orderID,
                            voidedTimeMillis: Self.nowMs(), voidedSource: 1, voidedReason: 0), subscription: true))
                return
            }
            throw .rejected(status: 404, reason: "notFound", message: "No order was found with the given ID.")
        }
    }

    public func revokeSubscription(packageName: String, token: String) throws(GooglePlayAPIError) {
        try begin("purchases.subscriptionsv2.revoke", packageName, "", token)
        var s = try subscription(packageName, token)
        guard [.active, .inGracePeriod, .canceled, .onHold, .paused].contains(s.subscriptionState) else { throw Self.invalidState }
        s.subscriptionState = .expired
        let order = s.orderID
        state.withLock { st in
            st.subscriptions[packageName + "/" + token] = s
            st.voided[packageName, default: []].append(
                Voided(
                    purchase: GooglePlay.VoidedPurchase(
                        purchaseToken: token, orderID: order, voidedTimeMillis: Self.nowMs(), voidedSource: 1,
                        voidedReason: 0), subscription: true))
        }
    }

    private static func nowMs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    public func voidedPurchases(packageName: String, _ query: GooglePlay.VoidedPurchasesQuery) throws(GooglePlayAPIError) -> GooglePlay.VoidedPurchasesPage {
        try begin("purchases.voidedpurchases.list", packageName, "", "", query.parameters.map { "\($0)=\($1)" }.joined(separator: "&"))
        var start = 0
        if let token = query.pageToken {
            guard let n = Int(token), n >= 0 else { throw .rejected(status: 400, reason: "invalid", message: "Invalid page token.") }
            start = n
        }
        let size = min(max(1, query.pageSize ?? defaultPageSize), 1000)
        let rows = state.withLock { s in
            (s.voided[packageName] ?? []).filter { v in
                (query.type == 1 || !v.subscription) && v.purchase.voidedTimeMillis >= (query.startTimeMillis ?? Int64.min)
                    && v.purchase.voidedTimeMillis <= (query.endTimeMillis ?? Int64.max)
            }.map(\.purchase).sorted { $0.voidedTimeMillis < $1.voidedTimeMillis }
        }
        let from = min(start, rows.count)
        let end = min(rows.count, from + size)
        return GooglePlay.VoidedPurchasesPage(purchases: Array(rows[from..<end]), nextPageToken: end < rows.count ? String(end) : nil)
    }

    // MARK: helpers

    private static let invalidState = GooglePlayAPIError.rejected(
        status: 400, reason: "invalidPurchaseState", message: "The purchase is not in a valid state to perform the desired operation.")
    private static let unknownToken = GooglePlayAPIError.notFound(status: 400, reason: "invalid", message: "Invalid Value")

    /// Logs the call, refuses a package not served, then fails it if a failure was queued for its endpoint.
    private func begin(_ endpoint: String, _ packageName: String, _ productID: String, _ token: String, _ detail: String = "") throws(GooglePlayAPIError) {
        let failure: GooglePlayAPIError? = state.withLock { s in
            s.calls.append(Call(endpoint: endpoint, packageName: packageName, productID: productID, token: token, detail: detail))
            guard var queued = s.failures[endpoint], !queued.isEmpty else { return nil }
            let first = queued.removeFirst()
            s.failures[endpoint] = queued
            return first
        }
        if let failure { throw failure }
        guard packages.contains(packageName) else {
            throw .unauthorized("HTTP 401 permissionDenied: the service account has no access to \(packageName)")
        }
    }

    private func product(_ packageName: String, _ productID: String, _ token: String) throws(GooglePlayAPIError) -> GooglePlay.ProductPurchase {
        guard let p = state.withLock({ $0.products[packageName + "/" + token] }) else { throw Self.unknownToken }
        guard p.productID == productID else {
            throw .notFound(status: 400, reason: "purchaseTokenDoesNotMatchProductId", message: "The purchase token does not match the product ID.")
        }
        return p
    }

    private func store(_ p: GooglePlay.ProductPurchase, _ packageName: String, _ token: String) {
        state.withLock { $0.products[packageName + "/" + token] = p }
    }

    private func subscription(_ packageName: String, _ token: String) throws(GooglePlayAPIError) -> GooglePlay.SubscriptionPurchaseV2 {
        guard let s = state.withLock({ $0.subscriptions[packageName + "/" + token] }) else { throw Self.unknownToken }
        return s
    }
}
