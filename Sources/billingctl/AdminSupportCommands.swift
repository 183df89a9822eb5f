import AppStoreAPI
import BillingAPI

/// `billingctl admin extend|extend-all|extension-status|set-token|app-transaction`: the support calls of
/// billing.admin.v1.Admin on billingd. Answers print as proto3 JSON.
extension AppStoreCommands {
    static let supportUsage = """
          admin extend ORIGINAL_TRANSACTION_ID --days N [--reason 0-3] [--request-id UUID]   ExtendRenewalDate (reason 0
                undeclared (default), 1 customer satisfaction, 2 other, 3 service issue or outage)
          admin extend-all PRODUCT_ID --days N [--reason 0-3] [--request-id UUID] [--storefront USA ...] [--environment E]
                ExtendRenewalDatesForAll: every active subscriber of the product (default: every storefront, sandbox)
          admin extension-status PRODUCT_ID REQUEST_ID [--environment E]   GetExtensionStatus of a mass extension
          admin set-token ORIGINAL_TRANSACTION_ID ORDER_ID   SetAppAccountToken: the purchase's token becomes the order id
                at Apple; billingd attaches it to the order's account (and completes the order when it can)
          admin app-transaction TRANSACTION_ID               GetAppTransaction: the customer's app transaction
        """

    /// Runs one support subcommand; false when `sub` is not one.
    static func support(_ sub: String, _ options: Options, _ env: AppStoreAPIEnvironment) throws -> Bool {
        let environment: Environment = env == .production ? .production : .sandbox
        func positional(_ n: Int, _ what: String) throws -> [String] {
            guard options.positional.count == n + 1 else { throw Usage(message: "admin \(sub) needs \(what)") }
            return Array(options.positional.dropFirst())
        }
        func days() throws -> Int32 {
            guard let raw = options.named["days"], let n = Int32(raw) else { throw Usage(message: "admin \(sub) needs --days N (1 to 90)") }
            return n
        }
        func reason() throws -> Int32 {
            guard let raw = options.named["reason"] else { return 0 }
            guard let n = Int32(raw) else { throw Usage(message: "--reason is 0, 1, 2 or 3") }
            return n
        }
        switch sub {
        case "extend":
            let args = try positional(1, "an ORIGINAL_TRANSACTION_ID")
            var req = ExtendRenewalDateRequest()
            req.originalTransactionID = args[0]
            req.extendByDays = try days()
            req.extendReasonCode = try reason()
            req.requestIdentifier = options.named["request-id"] ?? ""
            let r = try call(options, "billing.admin.v1.Admin/ExtendRenewalDate", req, ExtendRenewalDateResponse.self)
            print(
                JSON.object([
                    ("originalTransactionId", JSON.quote(r.originalTransactionID)), ("webOrderLineItemId", JSON.quote(r.webOrderLineItemID)),
                    ("success", String(r.success)), ("effectiveTimeMs", JSON.quote(String(r.effectiveTimeMs))),
                    ("requestIdentifier", JSON.quote(r.requestIdentifier)), ("environment", JSON.quote(r.environment.description)),
                    ("accountId", r.accountID.isEmpty ? nil : JSON.quote(r.accountID)),
                    ("currentExpiresTimeMs", r.currentExpiresTimeMs == 0 ? nil : JSON.quote(String(r.currentExpiresTimeMs))),
                ]))
        case "extend-all":
            let args = try positional(1, "a PRODUCT_ID")
            var req = ExtendRenewalDatesForAllRequest()
            req.productID = args[0]
            req.extendByDays = try days()
            req.extendReasonCode = try reason()
            req.requestIdentifier = options.named["request-id"] ?? ""
            req.storefrontCountryCodes = options.repeated["storefront"] ?? []
            req.environment = environment
            let r = try call(options, "billing.admin.v1.Admin/ExtendRenewalDatesForAll", req, ExtendRenewalDatesForAllResponse.self)
            print(JSON.object([("requestIdentifier", JSON.quote(r.requestIdentifier)), ("environment", JSON.quote(r.environment.description))]))
        case "extension-status":
            let args = try positional(2, "a PRODUCT_ID and a REQUEST_ID")
            var req = GetExtensionStatusRequest()
            req.productID = args[0]
            req.requestIdentifier = args[1]
            req.environment = environment
            let r = try call(options, "billing.admin.v1.Admin/GetExtensionStatus", req, GetExtensionStatusResponse.self)
            print(
                JSON.object([
                    ("requestIdentifier", JSON.quote(r.requestIdentifier)), ("complete", String(r.complete)),
                    ("completeTimeMs", r.completeTimeMs == 0 ? nil : JSON.quote(String(r.completeTimeMs))),
                    ("succeededCount", JSON.quote(String(r.succeededCount))), ("failedCount", JSON.quote(String(r.failedCount))),
                ]))
        case "set-token":
            let args = try positional(2, "an ORIGINAL_TRANSACTION_ID and an ORDER_ID")
            var req = SetAppAccountTokenRequest()
            req.originalTransactionID = args[0]
            req.orderID = args[1]
            let r = try call(options, "billing.admin.v1.Admin/SetAppAccountToken", req, SetAppAccountTokenResponse.self)
            print(
                JSON.object([
                    ("order", r.order.map { JSON.order($0, indent: 1) }),
                    ("transactions", "[" + r.transactions.map { JSON.transaction($0, indent: 1) }.joined(separator: ", ") + "]"),
                    ("environment", JSON.quote(r.environment.description)), ("orderCompleted", String(r.orderCompleted)),
                ]))
        case "app-transaction":
            let args = try positional(1, "a TRANSACTION_ID")
            var req = GetAppTransactionRequest()
            req.transactionID = args[0]
            let r = try call(options, "billing.admin.v1.Admin/GetAppTransaction", req, GetAppTransactionResponse.self)
            print(
                JSON.object([
                    ("environment", JSON.quote(r.environment.description)), ("bundleId", JSON.quote(r.bundleID)),
                    ("appAppleId", r.appAppleID == 0 ? nil : JSON.quote(String(r.appAppleID))),
                    ("applicationVersion", JSON.quote(r.applicationVersion)),
                    ("originalApplicationVersion", JSON.quote(r.originalApplicationVersion)),
                    ("originalPurchaseTimeMs", JSON.quote(String(r.originalPurchaseTimeMs))),
                    ("originalPlatform", r.originalPlatform.isEmpty ? nil : JSON.quote(r.originalPlatform)),
                    ("appTransactionId", r.appTransactionID.isEmpty ? nil : JSON.quote(r.appTransactionID)),
                    ("signedAppTransaction", JSON.quote(r.signedAppTransaction)),
                ]))
        default:
            return false
        }
        return true
    }
}
