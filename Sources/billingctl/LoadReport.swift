import IO
import AppStore
import BillingAPI
import Foundation
import Glibc
import HTTP2
import ProtoWire
import RPC
import Synchronization
import Lifecycle

/// The load run's report: calls per second, latency percentiles, errors by code and reason.
extension LoadCommand {
    /// The merged result: calls/s, latency percentiles, errors by code and reason.
    struct Report {
        let calls: Int
        let elapsed: Double
        let percentiles: [(String, Double)]
        let maxMs: Double
        let byCode: [String: Int]
        let byReason: [String: Int]
        let byMethod: [String: Int]
        let errorPercent: Double
        let settings: Settings

        init(_ tallies: [Tally], elapsed: Double, settings: Settings) {
            var all: [UInt32] = []
            var codes: [String: Int] = [:], reasons: [String: Int] = [:], methods: [String: Int] = [:]
            for t in tallies {
                all += t.latenciesMicros
                for (k, v) in t.byCode { codes[k, default: 0] += v }
                for (k, v) in t.byReason { reasons[k, default: 0] += v }
                for (k, v) in t.byMethod { methods[k, default: 0] += v }
                if t.transportErrors > 0 { codes["TRANSPORT", default: 0] += t.transportErrors }
            }
            all.sort()
            func p(_ q: Double) -> Double {
                guard !all.isEmpty else { return 0 }
                return Double(all[min(all.count - 1, Int(Double(all.count) * q))]) / 1000
            }
            calls = all.count
            self.elapsed = elapsed
            percentiles = [("p50", p(0.5)), ("p90", p(0.9)), ("p99", p(0.99)), ("p99.9", p(0.999))]
            maxMs = Double(all.last ?? 0) / 1000
            byCode = codes
            byReason = reasons
            byMethod = methods
            let bad = codes.filter { $0.key != "OK" }.values.reduce(0, +)
            errorPercent = calls == 0 ? (bad > 0 ? 100 : 0) : Double(bad) * 100 / Double(calls)
            self.settings = settings
        }

        var table: String {
            var out = String(
                format: "%d calls in %.2f s: %.0f calls/s (%d connections, %d in flight%@)\n", calls, elapsed,
                Double(calls) / elapsed, settings.connections, settings.concurrency,
                settings.rate.map { String(format: ", open loop at %.0f/s", $0) } ?? "")
            out += "latency ms: " + percentiles.map { String(format: "%@ %.3f", $0.0, $0.1) }.joined(separator: "  ")
            out += String(format: "  max %.3f\n", maxMs)
            out += "by method: " + byMethod.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + "\n"
            out += "by code: " + byCode.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + "\n"
            if !byReason.isEmpty {
                out += "errors by reason: " + byReason.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + "\n"
            }
            out += String(format: "errors: %.3f%%", errorPercent)
            return out
        }

        var json: String {
            func dict(_ d: [String: Int]) -> String {
                "{" + d.sorted { $0.key < $1.key }.map { "\(JSON.quote($0.key)): \($0.value)" }.joined(separator: ", ") + "}"
            }
            var fields = [
                "\"calls\": \(calls)", String(format: "\"seconds\": %.3f", elapsed), String(format: "\"calls_per_second\": %.1f", Double(calls) / elapsed),
                "\"connections\": \(settings.connections)", "\"concurrency\": \(settings.concurrency)",
            ]
            for (name, v) in percentiles { fields.append(String(format: "\"%@_ms\": %.3f", name.replacingOccurrences(of: ".", with: "_"), v)) }
            fields.append(String(format: "\"max_ms\": %.3f", maxMs))
            fields.append("\"by_method\": \(dict(byMethod))")
            fields.append("\"by_code\": \(dict(byCode))")
            fields.append("\"errors_by_reason\": \(dict(byReason))")
            fields.append(String(format: "\"error_percent\": %.4f", errorPercent))
            return "{" + fields.joined(separator: ", ") + "}"
        }
    }
}
