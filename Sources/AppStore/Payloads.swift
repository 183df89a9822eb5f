import JOSE
import Foundation

/// App Store environments as signed data names them.
public enum AppStoreEnvironment: String, Sendable, Equatable, CaseIterable {
    case production = "Production"
    case sandbox = "Sandbox"
    case xcode = "Xcode"
    case localTesting = "LocalTesting"

    /// From a configuration word (`production`, `sandbox`, `xcode`).
    public init?(configName: String) {
        switch configName.lowercased() {
        case "production": self = .production
        case "sandbox": self = .sandbox
        case "xcode": self = .xcode
        case "localtesting", "local_testing": self = .localTesting
        default: return nil
        }
    }
}

/// Typed reads from a decoded JSON object; numbers may be integers or fractional milliseconds.
struct JSONFields {
    let object: JSONObject

    init(_ object: JSONObject) { self.object = object }

    init(bytes: [UInt8]) throws(VerificationFailure) {
        guard bytes.count <= JWS.maxBytes, case .object(let o)? = try? JSONReader.parse(bytes) else {
            throw .malformed("payload is not a JSON object")
        }
        object = o
    }

    func string(_ key: String) -> String? {
        if case .string(let s)? = object[key] { return s }
        return nil
    }

    func number(_ key: String) -> Double? {
        switch object[key] {
        case .integer(let n)?: Double(n)
        case .number(let d)?: d
        default: nil
        }
    }

    /// Whole numbers exactly; fractional ones (Xcode's milliseconds) rounded down; out of range absent.
    func int64(_ key: String) -> Int64? {
        switch object[key] {
        case .integer(let n)?: return n
        case .number(let d)?:
            // Out-of-range or non-finite numbers are absent, never a trap (found by FuzzTests).
            guard d.isFinite, abs(d) < 9.2e18 else { return nil }
            return Int64(d.rounded(.down))
        default: return nil
        }
    }

    /// A date in milliseconds since 1970; Xcode writes fractional milliseconds.
    func millis(_ key: String) -> Int64? { int64(key) }

    func bool(_ key: String) -> Bool? {
        if case .bool(let b)? = object[key] { return b }
        return nil
    }

    func object(_ key: String) -> JSONFields? {
        if case .object(let o)? = object[key] { return JSONFields(o) }
        return nil
    }

    func strings(_ key: String) -> [String]? {
        guard case .array(let a)? = object[key] else { return nil }
        var out: [String] = []
        for v in a {
            guard case .string(let s) = v else { return nil }
            out.append(s)
        }
        return out
    }
}

/// JWSTransactionDecodedPayload: every field Apple documents.
public struct TransactionPayload: Sendable, Equatable {
    public var transactionID: String?
    public var originalTransactionID: String?
    public var webOrderLineItemID: String?
    public var bundleID: String?
    public var productID: String?
    public var subscriptionGroupIdentifier: String?
    public var purchaseDate: Int64?
    public var originalPurchaseDate: Int64?
    public var expiresDate: Int64?
    public var quantity: Int?
    /// `Auto-Renewable Subscription`, `Non-Consumable`, `Consumable`, `Non-Renewing Subscription`.
    public var type: String?
    public var appAccountToken: String?
    public var inAppOwnershipType: String?
    public var signedDate: Int64?
    public var revocationReason: Int?
    public var revocationDate: Int64?
    public var isUpgraded: Bool?
    public var offerType: Int?
    public var offerIdentifier: String?
    public var environment: String?
    public var storefront: String?
    public var storefrontID: String?
    public var transactionReason: String?
    public var currency: String?
    public var price: Int64?
    public var offerDiscountType: String?
    public var appTransactionID: String?
    public var offerPeriod: String?
    public var revocationType: String?
    public var revocationPercentage: Int?

    public init() {}

    init(_ j: JSONFields) {
        transactionID = j.string("transactionId")
        originalTransactionID = j.string("originalTransactionId")
        webOrderLineItemID = j.string("webOrderLineItemId")
        bundleID = j.string("bundleId")
        productID = j.string("productId")
        subscriptionGroupIdentifier = j.string("subscriptionGroupIdentifier")
        purchaseDate = j.millis("purchaseDate")
        originalPurchaseDate = j.millis("originalPurchaseDate")
        expiresDate = j.millis("expiresDate")
        quantity = j.int64("quantity").map { Int(clamping: $0) }
        type = j.string("type")
        appAccountToken = j.string("appAccountToken")
        inAppOwnershipType = j.string("inAppOwnershipType")
        signedDate = j.millis("signedDate")
        revocationReason = j.int64("revocationReason").map { Int(clamping: $0) }
        revocationDate = j.millis("revocationDate")
        isUpgraded = j.bool("isUpgraded")
        offerType = j.int64("offerType").map { Int(clamping: $0) }
        offerIdentifier = j.string("offerIdentifier")
        environment = j.string("environment")
        storefront = j.string("storefront")
        storefrontID = j.string("storefrontId")
        transactionReason = j.string("transactionReason")
        currency = j.string("currency")
        price = j.int64("price")
        offerDiscountType = j.string("offerDiscountType")
        appTransactionID = j.string("appTransactionId")
        offerPeriod = j.string("offerPeriod")
        revocationType = j.string("revocationType")
        revocationPercentage = j.int64("revocationPercentage").map { Int(clamping: $0) }
    }
}

