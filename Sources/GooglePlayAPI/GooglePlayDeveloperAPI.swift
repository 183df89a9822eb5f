/// Why a call to the Play Developer API gave no usable answer. Descriptions hold Google's reason and message
/// (capped), never a key, an access token or a request body.
public enum GooglePlayAPIError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Google does not know that token for that product and package: 400 (`invalid`,
    /// `purchaseTokenDoesNotMatchProductId`), 404, 410 (`subscriptionPurchaseNoLongerAvailable`): PURCHASE_NOT_FOUND.
    case notFound(status: Int, reason: String, message: String)
    /// Another refusal of the request itself, which a retry will not change: 400 `invalidPurchaseState`
    /// (acknowledging a pending purchase, consuming twice), a voided-purchases query out of range, 409.
    case rejected(status: Int, reason: String, message: String)
    /// 401 or 403 that a fresh access token did not cure, or the token endpoint refused the service account
    /// (`invalid_grant`): the account lacks access to the app, or its key is wrong. The cause is safe to log.
    case unauthorized(String)
    /// Not reachable, too slow, 5xx or 429 after every attempt (the API or its token endpoint):
    /// GOOGLE_PLAY_UNAVAILABLE; retry later.
    case unavailable(String)
    /// A 2xx whose JSON is not what Google documents.
    case invalidAnswer(String)

    public var description: String {
        switch self {
        case .notFound(let status, let reason, let m): "Play Developer API: purchase not found (HTTP \(status) \(reason)) \(m)"
        case .rejected(let status, let reason, let m): "Play Developer API refused the call: HTTP \(status) \(reason) \(m)"
        case .unauthorized(let m): "Play Developer API: not authorized: \(m)"
        case .unavailable(let m): "Play Developer API unavailable: \(m)"
        case .invalidAnswer(let m): "Play Developer API answer not understood: \(m)"
        }
    }

    /// The metric label: `not_found`, `rejected`, `unauthorized`, `unavailable`, `invalid_answer`.
    public var kind: String {
        switch self {
        case .notFound: "not_found"
        case .rejected: "rejected"
        case .unauthorized: "unauthorized"
        case .unavailable: "unavailable"
        case .invalidAnswer: "invalid_answer"
        }
    }
}

/// What billingd asks of the Google Play Developer API v3, one method per endpoint: `GooglePlayAPIClient` (module
/// GooglePlayHTTP) calls Google over HTTPS, `InMemoryGooglePlayAPI` answers from memory in tests. Every method
/// blocks its thread (as `AppStoreServerAPI` does): call from a worker queue, never an event loop.
public protocol GooglePlayDeveloperAPI: Sendable {
    /// purchases.products.get: a one-time product purchase.
    func productPurchase(packageName: String, productID: String, token: String) throws(GooglePlayAPIError) -> GooglePlay.ProductPurchase
    /// purchases.products.acknowledge.
    func acknowledgeProduct(packageName: String, productID: String, token: String, developerPayload: String?) throws(GooglePlayAPIError)
    /// purchases.products.consume (consuming also acknowledges).
    func consumeProduct(packageName: String, productID: String, token: String) throws(GooglePlayAPIError)
    /// purchases.subscriptionsv2.get: a subscription purchase.
    func subscriptionPurchase(packageName: String, token: String) throws(GooglePlayAPIError) -> GooglePlay.SubscriptionPurchaseV2
    /// purchases.subscriptions.acknowledge (`subscriptionID`: the subscription's product id).
    func acknowledgeSubscription(
        packageName: String, subscriptionID: String, token: String, developerPayload: String?, externalAccountIDs: GooglePlay.ExternalAccountIDs?
    ) throws(GooglePlayAPIError)
    /// orders.refund: refunds one order (a one-time purchase, or one period of a subscription); `revoke` also ends
    /// the access it gave (a subscription: revoked at once, no more renewals). Google answers an empty body.
    func refundOrder(packageName: String, orderID: String, revoke: Bool) throws(GooglePlayAPIError)
    /// purchases.subscriptionsv2.revoke with a full refund (`revocationContext.fullRefund`): Google refunds the latest
    /// charge and ends the subscription's access now. (The v1 purchases.subscriptions.revoke is gone from Google's
    /// discovery document; v2 is the one its clients call.)
    func revokeSubscription(packageName: String, token: String) throws(GooglePlayAPIError)
    /// One page of purchases.voidedpurchases.list.
    func voidedPurchases(packageName: String, _ query: GooglePlay.VoidedPurchasesQuery) throws(GooglePlayAPIError) -> GooglePlay.VoidedPurchasesPage
}

extension GooglePlayDeveloperAPI {
    /// Every page of voidedpurchases.list from `query` on, up to `maxPurchases`; `stop` is asked between pages.
    /// A page token seen before ends the walk (the list is complete as far as Google pages it).
    public func allVoidedPurchases(
        packageName: String, _ query: GooglePlay.VoidedPurchasesQuery, maxPurchases: Int = 10_000, stop: () -> Bool = { false }
    ) throws(GooglePlayAPIError) -> [GooglePlay.VoidedPurchase] {
        var all: [GooglePlay.VoidedPurchase] = []
        var q = query
        var seen = Set<String>()
        while true {
            let page = try voidedPurchases(packageName: packageName, q)
            all += page.purchases
            guard all.count <= maxPurchases else {
                throw .rejected(status: 0, reason: "tooLarge", message: "more than \(maxPurchases) voided purchases")
            }
            guard let next = page.nextPageToken, !next.isEmpty, seen.insert(next).inserted else { return all }
            if stop() { throw .unavailable("stopped: the caller gave up") }
            q.pageToken = next
        }
    }
}
