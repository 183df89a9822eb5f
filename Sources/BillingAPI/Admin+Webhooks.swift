public import ProtoWire

/// billing.admin.v1.GetWebhookStatusRequest (no fields).
public struct GetWebhookStatusRequest: ProtoMessage, Equatable {
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (_, wt) = try r.nextTag() { try r.skip(wt) }
    }
    public var encodedSize: Int { 0 }
    public func encode(to w: inout ProtoWriter) {}
}

/// billing.admin.v1.GetWebhookStatusResponse.
public struct GetWebhookStatusResponse: ProtoMessage, Equatable {
    public var url = ""
    public var position: UInt64 = 0
    public var newestCursor: UInt64 = 0
    public var lagEvents: UInt64 = 0
    public var oldestUndeliveredAgeMs: Int64 = 0
    public var holder = ""
    public var leaseUntilTimeMs: Int64 = 0
    public var failures: Int32 = 0
    public var lastError = ""
    public var lastAttemptTimeMs: Int64 = 0
    public var lastDeliveryTimeMs: Int64 = 0
    public var sendingHere = false
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); url = try r.readString(field: 1)
            case 2: try expect(wt, .varint, field: 2); position = try r.readUInt64()
            case 3: try expect(wt, .varint, field: 3); newestCursor = try r.readUInt64()
            case 4: try expect(wt, .varint, field: 4); lagEvents = try r.readUInt64()
            case 5: try expect(wt, .varint, field: 5); oldestUndeliveredAgeMs = try r.readInt64()
            case 6: try expect(wt, .lengthDelimited, field: 6); holder = try r.readString(field: 6)
            case 7: try expect(wt, .varint, field: 7); leaseUntilTimeMs = try r.readInt64()
            case 8: try expect(wt, .varint, field: 8); failures = try r.readInt32(field: 8)
            case 9: try expect(wt, .lengthDelimited, field: 9); lastError = try r.readString(field: 9)
            case 10: try expect(wt, .varint, field: 10); lastAttemptTimeMs = try r.readInt64()
            case 11: try expect(wt, .varint, field: 11); lastDeliveryTimeMs = try r.readInt64()
            case 12: try expect(wt, .varint, field: 12); sendingHere = try r.readBool()
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, url) + ProtoSize.uint64(2, position) + ProtoSize.uint64(3, newestCursor) + ProtoSize.uint64(4, lagEvents)
            + ProtoSize.int64(5, oldestUndeliveredAgeMs) + ProtoSize.string(6, holder) + ProtoSize.int64(7, leaseUntilTimeMs)
            + ProtoSize.int32(8, failures) + ProtoSize.string(9, lastError) + ProtoSize.int64(10, lastAttemptTimeMs)
            + ProtoSize.int64(11, lastDeliveryTimeMs) + ProtoSize.bool(12, sendingHere)
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, url)
        w.uint64(2, position)
        w.uint64(3, newestCursor)
        w.uint64(4, lagEvents)
        w.int64(5, oldestUndeliveredAgeMs)
        w.string(6, holder)
        w.int64(7, leaseUntilTimeMs)
        w.int32(8, failures)
        w.string(9, lastError)
        w.int64(10, lastAttemptTimeMs)
        w.int64(11, lastDeliveryTimeMs)
        w.bool(12, sendingHere)
    }
}

/// billing.admin.v1.ReplayWebhooksRequest.
public struct ReplayWebhooksRequest: ProtoMessage, Equatable {
    public var fromCursor: UInt64 = 0
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            if field == 1 { try expect(wt, .varint, field: 1); fromCursor = try r.readUInt64() } else { try r.skip(wt) }
        }
    }
    public var encodedSize: Int { ProtoSize.uint64(1, fromCursor) }
    public func encode(to w: inout ProtoWriter) { w.uint64(1, fromCursor) }
}

/// billing.admin.v1.ReplayWebhooksResponse.
public struct ReplayWebhooksResponse: ProtoMessage, Equatable {
    public var status = GetWebhookStatusResponse()
    public init() {}
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            if field == 1 { try expect(wt, .lengthDelimited, field: 1); status = try r.readMessage(GetWebhookStatusResponse.self) } else { try r.skip(wt) }
        }
    }
    public var encodedSize: Int { ProtoSize.message(1, status) }
    public func encode(to w: inout ProtoWriter) { w.message(1, status) }
}
