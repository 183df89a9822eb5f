/// What billingd asks of the App Store Server API, one method per endpoint: `AppStoreAPIClient` calls Apple over
/// HTTP/2, `InMemoryAppStoreAPI` answers from memory in tests. Every method blocks its thread; signed items come
/// back as received (the caller verifies them). Answer types are `AppStoreAPIClient`'s.
public protocol AppStoreServerAPI: Sendable {
    /// Get Transaction Info: the signed transaction (JWS).
    func transactionInfo(_ transactionID: String, in environment: AppStoreAPIEnvironment) throws(AppStoreAPIError) -> String
    /// One page of Get Transaction History (v2), oldest first.
    func transactionHistory(
        _ transactionID: String, revision: String?, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> AppStoreAPIClient.HistoryPage
    /// Get All Subscription Statuses.
    func subscriptionStatuses(
        _ transactionID: String, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> [AppStoreAPIClient.SubscriptionStatus]
    /// One page of Get Notification History.
    func notificationHistory(
        startMs: Int64, endMs: Int64, paginationToken: String?, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> AppStoreAPIClient.NotificationPage
    /// Send Consumption Information (v2).
    func sendConsumption(
        _ transactionID: String, _ information: AppStoreAPIClient.ConsumptionInformation, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError)
    /// Send Consumption Information (v1).
    func sendConsumptionV1(
        _ transactionID: String, _ information: AppStoreAPIClient.ConsumptionInformation, appAccountToken: String,
        in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError)
    /// Look Up Order ID: nil when Apple does not know the order id.
    func lookUpOrder(_ orderID: String, in environment: AppStoreAPIEnvironment) throws(AppStoreAPIError) -> [String]?
    /// Request a Test Notification: its token.
    func requestTestNotification(in environment: AppStoreAPIEnvironment) throws(AppStoreAPIError) -> String
    /// Get Test Notification Status.
    func testNotificationStatus(
        _ token: String, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> (signedPayload: String, attempts: [String])
    /// Extend a Subscription Renewal Date (`PUT /inApps/v1/subscriptions/extend/{originalTransactionId}`).
    func extendRenewalDate(
        _ originalTransactionID: String, _ request: AppStoreAPIClient.RenewalExtension, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> AppStoreAPIClient.RenewalExtensionResult
    /// Extend Subscription Renewal Dates for All Active Subscribers (`POST /inApps/v1/subscriptions/extend/mass`):
    /// the request identifier Apple echoes. `storefrontCountryCodes` empty: every storefront.
    func extendRenewalDatesForAll(
        productID: String, _ request: AppStoreAPIClient.RenewalExtension, storefrontCountryCodes: [String],
        in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> String
    /// Get Status of Subscription Renewal Date Extensions
    /// (`GET /inApps/v1/subscriptions/extend/mass/{productId}/{requestIdentifier}`).
    func extensionStatus(
        productID: String, requestIdentifier: String, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> AppStoreAPIClient.MassExtensionStatus
    /// Set App Account Token (`PUT /inApps/v1/transactions/{originalTransactionId}/appAccountToken`).
    func setAppAccountToken(
        _ originalTransactionID: String, appAccountToken: String, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError)
    /// One page of Get Refund History (`GET /inApps/v2/refund/lookup/{transactionId}`): the customer's refunded
    /// transactions, oldest revocation first.
    func refundHistory(
        _ transactionID: String, revision: String?, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> AppStoreAPIClient.HistoryPage
    /// Get App Transaction Info (`GET /inApps/v1/transactions/appTransactions/{transactionId}`): the signed app
    /// transaction (JWS).
    func appTransactionInfo(_ transactionID: String, in environment: AppStoreAPIEnvironment) throws(AppStoreAPIError) -> String
}

extension AppStoreServerAPI {
    /// Every page of a transaction history, up to `maxTransactions` signed transactions; `stop` is asked between
    /// pages (a caller that gave up).
    public func fullHistory(
        _ transactionID: String, in environment: AppStoreAPIEnvironment, maxTransactions: Int = 5000,
        stop: () -> Bool = { false }
    ) throws(AppStoreAPIError) -> [String] {
        try allPages("history", transactionID, maxTransactions, stop) { revision throws(AppStoreAPIError) in
            try transactionHistory(transactionID, revision: revision, in: environment)
        }
    }

    /// Every page of a customer's refund history, up to `maxTransactions` signed transactions.
    public func fullRefundHistory(
        _ transactionID: String, in environment: AppStoreAPIEnvironment, maxTransactions: Int = 5000,
        stop: () -> Bool = { false }
    ) throws(AppStoreAPIError) -> [String] {
        try allPages("refund history", transactionID, maxTransactions, stop) { revision throws(AppStoreAPIError) in
            try refundHistory(transactionID, revision: revision, in: environment)
        }
    }

    private func allPages(
        _ what: String, _ transactionID: String, _ maxTransactions: Int, _ stop: () -> Bool,
        _ page: (String?) throws(AppStoreAPIError) -> AppStoreAPIClient.HistoryPage
    ) throws(AppStoreAPIError) -> [String] {
        var all: [String] = []
        var revision: String?
        var revisions = Set<String>()
        while true {
            let p = try page(revision)
            all += p.signedTransactions
            guard all.count <= maxTransactions else {
                throw .tooLarge("the \(what) of \(transactionID) holds more than \(maxTransactions) transactions")
            }
            // A revision seen before would loop for ever: the history is complete as far as Apple pages it.
            guard p.hasMore, !p.revision.isEmpty, revisions.insert(p.revision).inserted else { return all }
            if stop() { throw .unavailable("stopped: the caller gave up") }
            revision = p.revision
        }
    }
}