/// JWSRenewalInfoDecodedPayload.
public struct RenewalInfoPayload: Sendable, Equatable {
    public var expirationIntent: Int?
    public var originalTransactionID: String?
    public var autoRenewProductID: String?
    public var productID: String?
    public var autoRenewStatus: Int?
    public var isInBillingRetryPeriod: Bool?
    public var priceIncreaseStatus: Int?
    public var gracePeriodExpiresDate: Int64?
    public var offerType: Int?
    public var offerIdentifier: String?
    public var signedDate: Int64?
    public var environment: String?
    public var recentSubscriptionStartDate: Int64?
    public var renewalDate: Int64?
    public var currency: String?
    public var renewalPrice: Int64?
    public var offerDiscountType: String?
    public var eligibleWinBackOfferIDs: [String]?
    public var appAccountToken: String?
    public var appTransactionID: String?
    public var offerPeriod: String?

    public init() {}

    init(_ j: JSONFields) {
        expirationIntent = j.int64("expirationIntent").map { Int(clamping: $0) }
        originalTransactionID = j.string("originalTransactionId")
        autoRenewProductID = j.string("autoRenewProductId")
        productID = j.string("productId")
        autoRenewStatus = j.int64("autoRenewStatus").map { Int(clamping: $0) }
        isInBillingRetryPeriod = j.bool("isInBillingRetryPeriod")
        priceIncreaseStatus = j.int64("priceIncreaseStatus").map { Int(clamping: $0) }
        gracePeriodExpiresDate = j.millis("gracePeriodExpiresDate")
        offerType = j.int64("offerType").map { Int(clamping: $0) }
        offerIdentifier = j.string("offerIdentifier")
        signedDate = j.millis("signedDate")
        environment = j.string("environment")
        recentSubscriptionStartDate = j.millis("recentSubscriptionStartDate")
        renewalDate = j.millis("renewalDate")
        currency = j.string("currency")
        renewalPrice = j.int64("renewalPrice")
        offerDiscountType = j.string("offerDiscountType")
        eligibleWinBackOfferIDs = j.strings("eligibleWinBackOfferIds")
        appAccountToken = j.string("appAccountToken")
        appTransactionID = j.string("appTransactionId")
        offerPeriod = j.string("offerPeriod")
    }
}

/// ResponseBodyV2DecodedPayload: an App Store Server Notification v2.
public struct NotificationPayload: Sendable, Equatable {
    public struct NotificationData: Sendable, Equatable {
        public var appAppleID: Int64?
        public var bundleID: String?
        public var bundleVersion: String?
        public var environment: String?
        public var signedTransactionInfo: String?
        public var signedRenewalInfo: String?
        public var status: Int?
        public var consumptionRequestReason: String?
    }
    public struct Summary: Sendable, Equatable {
        public var environment: String?
        public var appAppleID: Int64?
        public var bundleID: String?
        public var productID: String?
        public var requestIdentifier: String?
        public var storefrontCountryCodes: [String]?
        public var succeededCount: Int64?
        public var failedCount: Int64?
    }
    public struct ExternalPurchaseToken: Sendable, Equatable {
        public var externalPurchaseID: String?
        public var tokenCreationDate: Int64?
        public var appAppleID: Int64?
        public var bundleID: String?
    }
    /// appData: what a RESCIND_CONSENT notification carries instead of `data`.
    public struct AppData: Sendable, Equatable {
        public var appAppleID: Int64?
        public var bundleID: String?
        public var environment: String?
        /// The app transaction (JWSAppTransaction), signed by the App Store.
        public var signedAppTransactionInfo: String?
    }

    public var notificationType: String?
    public var subtype: String?
    public var notificationUUID: String?
    public var version: String?
    public var signedDate: Int64?
    public var data: NotificationData?
    public var summary: Summary?
    public var externalPurchaseToken: ExternalPurchaseToken?
    public var appData: AppData?

    public init() {}

