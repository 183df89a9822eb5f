public import ProtoWire

/// grpc.health.v1.HealthCheckRequest.
public struct HealthCheckRequest: ProtoMessage, Equatable {
    public var service = ""
    public init() {}
    public init(service: String) { self.service = service }
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            if field == 1 { try expect(wt, .lengthDelimited, field: 1); service = try r.readString(field: 1) } else { try r.skip(wt) }
        }
    }
    public var encodedSize: Int { ProtoSize.string(1, service) }
    public func encode(to w: inout ProtoWriter) { w.string(1, service) }
}

/// grpc.health.v1.HealthCheckResponse.
public struct HealthCheckResponse: ProtoMessage, Equatable {
    public var status = ServingStatus.unknown
    public init() {}
    public init(status: ServingStatus) { self.status = status }
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            if field == 1 { try expect(wt, .varint, field: 1); status = ServingStatus(rawValue: try r.readEnum(field: 1)) } else { try r.skip(wt) }
        }
    }
    public var encodedSize: Int { ProtoSize.int32(1, status.rawValue) }
    public func encode(to w: inout ProtoWriter) { w.int32(1, status.rawValue) }
}
