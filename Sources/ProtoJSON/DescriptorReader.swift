import ProtoWire

/// Reads serialized FileDescriptorProtos (google/protobuf/descriptor.proto) into message and enum tables.
///
/// Only what the JSON mapping and the RPC protocols need is kept: messages, enums, and each service
/// method's path, types, streaming and idempotency; other options and source info are skipped.
struct DescriptorReader {
    var messages: [String: MessageInfo] = [:]
    var enums: [String: EnumInfo] = [:]
    var methods: [String: MethodInfo] = [:]

    /// Adds the types of one file.
    mutating func add(file bytes: [UInt8]) throws(ProtoJSONError) {
        var package = ""
        var syntax = ""
        var messageBytes: [[UInt8]] = []
        var enumBytes: [[UInt8]] = []
        var serviceBytes: [[UInt8]] = []
        try Self.scan(bytes) { (reader: inout ProtoReader, number: Int, wire: WireType) throws(WireError) in
            switch (number, wire) {
            case (2, .lengthDelimited): package = try reader.readString(field: 2)
            case (4, .lengthDelimited): messageBytes.append(try reader.readBytes())
            case (5, .lengthDelimited): enumBytes.append(try reader.readBytes())
            case (6, .lengthDelimited): serviceBytes.append(try reader.readBytes())
            case (12, .lengthDelimited): syntax = try reader.readString(field: 12)
            default: try reader.skip(wire)
            }
        }
        let prefix = package.isEmpty ? "" : package + "."
        for service in serviceBytes { try addService(service, prefix: prefix) }
        // Files without a syntax statement are proto2; editions are read as proto3 (explicit presence is not
        // looked up in their features).
        let proto3 = syntax != "proto2" && syntax != ""
        for m in messageBytes { try addMessage(m, prefix: prefix, proto3: proto3, depth: 0) }
        for e in enumBytes { try addEnum(e, prefix: prefix) }
    }

    /// A ServiceDescriptorProto: each MethodDescriptorProto (name 1, input_type 2, output_type 3, options 4
    /// with idempotency_level 34, client_streaming 5, server_streaming 6) under `/package.Service/Method`.
    private mutating func addService(_ bytes: [UInt8], prefix: String) throws(ProtoJSONError) {
        var name = ""
        var methodBytes: [[UInt8]] = []
        try Self.scan(bytes) { (reader: inout ProtoReader, number: Int, wire: WireType) throws(WireError) in
            switch (number, wire) {
            case (1, .lengthDelimited): name = try reader.readString(field: 1)
            case (2, .lengthDelimited): methodBytes.append(try reader.readBytes())
            default: try reader.skip(wire)
            }
        }
        for m in methodBytes {
            var method = MethodInfo(path: "", inputType: "", outputType: "", clientStreaming: false, serverStreaming: false, hasNoSideEffects: false)
            var methodName = ""
            try Self.scan(m) { (reader: inout ProtoReader, number: Int, wire: WireType) throws(WireError) in
                switch (number, wire) {
                case (1, .lengthDelimited): methodName = try reader.readString(field: 1)
                case (2, .lengthDelimited): method.inputType = String(try reader.readString(field: 2).drop { $0 == "." })
                case (3, .lengthDelimited): method.outputType = String(try reader.readString(field: 3).drop { $0 == "." })
                case (4, .lengthDelimited):
                    try Self.walk(try reader.readBytes()) { (o: inout ProtoReader, n: Int, w: WireType) throws(WireError) in
                        // MethodOptions.idempotency_level = 34: NO_SIDE_EFFECTS is 1.
                        if n == 34 && w == .varint { method.hasNoSideEffects = try o.readVarint() == 1 } else { try o.skip(w) }
                    }
                case (5, .varint): method.clientStreaming = try reader.readBool()
                case (6, .varint): method.serverStreaming = try reader.readBool()
                default: try reader.skip(wire)
                }
            }
            method.path = "/" + prefix + name + "/" + methodName
            methods[method.path] = method
        }
    }

