import AppStore

// The support endpoints: renewal-date extensions (one subscription, or every active subscriber of a product with
// the status of that request), Set App Account Token, Get Refund History and Get App Transaction Info. Paths,
// fields and types as Apple documents them (and as Apple's App Store Server Library sends and reads them).

extension AppStoreAPIClient {
    /// ExtendRenewalDateRequest, and the common part of MassExtendRenewalDateRequest.
    public struct RenewalExtension: Sendable, Equatable {
        /// 1...90.
        public var extendByDays: Int
        /// extendReasonCode: 0 undeclared, 1 customer satisfaction, 2 other, 3 service issue or outage.
        public var reasonCode: Int
        /// Tracks the request (a UUID; Apple requires one for mass extensions).
        public var requestIdentifier: String

        public init(extendByDays: Int, reasonCode: Int, requestIdentifier: String) {
            self.extendByDays = extendByDays
            self.reasonCode = reasonCode
            self.requestIdentifier = requestIdentifier
        }

        var fields: [(String, String?)] {
            [
                ("extendByDays", String(extendByDays)), ("extendReasonCode", String(reasonCode)),
                ("requestIdentifier", JSONText.quote(requestIdentifier)),
            ]
        }
    }

    /// ExtendRenewalDateResponse.
    public struct RenewalExtensionResult: Sendable, Equatable {
        public var originalTransactionID: String
        public var webOrderLineItemID: String
        public var success: Bool
        /// effectiveDate: the subscription's new expiry (ms since 1970); 0 when Apple sent none.
        public var effectiveDateMs: Int64

        public init(originalTransactionID: String, webOrderLineItemID: String, success: Bool, effectiveDateMs: Int64) {
            self.originalTransactionID = originalTransactionID
            self.webOrderLineItemID = webOrderLineItemID
            self.success = success
            self.effectiveDateMs = effectiveDateMs
        }
    }

    /// MassExtendRenewalDateStatusResponse.
    public struct MassExtensionStatus: Sendable, Equatable {
        public var requestIdentifier: String
        public var complete: Bool
        /// completeDate (ms); 0 while not complete.
        public var completeDateMs: Int64
        public var succeededCount: Int64
        public var failedCount: Int64

        public init(requestIdentifier: String, complete: Bool, completeDateMs: Int64, succeededCount: Int64, failedCount: Int64) {
            self.requestIdentifier = requestIdentifier
            self.complete = complete
            self.completeDateMs = completeDateMs
            self.succeededCount = succeededCount
            self.failedCount = failedCount
        }
    }

    public func extendRenewalDate(
        _ originalTransactionID: String, _ request: RenewalExtension, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> RenewalExtensionResult {
        let json = try call(
            "extend_renewal_date", environment, "PUT", "/inApps/v1/subscriptions/extend/" + Self.segment(originalTransactionID),
            body: Array(JSONText.object(request.fields).utf8))
        return RenewalExtensionResult(
            originalTransactionID: Self.text(json, "originalTransactionId"), webOrderLineItemID: Self.text(json, "webOrderLineItemId"),
            success: Self.bool(json, "success"), effectiveDateMs: Self.integer(json, "effectiveDate"))
    }

    public func extendRenewalDatesForAll(
        productID: String, _ request: RenewalExtension, storefrontCountryCodes: [String], in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> String {
        var fields = request.fields + [("productId", JSONText.quote(productID))]
        // An empty list is an error to Apple (4000027): every storefront is the field left out.
        if !storefrontCountryCodes.isEmpty {
            fields.append(("storefrontCountryCodes", "[" + storefrontCountryCodes.map(JSONText.quote).joined(separator: ",") + "]"))
        }
        let json = try call(
            "extend_renewal_dates_mass", environment, "POST", "/inApps/v1/subscriptions/extend/mass", body: Array(JSONText.object(fields).utf8))
        return try Self.string(json, "requestIdentifier")
    }

    public func extensionStatus(
        productID: String, requestIdentifier: String, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> MassExtensionStatus {
        let json = try call(
            "extension_status", environment, "GET",
            "/inApps/v1/subscriptions/extend/mass/" + Self.segment(productID) + "/" + Self.segment(requestIdentifier))
        return MassExtensionStatus(
            requestIdentifier: Self.text(json, "requestIdentifier"), complete: Self.bool(json, "complete"),
            completeDateMs: Self.integer(json, "completeDate"), succeededCount: Self.integer(json, "succeededCount"),
            failedCount: Self.integer(json, "failedCount"))
    }

    public func setAppAccountToken(
        _ originalTransactionID: String, appAccountToken: String, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) {
        let body = JSONText.object([("appAccountToken", JSONText.quote(appAccountToken))])
        _ = try call(
            "set_app_account_token", environment, "PUT", "/inApps/v1/transactions/" + Self.segment(originalTransactionID) + "/appAccountToken",
            body: Array(body.utf8), expectJSON: false)
    }

    public func refundHistory(
        _ transactionID: String, revision: String?, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> HistoryPage {
        let json = try call(
            "refund_history", environment, "GET", "/inApps/v2/refund/lookup/" + Self.segment(transactionID),
            query: revision.map { [("revision", $0)] } ?? [])
        return HistoryPage(
            signedTransactions: try Self.strings(json, "signedTransactions"), revision: Self.text(json, "revision"),
            hasMore: Self.bool(json, "hasMore"))
    }

    public func appTransactionInfo(_ transactionID: String, in environment: AppStoreAPIEnvironment) throws(AppStoreAPIError) -> String {
        let json = try call(
            "app_transaction_info", environment, "GET", "/inApps/v1/transactions/appTransactions/" + Self.segment(transactionID))
        return try Self.string(json, "signedAppTransactionInfo")
    }

    /// A string member, or "" when absent.
    static func text(_ json: JSONValue, _ key: String) -> String {
        if case .object(let o) = json, case .string(let s)? = o[key] { return s }
        return ""
    }

    /// An integer member (Apple's int64 dates and counts), or 0 when absent.
    static func integer(_ json: JSONValue, _ key: String) -> Int64 {
        if case .object(let o) = json, case .integer(let n)? = o[key] { return n }
        return 0
    }
}
