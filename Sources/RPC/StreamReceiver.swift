/// Receives the request messages of a bidirectional call, on its event loop, in order.
public struct StreamReceiver: Sendable {
    public var onMessage: @Sendable ([UInt8]) -> Void
    public var onEnd: @Sendable () -> Void

    public init(onMessage: @escaping @Sendable ([UInt8]) -> Void, onEnd: @escaping @Sendable () -> Void) {
        self.onMessage = onMessage
        self.onEnd = onEnd
    }

    public static let ignore = StreamReceiver(onMessage: { _ in }, onEnd: {})
}