    private mutating func addMessage(_ bytes: [UInt8], prefix: String, proto3: Bool, depth: Int) throws(ProtoJSONError) {
        guard depth < 64 else { throw .invalidDescriptor("message types nest too deep") }
        var name = ""
        var fieldBytes: [[UInt8]] = []
        var nested: [[UInt8]] = []
        var nestedEnums: [[UInt8]] = []
        var oneofs: [String] = []
        var isMapEntry = false
        try Self.scan(bytes) { (reader: inout ProtoReader, number: Int, wire: WireType) throws(WireError) in
            switch (number, wire) {
            case (1, .lengthDelimited): name = try reader.readString(field: 1)
            case (2, .lengthDelimited): fieldBytes.append(try reader.readBytes())
            case (3, .lengthDelimited): nested.append(try reader.readBytes())
            case (4, .lengthDelimited): nestedEnums.append(try reader.readBytes())
            case (7, .lengthDelimited):
                // MessageOptions.map_entry = 7.
                try Self.walk(try reader.readBytes()) { (o: inout ProtoReader, n: Int, w: WireType) throws(WireError) in
                    if n == 7 && w == .varint { isMapEntry = try o.readBool() } else { try o.skip(w) }
                }
            case (8, .lengthDelimited):
                var oneofName = ""
                try Self.walk(try reader.readBytes()) { (o: inout ProtoReader, n: Int, w: WireType) throws(WireError) in
                    if n == 1 && w == .lengthDelimited { oneofName = try o.readString(field: 1) } else { try o.skip(w) }
                }
                oneofs.append(oneofName)
            default: try reader.skip(wire)
            }
        }
        let fullName = prefix + name
        var info = MessageInfo(fullName: fullName, fields: [], indexByNumber: [:], indexByName: [:], oneofNames: oneofs, isMapEntry: isMapEntry)
        for f in fieldBytes {
            let field = try Self.field(f, proto3: proto3, in: fullName)
            if let o = field.oneofIndex, o < 0 || o >= oneofs.count {
                throw .invalidDescriptor("\(fullName).\(field.name) names oneof \(o), which does not exist")
            }
            guard info.indexByNumber[field.number] == nil else { throw .invalidDescriptor("\(fullName) declares field \(field.number) twice") }
            info.indexByNumber[field.number] = info.fields.count
            info.indexByName[field.jsonName] = info.fields.count
            info.indexByName[field.name] = info.fields.count
            info.fields.append(field)
        }
        guard messages[fullName] == nil && enums[fullName] == nil else { throw .invalidDescriptor("\(fullName) is declared twice") }
        messages[fullName] = info
        for m in nested { try addMessage(m, prefix: fullName + ".", proto3: proto3, depth: depth + 1) }
        for e in nestedEnums { try addEnum(e, prefix: fullName + ".") }
    }

    private static func field(_ bytes: [UInt8], proto3: Bool, in message: String) throws(ProtoJSONError) -> FieldInfo {
        var name = "", jsonName = "", typeName = ""
        var number = 0, label = 1, type = 0
        var oneof: Int?
        var packed: Bool?
        var proto3Optional = false
        try scan(bytes) { (reader: inout ProtoReader, n: Int, wire: WireType) throws(WireError) in
            switch (n, wire) {
            case (1, .lengthDelimited): name = try reader.readString(field: 1)
            case (3, .varint): number = Int(truncatingIfNeeded: try reader.readInt32(field: 3))
            case (4, .varint): label = Int(truncatingIfNeeded: try reader.readInt32(field: 4))
            case (5, .varint): type = Int(truncatingIfNeeded: try reader.readInt32(field: 5))
            case (6, .lengthDelimited): typeName = try reader.readString(field: 6)
            case (8, .lengthDelimited):
                // FieldOptions.packed = 2.
                try walk(try reader.readBytes()) { (o: inout ProtoReader, k: Int, w: WireType) throws(WireError) in
                    if k == 2 && w == .varint { packed = try o.readBool() } else { try o.skip(w) }
                }
            case (9, .varint): oneof = Int(truncatingIfNeeded: try reader.readInt32(field: 9))
            case (10, .lengthDelimited): jsonName = try reader.readString(field: 10)
            case (17, .varint): proto3Optional = try reader.readBool()
            default: try reader.skip(wire)
            }
        }
        guard let kind = FieldKind(rawValue: type), kind != .group else {
            throw .invalidDescriptor("\(message).\(name) has type \(type), which JSON does not map (groups, or unknown)")
        }
        guard (1...0x1FFF_FFFF).contains(number), !name.isEmpty else { throw .invalidDescriptor("\(message) has a field with no name or number") }
        if (kind == .message || kind == .enumeration) && typeName.isEmpty {
            throw .invalidDescriptor("\(message).\(name) names no type")
        }
        let repeated = label == 3
        let presence = !repeated && (kind == .message || oneof != nil || proto3Optional || !proto3)
        return FieldInfo(
            name: name, jsonName: jsonName.isEmpty ? defaultJSONName(name) : jsonName, number: number, kind: kind,
            isRepeated: repeated, isPacked: repeated && kind.isPackable && (packed ?? proto3),
            typeName: typeName.hasPrefix(".") ? String(typeName.dropFirst()) : typeName, oneofIndex: oneof,
            hasPresence: presence, isMap: false)
    }

