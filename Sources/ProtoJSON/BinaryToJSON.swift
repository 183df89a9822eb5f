import ProtoWire

/// One field value as it came off the wire, before its declared type gives it a meaning.
enum RawValue {
    case varint(UInt64)
    case fixed32(UInt32)
    case fixed64(UInt64)
    case bytes([UInt8])

    /// The zero value of a field that travels with `wireType`: what a missing map key or value means.
    static func zero(_ wireType: UInt8) -> RawValue {
        switch wireType {
        case 1: .fixed64(0)
        case 5: .fixed32(0)
        case 2: .bytes([])
        default: .varint(0)
        }
    }

    /// Whether it is the proto3 default (bit pattern zero, or no bytes): left out of JSON for implicit presence.
    var isZero: Bool {
        switch self {
        case .varint(let v), .fixed64(let v): v == 0
        case .fixed32(let v): v == 0
        case .bytes(let b): b.isEmpty
        }
    }
}

/// Writes the canonical JSON of a binary message, walking its descriptor.
struct BinaryToJSON {
    let registry: Registry
    var out: [UInt8] = []

    init(registry: Registry) {
        self.registry = registry
        out.reserveCapacity(256)
    }

    /// The message as a JSON object.
    mutating func object(_ m: MessageInfo, _ bytes: [UInt8], depth: Int) throws(ProtoJSONError) {
        guard depth <= registry.limits.maxDepth else { throw .tooDeep(path: "") }
        if m.fullName == anyTypeName { return try any(bytes, depth: depth) }
        if unsupportedWellKnownTypes.contains(m.fullName) { throw .unsupportedType(path: "", typeName: m.fullName) }
        out.append(UInt8(ascii: "{"))
        var first = true
        try members(m, bytes, depth: depth, first: &first)
        out.append(UInt8(ascii: "}"))
    }

    /// The message's set fields as object members, in declaration order.
    fileprivate mutating func members(_ m: MessageInfo, _ bytes: [UInt8], depth: Int, first: inout Bool) throws(ProtoJSONError) {
        let values = try collect(m, bytes)
        for (index, field) in m.fields.enumerated() {
            let raws = values[index]
            guard let last = raws.last else { continue }
            if !field.isRepeated && !field.hasPresence && last.isZero { continue }
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            JSONString.append(field.jsonName, to: &out)
            out.append(UInt8(ascii: ":"))
            do throws(ProtoJSONError) {
                if field.isMap {
                    try map(field, raws, depth: depth)
                } else if field.isRepeated {
                    out.append(UInt8(ascii: "["))
                    for (n, raw) in raws.enumerated() {
                        if n > 0 { out.append(UInt8(ascii: ",")) }
                        do throws(ProtoJSONError) { try value(field.kind, field.typeName, raw, depth: depth) } catch { throw error.within("[\(n)]") }
                    }
                    out.append(UInt8(ascii: "]"))
                } else if field.kind == .message {
                    // A message that occurs more than once is the merge of its occurrences: their concatenation.
                    try value(.message, field.typeName, raws.count == 1 ? last : .bytes(Self.concatenated(raws)), depth: depth)
                } else {
                    try value(field.kind, field.typeName, last, depth: depth)
                }
            } catch {
                throw error.within(field.jsonName)
            }
            guard out.count <= registry.limits.maxOutputBytes else { throw .tooLarge(limit: registry.limits.maxOutputBytes) }
        }
    }

