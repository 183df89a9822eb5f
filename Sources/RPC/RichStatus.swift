public import ProtoWire

/// google.rpc.Status: the rich error model in `grpc-status-details-bin`.
public struct RichStatus: ProtoMessage, Equatable {
    public var code: Int32 = 0
    public var message = ""
    public var details: [AnyMessage] = []

    public init() {}
    public init(code: Int32, message: String, details: [AnyMessage]) {
        self.code = code
        self.message = message
        self.details = details
    }

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .varint, field: 1); code = try r.readInt32(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); message = try r.readString(field: 2)
            case 3: try expect(wt, .lengthDelimited, field: 3); details.append(try r.readMessage(AnyMessage.self))
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.int32(1, code) + ProtoSize.string(2, message) + details.reduce(0) { $0 + ProtoSize.message(3, $1) }
    }
    public func encode(to w: inout ProtoWriter) {
        w.int32(1, code); w.string(2, message)
        for d in details { w.message(3, d) }
    }

    /// The first `ErrorInfo` among the details, if any.
    public var errorInfo: ErrorInfo? {
        for d in details where d.typeURL == ErrorInfo.typeURL {
            if let info = try? ErrorInfo(decoding: d.value) { return info }
        }
        return nil
    }
}

/// google.protobuf.Any.
public struct AnyMessage: ProtoMessage, Equatable {
    public var typeURL = ""
    public var value: [UInt8] = []
    public init() {}
    public init(typeURL: String, value: [UInt8]) {
        self.typeURL = typeURL
        self.value = value
    }
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); typeURL = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); value = try r.readBytes()
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int { ProtoSize.string(1, typeURL) + ProtoSize.bytes(2, value) }
    public func encode(to w: inout ProtoWriter) { w.string(1, typeURL); w.bytesField(2, value) }
}

/// google.rpc.ErrorInfo, with its `map<string, string> metadata` (written in key order).
public struct ErrorInfo: ProtoMessage, Equatable {
    public static let typeURL = "type.googleapis.com/google.rpc.ErrorInfo"

    public var reason = ""
    public var domain = ""
    public var metadata: [String: String] = [:]

    public init() {}
    public init(reason: String, domain: String, metadata: [String: String]) {
        self.reason = reason
        self.domain = domain
        self.metadata = metadata
    }

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); reason = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); domain = try r.readString(field: 2)
            case 3:
                try expect(wt, .lengthDelimited, field: 3)
                let entry = try r.readMessage(MapEntry.self)
                metadata[entry.key] = entry.value
            default: try r.skip(wt)
            }
        }
    }

    private var entries: [MapEntry] {
        metadata.keys.sorted().map { MapEntry(key: $0, value: metadata[$0]!) }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, reason) + ProtoSize.string(2, domain) + entries.reduce(0) { $0 + ProtoSize.message(3, $1) }
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, reason); w.string(2, domain)
        for e in entries { w.message(3, e) }
    }
}

/// One entry of a `map<string, string>`: key = 1, value = 2.
public struct MapEntry: ProtoMessage, Equatable {
    public var key = ""
    public var value = ""
    public init() {}
    public init(key: String, value: String) {
        self.key = key
        self.value = value
    }
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); key = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); value = try r.readString(field: 2)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int { ProtoSize.string(1, key) + ProtoSize.string(2, value) }
    public func encode(to w: inout ProtoWriter) { w.string(1, key); w.string(2, value) }
}
