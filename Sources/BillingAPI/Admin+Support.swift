public import ProtoWire

// The support messages of billing.admin.v1 (schemas/billing/admin/v1/admin.proto): renewal-date extensions, Set
// App Account Token and Get App Transaction Info.

/// billing.admin.v1.ExtendRenewalDateRequest.
public struct ExtendRenewalDateRequest: ProtoMessage, Equatable {
    public var originalTransactionID = ""
    public var extendByDays: Int32 = 0
    public var extendReasonCode: Int32 = 0
    public var requestIdentifier = ""
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); originalTransactionID = try r.readString(field: 1)
            case 2: try expect(wt, .varint, field: 2); extendByDays = try r.readInt32(field: 2)
            case 3: try expect(wt, .varint, field: 3); extendReasonCode = try r.readInt32(field: 3)
            case 4: try expect(wt, .lengthDelimited, field: 4); requestIdentifier = try r.readString(field: 4)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, originalTransactionID) + ProtoSize.int32(2, extendByDays) + ProtoSize.int32(3, extendReasonCode)
            + ProtoSize.string(4, requestIdentifier)
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, originalTransactionID); w.int32(2, extendByDays); w.int32(3, extendReasonCode); w.string(4, requestIdentifier)
    }
}

/// billing.admin.v1.ExtendRenewalDateResponse.
public struct ExtendRenewalDateResponse: ProtoMessage, Equatable {
    public var originalTransactionID = ""
    public var webOrderLineItemID = ""
    public var success = false
    public var effectiveTimeMs: Int64 = 0
    public var requestIdentifier = ""
    public var environment = Environment.unspecified
    public var accountID = ""
    public var currentExpiresTimeMs: Int64 = 0
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); originalTransactionID = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); webOrderLineItemID = try r.readString(field: 2)
            case 3: try expect(wt, .varint, field: 3); success = try r.readBool()
            case 4: try expect(wt, .varint, field: 4); effectiveTimeMs = try r.readInt64()
            case 5: try expect(wt, .lengthDelimited, field: 5); requestIdentifier = try r.readString(field: 5)
            case 6: try expect(wt, .varint, field: 6); environment = Environment(rawValue: try r.readEnum(field: 6))
            case 7: try expect(wt, .lengthDelimited, field: 7); accountID = try r.readString(field: 7)
            case 8: try expect(wt, .varint, field: 8); currentExpiresTimeMs = try r.readInt64()
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, originalTransactionID) + ProtoSize.string(2, webOrderLineItemID) + ProtoSize.bool(3, success)
            + ProtoSize.int64(4, effectiveTimeMs) + ProtoSize.string(5, requestIdentifier) + ProtoSize.int32(6, environment.rawValue)
            + ProtoSize.string(7, accountID) + ProtoSize.int64(8, currentExpiresTimeMs)
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, originalTransactionID); w.string(2, webOrderLineItemID); w.bool(3, success); w.int64(4, effectiveTimeMs)
        w.string(5, requestIdentifier); w.int32(6, environment.rawValue); w.string(7, accountID); w.int64(8, currentExpiresTimeMs)
    }
}