    private mutating func addEnum(_ bytes: [UInt8], prefix: String) throws(ProtoJSONError) {
        var name = ""
        var values: [(String, Int32)] = []
        try Self.scan(bytes) { (reader: inout ProtoReader, n: Int, wire: WireType) throws(WireError) in
            switch (n, wire) {
            case (1, .lengthDelimited): name = try reader.readString(field: 1)
            case (2, .lengthDelimited):
                var valueName = ""
                var number: Int32 = 0
                try Self.walk(try reader.readBytes()) { (v: inout ProtoReader, k: Int, w: WireType) throws(WireError) in
                    switch (k, w) {
                    case (1, .lengthDelimited): valueName = try v.readString(field: 1)
                    case (2, .varint): number = try v.readInt32(field: 2)
                    default: try v.skip(w)
                    }
                }
                values.append((valueName, number))
            default: try reader.skip(wire)
            }
        }
        let fullName = prefix + name
        var info = EnumInfo(fullName: fullName, nameByNumber: [:], numberByName: [:])
        for (valueName, number) in values {
            info.numberByName[valueName] = number
            if info.nameByNumber[number] == nil { info.nameByNumber[number] = valueName }
        }
        guard messages[fullName] == nil && enums[fullName] == nil else { throw .invalidDescriptor("\(fullName) is declared twice") }
        enums[fullName] = info
    }

    /// Checks every field's type name and marks the map fields; called once all files are in.
    mutating func link() throws(ProtoJSONError) {
        for (messageName, var message) in messages {
            for i in message.fields.indices {
                let field = message.fields[i]
                switch field.kind {
                case .message:
                    guard let target = messages[field.typeName] else {
                        throw .invalidDescriptor("\(messageName).\(field.name) names \(field.typeName), which no file declares")
                    }
                    if target.isMapEntry && field.isRepeated {
                        guard let key = target.indexByNumber[1], let value = target.indexByNumber[2], target.fields.count == 2,
                            Self.isMapKey(target.fields[key].kind), !target.fields[value].isRepeated
                        else { throw .invalidDescriptor("\(field.typeName) is not a valid map entry") }
                        message.fields[i].isMap = true
                    }
                case .enumeration:
                    guard enums[field.typeName] != nil else {
                        throw .invalidDescriptor("\(messageName).\(field.name) names \(field.typeName), which no file declares")
                    }
                default: break
                }
            }
            messages[messageName] = message
        }
    }

    private static func isMapKey(_ kind: FieldKind) -> Bool {
        switch kind {
        case .double, .float, .bytes, .message, .enumeration, .group: false
        default: true
        }
    }

    /// Calls `body` for every field of `bytes`, which it must read or skip.
    static func scan(
        _ bytes: [UInt8], _ body: (inout ProtoReader, Int, WireType) throws(WireError) -> Void
    ) throws(ProtoJSONError) {
        do {
            try walk(bytes, body)
        } catch {
            throw .invalidDescriptor("\(error)")
        }
    }

    /// `scan` inside a field's callback, where errors are still `WireError`s.
    static func walk(_ bytes: [UInt8], _ body: (inout ProtoReader, Int, WireType) throws(WireError) -> Void) throws(WireError) {
        var reader = ProtoReader(bytes)
        while let (number, wire) = try reader.nextTag() { try body(&reader, number, wire) }
    }
}
