/// Revenue's periods: UTC days, ISO weeks (Monday 00:00 UTC) or calendar months (billing.v1.Granularity).
public enum Granularity: Int, Sendable, Equatable {
    case day = 1
    case week = 2
    case month = 3
}

/// The periods of a series: from the request's start aligned down to the granularity, each period's start up to
/// the exclusive end. At most `maxPeriods`.
public struct RevenuePeriods: Sendable, Equatable {
    public static let maxPeriods = 1000

    /// Each period's start, oldest first, then the last one's end (`count + 1` instants).
    public let bounds: [Int64]
    public var count: Int { bounds.count - 1 }
    public var start: Int64 { bounds[0] }
    public var end: Int64 { bounds[bounds.count - 1] }

    public init(startMs: Int64, endMs: Int64, granularity: Granularity) throws(BillingError) {
        guard endMs > startMs else { throw .invalidField(field: "end_time_ms", problem: "must be after start_time_ms") }
        var b: [Int64] = [Self.align(startMs, granularity)]
        while b[b.count - 1] < endMs {
            guard b.count <= Self.maxPeriods else {
                throw .invalidField(field: "end_time_ms", problem: "is more than \(Self.maxPeriods) periods after start_time_ms")
            }
            b.append(Self.next(b[b.count - 1], granularity))
        }
        bounds = b
    }

    /// The start of the period `ms` falls in.
    public static func align(_ ms: Int64, _ granularity: Granularity) -> Int64 {
        let day = CivilDate.day(ofMs: ms)
        switch granularity {
        case .day: return day * CivilDate.dayMs
        case .week:
            // 1970-01-05 (day 4) was a Monday.
            let offset = day - 4
            let weeks = offset >= 0 ? offset / 7 : -((-offset + 6) / 7)
            return (weeks * 7 + 4) * CivilDate.dayMs
        case .month:
            let (y, m, _) = CivilDate.civil(day)
            return CivilDate.days(year: y, month: m, day: 1) * CivilDate.dayMs
        }
    }

    /// The start of the period after the one that starts at `start`.
    public static func next(_ start: Int64, _ granularity: Granularity) -> Int64 {
        switch granularity {
        case .day: return start + CivilDate.dayMs
        case .week: return start + 7 * CivilDate.dayMs
        case .month:
            let (y, m, _) = CivilDate.civil(CivilDate.day(ofMs: start))
            return CivilDate.days(year: m == 12 ? y + 1 : y, month: m == 12 ? 1 : m + 1, day: 1) * CivilDate.dayMs
        }
    }

    /// The index of the period `ms` falls in, or nil outside the series.
    public func index(of ms: Int64) -> Int? {
        guard ms >= start, ms < end else { return nil }
        var lo = 0, hi = count
        while hi - lo > 1 {
            let mid = (lo + hi) / 2
            if bounds[mid] <= ms { lo = mid } else { hi = mid }
        }
        return lo
    }
}
