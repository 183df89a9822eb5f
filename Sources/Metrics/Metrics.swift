import Synchronization

/// Prometheus metrics: counters, gauges and histograms with labels, rendered in the text format.
/// Thread-safe; each family has its own lock, held only to add a number.
public final class MetricsRegistry: Sendable {
    private let families = Mutex<[any MetricFamily]>([])

    public init() {}

    func add(_ family: any MetricFamily) { families.withLock { $0.append(family) } }

    /// Text exposition format 0.0.4.
    public func render() -> String {
        var out = ""
        for family in families.withLock({ $0 }) { family.render(into: &out) }
        return out
    }

    public func counter(_ name: String, help: String, labels: [String] = []) -> Counter {
        let c = Counter(name: name, help: help, labels: labels)
        add(c)
        return c
    }

    @discardableResult
    /// A counter over fixed label values (`rows`), incremented by row index; series at 0 are not written.
    public func indexedCounter(_ name: String, help: String, labels: [String], rows: [[String]]) -> IndexedCounter {
        let c = IndexedCounter(name: name, help: help, labels: labels, rows: rows)
        add(c)
        return c
    }

    public func gauge(_ name: String, help: String, labels: [(String, String)] = [], read: @escaping @Sendable () -> Double) -> Gauge {
        let g = Gauge(name: name, help: help, labels: labels, type: "gauge", read: read)
        add(g)
        return g
    }

    /// A gauge of several label sets, all read when scraped: one HELP and TYPE line, one series per row.
    @discardableResult
    public func gauges(
        _ name: String, help: String, labels: [String], read: @escaping @Sendable () -> [(labelValues: [String], value: Double)]
    ) -> GaugeSeries {
        let g = GaugeSeries(name: name, help: help, labels: labels, read: read)
        add(g)
        return g
    }

    /// A counter whose value something else keeps (read when scraped).
    @discardableResult
    public func counter(_ name: String, help: String, read: @escaping @Sendable () -> Double) -> Gauge {
        let g = Gauge(name: name, help: help, labels: [], type: "counter", read: read)
        add(g)
        return g
    }

    public func histogram(
        _ name: String, help: String, labels: [String] = [],
        buckets: [Double] = Histogram.defaultBuckets
    ) -> Histogram {
        let h = Histogram(name: name, help: help, labels: labels, buckets: buckets)
        add(h)
        return h
    }
}

protocol MetricFamily: Sendable {
    func render(into out: inout String)
}

/// `name{label="value",...}` with escaping.
func series(_ name: String, _ labels: [String], _ values: [String], extra: (String, String)? = nil) -> String {
    var pairs = zip(labels, values).map { "\($0)=\"\(escape($1))\"" }
    if let extra { pairs.append("\(extra.0)=\"\(extra.1)\"") }
    return pairs.isEmpty ? name : name + "{" + pairs.joined(separator: ",") + "}"
}

func escape(_ s: String) -> String {
    var out = ""
    for c in s {
        switch c {
        case "\\": out += "\\\\"
        case "\"": out += "\\\""
        case "\n": out += "\\n"
        default: out.append(c)
        }
    }
    return out
}

func format(_ v: Double) -> String {
    if v == v.rounded() && abs(v) < 1e15 { return String(Int64(v)) }
    return String(v)
}

/// A monotonically increasing count per label set.
public final class Counter: MetricFamily {
    let name: String, help: String, labels: [String]
    private let values = Mutex<[[String]: Double]>([:])

    init(name: String, help: String, labels: [String]) {
        self.name = name
        self.help = help
        self.labels = labels
    }

    public func inc(_ labelValues: [String] = [], by amount: Double = 1) {
        values.withLock { $0[labelValues, default: 0] += amount }
    }

    public func value(_ labelValues: [String] = []) -> Double { values.withLock { $0[labelValues] ?? 0 } }

    func render(into out: inout String) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) counter\n"
        for (k, v) in values.withLock({ $0 }).sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            out += "\(series(name, labels, k)) \(format(v))\n"
        }
    }
}

/// A counter over a fixed set of label values, chosen by index: one lock and one array store per increment (no
/// label array built, no hashing), for series counted on every call.
public final class IndexedCounter: MetricFamily {
    let name: String, help: String, labels: [String], rows: [[String]]
    private let counts: Mutex<[UInt64]>

    init(name: String, help: String, labels: [String], rows: [[String]]) {
        self.name = name
        self.help = help
        self.labels = labels
        self.rows = rows
        counts = Mutex([UInt64](repeating: 0, count: rows.count))
    }

    /// Adds one to the series `rows[row]`.
    public func inc(_ row: Int) {
        counts.withLock { $0[row] &+= 1 }
    }

    public func value(_ row: Int) -> UInt64 { counts.withLock { $0[row] } }

