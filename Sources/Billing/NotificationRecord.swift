/// The record of one notification, by notificationUUID.
public struct NotificationRecord: Sendable, Equatable {
    public var uuid: String
    public var type: String
    public var subtype: String?
    public var signedTimeMs: Int64
    public var result: NotificationResult
    public var appliedTimeMs: Int64
    public var transactionID: String?
    public var signedPayload: String
}
