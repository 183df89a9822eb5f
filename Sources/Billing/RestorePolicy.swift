/// Where a purchase already owned by another account goes on restore.
public enum RestorePolicy: String, Sendable {
    /// It moves to the restoring account (default).
    case transfer
    /// It stays; the restoring account does not get it.
    case keep
}
