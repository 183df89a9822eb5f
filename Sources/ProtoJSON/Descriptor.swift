/// The type of a field, as FieldDescriptorProto.Type numbers it.
enum FieldKind: Int, Sendable {
    case double = 1, float, int64, uint64, int32, fixed64, fixed32, bool, string, group, message, bytes, uint32
    case enumeration, sfixed32, sfixed64, sint32, sint64

    /// The wire type a single value of this kind travels with.
    var wireType: UInt8 {
        switch self {
        case .double, .fixed64, .sfixed64: 1
        case .float, .fixed32, .sfixed32: 5
        case .string, .bytes, .message: 2
        case .group: 3
        default: 0
        }
    }

    /// Whether a repeated field of this kind may be packed (every scalar but strings and bytes).
    var isPackable: Bool { wireType != 2 && wireType != 3 }

    /// Whether JSON writes the value as a string: the 64-bit integers.
    var is64BitInteger: Bool {
        switch self {
        case .int64, .uint64, .fixed64, .sfixed64, .sint64: true
        default: false
        }
    }
}

/// One field of a message.
struct FieldInfo: Sendable {
    /// The name in the .proto file (`create_time_ms`).
    var name: String
    /// The lowerCamelCase name JSON writes (`createTimeMs`).
    var jsonName: String
    var number: Int
    var kind: FieldKind
    var isRepeated: Bool
    /// A repeated scalar written packed (proto3's default unless `[packed = false]`).
    var isPacked: Bool
    /// The full name without the leading dot, for message and enum fields.
    var typeName: String
    /// The oneof it belongs to (synthetic ones of proto3 `optional` included).
    var oneofIndex: Int?
    /// Written whenever set, default or not: message fields, oneof members, proto3 `optional`, proto2 singulars.
    var hasPresence: Bool
    /// A `map<K, V>` field: repeated entries of a map-entry message.
    var isMap: Bool
}

/// One message type: its fields in declaration order, found by number and by either name.
struct MessageInfo: Sendable {
    var fullName: String
    var fields: [FieldInfo]
    var indexByNumber: [Int: Int]
    /// JSON name and .proto name -> index in `fields`.
    var indexByName: [String: Int]
    var oneofNames: [String]
    var isMapEntry: Bool
}

/// One enum type: names and numbers both ways (the first name of an aliased number wins).
struct EnumInfo: Sendable {
    var fullName: String
    var nameByNumber: [Int32: String]
    var numberByName: [String: Int32]
}

/// The lowerCamelCase JSON name protoc derives from a field name, for descriptors without `json_name`.
func defaultJSONName(_ name: String) -> String {
    var out = ""
    var upper = false
    for c in name {
        if c == "_" {
            upper = true
        } else if upper {
            out += c.uppercased()
            upper = false
        } else {
            out.append(c)
        }
    }
    return out
}

/// One RPC method of a service, as its descriptor declares it.
public struct MethodInfo: Sendable, Equatable {
    /// `/package.Service/Method`.
    public var path: String
    /// Full message names, without a leading dot.
    public var inputType: String
    public var outputType: String
    public var clientStreaming: Bool
    public var serverStreaming: Bool
    /// `option idempotency_level = NO_SIDE_EFFECTS`: Connect lets such a method be called with GET.
    public var hasNoSideEffects: Bool
}
