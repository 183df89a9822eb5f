public import ProtoWire

/// billing.v1.EventType.
public struct EventType: ProtoEnum, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let unspecified = EventType(rawValue: 0)
    static let names = [
        "EVENT_TYPE_UNSPECIFIED", "EVENT_TYPE_ORDER_CREATED", "EVENT_TYPE_ORDER_COMPLETED", "EVENT_TYPE_ORDER_REFUNDED",
        "EVENT_TYPE_ORDER_EXPIRED", "EVENT_TYPE_ENTITLEMENT_GRANTED", "EVENT_TYPE_ENTITLEMENT_RENEWED",
        "EVENT_TYPE_ENTITLEMENT_REVOKED", "EVENT_TYPE_ENTITLEMENT_REINSTATED", "EVENT_TYPE_ENTITLEMENT_EXPIRED",
        "EVENT_TYPE_ENTITLEMENT_TRANSFERRED", "EVENT_TYPE_RENEWAL_STATUS_CHANGED", "EVENT_TYPE_BILLING_ISSUE",
        "EVENT_TYPE_ORDER_PARTIALLY_REFUNDED", "EVENT_TYPE_ENTITLEMENT_PRODUCT_CHANGED", "EVENT_TYPE_RENEWAL_PRODUCT_CHANGED",
        "EVENT_TYPE_ACCOUNT_DELETED",
    ]
    public var description: String { Self.names.indices.contains(Int(rawValue)) ? Self.names[Int(rawValue)] : "\(rawValue)" }
}

/// billing.v1.Event: one committed change to an order or an entitlement.
public struct Event: ProtoMessage, Equatable {
    public var cursor: UInt64 = 0
    public var type = EventType.unspecified
    public var timeMs: Int64 = 0
    public var accountID = ""
    public var order: Order?
    public var entitlement: Entitlement?
    public var cause = ""
    public var notificationUUID = ""
    public var transactionID = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .varint, field: 1); cursor = try r.readVarint()
            case 2: try expect(wt, .varint, field: 2); type = EventType(rawValue: try r.readEnum(field: 2))
            case 3: try expect(wt, .varint, field: 3); timeMs = try r.readInt64()
            case 4: try expect(wt, .lengthDelimited, field: 4); accountID = try r.readString(field: 4)
            case 5: try expect(wt, .lengthDelimited, field: 5); order = try r.readMessage(Order.self)
            case 6: try expect(wt, .lengthDelimited, field: 6); entitlement = try r.readMessage(Entitlement.self)
            case 7: try expect(wt, .lengthDelimited, field: 7); cause = try r.readString(field: 7)
            case 8: try expect(wt, .lengthDelimited, field: 8); notificationUUID = try r.readString(field: 8)
            case 9: try expect(wt, .lengthDelimited, field: 9); transactionID = try r.readString(field: 9)
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int {
        ProtoSize.uint64(1, cursor) + ProtoSize.int32(2, type.rawValue) + ProtoSize.int64(3, timeMs) + ProtoSize.string(4, accountID)
            + (order.map { ProtoSize.message(5, $0) } ?? 0) + (entitlement.map { ProtoSize.message(6, $0) } ?? 0)
            + ProtoSize.string(7, cause) + ProtoSize.string(8, notificationUUID) + ProtoSize.string(9, transactionID)
    }

    public func encode(to w: inout ProtoWriter) {
        w.uint64(1, cursor); w.int32(2, type.rawValue); w.int64(3, timeMs); w.string(4, accountID)
        if let order { w.message(5, order) }
        if let entitlement { w.message(6, entitlement) }
        w.string(7, cause); w.string(8, notificationUUID); w.string(9, transactionID)
    }
}

/// billing.v1.GetEntitlementsRequest.
public struct GetEntitlementsRequest: ProtoMessage, Equatable {
    public var accountID = ""
    public var includeInactive = false

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); accountID = try r.readString(field: 1)
            case 2: try expect(wt, .varint, field: 2); includeInactive = try r.readBool()
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int { ProtoSize.string(1, accountID) + ProtoSize.bool(2, includeInactive) }
    public func encode(to w: inout ProtoWriter) { w.string(1, accountID); w.bool(2, includeInactive) }
}

/// billing.v1.GetEntitlementsResponse.
public struct GetEntitlementsResponse: EntitlementList, Equatable {
    public var entitlements: [Entitlement] = []
    public init() {}
}

/// billing.v1.ListEventsRequest.
public struct ListEventsRequest: ProtoMessage, Equatable {
    public var afterCursor: UInt64 = 0
    public var limit: Int32 = 0
    public var accountID = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .varint, field: 1); afterCursor = try r.readVarint()
            case 2: try expect(wt, .varint, field: 2); limit = try r.readInt32(field: 2)
            case 3: try expect(wt, .lengthDelimited, field: 3); accountID = try r.readString(field: 3)
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int { ProtoSize.uint64(1, afterCursor) + ProtoSize.int32(2, limit) + ProtoSize.string(3, accountID) }
    public func encode(to w: inout ProtoWriter) { w.uint64(1, afterCursor); w.int32(2, limit); w.string(3, accountID) }
}

/// billing.v1.ListEventsResponse.
public struct ListEventsResponse: ProtoMessage, Equatable {
    public var events: [Event] = []
    public var nextCursor: UInt64 = 0

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); events.append(try r.readMessage(Event.self))
            case 2: try expect(wt, .varint, field: 2); nextCursor = try r.readVarint()
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int { events.reduce(0) { $0 + ProtoSize.message(1, $1) } + ProtoSize.uint64(2, nextCursor) }
    public func encode(to w: inout ProtoWriter) {
        for e in events { w.message(1, e) }
        w.uint64(2, nextCursor)
    }
}

/// billing.v1.WatchEventsRequest.
public struct WatchEventsRequest: ProtoMessage, Equatable {
    public var afterCursor: UInt64 = 0
    public var accountID = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .varint, field: 1); afterCursor = try r.readVarint()
            case 2: try expect(wt, .lengthDelimited, field: 2); accountID = try r.readString(field: 2)
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int { ProtoSize.uint64(1, afterCursor) + ProtoSize.string(2, accountID) }
    public func encode(to w: inout ProtoWriter) { w.uint64(1, afterCursor); w.string(2, accountID) }
}
