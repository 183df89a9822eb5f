import Synchronization

/// The facts a handler notes for its call's log line (`order_id`, `account_id`); never secrets.
///
/// Stored inline in the call's `Cancellation`, the one per-call object that the transport and the handler
/// both hold, so noting costs no allocation of its own. Any thread may note.
public struct CallNotes: ~Copyable, Sendable {
    private let entries = Mutex<[(String, String)]>([])
    private let keeps: Bool

    /// `keeps: false` when nothing reads the notes (no per-call log line): `note` then does nothing.
    public init(keeps: Bool = true) { self.keeps = keeps }

    /// Adds a fact for the log line (`order_id`, `account_id`); never secrets.
    public func note(_ key: String, _ value: String) {
        guard keeps else { return }
        entries.withLock { $0.append((key, value)) }
    }

    /// The facts noted so far, in the order they were noted.
    public var noted: [(String, String)] { keeps ? entries.withLock { $0 } : [] }

    /// Empty again, for the transport's next call on the same stream object. (Notes that are not kept
    /// are never written: no lock to take.)
    package func reset() {
        guard keeps else { return }
        entries.withLock { $0.removeAll(keepingCapacity: true) }
    }
}
