public import ProtoWire

/// billing.v1.Environment.
public struct Environment: ProtoEnum, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let unspecified = Environment(rawValue: 0)
    public static let production = Environment(rawValue: 1)
    public static let sandbox = Environment(rawValue: 2)
    public static let xcode = Environment(rawValue: 3)
    public var description: String {
        switch rawValue {
        case 0: "ENVIRONMENT_UNSPECIFIED"
        case 1: "ENVIRONMENT_PRODUCTION"
        case 2: "ENVIRONMENT_SANDBOX"
        case 3: "ENVIRONMENT_XCODE"
        default: "\(rawValue)"
        }
    }
}

/// billing.v1.ProductType.
public struct ProductType: ProtoEnum, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let unspecified = ProductType(rawValue: 0)
    public static let consumable = ProductType(rawValue: 1)
    public static let nonConsumable = ProductType(rawValue: 2)
    public static let autoRenewableSubscription = ProductType(rawValue: 3)
    public static let nonRenewingSubscription = ProductType(rawValue: 4)
    public var description: String {
        switch rawValue {
        case 0: "PRODUCT_TYPE_UNSPECIFIED"
        case 1: "PRODUCT_TYPE_CONSUMABLE"
        case 2: "PRODUCT_TYPE_NON_CONSUMABLE"
        case 3: "PRODUCT_TYPE_AUTO_RENEWABLE_SUBSCRIPTION"
        case 4: "PRODUCT_TYPE_NON_RENEWING_SUBSCRIPTION"
        default: "\(rawValue)"
        }
    }
}

/// billing.v1.OrderState.
public struct OrderState: ProtoEnum, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let unspecified = OrderState(rawValue: 0)
    public static let pending = OrderState(rawValue: 1)
    public static let completed = OrderState(rawValue: 2)
    public static let refunded = OrderState(rawValue: 3)
    public static let expired = OrderState(rawValue: 4)
    public var description: String {
        switch rawValue {
        case 0: "ORDER_STATE_UNSPECIFIED"
        case 1: "ORDER_STATE_PENDING"
        case 2: "ORDER_STATE_COMPLETED"
        case 3: "ORDER_STATE_REFUNDED"
        case 4: "ORDER_STATE_EXPIRED"
        default: "\(rawValue)"
        }
    }
}

/// billing.v1.Store: the store a transaction comes from.
public struct Store: ProtoEnum, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let unspecified = Store(rawValue: 0)
    public static let appStore = Store(rawValue: 1)
    public static let googlePlay = Store(rawValue: 2)
    /// Web purchases through Stripe Checkout (not served yet).
    public static let stripe = Store(rawValue: 3)
    /// No store: access an operator granted (Support.GrantEntitlement).
    public static let grant = Store(rawValue: 4)
    public var description: String {
        switch rawValue {
        case 0: "STORE_UNSPECIFIED"
        case 1: "STORE_APP_STORE"
        case 2: "STORE_GOOGLE_PLAY"
        case 3: "STORE_STRIPE"
        case 4: "STORE_GRANT"
        default: "\(rawValue)"
        }
    }
}

/// billing.v1.Ownership: the buyer, or a Family Sharing member the purchase was shared with.
public struct Ownership: ProtoEnum, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let unspecified = Ownership(rawValue: 0)
    public static let purchased = Ownership(rawValue: 1)
    public static let familyShared = Ownership(rawValue: 2)
    public var description: String {
        switch rawValue {
        case 0: "OWNERSHIP_UNSPECIFIED"
        case 1: "OWNERSHIP_PURCHASED"
        case 2: "OWNERSHIP_FAMILY_SHARED"
        default: "\(rawValue)"
        }
    }
}

/// billing.v1.EntitlementState: where an entitlement stands.
public struct EntitlementState: ProtoEnum, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let unspecified = EntitlementState(rawValue: 0)
    public static let active = EntitlementState(rawValue: 1)
    public static let gracePeriod = EntitlementState(rawValue: 2)
    public static let billingRetry = EntitlementState(rawValue: 3)
    public static let expired = EntitlementState(rawValue: 4)
    public static let revoked = EntitlementState(rawValue: 5)
    public static let paused = EntitlementState(rawValue: 6)
    public var description: String {
        switch rawValue {
        case 0: "ENTITLEMENT_STATE_UNSPECIFIED"
        case 1: "ENTITLEMENT_STATE_ACTIVE"
        case 2: "ENTITLEMENT_STATE_GRACE_PERIOD"
        case 3: "ENTITLEMENT_STATE_BILLING_RETRY"
        case 4: "ENTITLEMENT_STATE_EXPIRED"
        case 5: "ENTITLEMENT_STATE_REVOKED"
        case 6: "ENTITLEMENT_STATE_PAUSED"
        default: "\(rawValue)"
        }
    }
}

