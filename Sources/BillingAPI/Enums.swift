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
