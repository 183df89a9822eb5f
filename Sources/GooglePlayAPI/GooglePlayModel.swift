/// The requests and answers of the Play Developer API v3 endpoints billingd calls, as `GooglePlayDeveloperAPI` takes
/// and returns them: plain values, field names as in Google's discovery document (`androidpublisher.v3.json`) in
/// Swift spelling (`orderId` -> `orderID`), int64 strings as `Int64`, RFC 3339 times as milliseconds since 1970.
/// Members Google leaves out are nil (or their documented default where the reference names one).
public enum GooglePlay {
    /// ProductPurchase (purchases.products.get).
    public struct ProductPurchase: Sendable, Equatable {
        /// PurchaseState: 0 purchased, 1 canceled, 2 pending.
        public enum PurchaseState: Int, Sendable {
            case purchased = 0
            case canceled = 1
            case pending = 2
        }

        public var kind: String?
        /// Absent while the purchase is pending.
        public var orderID: String?
        /// 0 purchased, 1 canceled, 2 pending (`state` reads it).
        public var purchaseState: Int
        /// 0 yet to be consumed, 1 consumed.
        public var consumptionState: Int
        /// 0 yet to be acknowledged, 1 acknowledged.
        public var acknowledgementState: Int
        public var purchaseTimeMillis: Int64
        /// nil: a standard (production) purchase; 0 test (license tester), 1 promo code, 2 rewarded.
        public var purchaseType: Int?
        /// Absent means 1.
        public var quantity: Int
        public var refundableQuantity: Int?
        public var obfuscatedExternalAccountID: String?
        public var obfuscatedExternalProfileID: String?
        public var regionCode: String?
        public var productID: String?
        public var purchaseToken: String?
        public var developerPayload: String?

        public init(
            orderID: String?, purchaseState: Int, consumptionState: Int = 0, acknowledgementState: Int = 0, purchaseTimeMillis: Int64,
            purchaseType: Int? = nil, quantity: Int = 1, refundableQuantity: Int? = nil, obfuscatedExternalAccountID: String? = nil,
            obfuscatedExternalProfileID: String? = nil, regionCode: String? = nil, productID: String? = nil, purchaseToken: String? = nil,
            developerPayload: String? = nil, kind: String? = "androidpublisher#productPurchase"
        ) {
            self.kind = kind
            self.orderID = orderID
            self.purchaseState = purchaseState
            self.consumptionState = consumptionState
            self.acknowledgementState = acknowledgementState
            self.purchaseTimeMillis = purchaseTimeMillis
            self.purchaseType = purchaseType
            self.quantity = quantity
            self.refundableQuantity = refundableQuantity
            self.obfuscatedExternalAccountID = obfuscatedExternalAccountID
            self.obfuscatedExternalProfileID = obfuscatedExternalProfileID
            self.regionCode = regionCode
            self.productID = productID
            self.purchaseToken = purchaseToken
            self.developerPayload = developerPayload
        }

        /// `purchaseState` as a case; nil for a value Google does not document.
        public var state: PurchaseState? { PurchaseState(rawValue: purchaseState) }
        /// A license tester's purchase (`purchaseType` 0): billingd's SANDBOX.
        public var isTest: Bool { purchaseType == 0 }
        public var isAcknowledged: Bool { acknowledgementState == 1 }
        public var isConsumed: Bool { consumptionState == 1 }
    }

