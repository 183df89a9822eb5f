import Glibc
import Synchronization

/// Hands a value to exactly one thread.
final class Confined<T>: @unchecked Sendable {
    // Sendable: created on the opening thread, then used only by the one worker thread it is given to.
    // Checked in debug and test builds (GRDB's SchedulingWatchdog is the model): the first thread that reads
    // `value` owns it, and a read from any other thread stops the process.
    private let stored: T
    #if DEBUG
    private let owner = Atomic<UInt>(0)
    #endif

    init(_ value: T) { stored = value }

    var value: T {
        #if DEBUG
        let me = UInt(bitPattern: Int(bitPattern: pthread_self()))
        let (claimed, first) = owner.compareExchange(expected: 0, desired: me, ordering: .relaxed)
        precondition(claimed || first == me, "a \(T.self) confined to one thread was used from another")
        #endif
        return stored
    }
}
