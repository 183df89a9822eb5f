import IO
import Lifecycle

/// Where an `H2ServerSession` runs: the one thread it is confined to, its clock and timers, and how
/// answers made on other threads reach it. In a server the host is the connection's `EventLoop`; the
/// in-memory transport tests use a hand-turned host (a manual clock and task queue) instead.
package protocol SessionHost: AnyObject, Sendable {
    /// True on the host's thread.
    var inHost: Bool { get }
    /// Stops the process off the host's thread, in every build (a thread-id compare).
    func assertInHost(_ what: StaticString, file: StaticString, line: UInt)
    /// Runs `task` on the host's thread (soon, after the current event, when called from it).
    func execute(_ task: @escaping @Sendable () -> Void)
    /// Runs `action` on the host's thread after `nanoseconds`; an id for `cancelTimer`.
    func schedule(afterNanoseconds nanoseconds: Int64, _ action: @escaping () -> Void) -> Int
    func cancelTimer(_ id: Int)
    /// The host's monotonic clock, in nanoseconds.
    func now() -> UInt64
}

extension EventLoop: SessionHost {
    package var inHost: Bool { inEventLoop }

    @inline(__always)
    package func assertInHost(_ what: StaticString, file: StaticString, line: UInt) {
        assertInEventLoop(what, file: file, line: line)
    }

    @inline(__always)
    package func now() -> UInt64 { Monotonic.now() }
}

/// Where a session's output goes: told when the session has bytes to send, so its owner writes them
/// at the end of the current loop iteration.
package protocol SessionOutput: AnyObject {
    func outputPending()
}
