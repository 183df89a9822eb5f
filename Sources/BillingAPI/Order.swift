public import ProtoWire

/// billing.v1.Order.
public struct Order: ProtoMessage, Equatable {
    public var orderID = ""
    public var accountID = ""
    public var productID = ""
    public var state = OrderState.unspecified
    public var createTimeMs: Int64 = 0
    public var updateTimeMs: Int64 = 0
    public var transactionID = ""
    public var environment = Environment.unspecified
    public var quantity: Int32 = 0

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); orderID = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); accountID = try r.readString(field: 2)
            case 3: try expect(wt, .lengthDelimited, field: 3); productID = try r.readString(field: 3)
            case 4: try expect(wt, .varint, field: 4); state = OrderState(rawValue: try r.readEnum(field: 4))
            case 5: try expect(wt, .varint, field: 5); createTimeMs = try r.readInt64()
            case 6: try expect(wt, .varint, field: 6); updateTimeMs = try r.readInt64()
            case 7: try expect(wt, .lengthDelimited, field: 7); transactionID = try r.readString(field: 7)
            case 8: try expect(wt, .varint, field: 8); environment = Environment(rawValue: try r.readEnum(field: 8))
            case 9: try expect(wt, .varint, field: 9); quantity = try r.readInt32(field: 9)
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int {
        ProtoSize.string(1, orderID) + ProtoSize.string(2, accountID) + ProtoSize.string(3, productID)
            + ProtoSize.int32(4, state.rawValue) + ProtoSize.int64(5, createTimeMs) + ProtoSize.int64(6, updateTimeMs)
            + ProtoSize.string(7, transactionID) + ProtoSize.int32(8, environment.rawValue) + ProtoSize.int32(9, quantity)
    }

    public func encode(to w: inout ProtoWriter) {
        w.string(1, orderID); w.string(2, accountID); w.string(3, productID)
        w.int32(4, state.rawValue); w.int64(5, createTimeMs); w.int64(6, updateTimeMs)
        w.string(7, transactionID); w.int32(8, environment.rawValue); w.int32(9, quantity)
    }
}

/// billing.v1.Transaction.
public struct Transaction: ProtoMessage, Equatable {
    public var transactionID = ""
    public var originalTransactionID = ""
    public var productID = ""
    public var productType = ProductType.unspecified
    public var purchaseTimeMs: Int64 = 0
    public var expiresTimeMs: Int64 = 0
    public var revocationTimeMs: Int64 = 0
    public var quantity: Int32 = 0
    public var environment = Environment.unspecified
    public var appAccountToken = ""
    public var bundleID = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); transactionID = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); originalTransactionID = try r.readString(field: 2)
            case 3: try expect(wt, .lengthDelimited, field: 3); productID = try r.readString(field: 3)
            case 4: try expect(wt, .varint, field: 4); productType = ProductType(rawValue: try r.readEnum(field: 4))
            case 5: try expect(wt, .varint, field: 5); purchaseTimeMs = try r.readInt64()
            case 6: try expect(wt, .varint, field: 6); expiresTimeMs = try r.readInt64()
            case 7: try expect(wt, .varint, field: 7); revocationTimeMs = try r.readInt64()
            case 8: try expect(wt, .varint, field: 8); quantity = try r.readInt32(field: 8)
            case 9: try expect(wt, .varint, field: 9); environment = Environment(rawValue: try r.readEnum(field: 9))
            case 10: try expect(wt, .lengthDelimited, field: 10); appAccountToken = try r.readString(field: 10)
            case 11: try expect(wt, .lengthDelimited, field: 11); bundleID = try r.readString(field: 11)
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int {
        ProtoSize.string(1, transactionID) + ProtoSize.string(2, originalTransactionID) + ProtoSize.string(3, productID)
            + ProtoSize.int32(4, productType.rawValue) + ProtoSize.int64(5, purchaseTimeMs) + ProtoSize.int64(6, expiresTimeMs)
            + ProtoSize.int64(7, revocationTimeMs) + ProtoSize.int32(8, quantity) + ProtoSize.int32(9, environment.rawValue)
            + ProtoSize.string(10, appAccountToken) + ProtoSize.string(11, bundleID)
    }

    public func encode(to w: inout ProtoWriter) {
        w.string(1, transactionID); w.string(2, originalTransactionID); w.string(3, productID)
        w.int32(4, productType.rawValue); w.int64(5, purchaseTimeMs); w.int64(6, expiresTimeMs)
        w.int64(7, revocationTimeMs); w.int32(8, quantity); w.int32(9, environment.rawValue)
        w.string(10, appAccountToken); w.string(11, bundleID)
    }
}

/// billing.v1.Entitlement.
public struct Entitlement: ProtoMessage, Equatable {
    public var productID = ""
    public var productType = ProductType.unspecified
    public var originalTransactionID = ""
    public var latestTransactionID = ""
    public var purchaseTimeMs: Int64 = 0
    public var expiresTimeMs: Int64 = 0
    public var active = false
    public var orderID = ""
    public var revocationTimeMs: Int64 = 0
    public var gracePeriodExpiresTimeMs: Int64 = 0
    public var autoRenew = false
    public var environment = Environment.unspecified

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); productID = try r.readString(field: 1)
            case 2: try expect(wt, .varint, field: 2); productType = ProductType(rawValue: try r.readEnum(field: 2))
            case 3: try expect(wt, .lengthDelimited, field: 3); originalTransactionID = try r.readString(field: 3)
            case 4: try expect(wt, .lengthDelimited, field: 4); latestTransactionID = try r.readString(field: 4)
            case 5: try expect(wt, .varint, field: 5); purchaseTimeMs = try r.readInt64()
            case 6: try expect(wt, .varint, field: 6); expiresTimeMs = try r.readInt64()
            case 7: try expect(wt, .varint, field: 7); active = try r.readBool()
            case 8: try expect(wt, .lengthDelimited, field: 8); orderID = try r.readString(field: 8)
            case 9: try expect(wt, .varint, field: 9); revocationTimeMs = try r.readInt64()
            case 10: try expect(wt, .varint, field: 10); gracePeriodExpiresTimeMs = try r.readInt64()
            case 11: try expect(wt, .varint, field: 11); autoRenew = try r.readBool()
            case 12: try expect(wt, .varint, field: 12); environment = Environment(rawValue: try r.readEnum(field: 12))
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int {
        ProtoSize.string(1, productID) + ProtoSize.int32(2, productType.rawValue) + ProtoSize.string(3, originalTransactionID)
            + ProtoSize.string(4, latestTransactionID) + ProtoSize.int64(5, purchaseTimeMs) + ProtoSize.int64(6, expiresTimeMs)
            + ProtoSize.bool(7, active) + ProtoSize.string(8, orderID) + ProtoSize.int64(9, revocationTimeMs)
            + ProtoSize.int64(10, gracePeriodExpiresTimeMs) + ProtoSize.bool(11, autoRenew) + ProtoSize.int32(12, environment.rawValue)
    }

    public func encode(to w: inout ProtoWriter) {
        w.string(1, productID); w.int32(2, productType.rawValue); w.string(3, originalTransactionID)
        w.string(4, latestTransactionID); w.int64(5, purchaseTimeMs); w.int64(6, expiresTimeMs)
        w.bool(7, active); w.string(8, orderID); w.int64(9, revocationTimeMs)
        w.int64(10, gracePeriodExpiresTimeMs); w.bool(11, autoRenew); w.int32(12, environment.rawValue)
    }
}
