import Synchronization

/// Per-call cancellation shared by the transport and the handler: set once when the call is cancelled
/// (client reset, deadline, shutdown).
///
/// It also carries the call's log notes (`notes`), being the one per-call object both sides hold;
/// `note` and `noted` forward to them.
public final class Cancellation: Sendable {
    private let flag = Atomic<Bool>(false)
    private let handler = Mutex<(@Sendable () -> Void)?>(nil)
    /// Whether `onCancel` ever set a handler on this object (`reset` takes the lock only then).
    private let armed = Atomic<Bool>(false)
    /// The facts a handler notes for the call's log line.
    public let notes: CallNotes

    /// `keepsNotes: false` when nothing reads the notes (no per-call log line): `note` then does nothing.
    public init(keepsNotes: Bool = true) { notes = CallNotes(keeps: keepsNotes) }

    public var isCancelled: Bool { flag.load(ordering: .acquiring) }

    public func cancel() {
        guard !flag.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if let body = handler.withLock({ h in
            defer { h = nil }
            return h
        }) {
            body()
        }
    }

    /// Runs `body` once when the call is cancelled (client reset, connection closed, deadline), at once if it
    /// already is; on the thread that cancels it. One handler per call (a later one replaces it).
    public func onCancel(_ body: @escaping @Sendable () -> Void) {
        armed.store(true, ordering: .releasing)
        let now = handler.withLock { h -> Bool in
            if flag.load(ordering: .acquiring) { return true }
            h = body
            return false
        }
        if now { body() }
    }

    /// Adds a fact for the log line (`order_id`, `account_id`); never secrets. Same as `notes.note`.
    public func note(_ key: String, _ value: String) { notes.note(key, value) }

    /// The facts noted so far. Same as `notes.noted`.
    public var noted: [(String, String)] { notes.noted }

    /// New again, for the transport's next call on the same stream object; only when nothing else holds it.
    package func reset() {
        flag.store(false, ordering: .relaxed)
        // Only the transport holds this object now: no `onCancel` can run concurrently.
        if armed.load(ordering: .acquiring) {
            handler.withLock { $0 = nil }
            armed.store(false, ordering: .relaxed)
        }
        notes.reset()
    }
}