    /// Every known field's occurrences, by field index: the last one for singular scalars (proto's last-wins),
    /// all of them for messages and repeated fields (packed runs unpacked). Members of a oneof clear each other;
    /// unknown fields, and known ones with a wire type their declaration does not allow, are skipped.
    fileprivate func collect(_ m: MessageInfo, _ bytes: [UInt8]) throws(ProtoJSONError) -> [[RawValue]] {
        var values = [[RawValue]](repeating: [], count: m.fields.count)
        var reader = ProtoReader(bytes, limits: DecodingLimits(maxDepth: registry.limits.maxDepth, maxFieldBytes: registry.limits.maxInputBytes))
        do throws(WireError) {
            while let (number, wire) = try reader.nextTag() {
                guard let index = m.indexByNumber[number] else {
                    try reader.skip(wire)
                    continue
                }
                let field = m.fields[index]
                let expected = field.kind.wireType
                if wire.rawValue == expected {
                    let raw = try Self.read(&reader, expected)
                    if field.isRepeated || field.kind == .message {
                        values[index].append(raw)
                    } else {
                        values[index] = [raw]
                    }
                } else if field.isRepeated && field.kind.isPackable && wire == .lengthDelimited {
                    try reader.withLengthDelimited { (sub: inout ProtoReader) throws(WireError) in
                        while !sub.isAtEnd { values[index].append(try Self.read(&sub, expected)) }
                    }
                } else {
                    try reader.skip(wire)
                    continue
                }
                if let oneof = field.oneofIndex {
                    for j in m.fields.indices where j != index && m.fields[j].oneofIndex == oneof { values[j] = [] }
                }
            }
        } catch {
            throw .invalidBinary(path: "", error)
        }
        return values
    }

    private static func read(_ reader: inout ProtoReader, _ wireType: UInt8) throws(WireError) -> RawValue {
        switch wireType {
        case 1: .fixed64(try reader.readFixed64())
        case 5: .fixed32(try reader.readFixed32())
        case 2: .bytes(try reader.readBytes())
        default: .varint(try reader.readVarint())
        }
    }

    private static func concatenated(_ raws: [RawValue]) -> [UInt8] {
        var all: [UInt8] = []
        for case .bytes(let b) in raws { all.append(contentsOf: b) }
        return all
    }

    /// One value of a field of `kind`.
    private mutating func value(_ kind: FieldKind, _ typeName: String, _ raw: RawValue, depth: Int) throws(ProtoJSONError) {
        switch (kind, raw) {
        case (.int32, .varint(let v)): append(String(Int32(truncatingIfNeeded: v)))
        case (.uint32, .varint(let v)): append(String(UInt32(truncatingIfNeeded: v)))
        case (.sint32, .varint(let v)):
            let u = UInt32(truncatingIfNeeded: v)
            append(String(Int32(bitPattern: (u >> 1) ^ (0 &- (u & 1)))))
        case (.int64, .varint(let v)): quoted(String(Int64(bitPattern: v)))
        case (.uint64, .varint(let v)): quoted(String(v))
        case (.sint64, .varint(let v)): quoted(String(Int64(bitPattern: (v >> 1) ^ (0 &- (v & 1)))))
        case (.bool, .varint(let v)): append(v != 0 ? "true" : "false")
        case (.enumeration, .varint(let v)):
            let number = Int32(truncatingIfNeeded: v)
            if let name = registry.enums[typeName]?.nameByNumber[number] { quoted(name) } else { append(String(number)) }
        case (.fixed32, .fixed32(let v)): append(String(v))
        case (.sfixed32, .fixed32(let v)): append(String(Int32(bitPattern: v)))
        case (.float, .fixed32(let v)): floating(Float(bitPattern: v))
        case (.fixed64, .fixed64(let v)): quoted(String(v))
        case (.sfixed64, .fixed64(let v)): quoted(String(Int64(bitPattern: v)))
        case (.double, .fixed64(let v)): floating(Double(bitPattern: v))
        case (.string, .bytes(let b)):
            guard let s = String(validating: b, as: UTF8.self) else { throw .invalidField(path: "", reason: "string is not UTF-8") }
            JSONString.append(s, to: &out)
        case (.bytes, .bytes(let b)): quoted(Base64.encode(b, padded: true))
        case (.message, .bytes(let b)):
            guard let m = registry.messages[typeName] else { throw .unknownMessage(typeName) }
            try object(m, b, depth: depth + 1)
        default:
            // collect() keeps only values whose wire type matches the declaration.
            preconditionFailure("\(kind) field with a \(raw) value")
        }
    }

