public import ProtoWire

// The messages of billing.admin.v1 (schemas/billing/admin/v1/admin.proto).

/// billing.admin.v1.ReconcileRequest.
public struct ReconcileRequest: ProtoMessage, Equatable {
    public var sinceTimeMs: Int64 = 0
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            if field == 1 { try expect(wt, .varint, field: 1); sinceTimeMs = try r.readInt64() } else { try r.skip(wt) }
        }
    }
    public var encodedSize: Int { ProtoSize.int64(1, sinceTimeMs) }
    public func encode(to w: inout ProtoWriter) { w.int64(1, sinceTimeMs) }
}

/// billing.admin.v1.ReconcileResponse.
public struct ReconcileResponse: ProtoMessage, Equatable {
    public var startTimeMs: Int64 = 0
    public var endTimeMs: Int64 = 0
    public var pages: Int32 = 0
    public var applied: Int32 = 0
    public var duplicate: Int32 = 0
    public var ignored: Int32 = 0
    public var rejected: Int32 = 0
    /// Customers whose refund history was read, and the refunded transactions that changed billingd's record.
    public var refundHistories: Int32 = 0
    public var refundsApplied: Int32 = 0
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .varint, field: 1); startTimeMs = try r.readInt64()
            case 2: try expect(wt, .varint, field: 2); endTimeMs = try r.readInt64()
            case 3: try expect(wt, .varint, field: 3); pages = try r.readInt32(field: 3)
            case 4: try expect(wt, .varint, field: 4); applied = try r.readInt32(field: 4)
            case 5: try expect(wt, .varint, field: 5); duplicate = try r.readInt32(field: 5)
            case 6: try expect(wt, .varint, field: 6); ignored = try r.readInt32(field: 6)
            case 7: try expect(wt, .varint, field: 7); rejected = try r.readInt32(field: 7)
            case 8: try expect(wt, .varint, field: 8); refundHistories = try r.readInt32(field: 8)
            case 9: try expect(wt, .varint, field: 9); refundsApplied = try r.readInt32(field: 9)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.int64(1, startTimeMs) + ProtoSize.int64(2, endTimeMs) + ProtoSize.int32(3, pages) + ProtoSize.int32(4, applied)
            + ProtoSize.int32(5, duplicate) + ProtoSize.int32(6, ignored) + ProtoSize.int32(7, rejected)
            + ProtoSize.int32(8, refundHistories) + ProtoSize.int32(9, refundsApplied)
    }
    public func encode(to w: inout ProtoWriter) {
        w.int64(1, startTimeMs); w.int64(2, endTimeMs); w.int32(3, pages); w.int32(4, applied)
        w.int32(5, duplicate); w.int32(6, ignored); w.int32(7, rejected)
        w.int32(8, refundHistories); w.int32(9, refundsApplied)
    }
}

/// billing.admin.v1.LookUpOrderRequest.
public struct LookUpOrderRequest: ProtoMessage, Equatable {
    public var customerOrderID = ""
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            if field == 1 { try expect(wt, .lengthDelimited, field: 1); customerOrderID = try r.readString(field: 1) } else { try r.skip(wt) }
        }
    }
    public var encodedSize: Int { ProtoSize.string(1, customerOrderID) }
    public func encode(to w: inout ProtoWriter) { w.string(1, customerOrderID) }
}

/// billing.admin.v1.LookUpOrderResponse.
public struct LookUpOrderResponse: ProtoMessage, Equatable {
    public var found = false
    public var environment = Environment.unspecified
    public var transactions: [Transaction] = []
    public var orders: [Order] = []
    public var accountIDs: [String] = []
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .varint, field: 1); found = try r.readBool()
            case 2: try expect(wt, .varint, field: 2); environment = Environment(rawValue: try r.readEnum(field: 2))
            case 3: try expect(wt, .lengthDelimited, field: 3); transactions.append(try r.readMessage(Transaction.self))
            case 4: try expect(wt, .lengthDelimited, field: 4); orders.append(try r.readMessage(Order.self))
            case 5: try expect(wt, .lengthDelimited, field: 5); accountIDs.append(try r.readString(field: 5))
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.bool(1, found) + ProtoSize.int32(2, environment.rawValue) + transactions.reduce(0) { $0 + ProtoSize.message(3, $1) }
            + orders.reduce(0) { $0 + ProtoSize.message(4, $1) } + accountIDs.reduce(0) { $0 + ProtoSize.string(5, $1) }
    }
    public func encode(to w: inout ProtoWriter) {
        w.bool(1, found); w.int32(2, environment.rawValue)
        for t in transactions { w.message(3, t) }
        for o in orders { w.message(4, o) }
        for a in accountIDs { w.string(5, a) }
    }
}

/// billing.admin.v1.RequestTestNotificationRequest.
public struct RequestTestNotificationRequest: ProtoMessage, Equatable {
    public var environment = Environment.unspecified
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            if field == 1 { try expect(wt, .varint, field: 1); environment = Environment(rawValue: try r.readEnum(field: 1)) } else { try r.skip(wt) }
        }
    }
    public var encodedSize: Int { ProtoSize.int32(1, environment.rawValue) }
    public func encode(to w: inout ProtoWriter) { w.int32(1, environment.rawValue) }
}

/// billing.admin.v1.RequestTestNotificationResponse.
public struct RequestTestNotificationResponse: TestNotificationTokenMessage, Equatable {
    public var testNotificationToken = ""
    public var environment = Environment.unspecified
    public init() {}
}

/// billing.admin.v1.GetTestNotificationStatusRequest.
public struct GetTestNotificationStatusRequest: TestNotificationTokenMessage, Equatable {
    public var testNotificationToken = ""
    public var environment = Environment.unspecified
    public init() {}
}

/// The shape RequestTestNotificationResponse and GetTestNotificationStatusRequest share on the wire:
/// `test_notification_token = 1`, `environment = 2`; one codec for both.
public protocol TestNotificationTokenMessage: ProtoMessage {
    var testNotificationToken: String { get set }
    var environment: Environment { get set }
}

extension TestNotificationTokenMessage {
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); testNotificationToken = try r.readString(field: 1)
            case 2: try expect(wt, .varint, field: 2); environment = Environment(rawValue: try r.readEnum(field: 2))
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int { ProtoSize.string(1, testNotificationToken) + ProtoSize.int32(2, environment.rawValue) }
    public func encode(to w: inout ProtoWriter) { w.string(1, testNotificationToken); w.int32(2, environment.rawValue) }
}

/// billing.admin.v1.GetTestNotificationStatusResponse.
public struct GetTestNotificationStatusResponse: ProtoMessage, Equatable {
    public var sendAttemptResults: [String] = []
    public var notificationUUID = ""
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); sendAttemptResults.append(try r.readString(field: 1))
            case 2: try expect(wt, .lengthDelimited, field: 2); notificationUUID = try r.readString(field: 2)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int { sendAttemptResults.reduce(0) { $0 + ProtoSize.string(1, $1) } + ProtoSize.string(2, notificationUUID) }
    public func encode(to w: inout ProtoWriter) {
        for s in sendAttemptResults { w.string(1, s) }
        w.string(2, notificationUUID)
    }
}
