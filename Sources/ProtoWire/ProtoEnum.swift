/// A proto3 enum: any Int32 on the wire, with names for the values it declares.
public protocol ProtoEnum: RawRepresentable, Sendable, Hashable where RawValue == Int32 {
    init(rawValue: Int32)
}
