import BillingAPI
import Foundation
import HTTP2
import ProtoWire
import RPC

/// billingctl's revenue commands (billing.v1.Revenue): the summary, one metric over time, and the export.
enum RevenueCommands {
    static let usage = """
          revenue summary [--as-of DATE] [--currency C] [--environment production|sandbox|xcode]
                                                           GetRevenueSummary: MRR, ARR, active subscriptions, trials,
                                                           grants, the last 30 days' gross and net
          revenue series METRIC --from DATE --to DATE [--by day|week|month] [--group product|store|storefront|currency]
                [--currency C] [--environment E] [--store app_store|google_play|stripe] [--product ID]
                                                           GetRevenueSeries as a table (one column per group; money in
                                                           units of the currency); METRIC: gross, refunds, net, proceeds,
                                                           mrr, active_subscriptions, active_trials, new_subscriptions,
                                                           trial_starts, trial_conversions, churned_subscriptions,
                                                           refunded_transactions
          revenue export --from DATE --to DATE [--format csv|jsonl] [--currency C] [--environment E] > FILE
                                                           ExportTransactions: the file on stdout, rows so far on stderr
        """

    static let flags: [String: Set<String>] = [
        "revenue": ["as-of", "currency", "environment", "from", "to", "by", "group", "store", "product", "format"]
    ]

    static func run(_ o: Options) throws {
        guard let verb = o.positional.first else { throw Usage(message: "revenue needs summary, series or export") }
        switch verb {
        case "summary": try summary(o)
        case "series": try series(o)
        case "export": try export(o)
        default: throw Usage(message: "revenue needs summary, series or export, not \(verb)")
        }
    }

    static func environment(_ o: Options) throws -> Environment {
        switch o.named["environment"] ?? "production" {
        case "production": return .production
        case "sandbox": return .sandbox
        case "xcode": return .xcode
        case let other: throw Usage(message: "--environment needs production, sandbox or xcode, not \(other)")
        }
    }

    static func summary(_ o: Options) throws {
        var r = GetRevenueSummaryRequest()
        if let s = o.named["as-of"] { r.asOfTimeMs = try SupportCommands.time(s, flag: "--as-of") }
        r.currency = o.named["currency"] ?? ""
        r.environment = try environment(o)
        let a = try call(o, "billing.v1.Revenue/GetRevenueSummary", r, GetRevenueSummaryResponse.self)
        if o.named["json"] == "true" { return try SupportCommands.printJSON(a, "billing.v1.GetRevenueSummaryResponse") }
        print("MRR                   \(money(a.mrrMilliunits)) \(a.currency)")
        print("ARR                   \(money(a.arrMilliunits)) \(a.currency)")
        print("active subscriptions  \(a.activeSubscriptions)")
        print("active trials         \(a.activeTrials)")
        print("active grants         \(a.activeGrants)")
        print("gross, last 30 days   \(money(a.grossLast30DaysMilliunits)) \(a.currency)")
        print("net, last 30 days     \(money(a.netLast30DaysMilliunits)) \(a.currency)")
        for m in a.unconverted { print("unconverted           \(money(m.milliunits)) \(m.currency) (no exchange rate)") }
    }

