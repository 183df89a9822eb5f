import Glibc

/// CLOCK_MONOTONIC in nanoseconds: the one monotonic clock of billingd (event-loop timers, call deadlines,
/// durations in logs and metrics, the workers' sleeps). It never steps with the wall clock.
public enum Monotonic {
    public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    /// `now() + duration`, saturating: a negative duration is now, a huge one `UInt64.max` (never).
    public static func after(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0, attoseconds >= 0 || seconds > 0 else { return now() }
        let (ns, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return .max }
        let (sum, over) = now().addingReportingOverflow(UInt64(max(0, ns &+ attoseconds / 1_000_000_000)))
        return over ? .max : sum
    }

    /// Seconds from `start` (a `now()`) to now.
    public static func seconds(since start: UInt64) -> Double { Double(now() &- start) / 1e9 }

    /// Nanoseconds from `start` (a `now()`) to now.
    public static func nanoseconds(since start: UInt64) -> UInt64 { now() &- start }
}
