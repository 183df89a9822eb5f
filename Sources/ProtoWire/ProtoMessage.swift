/// A protobuf message with a hand-written proto3 codec.
public protocol ProtoMessage: Sendable {
    init()
    /// Reads every field up to the reader's end, skipping unknown ones.
    mutating func decodeFields(from reader: inout ProtoReader) throws(WireError)
    /// The exact number of bytes `encode(to:)` writes.
    var encodedSize: Int { get }
    /// Appends the message's fields, defaults omitted.
    func encode(to writer: inout ProtoWriter)
}

extension ProtoMessage {
    /// Decodes a whole message from `bytes`.
    public init(decoding bytes: [UInt8], limits: DecodingLimits = .default) throws(WireError) {
        self.init()
        var reader = ProtoReader(bytes, limits: limits)
        try decodeFields(from: &reader)
    }

    /// The message's wire bytes, in one allocation.
    public func encoded() -> [UInt8] {
        var writer = ProtoWriter(capacity: encodedSize)
        encode(to: &writer)
        return writer.finish()
    }
}

/// Checks a field's wire type against the one its declaration needs.
@inlinable
public func expect(_ actual: WireType, _ wanted: WireType, field: Int) throws(WireError) {
    if actual != wanted { throw .wrongWireType(field: field) }
}