/// billing.v1.RevocationType: how a transaction was revoked.
public struct RevocationType: ProtoEnum, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let unspecified = RevocationType(rawValue: 0)
    public static let refundFull = RevocationType(rawValue: 1)
    public static let refundProrated = RevocationType(rawValue: 2)
    public static let familyRevoke = RevocationType(rawValue: 3)
    public var description: String {
        switch rawValue {
        case 0: "REVOCATION_TYPE_UNSPECIFIED"
        case 1: "REVOCATION_TYPE_REFUND_FULL"
        case 2: "REVOCATION_TYPE_REFUND_PRORATED"
        case 3: "REVOCATION_TYPE_FAMILY_REVOKE"
        default: "\(rawValue)"
        }
    }
}

/// billing.v1.OfferSignatureKind: what SignOffer signs.
public struct OfferSignatureKind: ProtoEnum, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let unspecified = OfferSignatureKind(rawValue: 0)
    public static let promotional = OfferSignatureKind(rawValue: 1)
    public static let promotionalJWS = OfferSignatureKind(rawValue: 2)
    public static let introductoryEligibility = OfferSignatureKind(rawValue: 3)
    public var description: String {
        switch rawValue {
        case 0: "OFFER_SIGNATURE_KIND_UNSPECIFIED"
        case 1: "OFFER_SIGNATURE_KIND_PROMOTIONAL"
        case 2: "OFFER_SIGNATURE_KIND_PROMOTIONAL_JWS"
        case 3: "OFFER_SIGNATURE_KIND_INTRODUCTORY_ELIGIBILITY"
        default: "\(rawValue)"
        }
    }
}

/// grpc.health.v1.HealthCheckResponse.ServingStatus.
public struct ServingStatus: ProtoEnum, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let unknown = ServingStatus(rawValue: 0)
    public static let serving = ServingStatus(rawValue: 1)
    public static let notServing = ServingStatus(rawValue: 2)
    public static let serviceUnknown = ServingStatus(rawValue: 3)
    public var description: String {
        switch rawValue {
        case 0: "UNKNOWN"
        case 1: "SERVING"
        case 2: "NOT_SERVING"
        case 3: "SERVICE_UNKNOWN"
        default: "\(rawValue)"
        }
    }
}

/// billing.v1.AccessReason: why an entitlement stands where it does (Support.ExplainAccess).
public struct AccessReason: ProtoEnum, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let unspecified = AccessReason(rawValue: 0)
    public static let purchased = AccessReason(rawValue: 1)
    public static let subscriptionActive = AccessReason(rawValue: 2)
    public static let gracePeriod = AccessReason(rawValue: 3)
    public static let billingRetry = AccessReason(rawValue: 4)
    public static let expired = AccessReason(rawValue: 5)
    public static let refunded = AccessReason(rawValue: 6)
    public static let familyShared = AccessReason(rawValue: 7)
    public static let familyRevoked = AccessReason(rawValue: 8)
    public static let upgraded = AccessReason(rawValue: 9)
    public static let granted = AccessReason(rawValue: 10)
    public static let grantRevoked = AccessReason(rawValue: 11)
    public static let grantExpired = AccessReason(rawValue: 12)
    public static let paused = AccessReason(rawValue: 13)
    public var description: String {
        switch rawValue {
        case 0: "ACCESS_REASON_UNSPECIFIED"
        case 1: "ACCESS_REASON_PURCHASED"
        case 2: "ACCESS_REASON_SUBSCRIPTION_ACTIVE"
        case 3: "ACCESS_REASON_GRACE_PERIOD"
        case 4: "ACCESS_REASON_BILLING_RETRY"
        case 5: "ACCESS_REASON_EXPIRED"
        case 6: "ACCESS_REASON_REFUNDED"
        case 7: "ACCESS_REASON_FAMILY_SHARED"
        case 8: "ACCESS_REASON_FAMILY_REVOKED"
        case 9: "ACCESS_REASON_UPGRADED"
        case 10: "ACCESS_REASON_GRANTED"
        case 11: "ACCESS_REASON_GRANT_REVOKED"
        case 12: "ACCESS_REASON_GRANT_EXPIRED"
        case 13: "ACCESS_REASON_PAUSED"
        default: String(rawValue)
        }
    }
}