    init(_ j: JSONFields) {
        notificationType = j.string("notificationType")
        subtype = j.string("subtype")
        notificationUUID = j.string("notificationUUID")
        version = j.string("version")
        signedDate = j.millis("signedDate")
        if let d = j.object("data") {
            data = NotificationData(
                appAppleID: d.int64("appAppleId"), bundleID: d.string("bundleId"), bundleVersion: d.string("bundleVersion"),
                environment: d.string("environment"), signedTransactionInfo: d.string("signedTransactionInfo"),
                signedRenewalInfo: d.string("signedRenewalInfo"), status: d.int64("status").map { Int(clamping: $0) },
                consumptionRequestReason: d.string("consumptionRequestReason"))
        }
        if let s = j.object("summary") {
            summary = Summary(
                environment: s.string("environment"), appAppleID: s.int64("appAppleId"), bundleID: s.string("bundleId"),
                productID: s.string("productId"), requestIdentifier: s.string("requestIdentifier"),
                storefrontCountryCodes: s.strings("storefrontCountryCodes"), succeededCount: s.int64("succeededCount"),
                failedCount: s.int64("failedCount"))
        }
        if let t = j.object("externalPurchaseToken") {
            externalPurchaseToken = ExternalPurchaseToken(
                externalPurchaseID: t.string("externalPurchaseId"), tokenCreationDate: t.millis("tokenCreationDate"),
                appAppleID: t.int64("appAppleId"), bundleID: t.string("bundleId"))
        }
        if let a = j.object("appData") {
            appData = AppData(
                appAppleID: a.int64("appAppleId"), bundleID: a.string("bundleId"), environment: a.string("environment"),
                signedAppTransactionInfo: a.string("signedAppTransactionInfo"))
        }
    }

    /// Decodes a JWS's payload without verifying it: only for a notification whose signature and app
    /// `SignedDataVerifier` already checked (it refused only its environment).
    public static func decodeVerified(_ signed: String) -> NotificationPayload? {
        guard let jws = try? JWS.parse(signed), let fields = try? JSONFields(bytes: jws.payload) else { return nil }
        return NotificationPayload(fields)
    }

    /// The environment the notification speaks for (data, summary, external purchase token or app data).
    public var environment: String? { scope.environment }

    /// The bundle id the notification speaks for (data, summary, external purchase token or app data).
    public var bundleID: String? { scope.bundleID }

    /// The app id the notification speaks for, when it names one.
    public var appAppleID: Int64? { scope.appAppleID }

    /// The environment, bundle id and app id the notification speaks for. Apple sends exactly one of
    /// `data`, `summary`, `externalPurchaseToken` and `appData` (RESCIND_CONSENT); they are read in that order.
    var scope: (environment: String?, bundleID: String?, appAppleID: Int64?) {
        if let data { return (data.environment, data.bundleID, data.appAppleID) }
        if let summary { return (summary.environment, summary.bundleID, summary.appAppleID) }
        if let token = externalPurchaseToken {
            // Apple's libraries: an id starting with SANDBOX is a sandbox token.
            let env = token.externalPurchaseID?.hasPrefix("SANDBOX") == true ? "Sandbox" : "Production"
            return (env, token.bundleID, token.appAppleID)
        }
        if let appData { return (appData.environment, appData.bundleID, appData.appAppleID) }
        return (nil, nil, nil)
    }
}

/// AppTransaction: the app's own signed purchase record.
public struct AppTransactionPayload: Sendable, Equatable {
    public var receiptType: String?
    public var appAppleID: Int64?
    public var bundleID: String?
    public var applicationVersion: String?
    public var versionExternalIdentifier: Int64?
    public var receiptCreationDate: Int64?
    public var originalPurchaseDate: Int64?
    public var originalApplicationVersion: String?
    public var deviceVerification: String?
    public var deviceVerificationNonce: String?
    public var preorderDate: Int64?
    public var appTransactionID: String?
    public var originalPlatform: String?

    public init() {}

    init(_ j: JSONFields) {
        receiptType = j.string("receiptType")
        appAppleID = j.int64("appAppleId")
        bundleID = j.string("bundleId")
        applicationVersion = j.string("applicationVersion")
        versionExternalIdentifier = j.int64("versionExternalIdentifier")
        receiptCreationDate = j.millis("receiptCreationDate")
        originalPurchaseDate = j.millis("originalPurchaseDate")
        originalApplicationVersion = j.string("originalApplicationVersion")
        deviceVerification = j.string("deviceVerification")
        deviceVerificationNonce = j.string("deviceVerificationNonce")
        preorderDate = j.millis("preorderDate")
        appTransactionID = j.string("appTransactionId")
        originalPlatform = j.string("originalPlatform")
    }
}