    /// SubscriptionPurchaseV2.subscriptionState; unknown spellings are kept as they came.
    public struct SubscriptionState: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let unspecified = Self(rawValue: "SUBSCRIPTION_STATE_UNSPECIFIED")
        public static let pending = Self(rawValue: "SUBSCRIPTION_STATE_PENDING")
        public static let active = Self(rawValue: "SUBSCRIPTION_STATE_ACTIVE")
        public static let paused = Self(rawValue: "SUBSCRIPTION_STATE_PAUSED")
        public static let inGracePeriod = Self(rawValue: "SUBSCRIPTION_STATE_IN_GRACE_PERIOD")
        public static let onHold = Self(rawValue: "SUBSCRIPTION_STATE_ON_HOLD")
        public static let canceled = Self(rawValue: "SUBSCRIPTION_STATE_CANCELED")
        public static let expired = Self(rawValue: "SUBSCRIPTION_STATE_EXPIRED")
        public static let pendingPurchaseCanceled = Self(rawValue: "SUBSCRIPTION_STATE_PENDING_PURCHASE_CANCELED")
    }

    /// SubscriptionPurchaseV2.acknowledgementState.
    public struct AcknowledgementState: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let unspecified = Self(rawValue: "ACKNOWLEDGEMENT_STATE_UNSPECIFIED")
        public static let pending = Self(rawValue: "ACKNOWLEDGEMENT_STATE_PENDING")
        public static let acknowledged = Self(rawValue: "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED")
    }

    /// google.type.Money: `units` (int64 string) and `nanos` of the same sign.
    public struct Money: Sendable, Equatable {
        public var currencyCode: String
        public var units: Int64
        public var nanos: Int32

        public init(currencyCode: String, units: Int64, nanos: Int32) {
            self.currencyCode = currencyCode
            self.units = units
            self.nanos = nanos
        }

        /// The amount in millionths (nanos below a micro are dropped).
        public var micros: Int64 { units &* 1_000_000 &+ Int64(nanos / 1000) }
    }

    /// ExternalAccountIdentifiers (SubscriptionPurchaseV2).
    public struct ExternalAccountIdentifiers: Sendable, Equatable {
        public var externalAccountID: String?
        public var obfuscatedExternalAccountID: String?
        public var obfuscatedExternalProfileID: String?

        public init(externalAccountID: String? = nil, obfuscatedExternalAccountID: String? = nil, obfuscatedExternalProfileID: String? = nil) {
            self.externalAccountID = externalAccountID
            self.obfuscatedExternalAccountID = obfuscatedExternalAccountID
            self.obfuscatedExternalProfileID = obfuscatedExternalProfileID
        }
    }

    /// ExternalAccountIds of a subscription acknowledgement (`obfuscatedAccountId`, `obfuscatedProfileId`).
    public struct ExternalAccountIDs: Sendable, Equatable {
        public var obfuscatedAccountID: String?
        public var obfuscatedProfileID: String?

        public init(obfuscatedAccountID: String? = nil, obfuscatedProfileID: String? = nil) {
            self.obfuscatedAccountID = obfuscatedAccountID
            self.obfuscatedProfileID = obfuscatedProfileID
        }
    }

    /// CanceledStateContext: which of its four members Google set, and the user's cancel time and survey reason.
    public struct CanceledStateContext: Sendable, Equatable {
        public enum Initiator: String, Sendable {
            case user = "userInitiatedCancellation"
            case system = "systemInitiatedCancellation"
            case developer = "developerInitiatedCancellation"
            case replacement = "replacementCancellation"
        }

        /// nil when the context names none of the four.
        public var initiator: Initiator?
        /// userInitiatedCancellation.cancelTime.
        public var cancelTimeMillis: Int64?
        /// userInitiatedCancellation.cancelSurveyResult.reason (`CANCEL_SURVEY_REASON_...`).
        public var cancelSurveyReason: String?

        public init(initiator: Initiator?, cancelTimeMillis: Int64? = nil, cancelSurveyReason: String? = nil) {
            self.initiator = initiator
            self.cancelTimeMillis = cancelTimeMillis
            self.cancelSurveyReason = cancelSurveyReason
        }
    }

    /// OfferDetails of a line item.
    public struct OfferDetails: Sendable, Equatable {
        public var basePlanID: String?
        public var offerID: String?
        public var offerTags: [String]

        public init(basePlanID: String?, offerID: String? = nil, offerTags: [String] = []) {
            self.basePlanID = basePlanID
            self.offerID = offerID
            self.offerTags = offerTags
        }
    }

    /// ItemReplacement: what this line item replaced (an upgrade or downgrade).
    public struct ItemReplacement: Sendable, Equatable {
        public var productID: String?
        public var basePlanID: String?
        public var offerID: String?
        /// `WITH_TIME_PRORATION`, `CHARGE_PRORATED_PRICE`, `WITHOUT_PRORATION`, `CHARGE_FULL_PRICE`, `DEFERRED`,
        /// `KEEP_EXISTING`.
        public var replacementMode: String?

        public init(productID: String?, basePlanID: String? = nil, offerID: String? = nil, replacementMode: String? = nil) {
            self.productID = productID
            self.basePlanID = basePlanID
            self.offerID = offerID
            self.replacementMode = replacementMode
        }
    }

    /// SubscriptionPurchaseLineItem.
    public struct LineItem: Sendable, Equatable {
        public var productID: String
        public var expiryTimeMillis: Int64?
        /// autoRenewingPlan, when the plan renews by itself.
        public var autoRenewing: Bool
        public var autoRenewEnabled: Bool?
        /// autoRenewingPlan.recurringPrice.
        public var recurringPrice: Money?
        /// prepaidPlan present; its allowExtendAfterTime.
        public var prepaid: Bool
        public var allowExtendAfterTimeMillis: Int64?
        public var offerDetails: OfferDetails?
        public var latestSuccessfulOrderID: String?
        public var itemReplacement: ItemReplacement?
        /// deferredItemReplacement.productId.
        public var deferredReplacementProductID: String?
        /// offerPhase: which phase the item is in now (`freeTrial`, `introductoryPrice`, `basePrice`,
        /// `prorationPeriod`), when Google says.
        public var offerPhase: String?

        public init(
            productID: String, expiryTimeMillis: Int64?, autoRenewing: Bool = true, autoRenewEnabled: Bool? = true, recurringPrice: Money? = nil,
            prepaid: Bool = false, allowExtendAfterTimeMillis: Int64? = nil, offerDetails: OfferDetails? = nil,
            latestSuccessfulOrderID: String? = nil, itemReplacement: ItemReplacement? = nil, deferredReplacementProductID: String? = nil
        ) {
            self.productID = productID
            self.expiryTimeMillis = expiryTimeMillis
            self.autoRenewing = autoRenewing
            self.autoRenewEnabled = autoRenewEnabled
            self.recurringPrice = recurringPrice
            self.prepaid = prepaid
            self.allowExtendAfterTimeMillis = allowExtendAfterTimeMillis
            self.offerDetails = offerDetails
            self.latestSuccessfulOrderID = latestSuccessfulOrderID
            self.itemReplacement = itemReplacement
            self.deferredReplacementProductID = deferredReplacementProductID
        }
    }

    /// SubscriptionPurchaseV2 (purchases.subscriptionsv2.get).
    public struct SubscriptionPurchaseV2: Sendable, Equatable {
        public var kind: String?
        public var regionCode: String?
        public var startTimeMillis: Int64?
        public var subscriptionState: SubscriptionState
        public var lineItems: [LineItem]
        /// The top-level latestOrderId (older answers; the current reference has lineItems[].latestSuccessfulOrderId).
        public var latestOrderID: String?
        public var linkedPurchaseToken: String?
        public var acknowledgementState: AcknowledgementState
        public var externalAccountIdentifiers: ExternalAccountIdentifiers?
        /// testPurchase present: a license tester's subscription (billingd's SANDBOX).
        public var isTestPurchase: Bool
        /// pausedStateContext.autoResumeTime, when paused.
        public var autoResumeTimeMillis: Int64?
        public var canceledStateContext: CanceledStateContext?

        public init(
            subscriptionState: SubscriptionState, lineItems: [LineItem], startTimeMillis: Int64? = nil, regionCode: String? = nil,
            latestOrderID: String? = nil, linkedPurchaseToken: String? = nil, acknowledgementState: AcknowledgementState = .pending,
            externalAccountIdentifiers: ExternalAccountIdentifiers? = nil, isTestPurchase: Bool = false, autoResumeTimeMillis: Int64? = nil,
            canceledStateContext: CanceledStateContext? = nil, kind: String? = "androidpublisher#subscriptionPurchaseV2"
        ) {
            self.kind = kind
            self.regionCode = regionCode
            self.startTimeMillis = startTimeMillis
            self.subscriptionState = subscriptionState
            self.lineItems = lineItems
            self.latestOrderID = latestOrderID
            self.linkedPurchaseToken = linkedPurchaseToken
            self.acknowledgementState = acknowledgementState
            self.externalAccountIdentifiers = externalAccountIdentifiers
            self.isTestPurchase = isTestPurchase
            self.autoResumeTimeMillis = autoResumeTimeMillis
            self.canceledStateContext = canceledStateContext
        }

        /// The latest paid order: the first line item's latestSuccessfulOrderId, else latestOrderId.
        public var orderID: String? { lineItems.lazy.compactMap(\.latestSuccessfulOrderID).first ?? latestOrderID }
        /// The latest expiry over the line items.
        public var expiryTimeMillis: Int64? { lineItems.compactMap(\.expiryTimeMillis).max() }
        public var isAcknowledged: Bool { acknowledgementState == .acknowledged }
    }

    /// VoidedPurchase (purchases.voidedpurchases.list).
    public struct VoidedPurchase: Sendable, Equatable {
        public var kind: String?
        public var purchaseToken: String
        public var orderID: String?
        public var purchaseTimeMillis: Int64?
        public var voidedTimeMillis: Int64
        /// 0 user, 1 developer, 2 Google.
        public var voidedSource: Int
        /// 0 other, 1 remorse, 2 not received, 3 defective, 4 accidental purchase, 5 fraud, 6 friendly fraud,
        /// 7 chargeback, 8 unacknowledged purchase.
        public var voidedReason: Int
        /// Set for a quantity-based partial refund.
        public var voidedQuantity: Int?
        /// refundType where Google sends it (RTDN's codes: 1 full, 2 quantity-based partial); the v3 discovery
        /// document of this writing does not list it.
        public var refundType: Int?

        public init(
            purchaseToken: String, orderID: String?, purchaseTimeMillis: Int64? = nil, voidedTimeMillis: Int64, voidedSource: Int = 0,
            voidedReason: Int = 0, voidedQuantity: Int? = nil, refundType: Int? = nil, kind: String? = "androidpublisher#voidedPurchase"
        ) {
            self.kind = kind
            self.purchaseToken = purchaseToken
            self.orderID = orderID
            self.purchaseTimeMillis = purchaseTimeMillis
            self.voidedTimeMillis = voidedTimeMillis
            self.voidedSource = voidedSource
            self.voidedReason = voidedReason
            self.voidedQuantity = voidedQuantity
            self.refundType = refundType
        }
    }

    /// The query of voidedpurchases.list. Google ignores the times once a page token is given.
    public struct VoidedPurchasesQuery: Sendable, Equatable {
        /// startTime (ms); Google refuses more than 30 days back; nil: 30 days ago.
        public var startTimeMillis: Int64?
        /// endTime (ms); nil: now.
        public var endTimeMillis: Int64?
        /// type: 0 one-time products only (Google's default), 1 products and subscriptions.
        public var type: Int
        /// maxResults (the page size); nil: Google's default (1000).
        public var pageSize: Int?
        /// token: the nextPageToken of the previous page.
        public var pageToken: String?
        public var includeQuantityBasedPartialRefund: Bool

        public init(
            startTimeMillis: Int64? = nil, endTimeMillis: Int64? = nil, type: Int = 1, pageSize: Int? = nil, pageToken: String? = nil,
            includeQuantityBasedPartialRefund: Bool = false
        ) {
            self.startTimeMillis = startTimeMillis
            self.endTimeMillis = endTimeMillis
            self.type = type
            self.pageSize = pageSize
            self.pageToken = pageToken
            self.includeQuantityBasedPartialRefund = includeQuantityBasedPartialRefund
        }

        /// The query string's pairs, in Google's parameter names.
        public var parameters: [(String, String)] {
            var out: [(String, String)] = [("type", String(type))]
            if let startTimeMillis { out.append(("startTime", String(startTimeMillis))) }
            if let endTimeMillis { out.append(("endTime", String(endTimeMillis))) }
            if let pageSize { out.append(("maxResults", String(pageSize))) }
            if let pageToken { out.append(("token", pageToken)) }
            if includeQuantityBasedPartialRefund { out.append(("includeQuantityBasedPartialRefund", "true")) }
            return out
        }
    }

    /// One page of voidedpurchases.list: the purchases and tokenPagination.nextPageToken.
    public struct VoidedPurchasesPage: Sendable, Equatable {
        public var purchases: [VoidedPurchase]
        public var nextPageToken: String?

        public init(purchases: [VoidedPurchase], nextPageToken: String?) {
            self.purchases = purchases
            self.nextPageToken = nextPageToken
        }
    }
}
