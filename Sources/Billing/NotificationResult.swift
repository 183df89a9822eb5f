/// What became of a notification (the `result` label of billingd_notifications_total).
public enum NotificationResult: String, Sendable, Equatable, CaseIterable {
    /// Its effects (possibly none, for types without effect) are committed.
    case applied
    /// Its notificationUUID was seen before: nothing changed.
    case duplicate
    /// Recorded without effect: an environment this service does not accept.
    case ignored
}