    func render(into out: inout String) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) counter\n"
        for (row, n) in counts.withLock({ $0 }).enumerated() where n > 0 {
            out += "\(series(name, labels, rows[row])) \(n)\n"
        }
    }
}

/// A value read when scraped.
public final class Gauge: MetricFamily {
    let name: String, help: String
    let labels: [(String, String)]
    let type: String
    let read: @Sendable () -> Double

    init(name: String, help: String, labels: [(String, String)], type: String, read: @escaping @Sendable () -> Double) {
        self.name = name
        self.help = help
        self.labels = labels
        self.type = type
        self.read = read
    }

    func render(into out: inout String) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(series(name, labels.map(\.0), labels.map(\.1))) \(format(read()))\n"
    }
}

/// Values of several label sets read when scraped, under one family.
public final class GaugeSeries: MetricFamily {
    let name: String, help: String
    let labels: [String]
    let read: @Sendable () -> [(labelValues: [String], value: Double)]

    init(name: String, help: String, labels: [String], read: @escaping @Sendable () -> [(labelValues: [String], value: Double)]) {
        self.name = name
        self.help = help
        self.labels = labels
        self.read = read
    }

    func render(into out: inout String) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) gauge\n"
        for row in read() { out += "\(series(name, labels, row.labelValues)) \(format(row.value))\n" }
    }
}

/// Cumulative buckets, sum and count per label set.
public final class Histogram: MetricFamily {
    public static let defaultBuckets: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
    let name: String, help: String, labels: [String], buckets: [Double]
    private struct Series {
        var counts: [UInt64]
        var sum: Double = 0
        var count: UInt64 = 0

        mutating func add(_ index: Int, _ value: Double) {
            counts[index] += 1
            sum += value
            count += 1
        }
    }
    /// The series in the order first seen, and where each label set is. A caller usually passes the very same
    /// label array every time (a constant), which `==` recognises by its storage before comparing any text, so
    /// the first few label sets are found by a scan without hashing; more are looked up by hash.
    private struct Table {
        var labelSets: [[String]] = []
        var series: [Series] = []
        var slots: [[String]: Int] = [:]

        mutating func slot(_ labelValues: [String], size: Int) -> Int {
            for i in 0..<min(labelSets.count, 8) where labelSets[i] == labelValues { return i }
            if let i = slots[labelValues] { return i }
            labelSets.append(labelValues)
            series.append(Series(counts: Array(repeating: 0, count: size)))
            slots[labelValues] = series.count - 1
            return series.count - 1
        }
    }
    private let series_ = Mutex(Table())

    init(name: String, help: String, labels: [String], buckets: [Double]) {
        self.name = name
        self.help = help
        self.labels = labels
        self.buckets = buckets
    }

    public func observe(_ value: Double, _ labelValues: [String] = []) {
        let index = buckets.firstIndex { value <= $0 } ?? buckets.count
        let size = buckets.count + 1
        series_.withLock { t in
            // In place: a copy taken out of the table would copy the counts on every observation.
            t.series[t.slot(labelValues, size: size)].add(index, value)
        }
    }

    func render(into out: inout String) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
        let table = series_.withLock { $0 }
        for (k, s) in zip(table.labelSets, table.series).sorted(by: { $0.0.lexicographicallyPrecedes($1.0) }) {
            var cumulative: UInt64 = 0
            for (i, bound) in buckets.enumerated() {
                cumulative += s.counts[i]
                out += "\(series(name + "_bucket", labels, k, extra: ("le", format(bound)))) \(cumulative)\n"
            }
            out += "\(series(name + "_bucket", labels, k, extra: ("le", "+Inf"))) \(s.count)\n"
            out += "\(series(name + "_sum", labels, k)) \(s.sum)\n"
            out += "\(series(name + "_count", labels, k)) \(s.count)\n"
        }
    }
}

/// Calls by method: `<prefix>_calls_total{method,code}`, `<prefix>_errors_total{method,reason}` and
/// `<prefix>_duration_seconds{method}` in one family, so a call costs one lookup and one lock.
///
/// Every label is bounded, whatever peers send: the caller says which methods are unknown (one
/// `unknown` series), reasons outside the fixed set count as `OTHER`, and past `maxMethods` series
/// further method names count as `unknown` too.
public final class CallMetrics: MetricFamily {
    /// The method label of calls to methods the server does not have.
    public static let unknownMethod = "unknown"
    /// The reason label of a reason outside the fixed set.
    public static let otherReason = "OTHER"

    struct State {
        /// Calls answered OK, counted apart (most calls: no dictionary update); `allCodes` merges them.
        var ok = 0
        var codes: [String: Int] = [:]
        var allCodes: [String: Int] {
            var all = codes
            if ok > 0 { all["OK", default: 0] += ok }
            return all
        }
        var reasons: [String: Int] = [:]
        var buckets: [UInt64]
        var sum = 0.0
        var count: UInt64 = 0
    }

