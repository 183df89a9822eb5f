/// The requests and answers of the App Store Server API endpoints billingd calls, as `AppStoreServerAPI` takes and
/// returns them: plain values, whatever carries them (the HTTP/2 client in AppStoreHTTP, `InMemoryAppStoreAPI`).
/// Signed items are kept as received (JWS text).
public enum AppStoreAPIModel {
    /// One page of Get Transaction History (v2), oldest first.
    /// Also the shape of a Get Refund History page.
    public struct HistoryPage: Sendable {
        public var signedTransactions: [String]
        public var revision: String
        public var hasMore: Bool

        public init(signedTransactions: [String], revision: String, hasMore: Bool) {
            self.signedTransactions = signedTransactions
            self.revision = revision
            self.hasMore = hasMore
        }
    }

    /// Get All Subscription Statuses: per subscription group, the last transactions with their status
    /// (1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked) and signed items.
    public struct SubscriptionStatus: Sendable {
        public var groupID: String
        public var status: Int64
        public var originalTransactionID: String
        public var signedTransactionInfo: String
        public var signedRenewalInfo: String

        public init(groupID: String, status: Int64, originalTransactionID: String, signedTransactionInfo: String, signedRenewalInfo: String) {
            self.groupID = groupID
            self.status = status
            self.originalTransactionID = originalTransactionID
            self.signedTransactionInfo = signedTransactionInfo
            self.signedRenewalInfo = signedRenewalInfo
        }
    }

    /// One page of Get Notification History: the signed payloads (oldest first) and the next page's token.
    public struct NotificationPage: Sendable {
        public var signedPayloads: [String]
        public var paginationToken: String?
        public var hasMore: Bool

        public init(signedPayloads: [String], paginationToken: String?, hasMore: Bool) {
            self.signedPayloads = signedPayloads
            self.paginationToken = paginationToken
            self.hasMore = hasMore
        }
    }

    /// What Send Consumption Information (v2) tells Apple about a consumable whose refund was requested.
    public struct ConsumptionInformation: Sendable {
        /// Only true when the customer agreed to share this data; Apple ignores the rest otherwise.
        public var customerConsented: Bool
        public var sampleContentProvided: Bool
        /// `DELIVERED`, `UNDELIVERED_QUALITY_ISSUE`, `UNDELIVERED_WRONG_ITEM`, `UNDELIVERED_SERVER_OUTAGE`, `UNDELIVERED_OTHER`.
        public var deliveryStatus: String
        /// 0...100000 (thousandths of a percent), when known.
        public var consumptionPercentage: Int?
        /// `DECLINE`, `GRANT_FULL`, `GRANT_PRORATED`, `NO_PREFERENCE`, when there is one.
        public var refundPreference: String?

        public init(
            customerConsented: Bool, sampleContentProvided: Bool, deliveryStatus: String,
            consumptionPercentage: Int? = nil, refundPreference: String? = nil
        ) {
            self.customerConsented = customerConsented
            self.sampleContentProvided = sampleContentProvided
            self.deliveryStatus = deliveryStatus
            self.consumptionPercentage = consumptionPercentage
            self.refundPreference = refundPreference
        }
    }

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
}
