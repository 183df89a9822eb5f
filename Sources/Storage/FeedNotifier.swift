import Billing
import Synchronization

/// The one callback a store calls after commits that made events visible (the feed's followers).
///
/// The closure lives in a class box: a closure stored directly in a `Mutex` and read back with
/// `withLock { $0 }` was re-abstracted on every read, each read wrapping the last (tens of thousands
/// of thunks deep after a load run, then a stack overflow).
final class FeedNotifier: Sendable {
    private final class Box: Sendable {
        let call: @Sendable () -> Void
        init(_ call: @escaping @Sendable () -> Void) { self.call = call }
    }
    private let box = Mutex<Box?>(nil)
    func set(_ listener: @escaping @Sendable () -> Void) { box.withLock { $0 = Box(listener) } }
    func notify() { box.withLock { $0 }?.call() }
}

/// The callback a store calls with what a commit changed for Revenue.
final class RevenueNotifier: Sendable {
    private final class Box: Sendable {
        let call: @Sendable (RevenueChanges) -> Void
        init(_ call: @escaping @Sendable (RevenueChanges) -> Void) { self.call = call }
    }
    private let box = Mutex<Box?>(nil)
    func set(_ listener: @escaping @Sendable (RevenueChanges) -> Void) { box.withLock { $0 = Box(listener) } }
    func notify(_ changes: RevenueChanges) {
        guard !changes.isEmpty else { return }
        box.withLock { $0 }?.call(changes)
    }
}
