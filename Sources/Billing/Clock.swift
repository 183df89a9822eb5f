import Glibc
import Synchronization

/// Wall-clock time for order timestamps, injectable for tests.
public protocol WallClock: Sendable {
    /// Milliseconds since 1970-01-01 UTC.
    func nowMilliseconds() -> Int64
}

/// The system's real-time clock.
public struct SystemClock: WallClock {
    public init() {}
    public func nowMilliseconds() -> Int64 {
        var ts = timespec()
        unsafe clock_gettime(CLOCK_REALTIME, &ts)  // a C call writing one local timespec
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}

/// A clock tests set and advance by hand.
public final class ManualClock: WallClock {
    private let now: Mutex<Int64>
    public init(milliseconds: Int64) { now = Mutex(milliseconds) }
    public func nowMilliseconds() -> Int64 { now.withLock { $0 } }
    public func advance(milliseconds: Int64) { now.withLock { $0 += milliseconds } }
}
