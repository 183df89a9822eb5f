import ProtoWire

extension JSONToBinary {
    /// The wire value of one JSON value for a field of `kind`; nil for an enum name the schema lacks, which is
    /// skipped when unknown fields are ignored.
    func value(_ kind: FieldKind, _ typeName: String, _ json: JSONNode, depth: Int) throws(ProtoJSONError) -> RawValue? {
        switch kind {
        case .int32: return .varint(UInt64(bitPattern: try Self.signed(json, bits: 32)))
        case .int64: return .varint(UInt64(bitPattern: try Self.signed(json, bits: 64)))
        case .uint32: return .varint(try Self.unsigned(json, bits: 32))
        case .uint64: return .varint(try Self.unsigned(json, bits: 64))
        case .sint32, .sint64:
            let v = try Self.signed(json, bits: kind == .sint32 ? 32 : 64)
            return .varint(UInt64(bitPattern: (v << 1) ^ (v >> 63)))
        case .fixed32: return .fixed32(UInt32(try Self.unsigned(json, bits: 32)))
        case .sfixed32: return .fixed32(UInt32(bitPattern: Int32(try Self.signed(json, bits: 32))))
        case .fixed64: return .fixed64(try Self.unsigned(json, bits: 64))
        case .sfixed64: return .fixed64(UInt64(bitPattern: try Self.signed(json, bits: 64)))
        case .bool:
            guard case .bool(let b) = json else { throw Self.expected("true or false", json) }
            return .varint(b ? 1 : 0)
        case .float: return .fixed32(Float(try Self.floating(json, isFloat: true)).bitPattern)
        case .double: return .fixed64(try Self.floating(json, isFloat: false).bitPattern)
        case .string:
            guard case .string(let s) = json else { throw Self.expected("a string", json) }
            return .bytes(Array(s.utf8))
        case .bytes:
            guard case .string(let s) = json else { throw Self.expected("a base64 string", json) }
            guard let b = Base64.decode(s) else { throw .invalidField(path: "", reason: "not base64") }
            return .bytes(b)
        case .enumeration: return try enumeration(typeName, json)
        case .message:
            guard let m = registry.messages[typeName] else { throw .unknownMessage(typeName) }
            return .bytes(try message(m, json, depth: depth + 1))
        case .group: throw .unsupportedType(path: "", typeName: "group")
        }
    }

    /// An enum value by name, or by number (as a JSON number or a numeric string); any int32 number is kept, as
    /// proto3 enums are open.
    private func enumeration(_ typeName: String, _ json: JSONNode) throws(ProtoJSONError) -> RawValue? {
        guard let info = registry.enums[typeName] else { throw .invalidField(path: "", reason: "unknown enum \(typeName)") }
        if case .string(let name) = json, !JSONNumber.isNumber(name) {
            if let n = info.numberByName[name] { return .varint(UInt64(bitPattern: Int64(n))) }
            if registry.ignoresUnknownFields { return nil }
            throw .invalidField(path: "", reason: "\(typeName) has no value named \(JSONString.quote(name))")
        }
        switch json {
        case .number, .string: return .varint(UInt64(bitPattern: try Self.signed(json, bits: 32)))
        default: throw Self.expected("an enum name or number", json)
        }
    }

    static func expected(_ what: String, _ json: JSONNode) -> ProtoJSONError {
        .invalidField(path: "", reason: "expected \(what), got \(json.kindName)")
    }

    /// The text of a number given as a JSON number or as a string holding one.
    private static func numberText(_ json: JSONNode, _ what: String) throws(ProtoJSONError) -> String {
        switch json {
        case .number(let t): return t
        case .string(let s) where JSONNumber.isNumber(s): return s
        case .string(let s): throw .invalidField(path: "", reason: "expected \(what), got \(JSONString.quote(s))")
        default: throw expected(what, json)
        }
    }

    /// A signed integer of `bits` bits: digits read exactly; a fraction or exponent only when the value is whole.
    static func signed(_ json: JSONNode, bits: Int) throws(ProtoJSONError) -> Int64 {
        let text = try numberText(json, "an integer")
        let value: Int64
        if let exact = Int64(text) {
            value = exact
        } else if !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) {
            throw .invalidField(path: "", reason: "\(text) is out of range for int\(bits)")
        } else {
            guard let d = Double(text), d.isFinite, d == d.rounded() else { throw .invalidField(path: "", reason: "\(text) is not an integer") }
            guard let exact = Int64(exactly: d) else { throw .invalidField(path: "", reason: "\(text) is out of range for int\(bits)") }
            value = exact
        }
        if bits == 32 && Int32(exactly: value) == nil { throw .invalidField(path: "", reason: "\(text) is out of range for int32") }
        return value
    }

    /// An unsigned integer of `bits` bits.
    static func unsigned(_ json: JSONNode, bits: Int) throws(ProtoJSONError) -> UInt64 {
        let text = try numberText(json, "an integer")
        let value: UInt64
        if let exact = UInt64(text) {
            value = exact
        } else if text == "-0" {
            value = 0
        } else if !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) {
            throw .invalidField(path: "", reason: "\(text) is out of range for uint\(bits)")
        } else {
            guard let d = Double(text), d.isFinite, d == d.rounded() else { throw .invalidField(path: "", reason: "\(text) is not an integer") }
            guard let exact = UInt64(exactly: d) else { throw .invalidField(path: "", reason: "\(text) is out of range for uint\(bits)") }
            value = exact
        }
        if bits == 32 && UInt32(exactly: value) == nil { throw .invalidField(path: "", reason: "\(text) is out of range for uint32") }
        return value
    }

    /// A float or double: a number, a numeric string, or "NaN", "Infinity", "-Infinity".
    static func floating(_ json: JSONNode, isFloat: Bool) throws(ProtoJSONError) -> Double {
        switch json {
        case .string("NaN"): return .nan
        case .string("Infinity"): return .infinity
        case .string("-Infinity"): return -.infinity
        default: break
        }
        let text = try numberText(json, "a number")
        guard let d = Double(text), d.isFinite else { throw .invalidField(path: "", reason: "\(text) is out of range") }
        // A float takes any double that rounds to a finite float (3.4028235e+38, the largest one's shortest text,
        // is a little above it).
        if isFloat && Float(d).isInfinite {
            throw .invalidField(path: "", reason: "\(text) is out of range for float")
        }
        return d
    }
}
