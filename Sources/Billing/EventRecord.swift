/// One committed change, as the feed keeps it. `cursor` is assigned by the store at commit.
public struct EventRecord: Sendable, Equatable {
    public var cursor: UInt64
    public var kind: EventKind
    public var timeMs: Int64
    public var accountID: String
    public var order: Order?
    public var entitlement: Entitlement?
    public var cause: String
    public var notificationUUID: String?
    public var transactionID: String?

    public init(
        cursor: UInt64 = 0, kind: EventKind, timeMs: Int64, accountID: String, order: Order? = nil,
        entitlement: Entitlement? = nil, cause: EventCause, transactionID: String? = nil
    ) {
        self.cursor = cursor
        self.kind = kind
        self.timeMs = timeMs
        self.accountID = accountID
        self.order = order
        self.entitlement = entitlement
        self.cause = cause.text
        self.notificationUUID = cause.notificationUUID
        self.transactionID = transactionID
    }
}
