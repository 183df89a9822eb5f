/// An App Store Server Notification whose outer and nested signatures verified.
public struct VerifiedNotification: Sendable, Equatable {
    public var uuid: String
    public var type: String
    public var subtype: String?
    public var signedTimeMs: Int64
    public var environment: StoreEnvironment?
    /// False when the environment is not one this service accepts: recorded as ignored, no effect.
    public var accepted: Bool
    public var transaction: StoreTransaction?
    public var renewal: RenewalFact?
    /// The whole signed payload, kept for audit.
    public var signedPayload: String
    /// Whose notification: App Store Server Notifications, or Google Play's Real-time developer notifications
    /// (their events are caused `rtdn:` + the notification type).
    public var source: Store = .appStore

    public init(
        uuid: String, type: String, subtype: String?, signedTimeMs: Int64, environment: StoreEnvironment?, accepted: Bool,
        transaction: StoreTransaction?, renewal: RenewalFact?, signedPayload: String
    ) {
        self.uuid = uuid
        self.type = type
        self.subtype = subtype
        self.signedTimeMs = signedTimeMs
        self.environment = environment
        self.accepted = accepted
        self.transaction = transaction
        self.renewal = renewal
        self.signedPayload = signedPayload
    }
}
