import Metrics
import Testing

/// The Prometheus text the registry renders: what promtool and Prometheus read (exposition format 0.0.4).
@Suite("Prometheus text")
struct MetricsTests {
    /// The lines of one family.
    func lines(_ text: String, _ family: String) -> [String] {
        text.split(separator: "\n").map(String.init).filter { $0.hasPrefix(family) || $0.hasPrefix("# HELP \(family) ") || $0.hasPrefix("# TYPE \(family) ") }
    }

    @Test("a counter: one HELP and one TYPE line, a line per label set, values added")
    func counter() {
        let registry = MetricsRegistry()
        let c = registry.counter("t_calls_total", help: "Calls.", labels: ["method", "code"])
        c.inc(["a", "OK"])
        c.inc(["a", "OK"], by: 2)
        c.inc(["b", "NOT_FOUND"])
        let text = registry.render()
        let family = lines(text, "t_calls_total")
        #expect(family.filter { $0.hasPrefix("# HELP") } == ["# HELP t_calls_total Calls."])
        #expect(family.filter { $0.hasPrefix("# TYPE") } == ["# TYPE t_calls_total counter"])
        #expect(family.contains(#"t_calls_total{method="a",code="OK"} 3"#) || family.contains(#"t_calls_total{method="a",code="OK"} 3.0"#))
        #expect(c.value(["a", "OK"]) == 3)
        #expect(c.value(["b", "NOT_FOUND"]) == 1)
        #expect(c.value(["c", "OK"]) == 0)
    }

    @Test("label values are escaped: a quote, a backslash and a newline cannot break the line")
    func escaping() {
        let registry = MetricsRegistry()
        let c = registry.counter("t_odd_total", help: "Odd labels.", labels: ["v"])
        c.inc(["a\"b\\c\nd"])
        let text = registry.render()
        #expect(text.contains(#"t_odd_total{v="a\"b\\c\nd"}"#))
        // Every sample line still starts with the family: nothing leaked onto a line of its own.
        for line in text.split(separator: "\n") where !line.hasPrefix("#") { #expect(line.hasPrefix("t_odd_total")) }
    }

    @Test("a histogram: cumulative buckets, +Inf equal to the count, the sum")
    func histogram() {
        let registry = MetricsRegistry()
        let h = registry.histogram("t_seconds", help: "Durations.", buckets: [0.1, 1])
        for v in [0.05, 0.5, 0.5, 3] { h.observe(v) }
        let family = lines(registry.render(), "t_seconds")
        func sample(_ prefix: String) -> Double? {
            family.first { $0.hasPrefix(prefix) }.flatMap { Double($0.split(separator: " ").last!) }
        }
        #expect(family.contains("# TYPE t_seconds histogram"))
        #expect(sample(#"t_seconds_bucket{le="0.1"}"#) == 1)
        #expect(sample(#"t_seconds_bucket{le="1"}"#) == 3 || sample(#"t_seconds_bucket{le="1.0"}"#) == 3)
        #expect(sample(#"t_seconds_bucket{le="+Inf"}"#) == 4)
        #expect(sample("t_seconds_count") == 4)
        #expect(sample("t_seconds_sum") == 4.05)
    }

    @Test("a gauge reads its value at each render")
    func gauge() {
        let registry = MetricsRegistry()
        let box = Box()
        _ = registry.gauge("t_depth", help: "Depth.") { box.value }
        box.value = 7
        #expect(lines(registry.render(), "t_depth").contains { $0.hasPrefix("t_depth 7") })
        box.value = 9
        #expect(lines(registry.render(), "t_depth").contains { $0.hasPrefix("t_depth 9") })
    }

    @Test("call metrics keep every label bounded: unknown methods, reasons outside the set, methods past the cap")
    func bounded() {
        let registry = MetricsRegistry()
        let calls = registry.callMetrics(prefix: "t_rpc", reasons: ["ORDER_NOT_FOUND"], maxMethods: 2)
        calls.record(method: "a.A/One", code: "OK", reason: nil, seconds: 0.01)
        calls.record(method: "a.A/Two", code: "NOT_FOUND", reason: "ORDER_NOT_FOUND", seconds: 0.01)
        calls.record(method: "a.A/Three", code: "OK", reason: nil, seconds: 0.01)  // past the cap
        calls.record(method: "x.Y/Z", known: false, code: "UNIMPLEMENTED", reason: "MADE_UP_BY_A_PEER", seconds: 0.01)
        let text = registry.render()
        #expect(!text.contains("a.A/Three"))
        #expect(!text.contains("x.Y/Z"))
        #expect(!text.contains("MADE_UP_BY_A_PEER"))
        #expect(text.contains("OTHER"))
        #expect(text.contains("ORDER_NOT_FOUND"))
        #expect(calls.count(method: "a.A/One", code: "OK") == 1)
    }
}

final class Box: @unchecked Sendable {
    var value = 0.0
}
