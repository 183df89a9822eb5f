/// Reads protobuf wire format from a byte buffer, one field at a time.
///
/// A reader never allocates for a length it has not checked against both
/// the bytes left and `DecodingLimits.maxFieldBytes`.
public struct ProtoReader: ~Copyable {
    @usableFromInline let bytes: [UInt8]
    @usableFromInline var position: Int
    @usableFromInline let end: Int
    /// How deep this reader is in nested messages.
    public let depth: Int
    public let limits: DecodingLimits

    public init(_ bytes: [UInt8], limits: DecodingLimits = .default) {
        self.bytes = bytes
        self.position = 0
        self.end = bytes.count
        self.depth = 0
        self.limits = limits
    }

    init(bytes: [UInt8], start: Int, end: Int, depth: Int, limits: DecodingLimits) {
        self.bytes = bytes
        self.position = start
        self.end = end
        self.depth = depth
        self.limits = limits
    }

    /// True when every byte has been read.
    public var isAtEnd: Bool { position >= end }

    /// The next field's number and wire type, or nil at the end of the message.
    public mutating func nextTag() throws(WireError) -> (number: Int, wireType: WireType)? {
        if position >= end { return nil }
        let key = try readVarint()
        let number = key >> 3
        guard number >= 1, number <= 0x1FFF_FFFF else { throw .invalidFieldNumber(number) }
        let raw = UInt8(truncatingIfNeeded: key & 7)
        guard let wireType = WireType(rawValue: raw), raw != 3, raw != 4 else {
            throw .invalidWireType(raw)
        }
        return (Int(number), wireType)
    }

    /// A base-128 varint of up to ten bytes.
    @inlinable
    public mutating func readVarint() throws(WireError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard position < end else { throw .truncated }
            let byte = bytes[position]
            position += 1
            if shift == 63 && byte > 1 { throw .malformedVarint }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
            if shift > 63 { throw .malformedVarint }
        }
    }

    public mutating func readFixed32() throws(WireError) -> UInt32 {
        guard end - position >= 4 else { throw .truncated }
        var v: UInt32 = 0
        for i in 0..<4 { v |= UInt32(bytes[position + i]) << (8 * UInt32(i)) }
        position += 4
        return v
    }

    public mutating func readFixed64() throws(WireError) -> UInt64 {
        guard end - position >= 8 else { throw .truncated }
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(bytes[position + i]) << (8 * UInt64(i)) }
        position += 8
        return v
    }

    /// The bounds of the next length-delimited payload, checked against the input and the limit.
    mutating func readLengthBounds() throws(WireError) -> Range<Int> {
        let length = try readVarint()
        guard length <= UInt64(limits.maxFieldBytes), length <= UInt64(end - position) else {
            throw .lengthTooLarge(length)
        }
        let start = position
        position += Int(length)
        return start..<position
    }

    public mutating func readBytes() throws(WireError) -> [UInt8] {
        let range = try readLengthBounds()
        return Array(bytes[range])
    }

    /// A string field; `field` names it in the error when it is not UTF-8.
    public mutating func readString(field: Int) throws(WireError) -> String {
        let range = try readLengthBounds()
        if range.isEmpty { return "" }
        let ascii = bytes.withUnsafeBufferPointer { ASCII.isASCII(UnsafeBufferPointer(rebasing: $0[range])) }
        if ascii { return String(decoding: bytes[range], as: UTF8.self) }
        guard let s = String(validating: bytes[range], as: UTF8.self) else { throw .invalidUTF8(field: field) }
        return s
    }

    /// Decodes a nested message one level deeper.
    public mutating func readMessage<M: ProtoMessage>(_ type: M.Type = M.self) throws(WireError) -> M {
        guard depth + 1 <= limits.maxDepth else { throw .tooDeep }
        let range = try readLengthBounds()
        var sub = ProtoReader(bytes: bytes, start: range.lowerBound, end: range.upperBound, depth: depth + 1, limits: limits)
        var message = M()
        try message.decodeFields(from: &sub)
        return message
    }

    /// Calls `body` with a reader over the next length-delimited payload (packed values).
    public mutating func withLengthDelimited<T>(_ body: (inout ProtoReader) throws(WireError) -> T) throws(WireError) -> T {
        let range = try readLengthBounds()
        var sub = ProtoReader(bytes: bytes, start: range.lowerBound, end: range.upperBound, depth: depth, limits: limits)
        return try body(&sub)
    }

    /// Skips a field of the given wire type (unknown fields).
    public mutating func skip(_ wireType: WireType) throws(WireError) {
        switch wireType {
        case .varint: _ = try readVarint()
        case .fixed64:
            guard end - position >= 8 else { throw .truncated }
            position += 8
        case .fixed32:
            guard end - position >= 4 else { throw .truncated }
            position += 4
        case .lengthDelimited: _ = try readLengthBounds()
        case .startGroup, .endGroup: throw .invalidWireType(wireType.rawValue)
        }
    }
}

extension ProtoReader {
    // Typed helpers for the scalar kinds proto3 declares; `field` is for errors.

    public mutating func readInt32(field: Int) throws(WireError) -> Int32 {
        // int32 is sign-extended to 64 bits on the wire.
        let v = Int64(bitPattern: try readVarint())
        guard let r = Int32(exactly: v) else { throw .valueOutOfRange(field: field) }
        return r
    }
    public mutating func readInt64() throws(WireError) -> Int64 { Int64(bitPattern: try readVarint()) }
    public mutating func readUInt32(field: Int) throws(WireError) -> UInt32 {
        let v = try readVarint()
        // Other encoders write only 32 bits; accept the low 32 as protobuf does.
        return UInt32(truncatingIfNeeded: v)
    }
    public mutating func readUInt64() throws(WireError) -> UInt64 { try readVarint() }
    public mutating func readSInt32() throws(WireError) -> Int32 {
        let v = UInt32(truncatingIfNeeded: try readVarint())
        return Int32(bitPattern: (v >> 1) ^ (0 &- (v & 1)))
    }
    public mutating func readSInt64() throws(WireError) -> Int64 {
        let v = try readVarint()
        return Int64(bitPattern: (v >> 1) ^ (0 &- (v & 1)))
    }
    public mutating func readBool() throws(WireError) -> Bool { try readVarint() != 0 }
    /// An enum as its raw number; unknown values are kept, as proto3 requires.
    public mutating func readEnum(field: Int) throws(WireError) -> Int32 {
        Int32(truncatingIfNeeded: Int64(bitPattern: try readVarint()))
    }
    public mutating func readDouble() throws(WireError) -> Double { Double(bitPattern: try readFixed64()) }
    public mutating func readFloat() throws(WireError) -> Float { Float(bitPattern: try readFixed32()) }
}

extension ProtoReader {
    /// Appends a repeated varint field, packed or not (decoders must accept both).
    public mutating func readRepeatedVarints(_ wireType: WireType, field: Int, into values: inout [UInt64]) throws(WireError) {
        switch wireType {
        case .varint: values.append(try readVarint())
        case .lengthDelimited:
            try withLengthDelimited { (sub: inout ProtoReader) throws(WireError) in
                while !sub.isAtEnd { values.append(try sub.readVarint()) }
            }
        default: throw .wrongWireType(field: field)
        }
    }
}
