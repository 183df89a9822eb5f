/// Why bytes could not be read as a protobuf message.
public enum WireError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The input ended inside a field.
    case truncated
    /// A varint ran past ten bytes or overflowed 64 bits.
    case malformedVarint
    /// A field number of 0, or above 2^29 - 1.
    case invalidFieldNumber(UInt64)
    /// A wire type this codec does not accept (groups, 6, 7).
    case invalidWireType(UInt8)
    /// A known field arrived with a wire type its declaration does not allow.
    case wrongWireType(field: Int)
    /// A length-delimited field claims more bytes than the limit or the input holds.
    case lengthTooLarge(UInt64)
    /// A string field holds bytes that are not UTF-8.
    case invalidUTF8(field: Int)
    /// Messages nest deeper than the decoder allows.
    case tooDeep
    /// A value does not fit its declared type (an int32 outside 32 bits).
    case valueOutOfRange(field: Int)

    public var description: String {
        switch self {
        case .truncated: "message truncated"
        case .malformedVarint: "malformed varint"
        case .invalidFieldNumber(let n): "invalid field number \(n)"
        case .invalidWireType(let t): "invalid wire type \(t)"
        case .wrongWireType(let f): "field \(f) has the wrong wire type"
        case .lengthTooLarge(let n): "length \(n) exceeds the input or the limit"
        case .invalidUTF8(let f): "field \(f) is not valid UTF-8"
        case .tooDeep: "message nesting too deep"
        case .valueOutOfRange(let f): "field \(f) is out of range"
        }
    }
}

/// The wire types of the protobuf encoding.
public enum WireType: UInt8, Sendable {
    case varint = 0
    case fixed64 = 1
    case lengthDelimited = 2
    case startGroup = 3
    case endGroup = 4
    case fixed32 = 5
}

/// Limits a decoder enforces before it allocates.
public struct DecodingLimits: Sendable {
    /// The deepest nesting of messages accepted (the top level is depth 0).
    public var maxDepth: Int
    /// The longest single length-delimited field accepted, in bytes.
    public var maxFieldBytes: Int

    public init(maxDepth: Int = 64, maxFieldBytes: Int = 64 << 20) {
        self.maxDepth = maxDepth
        self.maxFieldBytes = maxFieldBytes
    }

    public static let `default` = DecodingLimits()
}
