import Lifecycle

/// CLOCK_MONOTONIC in nanoseconds: the clock of call deadlines (`CallContext.monotonicDeadline`), the one
/// the server's event loops read.
public enum CallClock {
    public static func now() -> UInt64 { Monotonic.now() }

    /// `instant` on this clock (an instant already past gives a value at or before now, never 0).
    static func monotonic(_ instant: ContinuousClock.Instant) -> UInt64 {
        let remaining = ContinuousClock.now.duration(to: instant)
        let (seconds, attoseconds) = remaining.components
        let nanoseconds = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let offset = nanoseconds.overflow ? (seconds < 0 ? Int64.min / 2 : Int64.max / 2) : nanoseconds.partialValue &+ attoseconds / 1_000_000_000
        let now = Int64(bitPattern: now())
        return UInt64(bitPattern: max(1, now &+ offset))
    }
}
