import ProtoWire

/// Writes the binary encoding of a parsed JSON message, walking its descriptor.
struct JSONToBinary {
    let registry: Registry

    /// The message's fields in number order; `json` must be an object (or null inside a message: unset).
    func message(_ m: MessageInfo, _ json: JSONNode, depth: Int) throws(ProtoJSONError) -> [UInt8] {
        guard depth <= registry.limits.maxDepth else { throw .tooDeep(path: "") }
        if m.fullName == anyTypeName { return try any(json, depth: depth) }
        if unsupportedWellKnownTypes.contains(m.fullName) { throw .unsupportedType(path: "", typeName: m.fullName) }
        guard case .object(let members) = json else { throw .invalidField(path: "", reason: "expected an object, got \(json.kindName)") }
        var assigned: [(index: Int, key: String, value: JSONNode)] = []
        var seen = Set<Int>()
        var oneofs: [Int: String] = [:]
        for (key, value) in members {
            guard let index = m.indexByName[key] else {
                if registry.ignoresUnknownFields { continue }
                throw .invalidField(path: key, reason: "\(m.fullName) has no such field")
            }
            let field = m.fields[index]
            guard seen.insert(index).inserted else {
                throw .invalidField(path: key, reason: "field \(field.name) is given twice (JSON name and .proto name?)")
            }
            if case .null = value { continue }
            if let o = field.oneofIndex {
                if let other = oneofs[o] { throw .invalidField(path: key, reason: "oneof \(m.oneofNames[o]) is already set by \(other)") }
                oneofs[o] = key
            }
            assigned.append((index, key, value))
        }
        assigned.sort { m.fields[$0.index].number < m.fields[$1.index].number }
        var writer = ProtoWriter()
        for (index, key, value) in assigned {
            do throws(ProtoJSONError) { try field(m.fields[index], value, into: &writer, depth: depth) } catch { throw error.within(key) }
            guard writer.bytes.count <= registry.limits.maxOutputBytes else { throw .tooLarge(limit: registry.limits.maxOutputBytes) }
        }
        return writer.finish()
    }

    private func field(_ field: FieldInfo, _ value: JSONNode, into writer: inout ProtoWriter, depth: Int) throws(ProtoJSONError) {
        if field.isMap { return try map(field, value, into: &writer, depth: depth) }
        if !field.isRepeated {
            guard let scalar = try self.value(field.kind, field.typeName, value, depth: depth) else { return }
            if field.hasPresence || !scalar.isZero { Self.write(field.number, scalar, into: &writer) }
            return
        }
        guard case .array(let elements) = value else { throw .invalidField(path: "", reason: "expected an array, got \(value.kindName)") }
        var packed = ProtoWriter()
        for (n, element) in elements.enumerated() {
            do throws(ProtoJSONError) {
                if case .null = element { throw ProtoJSONError.invalidField(path: "", reason: "null is not an element") }
                guard let scalar = try self.value(field.kind, field.typeName, element, depth: depth) else { continue }
                if field.isPacked { Self.payload(scalar, into: &packed) } else { Self.write(field.number, scalar, into: &writer) }
            } catch {
                throw error.within("[\(n)]")
            }
        }
        if !packed.bytes.isEmpty {
            writer.writeTag(field.number, .lengthDelimited)
            writer.writeVarint(UInt64(packed.bytes.count))
            writer.writeRaw(packed.bytes)
        }
    }

    /// A map: an object whose member names are the keys as strings; every entry written with key and value.
    private func map(_ field: FieldInfo, _ value: JSONNode, into writer: inout ProtoWriter, depth: Int) throws(ProtoJSONError) {
        guard case .object(let members) = value else { throw .invalidField(path: "", reason: "expected an object, got \(value.kindName)") }
        guard let entry = registry.messages[field.typeName], let k = entry.indexByNumber[1], let v = entry.indexByNumber[2] else {
            throw .unknownMessage(field.typeName)
        }
        var keys = Set<String>()
        for (key, item) in members {
            do throws(ProtoJSONError) {
                guard keys.insert(key).inserted else { throw ProtoJSONError.invalidField(path: "", reason: "key given twice") }
                if case .null = item { throw ProtoJSONError.invalidField(path: "", reason: "null is not a map value") }
                let keyField = entry.fields[k]
                let keyValue: JSONNode =
                    switch keyField.kind {
                    case .string: .string(key)
                    case .bool where key == "true": .bool(true)
                    case .bool where key == "false": .bool(false)
                    case .bool: throw ProtoJSONError.invalidField(path: "", reason: "a bool key must be \"true\" or \"false\"")
                    default: .string(key)
                    }
                guard let keyScalar = try self.value(keyField.kind, keyField.typeName, keyValue, depth: depth),
                    let valueScalar = try self.value(entry.fields[v].kind, entry.fields[v].typeName, item, depth: depth)
                else { continue }
                var e = ProtoWriter()
                Self.write(1, keyScalar, into: &e)
                Self.write(2, valueScalar, into: &e)
                writer.writeTag(field.number, .lengthDelimited)
                writer.writeVarint(UInt64(e.bytes.count))
                writer.writeRaw(e.bytes)
            } catch {
                throw error.within("[\(JSONString.quote(key))]")
            }
        }
    }

    /// A tag and the value's payload.
    static func write(_ number: Int, _ scalar: RawValue, into writer: inout ProtoWriter) {
        switch scalar {
        case .varint: writer.writeTag(number, .varint)
        case .fixed32: writer.writeTag(number, .fixed32)
        case .fixed64: writer.writeTag(number, .fixed64)
        case .bytes: writer.writeTag(number, .lengthDelimited)
        }
        payload(scalar, into: &writer)
    }

    /// The value without its tag (packed runs are payloads back to back).
    static func payload(_ scalar: RawValue, into writer: inout ProtoWriter) {
        switch scalar {
        case .varint(let v): writer.writeVarint(v)
        case .fixed32(let v): writer.writeFixed32(v)
        case .fixed64(let v): writer.writeFixed64(v)
        case .bytes(let b):
            writer.writeVarint(UInt64(b.count))
            writer.writeRaw(b)
        }
    }

    /// `google.protobuf.Any`: `"@type"` names the embedded message, whose fields are the other members (or,
    /// for an embedded Any, the member `"value"`). `{}` is an empty Any.
    private func any(_ json: JSONNode, depth: Int) throws(ProtoJSONError) -> [UInt8] {
        guard case .object(let members) = json else { throw .invalidField(path: "", reason: "expected an object, got \(json.kindName)") }
        if members.isEmpty { return [] }
        let types = members.filter { $0.key == "@type" }
        guard types.count == 1, case .string(let url) = types[0].value else {
            throw .invalidField(path: "@type", reason: types.isEmpty ? "an Any needs @type" : "expected one string")
        }
        guard let inner = registry.message(url) else {
            throw .invalidField(path: "@type", reason: "\(url) names a type the registry does not hold")
        }
        let rest = members.filter { $0.key != "@type" }
        let payload: [UInt8]
        if inner.fullName == anyTypeName || unsupportedWellKnownTypes.contains(inner.fullName) {
            let values = rest.filter { $0.key == "value" }
            guard values.count == 1 else { throw .invalidField(path: "value", reason: "an Any holding \(inner.fullName) needs one value") }
            do throws(ProtoJSONError) { payload = try message(inner, values[0].value, depth: depth + 1) } catch { throw error.within("value") }
        } else {
            payload = try message(inner, .object(rest), depth: depth + 1)
        }
        var writer = ProtoWriter()
        writer.string(1, url)
        writer.bytesField(2, payload)
        return writer.finish()
    }
}