    let prefix: String
    let buckets: [Double]
    let reasons: Set<String>?
    let maxMethods: Int
    /// Every series, and the index of each method label's; the label found last is compared first (a
    /// connection calls one method again and again: the very same String, compared without hashing).
    /// One lock for the family: a call takes it once.
    private struct Series {
        var states: [State] = []
        var byLabel: [String: Int] = [:]
        var lastLabel = ""
        var lastKnown = false
        var last = -1
    }
    private let table = Mutex(Series())

    init(prefix: String, buckets: [Double], reasons: Set<String>?, maxMethods: Int) {
        self.prefix = prefix
        self.buckets = buckets
        self.reasons = reasons
        self.maxMethods = max(1, maxMethods)
    }

    /// Counts one call; `known` is false for a method the server does not have.
    public func record(method: String, known: Bool = true, code: String, reason: String?, seconds: Double) {
        let reason = reason.map { reasons == nil || reasons!.contains($0) ? $0 : Self.otherReason }
        let index = buckets.firstIndex { seconds <= $0 } ?? buckets.count
        let ok = code == "OK"
        table.withLock { m in
            let i: Int
            if m.last >= 0 && m.lastKnown == known && (!known || m.lastLabel == method) {
                i = m.last
            } else {
                i = find(&m, label: known ? method : Self.unknownMethod)
                m.lastLabel = known ? method : ""
                m.lastKnown = known
                m.last = i
            }
            if ok { m.states[i].ok += 1 } else { m.states[i].codes[code, default: 0] += 1 }
            if let reason { m.states[i].reasons[reason, default: 0] += 1 }
            m.states[i].buckets[index] += 1
            m.states[i].sum += seconds
            m.states[i].count += 1
        }
    }

    /// The series of `label`, made on first use; past `maxMethods` labels, the `unknown` one.
    private func find(_ m: inout Series, label: String) -> Int {
        if let i = m.byLabel[label] { return i }
        if m.byLabel.count >= maxMethods, let i = m.byLabel[Self.unknownMethod] { return i }
        let i = m.states.count
        m.states.append(State(buckets: Array(repeating: 0, count: buckets.count + 1)))
        m.byLabel[m.byLabel.count >= maxMethods ? Self.unknownMethod : label] = i
        return i
    }

    /// The count for one method and code (tests).
    public func count(method: String, code: String) -> Int {
        table.withLock { m in m.byLabel[method].map { m.states[$0].allCodes[code] ?? 0 } } ?? 0
    }

    func render(into out: inout String) {
        let all = table.withLock { m in m.byLabel.sorted { $0.key < $1.key }.map { ($0.key, m.states[$0.value]) } }
        out += "# HELP \(prefix)_calls_total Calls answered, by method and gRPC code.\n# TYPE \(prefix)_calls_total counter\n"
        for (method, s) in all {
            for (code, n) in s.allCodes.sorted(by: { $0.key < $1.key }) {
                out += "\(series(prefix + "_calls_total", ["method", "code"], [method, code])) \(n)\n"
            }
        }
        out += "# HELP \(prefix)_errors_total Failed calls, by method and ErrorInfo reason.\n# TYPE \(prefix)_errors_total counter\n"
        for (method, s) in all {
            for (reason, n) in s.reasons.sorted(by: { $0.key < $1.key }) {
                out += "\(series(prefix + "_errors_total", ["method", "reason"], [method, reason])) \(n)\n"
            }
        }
        out += "# HELP \(prefix)_duration_seconds Call latency from request headers to answer.\n# TYPE \(prefix)_duration_seconds histogram\n"
        for (method, s) in all {
            var cumulative: UInt64 = 0
            for (i, bound) in buckets.enumerated() {
                cumulative += s.buckets[i]
                out += "\(series(prefix + "_duration_seconds_bucket", ["method"], [method], extra: ("le", format(bound)))) \(cumulative)\n"
            }
            out += "\(series(prefix + "_duration_seconds_bucket", ["method"], [method], extra: ("le", "+Inf"))) \(s.count)\n"
            out += "\(series(prefix + "_duration_seconds_sum", ["method"], [method])) \(s.sum)\n"
            out += "\(series(prefix + "_duration_seconds_count", ["method"], [method])) \(s.count)\n"
        }
    }
}

extension MetricsRegistry {
    /// Call metrics whose reason label is one of `reasons` (nil: any) and whose method label takes at
    /// most `maxMethods` values.
    public func callMetrics(
        prefix: String, buckets: [Double] = Histogram.defaultBuckets, reasons: Set<String>? = nil,
        maxMethods: Int = 256
    ) -> CallMetrics {
        let c = CallMetrics(prefix: prefix, buckets: buckets, reasons: reasons, maxMethods: maxMethods)
        add(c)
        return c
    }
}
