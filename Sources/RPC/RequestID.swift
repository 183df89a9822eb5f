/// A call's id, `PREFIX-HEX`: a per-process random prefix and a counter, formatted only when read.
public struct RequestID: Sendable, CustomStringConvertible {
    public var prefix: String
    public var number: UInt64
    public init(prefix: String, number: UInt64) {
        self.prefix = prefix
        self.number = number
    }
    public var description: String { prefix + "-" + String(number, radix: 16) }
}
