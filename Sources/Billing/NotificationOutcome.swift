/// The answer to a notification: its result and the events it wrote.
public struct NotificationOutcome: Sendable, Equatable {
    public var result: NotificationResult
    public var events: Int
    public init(result: NotificationResult, events: Int) {
        self.result = result
        self.events = events
    }
}