/// billing.admin.v1.ExtendRenewalDatesForAllRequest.
public struct ExtendRenewalDatesForAllRequest: ProtoMessage, Equatable {
    public var productID = ""
    public var extendByDays: Int32 = 0
    public var extendReasonCode: Int32 = 0
    public var requestIdentifier = ""
    public var storefrontCountryCodes: [String] = []
    public var environment = Environment.unspecified
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); productID = try r.readString(field: 1)
            case 2: try expect(wt, .varint, field: 2); extendByDays = try r.readInt32(field: 2)
            case 3: try expect(wt, .varint, field: 3); extendReasonCode = try r.readInt32(field: 3)
            case 4: try expect(wt, .lengthDelimited, field: 4); requestIdentifier = try r.readString(field: 4)
            case 5: try expect(wt, .lengthDelimited, field: 5); storefrontCountryCodes.append(try r.readString(field: 5))
            case 6: try expect(wt, .varint, field: 6); environment = Environment(rawValue: try r.readEnum(field: 6))
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, productID) + ProtoSize.int32(2, extendByDays) + ProtoSize.int32(3, extendReasonCode)
            + ProtoSize.string(4, requestIdentifier) + storefrontCountryCodes.reduce(0) { $0 + ProtoSize.string(5, $1) }
            + ProtoSize.int32(6, environment.rawValue)
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, productID); w.int32(2, extendByDays); w.int32(3, extendReasonCode); w.string(4, requestIdentifier)
        for c in storefrontCountryCodes { w.string(5, c) }
        w.int32(6, environment.rawValue)
    }
}

/// billing.admin.v1.ExtendRenewalDatesForAllResponse.
public struct ExtendRenewalDatesForAllResponse: ProtoMessage, Equatable {
    public var requestIdentifier = ""
    public var environment = Environment.unspecified
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); requestIdentifier = try r.readString(field: 1)
            case 2: try expect(wt, .varint, field: 2); environment = Environment(rawValue: try r.readEnum(field: 2))
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int { ProtoSize.string(1, requestIdentifier) + ProtoSize.int32(2, environment.rawValue) }
    public func encode(to w: inout ProtoWriter) { w.string(1, requestIdentifier); w.int32(2, environment.rawValue) }
}

/// billing.admin.v1.GetExtensionStatusRequest.
public struct GetExtensionStatusRequest: ProtoMessage, Equatable {
    public var productID = ""
    public var requestIdentifier = ""
    public var environment = Environment.unspecified
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); productID = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); requestIdentifier = try r.readString(field: 2)
            case 3: try expect(wt, .varint, field: 3); environment = Environment(rawValue: try r.readEnum(field: 3))
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int { ProtoSize.string(1, productID) + ProtoSize.string(2, requestIdentifier) + ProtoSize.int32(3, environment.rawValue) }
    public func encode(to w: inout ProtoWriter) { w.string(1, productID); w.string(2, requestIdentifier); w.int32(3, environment.rawValue) }
}

/// billing.admin.v1.GetExtensionStatusResponse.
public struct GetExtensionStatusResponse: ProtoMessage, Equatable {
    public var requestIdentifier = ""
    public var complete = false
    public var completeTimeMs: Int64 = 0
    public var succeededCount: Int64 = 0
    public var failedCount: Int64 = 0
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); requestIdentifier = try r.readString(field: 1)
            case 2: try expect(wt, .varint, field: 2); complete = try r.readBool()
            case 3: try expect(wt, .varint, field: 3); completeTimeMs = try r.readInt64()
            case 4: try expect(wt, .varint, field: 4); succeededCount = try r.readInt64()
            case 5: try expect(wt, .varint, field: 5); failedCount = try r.readInt64()
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, requestIdentifier) + ProtoSize.bool(2, complete) + ProtoSize.int64(3, completeTimeMs)
            + ProtoSize.int64(4, succeededCount) + ProtoSize.int64(5, failedCount)
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, requestIdentifier); w.bool(2, complete); w.int64(3, completeTimeMs); w.int64(4, succeededCount); w.int64(5, failedCount)
    }
}

/// billing.admin.v1.SetAppAccountTokenRequest.
public struct SetAppAccountTokenRequest: ProtoMessage, Equatable {
    public var originalTransactionID = ""
    public var orderID = ""
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); originalTransactionID = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); orderID = try r.readString(field: 2)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int { ProtoSize.string(1, originalTransactionID) + ProtoSize.string(2, orderID) }
    public func encode(to w: inout ProtoWriter) { w.string(1, originalTransactionID); w.string(2, orderID) }
}

