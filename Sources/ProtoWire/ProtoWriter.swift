/// Writes protobuf wire format into one preallocated buffer.
///
/// Callers reserve `encodedSize` first, so encoding a message allocates once.
public struct ProtoWriter: ~Copyable {
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 0) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Writes into `buffer`'s storage: its bytes are dropped, its capacity kept (and grown to `capacity`).
    /// For a transport that lends the storage of an earlier answer: no allocation per message.
    public init(reusing buffer: consuming [UInt8], capacity: Int) {
        bytes = consume buffer
        if !bytes.isEmpty { bytes.removeAll(keepingCapacity: true) }
        if bytes.capacity < capacity { bytes.reserveCapacity(capacity) }
    }

    /// Hands the written bytes over.
    public consuming func finish() -> [UInt8] { bytes }

    @inlinable
    public static func varintSize(_ value: UInt64) -> Int {
        // 1 byte per 7 bits; 0 takes one byte.
        let bits = 64 - value.leadingZeroBitCount
        return bits == 0 ? 1 : (bits + 6) / 7
    }

    public static func tagSize(_ field: Int) -> Int { varintSize(UInt64(field) << 3) }

    public mutating func writeVarint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    public mutating func writeTag(_ field: Int, _ wireType: WireType) {
        writeVarint(UInt64(field) << 3 | UInt64(wireType.rawValue))
    }

    public mutating func writeFixed32(_ value: UInt32) {
        for i in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt32(i)))) }
    }

    public mutating func writeFixed64(_ value: UInt64) {
        for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }

    public mutating func writeRaw(_ raw: some Collection<UInt8>) { bytes.append(contentsOf: raw) }

    /// A gRPC message prefix: the compressed flag (0) and `size` as four bytes, big-endian. Byte by byte: an
    /// array literal passed to `writeRaw` was allocated and freed for every answer.
    public mutating func writeMessagePrefix(size: Int) {
        bytes.append(0)
        bytes.append(UInt8(truncatingIfNeeded: size >> 24))
        bytes.append(UInt8(truncatingIfNeeded: size >> 16))
        bytes.append(UInt8(truncatingIfNeeded: size >> 8))
        bytes.append(UInt8(truncatingIfNeeded: size))
    }
}

/// Field-level helpers that skip proto3 defaults and pair each writer with its size.
extension ProtoWriter {
    public mutating func string(_ field: Int, _ value: String) {
        guard !value.isEmpty else { return }
        writeTag(field, .lengthDelimited)
        writeVarint(UInt64(value.utf8.count))
        // The contiguous bytes in one copy (appending the UTF8View went byte by byte).
        var value = value
        value.withUTF8 { bytes.append(contentsOf: $0) }
    }
    public mutating func bytesField(_ field: Int, _ value: [UInt8]) {
        guard !value.isEmpty else { return }
        writeTag(field, .lengthDelimited)
        writeVarint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }
    public mutating func int64(_ field: Int, _ value: Int64) {
        guard value != 0 else { return }
        writeTag(field, .varint)
        writeVarint(UInt64(bitPattern: value))
    }
    public mutating func int32(_ field: Int, _ value: Int32) { int64(field, Int64(value)) }
    public mutating func uint64(_ field: Int, _ value: UInt64) {
        guard value != 0 else { return }
        writeTag(field, .varint)
        writeVarint(value)
    }
    public mutating func bool(_ field: Int, _ value: Bool) {
        guard value else { return }
        writeTag(field, .varint)
        writeVarint(1)
    }
    public mutating func sint64(_ field: Int, _ value: Int64) {
        guard value != 0 else { return }
        writeTag(field, .varint)
        writeVarint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }
    public mutating func fixed32(_ field: Int, _ value: UInt32) {
        guard value != 0 else { return }
        writeTag(field, .fixed32)
        writeFixed32(value)
    }
    public mutating func fixed64(_ field: Int, _ value: UInt64) {
        guard value != 0 else { return }
        writeTag(field, .fixed64)
        writeFixed64(value)
    }
    public mutating func double(_ field: Int, _ value: Double) {
        guard value.bitPattern != 0 else { return }
        writeTag(field, .fixed64)
        writeFixed64(value.bitPattern)
    }
    /// A nested message: written even when empty if `always` (a set submessage field).
    public mutating func message<M: ProtoMessage>(_ field: Int, _ value: M) {
        writeTag(field, .lengthDelimited)
        writeVarint(UInt64(value.encodedSize))
        value.encode(to: &self)
    }
    /// Packed repeated varints (int32/int64/uint/enum/bool).
    public mutating func packedVarints(_ field: Int, _ values: [UInt64]) {
        guard !values.isEmpty else { return }
        writeTag(field, .lengthDelimited)
        var len = 0
        for v in values { len += ProtoWriter.varintSize(v) }
        writeVarint(UInt64(len))
        for v in values { writeVarint(v) }
    }
}

/// Exact sizes matching the helpers above.
public enum ProtoSize {
    public static func string(_ field: Int, _ value: String) -> Int {
        let n = value.utf8.count
        return n == 0 ? 0 : ProtoWriter.tagSize(field) + ProtoWriter.varintSize(UInt64(n)) + n
    }
    public static func bytes(_ field: Int, _ value: [UInt8]) -> Int {
        let n = value.count
        return n == 0 ? 0 : ProtoWriter.tagSize(field) + ProtoWriter.varintSize(UInt64(n)) + n
    }
    public static func int64(_ field: Int, _ value: Int64) -> Int {
        value == 0 ? 0 : ProtoWriter.tagSize(field) + ProtoWriter.varintSize(UInt64(bitPattern: value))
    }
    public static func int32(_ field: Int, _ value: Int32) -> Int { int64(field, Int64(value)) }
    public static func uint64(_ field: Int, _ value: UInt64) -> Int {
        value == 0 ? 0 : ProtoWriter.tagSize(field) + ProtoWriter.varintSize(value)
    }
    public static func bool(_ field: Int, _ value: Bool) -> Int { value ? ProtoWriter.tagSize(field) + 1 : 0 }
    public static func sint64(_ field: Int, _ value: Int64) -> Int {
        value == 0 ? 0 : ProtoWriter.tagSize(field) + ProtoWriter.varintSize(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }
    public static func fixed32(_ field: Int, _ value: UInt32) -> Int { value == 0 ? 0 : ProtoWriter.tagSize(field) + 4 }
    public static func fixed64(_ field: Int, _ value: UInt64) -> Int { value == 0 ? 0 : ProtoWriter.tagSize(field) + 8 }
    public static func double(_ field: Int, _ value: Double) -> Int { value.bitPattern == 0 ? 0 : ProtoWriter.tagSize(field) + 8 }
    public static func message<M: ProtoMessage>(_ field: Int, _ value: M) -> Int {
        let n = value.encodedSize
        return ProtoWriter.tagSize(field) + ProtoWriter.varintSize(UInt64(n)) + n
    }
    public static func packedVarints(_ field: Int, _ values: [UInt64]) -> Int {
        guard !values.isEmpty else { return 0 }
        var len = 0
        for v in values { len += ProtoWriter.varintSize(v) }
        return ProtoWriter.tagSize(field) + ProtoWriter.varintSize(UInt64(len)) + len
    }
}
