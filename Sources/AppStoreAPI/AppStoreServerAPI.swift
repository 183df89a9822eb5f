/// The two App Store Server API environments.
public enum AppStoreAPIEnvironment: String, Sendable, CaseIterable {
    case production = "Production"
    case sandbox = "Sandbox"
}

/// Why a call to the App Store Server API gave no usable answer.
public enum AppStoreAPIError: Error, Sendable, CustomStringConvertible {
    /// Not reachable, too slow, 5xx or rate-limited after every attempt: APPSTORE_API_UNAVAILABLE.
    case unavailable(String)
    /// 404 with Apple's error code (4040010 transaction id not found, ...).
    case notFound(code: Int64, message: String)
    /// Another 4xx (401: the key id, issuer id, key or bundle id is wrong).
    case rejected(status: Int, code: Int64, message: String)
    /// A 2xx whose JSON is not what Apple documents.
    case malformedAnswer(String)
    /// More than billingd takes in one call (a history of thousands of transactions).
    case tooLarge(String)

    public var description: String {
        switch self {
        case .unavailable(let m): "App Store Server API unavailable: \(m)"
        case .notFound(let code, let m): "App Store Server API: not found (\(code)) \(m)"
        case .rejected(let status, let code, let m): "App Store Server API refused the call: HTTP \(status) (\(code)) \(m)"
        case .malformedAnswer(let m): "App Store Server API answer not understood: \(m)"
        case .tooLarge(let m): "App Store Server API answer too large: \(m)"
        }
    }
}

/// What billingd asks of the App Store Server API, one method per endpoint: `AppStoreAPIClient` (module
/// AppStoreHTTP) calls Apple over HTTP/2, `InMemoryAppStoreAPI` answers from memory in tests. Every method blocks
/// its thread; signed items come back as received (the caller verifies them). Requests and answers are
/// `AppStoreAPIModel`'s.
public protocol AppStoreServerAPI: Sendable {
    /// Get Transaction Info: the signed transaction (JWS).
    func transactionInfo(_ transactionID: String, in environment: AppStoreAPIEnvironment) throws(AppStoreAPIError) -> String
    /// One page of Get Transaction History (v2), oldest first.
    func transactionHistory(
        _ transactionID: String, revision: String?, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> AppStoreAPIModel.HistoryPage
    /// Get All Subscription Statuses.
    func subscriptionStatuses(
        _ transactionID: String, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> [AppStoreAPIModel.SubscriptionStatus]
    /// One page of Get Notification History.
    func notificationHistory(
        startMs: Int64, endMs: Int64, paginationToken: String?, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> AppStoreAPIModel.NotificationPage
    /// Send Consumption Information (v2).
    func sendConsumption(
        _ transactionID: String, _ information: AppStoreAPIModel.ConsumptionInformation, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError)
    /// Send Consumption Information (v1).
    func sendConsumptionV1(
        _ transactionID: String, _ information: AppStoreAPIModel.ConsumptionInformation, appAccountToken: String,
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
        _ originalTransactionID: String, _ request: AppStoreAPIModel.RenewalExtension, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> AppStoreAPIModel.RenewalExtensionResult
    /// Extend Subscription Renewal Dates for All Active Subscribers (`POST /inApps/v1/subscriptions/extend/mass`):
    /// the request identifier Apple echoes. `storefrontCountryCodes` empty: every storefront.
    func extendRenewalDatesForAll(
        productID: String, _ request: AppStoreAPIModel.RenewalExtension, storefrontCountryCodes: [String],
        in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> String
    /// Get Status of Subscription Renewal Date Extensions
    /// (`GET /inApps/v1/subscriptions/extend/mass/{productId}/{requestIdentifier}`).
    func extensionStatus(
        productID: String, requestIdentifier: String, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> AppStoreAPIModel.MassExtensionStatus
    /// Set App Account Token (`PUT /inApps/v1/transactions/{originalTransactionId}/appAccountToken`).
    func setAppAccountToken(
        _ originalTransactionID: String, appAccountToken: String, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError)
    /// One page of Get Refund History (`GET /inApps/v2/refund/lookup/{transactionId}`): the customer's refunded
    /// transactions, oldest revocation first.
    func refundHistory(
        _ transactionID: String, revision: String?, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> AppStoreAPIModel.HistoryPage
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
        _ page: (String?) throws(AppStoreAPIError) -> AppStoreAPIModel.HistoryPage
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
