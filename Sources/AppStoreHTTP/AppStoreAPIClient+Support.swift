import JOSE
import AppStore
public import AppStoreAPI

// The support endpoints: renewal-date extensions (one subscription, or every active subscriber of a product with
// the status of that request), Set App Account Token, Get Refund History and Get App Transaction Info. Paths,
// fields and types as Apple documents them (and as Apple's App Store Server Library sends and reads them).

extension AppStoreAPIClient {
    /// Extend a Subscription Renewal Date.
    public func extendRenewalDate(
        _ originalTransactionID: String, _ request: AppStoreAPIModel.RenewalExtension, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> AppStoreAPIModel.RenewalExtensionResult {
        let json = try call(
            "extend_renewal_date", environment, "PUT", "/inApps/v1/subscriptions/extend/" + Self.segment(originalTransactionID),
            body: Array(JSONText.object(request.fields).utf8))
        return AppStoreAPIModel.RenewalExtensionResult(
            originalTransactionID: Self.text(json, "originalTransactionId"), webOrderLineItemID: Self.text(json, "webOrderLineItemId"),
            success: Self.bool(json, "success"), effectiveDateMs: Self.integer(json, "effectiveDate"))
    }

    /// Extend Subscription Renewal Dates for All Active Subscribers: the request identifier Apple echoes.
    public func extendRenewalDatesForAll(
        productID: String, _ request: AppStoreAPIModel.RenewalExtension, storefrontCountryCodes: [String], in environment: AppStoreAPIEnvironment
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

    /// Get Status of Subscription Renewal Date Extensions.
    public func extensionStatus(
        productID: String, requestIdentifier: String, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> AppStoreAPIModel.MassExtensionStatus {
        let json = try call(
            "extension_status", environment, "GET",
            "/inApps/v1/subscriptions/extend/mass/" + Self.segment(productID) + "/" + Self.segment(requestIdentifier))
        return AppStoreAPIModel.MassExtensionStatus(
            requestIdentifier: Self.text(json, "requestIdentifier"), complete: Self.bool(json, "complete"),
            completeDateMs: Self.integer(json, "completeDate"), succeededCount: Self.integer(json, "succeededCount"),
            failedCount: Self.integer(json, "failedCount"))
    }

    /// Set App Account Token.
    public func setAppAccountToken(
        _ originalTransactionID: String, appAccountToken: String, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) {
        let body = JSONText.object([("appAccountToken", JSONText.quote(appAccountToken))])
        _ = try call(
            "set_app_account_token", environment, "PUT", "/inApps/v1/transactions/" + Self.segment(originalTransactionID) + "/appAccountToken",
            body: Array(body.utf8), expectJSON: false)
    }

    /// One page of Get Refund History.
    public func refundHistory(
        _ transactionID: String, revision: String?, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> AppStoreAPIModel.HistoryPage {
        let json = try call(
            "refund_history", environment, "GET", "/inApps/v2/refund/lookup/" + Self.segment(transactionID),
            query: revision.map { [("revision", $0)] } ?? [])
        return AppStoreAPIModel.HistoryPage(
            signedTransactions: try Self.strings(json, "signedTransactions"), revision: Self.text(json, "revision"),
            hasMore: Self.bool(json, "hasMore"))
    }

    /// Get App Transaction Info: the signed app transaction (JWS).
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

extension AppStoreAPIModel.RenewalExtension {
    /// ExtendRenewalDateRequest's fields, the common part of MassExtendRenewalDateRequest's.
    var fields: [(String, String?)] {
        [
            ("extendByDays", String(extendByDays)), ("extendReasonCode", String(reasonCode)),
            ("requestIdentifier", JSONText.quote(requestIdentifier)),
        ]
    }
}