    /// A map field: an object keyed by the entries' keys as strings; a later entry with the same key wins.
    private mutating func map(_ field: FieldInfo, _ raws: [RawValue], depth: Int) throws(ProtoJSONError) {
        guard let entry = registry.messages[field.typeName], let k = entry.indexByNumber[1], let v = entry.indexByNumber[2] else {
            throw .unknownMessage(field.typeName)
        }
        let keyField = entry.fields[k]
        let valueField = entry.fields[v]
        var order: [String] = []
        var rendered: [String: [UInt8]] = [:]
        // Keys and values are rendered apart, then written once each key's last value is known. A failure
        // abandons the whole conversion, so `out` need not be put back on that path.
        var saved: [UInt8] = []
        swap(&saved, &out)
        for case .bytes(let b) in raws {
            let values = try collect(entry, b)
            out = []
            try value(keyField.kind, keyField.typeName, values[k].last ?? .zero(keyField.kind.wireType), depth: depth)
            // String keys come quoted; numbers and booleans are quoted here (64-bit ones already are).
            let bare = out.filter { $0 != UInt8(ascii: "\"") }
            let keyText = keyField.kind == .string ? String(decoding: out, as: UTF8.self) : "\"" + String(decoding: bare, as: UTF8.self) + "\""
            out = []
            let raw: RawValue =
                valueField.kind == .message
                ? .bytes(Self.concatenated(values[v])) : values[v].last ?? .zero(valueField.kind.wireType)
            do throws(ProtoJSONError) { try value(valueField.kind, valueField.typeName, raw, depth: depth) } catch { throw error.within("[\(keyText)]") }
            if rendered.updateValue(out, forKey: keyText) == nil { order.append(keyText) }
        }
        swap(&saved, &out)
        out.append(UInt8(ascii: "{"))
        for (n, key) in order.enumerated() {
            if n > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: key.utf8)
            out.append(UInt8(ascii: ":"))
            out.append(contentsOf: rendered[key] ?? [])
        }
        out.append(UInt8(ascii: "}"))
    }
}

extension BinaryToJSON {
    private mutating func append(_ s: String) { out.append(contentsOf: s.utf8) }

    private mutating func quoted(_ s: String) {
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: s.utf8)
        out.append(UInt8(ascii: "\""))
    }

    /// The shortest text that reads back to the same value; NaN and the infinities as the strings JSON uses.
    private mutating func floating<F: BinaryFloatingPoint & LosslessStringConvertible>(_ f: F) {
        if f.isNaN {
            quoted("NaN")
        } else if f.isInfinite {
            quoted(f < 0 ? "-Infinity" : "Infinity")
        } else {
            append(f.description)
        }
    }

    /// `google.protobuf.Any`: the embedded message's members after `"@type"`, or `"value"` when the embedded
    /// type is itself an Any. An empty Any is `{}`.
    fileprivate mutating func any(_ bytes: [UInt8], depth: Int) throws(ProtoJSONError) {
        guard let m = registry.messages[anyTypeName], let u = m.indexByNumber[1], let v = m.indexByNumber[2] else {
            throw .unknownMessage(anyTypeName)
        }
        let values = try collect(m, bytes)
        var url = ""
        if case .bytes(let b)? = values[u].last {
            guard let s = String(validating: b, as: UTF8.self) else { throw .invalidField(path: "@type", reason: "string is not UTF-8") }
            url = s
        }
        var payload: [UInt8] = []
        if case .bytes(let b)? = values[v].last { payload = b }
        if url.isEmpty {
            guard payload.isEmpty else { throw .invalidField(path: "@type", reason: "an Any with a value has no type URL") }
            out.append(contentsOf: "{}".utf8)
            return
        }
        guard let inner = registry.message(url) else {
            throw .invalidField(path: "@type", reason: "\(url) names a type the registry does not hold")
        }
        out.append(contentsOf: "{\"@type\":".utf8)
        JSONString.append(url, to: &out)
        if inner.fullName == anyTypeName || unsupportedWellKnownTypes.contains(inner.fullName) {
            out.append(contentsOf: ",\"value\":".utf8)
            do throws(ProtoJSONError) { try object(inner, payload, depth: depth + 1) } catch { throw error.within("value") }
        } else {
            guard depth + 1 <= registry.limits.maxDepth else { throw .tooDeep(path: "") }
            var first = false
            try members(inner, payload, depth: depth + 1, first: &first)
        }
        out.append(UInt8(ascii: "}"))
    }
}
