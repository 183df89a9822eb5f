/// What caused a change: the cause string of billing.proto and, for notifications, their UUID.
public struct EventCause: Sendable, Equatable {
    public var text: String
    public var notificationUUID: String?

    public init(_ text: String, notificationUUID: String? = nil) {
        self.text = text
        self.notificationUUID = notificationUUID
    }

    public static let createOrder = EventCause("create_order")
    public static let submitReceipt = EventCause("submit_receipt")
    public static let restorePurchases = EventCause("restore_purchases")
    public static let orderExpiry = EventCause("order_expiry")
    public static func notification(_ type: String, uuid: String) -> EventCause { EventCause("notification:" + type, notificationUUID: uuid) }
}