    static func series(_ o: Options) throws {
        guard o.positional.count == 2 else { throw Usage(message: "revenue series needs one METRIC") }
        let name = o.positional[1].uppercased().replacingOccurrences(of: "-", with: "_")
        guard let index = RevenueMetric.names.firstIndex(of: name), index > 0 else {
            throw Usage(message: "no metric \(o.positional[1]); one of \(RevenueMetric.names.dropFirst().map { $0.lowercased() }.joined(separator: ", "))")
        }
        var r = GetRevenueSeriesRequest()
        r.metric = RevenueMetric(rawValue: Int32(index))
        (r.startTimeMs, r.endTimeMs) = try range(o)
        let by = (o.named["by"] ?? "day").uppercased()
        guard let g = Granularity.names.firstIndex(of: by), g > 0 else { throw Usage(message: "--by needs day, week or month") }
        r.granularity = Granularity(rawValue: Int32(g))
        if let group = o.named["group"] {
            guard let d = RevenueDimension.names.firstIndex(of: group.uppercased()), d > 0 else {
                throw Usage(message: "--group needs product, store, storefront or currency")
            }
            r.groupBy = RevenueDimension(rawValue: Int32(d))
        }
        r.currency = o.named["currency"] ?? ""
        r.environment = try environment(o)
        switch o.named["store"] {
        case nil: break
        case "app_store": r.store = .appStore
        case "google_play": r.store = .googlePlay
        case "stripe": r.store = .stripe
        case let other?: throw Usage(message: "--store needs app_store, google_play or stripe, not \(other)")
        }
        r.productID = o.named["product"] ?? ""
        let a = try call(o, "billing.v1.Revenue/GetRevenueSeries", r, GetRevenueSeriesResponse.self)
        if o.named["json"] == "true" { return try SupportCommands.printJSON(a, "billing.v1.GetRevenueSeriesResponse") }
        let isMoney = index <= 5
        let groups = a.series.map { $0.group.isEmpty ? (isMoney ? a.currency : "count") : $0.group }
        print((["period"] + groups).joined(separator: "\t"))
        let periods = a.series.first?.points.map(\.startTimeMs) ?? []
        for (k, start) in periods.enumerated() {
            let cells = a.series.map { s in isMoney ? money(s.points[k].value) : String(s.points[k].value) }
            print(([day(start)] + cells).joined(separator: "\t"))
        }
        for m in a.unconverted {
            FileHandle.standardError.write(Data("unconverted: \(money(m.milliunits)) \(m.currency) (no exchange rate)\n".utf8))
        }
    }

    static func range(_ o: Options) throws -> (Int64, Int64) {
        guard let from = o.named["from"], let to = o.named["to"] else { throw Usage(message: "needs --from DATE and --to DATE") }
        return (try SupportCommands.time(from, flag: "--from"), try SupportCommands.time(to, flag: "--to"))
    }

    /// ExportTransactions, written to stdout as it arrives; the rows so far on stderr (a terminal's line redrawn).
    static func export(_ o: Options) throws {
        var r = ExportTransactionsRequest()
        (r.startTimeMs, r.endTimeMs) = try range(o)
        r.environment = try environment(o)
        r.format = o.named["format"] ?? "csv"
        r.currency = o.named["currency"] ?? ""
        let client = try o.client()
        client.setReceiveTimeout(milliseconds: 1000)
        let id = try client.start("billing.v1.Revenue/ExportTransactions", body: MessageFraming.frame(r.encoded()))
        var buffer: [UInt8] = []
        var lines = 0, lastShown = Date.distantPast
        let progress = isatty(2) != 0
        let out = FileHandle.standardOutput
        while true {
            _ = try client.poll()
            buffer += client.takeData(id)
            var offset = 0
            while buffer.count - offset >= 5 {
                let size = Int(buffer[offset + 1]) << 24 | Int(buffer[offset + 2]) << 16 | Int(buffer[offset + 3]) << 8 | Int(buffer[offset + 4])
                guard buffer.count - offset >= 5 + size else { break }
                let chunk = try ExportTransactionsChunk(decoding: Array(buffer[(offset + 5)..<(offset + 5 + size)]))
                offset += 5 + size
                out.write(Data(chunk.data))
                lines += chunk.data.reduce(0) { $0 + ($1 == 10 ? 1 : 0) }
            }
            if offset > 0 { buffer.removeFirst(offset) }
            if progress && Date().timeIntervalSince(lastShown) > 0.25 {
                FileHandle.standardError.write(Data("\r\(rows(lines, r.format)) rows".utf8))
                lastShown = Date()
            }
            if client.isDone(id) {
                let answer = client.finish(id)
                if let error = answer.error {
                    FileHandle.standardError.write(Data(((progress ? "\n" : "") + JSON.error(error) + "\n").utf8))
                    exit(1)
                }
                FileHandle.standardError.write(Data(((progress ? "\r" : "") + "\(rows(lines, r.format)) rows exported\n").utf8))
                return
            }
        }
    }

    /// Rows of `lines` lines: the CSV's header is no row.
    static func rows(_ lines: Int, _ format: String) -> Int { format == "jsonl" ? lines : max(0, lines - 1) }

    /// Milliunits as units with three decimals (-12.340).
    static func money(_ milliunits: Int64) -> String {
        let sign = milliunits < 0 ? "-" : ""
        let m = milliunits.magnitude
        let frac = String(m % 1000)
        return "\(sign)\(m / 1000).\(String(repeating: "0", count: 3 - frac.count))\(frac)"
    }

    static func day(_ ms: Int64) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withFullDate]
        return f.string(from: Date(timeIntervalSince1970: Double(ms) / 1000))
    }
}