/// billing.admin.v1.SetAppAccountTokenResponse.
public struct SetAppAccountTokenResponse: ProtoMessage, Equatable {
    public var order: Order?
    public var transactions: [Transaction] = []
    public var environment = Environment.unspecified
    public var orderCompleted = false
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); order = try r.readMessage(Order.self)
            case 2: try expect(wt, .lengthDelimited, field: 2); transactions.append(try r.readMessage(Transaction.self))
            case 3: try expect(wt, .varint, field: 3); environment = Environment(rawValue: try r.readEnum(field: 3))
            case 4: try expect(wt, .varint, field: 4); orderCompleted = try r.readBool()
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        (order.map { ProtoSize.message(1, $0) } ?? 0) + transactions.reduce(0) { $0 + ProtoSize.message(2, $1) }
            + ProtoSize.int32(3, environment.rawValue) + ProtoSize.bool(4, orderCompleted)
    }
    public func encode(to w: inout ProtoWriter) {
        if let order { w.message(1, order) }
        for t in transactions { w.message(2, t) }
        w.int32(3, environment.rawValue); w.bool(4, orderCompleted)
    }
}

/// billing.admin.v1.GetAppTransactionRequest.
public struct GetAppTransactionRequest: ProtoMessage, Equatable {
    public var transactionID = ""
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            if field == 1 { try expect(wt, .lengthDelimited, field: 1); transactionID = try r.readString(field: 1) } else { try r.skip(wt) }
        }
    }
    public var encodedSize: Int { ProtoSize.string(1, transactionID) }
    public func encode(to w: inout ProtoWriter) { w.string(1, transactionID) }
}

/// billing.admin.v1.GetAppTransactionResponse.
public struct GetAppTransactionResponse: ProtoMessage, Equatable {
    public var environment = Environment.unspecified
    public var bundleID = ""
    public var appAppleID: Int64 = 0
    public var applicationVersion = ""
    public var originalApplicationVersion = ""
    public var originalPurchaseTimeMs: Int64 = 0
    public var originalPlatform = ""
    public var appTransactionID = ""
    public var signedAppTransaction = ""
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .varint, field: 1); environment = Environment(rawValue: try r.readEnum(field: 1))
            case 2: try expect(wt, .lengthDelimited, field: 2); bundleID = try r.readString(field: 2)
            case 3: try expect(wt, .varint, field: 3); appAppleID = try r.readInt64()
            case 4: try expect(wt, .lengthDelimited, field: 4); applicationVersion = try r.readString(field: 4)
            case 5: try expect(wt, .lengthDelimited, field: 5); originalApplicationVersion = try r.readString(field: 5)
            case 6: try expect(wt, .varint, field: 6); originalPurchaseTimeMs = try r.readInt64()
            case 7: try expect(wt, .lengthDelimited, field: 7); originalPlatform = try r.readString(field: 7)
            case 8: try expect(wt, .lengthDelimited, field: 8); appTransactionID = try r.readString(field: 8)
            case 9: try expect(wt, .lengthDelimited, field: 9); signedAppTransaction = try r.readString(field: 9)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.int32(1, environment.rawValue) + ProtoSize.string(2, bundleID) + ProtoSize.int64(3, appAppleID)
            + ProtoSize.string(4, applicationVersion) + ProtoSize.string(5, originalApplicationVersion)
            + ProtoSize.int64(6, originalPurchaseTimeMs) + ProtoSize.string(7, originalPlatform) + ProtoSize.string(8, appTransactionID)
            + ProtoSize.string(9, signedAppTransaction)
    }
    public func encode(to w: inout ProtoWriter) {
        w.int32(1, environment.rawValue); w.string(2, bundleID); w.int64(3, appAppleID); w.string(4, applicationVersion)
        w.string(5, originalApplicationVersion); w.int64(6, originalPurchaseTimeMs); w.string(7, originalPlatform)
        w.string(8, appTransactionID); w.string(9, signedAppTransaction)
    }
}
