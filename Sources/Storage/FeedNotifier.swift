import Synchronization

/// The one callback a store calls after commits that made events visible (the feed's followers).
final class FeedNotifier: Sendable {
    private let callback = Mutex<(@Sendable () -> Void)?>(nil)
    func set(_ listener: @escaping @Sendable () -> Void) { callback.withLock { $0 = listener } }
    func notify() { callback.withLock { $0 }?() }
}
