import ProtoWire

/// Message and enum types read from serialized FileDescriptorProtos, and the canonical proto3 JSON mapping
/// (https://protobuf.dev/programming-guides/json/) driven by them: no code per message.
///
/// A registry is an immutable value: share it between threads freely.
public struct Registry: Sendable {
    let messages: [String: MessageInfo]
    let enums: [String: EnumInfo]
    let methods: [String: MethodInfo]
    /// Bounds every conversion checks.
    public var limits: ProtoJSONLimits
    /// On JSON input, skip members that name no field and enum names the schema lacks (the default, as
    /// Connect servers do); when false, both are errors.
    public var ignoresUnknownFields: Bool

    /// The types of `files`, each a serialized FileDescriptorProto; every type a field names must be among them.
    public init(files: [[UInt8]], limits: ProtoJSONLimits = .default, ignoresUnknownFields: Bool = true) throws(ProtoJSONError) {
        var reader = DescriptorReader()
        for file in files { try reader.add(file: file) }
        try reader.link()
        messages = reader.messages
        enums = reader.enums
        methods = reader.methods
        self.limits = limits
        self.ignoresUnknownFields = ignoresUnknownFields
    }

    /// The types of `base64Files`, each the base64 of a serialized FileDescriptorProto (as `BillingDescriptors`
    /// and the reflection tables hold them).
    public init(
        base64Files: some Sequence<String>, limits: ProtoJSONLimits = .default, ignoresUnknownFields: Bool = true
    ) throws(ProtoJSONError) {
        var files: [[UInt8]] = []
        for text in base64Files {
            guard let bytes = Base64.decode(text) else { throw .invalidDescriptor("a file is not base64") }
            files.append(bytes)
        }
        try self.init(files: files, limits: limits, ignoresUnknownFields: ignoresUnknownFields)
    }

    /// The types of a serialized FileDescriptorSet (`protoc --descriptor_set_out --include_imports`).
    public init(descriptorSet: [UInt8], limits: ProtoJSONLimits = .default, ignoresUnknownFields: Bool = true) throws(ProtoJSONError) {
        var files: [[UInt8]] = []
        try DescriptorReader.scan(descriptorSet) { (reader: inout ProtoReader, number: Int, wire: WireType) throws(WireError) in
            if number == 1 && wire == .lengthDelimited { files.append(try reader.readBytes()) } else { try reader.skip(wire) }
        }
        try self.init(files: files, limits: limits, ignoresUnknownFields: ignoresUnknownFields)
    }

    /// The service method at `path` (`/billing.v1.Billing/GetOrder`), or nil.
    public func method(path: String) -> MethodInfo? { methods[path] }

    /// The full names of every message type (map entries left out), sorted.
    public var messageNames: [String] {
        messages.values.filter { !$0.isMapEntry }.map(\.fullName).sorted()
    }

    /// The message named `name`: `billing.v1.Order`, with or without a leading dot, or a type URL
    /// (`type.googleapis.com/billing.v1.Order`).
    func message(_ name: String) -> MessageInfo? {
        var key = Substring(name)
        if let slash = key.lastIndex(of: "/") { key = key[key.index(after: slash)...] }
        if key.hasPrefix(".") { key = key.dropFirst() }
        return messages[String(key)]
    }

    /// The canonical JSON of the binary message `binary` of type `messageName`: lowerCamelCase names, defaults
    /// left out, 64-bit integers as strings, enums by name, bytes as padded base64.
    public func toJSON(_ messageName: String, binary: [UInt8]) throws(ProtoJSONError) -> [UInt8] {
        guard let m = message(messageName) else { throw .unknownMessage(messageName) }
        guard binary.count <= limits.maxInputBytes else { throw .tooLarge(limit: limits.maxInputBytes) }
        var writer = BinaryToJSON(registry: self)
        try writer.object(m, binary, depth: 0)
        return writer.out
    }

    /// The binary encoding of the JSON message `json` of type `messageName`; fields are written in number order.
    ///
    /// Accepts JSON names and .proto names, integers as numbers or strings, enums by name or number, `null` for
    /// a field left unset, and standard or URL-safe base64, padded or not.
    public func toBinary(_ messageName: String, json: [UInt8]) throws(ProtoJSONError) -> [UInt8] {
        guard let m = message(messageName) else { throw .unknownMessage(messageName) }
        guard json.count <= limits.maxInputBytes else { throw .tooLarge(limit: limits.maxInputBytes) }
        // Each message level can take two JSON levels (an array of objects), and Any one more.
        let value = try JSONParser.parse(json, maxNesting: 2 * limits.maxDepth + 4)
        let reader = JSONToBinary(registry: self)
        return try reader.message(m, value, depth: 0)
    }
}

/// Well-known types with a JSON form of their own that this module does not write; refused rather than
/// written as plain messages. (`google.protobuf.Empty` is a plain `{}` and needs nothing.)
let unsupportedWellKnownTypes: Set<String> = [
    "google.protobuf.Timestamp", "google.protobuf.Duration", "google.protobuf.FieldMask", "google.protobuf.Struct",
    "google.protobuf.Value", "google.protobuf.ListValue", "google.protobuf.DoubleValue", "google.protobuf.FloatValue",
    "google.protobuf.Int64Value", "google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
    "google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue",
]

let anyTypeName = "google.protobuf.Any"
