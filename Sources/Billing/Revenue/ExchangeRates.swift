/// The European Central Bank's daily reference rates (`--exchange-rates`, `eurofxref-hist.csv` as published): a
/// header `Date,USD,JPY,...` and one row per day, each rate the units of that currency for one euro; `N/A` or an
/// empty cell is no rate that day. An amount paid on a day converts at that day's rates, or, when the day has none,
/// at the latest earlier day's; a currency with no rate on or before the day stays unconverted. The euro is 1.
public struct ExchangeRates: Sendable {
    /// Per currency, the days (UTC day numbers since 1970-01-01) it has a rate on, ascending, and those rates.
    private var days: [String: [Int64]] = [:]
    private var rates: [String: [Fraction]] = [:]

    /// No file: only money paid in the reporting currency converts.
    public static let none = ExchangeRates()

    public init() {}

    /// Days with at least one rate.
    public private(set) var dayCount = 0
    /// The currencies the file has a rate for (the euro not included).
    public var currencies: [String] { days.keys.sorted() }

    /// What is wrong with a rates file, and on which line (1-based).
    public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
        public var line: Int
        public var message: String
        public var description: String { "line \(line): \(message)" }
    }

    /// Parses the file's text. Rows may come in any order (the ECB's newest first); a day may appear once.
    public static func parse(_ text: String) throws(Problem) -> ExchangeRates {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.hasSuffix("\r") ? $0.dropLast() : $0 }
        while let last = lines.last, last.allSatisfy({ $0 == " " }) { lines.removeLast() }
        guard let header = lines.first, !header.isEmpty else { throw Problem(line: 1, message: "empty: a header Date,USD,JPY,... is required") }
        let names = header.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingSpaces }
        guard names.first == "Date" else { throw Problem(line: 1, message: "the header must start with Date (the ECB's eurofxref-hist.csv)") }
        var columns: [String?] = []
        for (i, name) in names.enumerated().dropFirst() {
            if name.isEmpty {
                // The ECB's rows end with a comma: an unnamed last column, always empty.
                guard i == names.count - 1 else { throw Problem(line: 1, message: "column \(i + 1) has no currency code") }
                columns.append(nil)
                continue
            }
            guard CurrencyCode.isValid(name) else { throw Problem(line: 1, message: "\"\(name.prefix(20))\" is not an ISO 4217 currency code") }
            guard !columns.contains(name) else { throw Problem(line: 1, message: "\(name) appears twice") }
            columns.append(name)
        }
        var rows: [(day: Int64, cells: [(String, Fraction)])] = []
        var seen = Set<Int64>()
        for (index, line) in lines.enumerated().dropFirst() {
            let number = index + 1
            if line.allSatisfy({ $0 == " " }) { continue }
            let cells = line.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingSpaces }
            guard let day = CivilDate.day(iso: cells[0]) else {
                throw Problem(line: number, message: "\"\(cells[0].prefix(20))\" is not a date YYYY-MM-DD")
            }
            guard seen.insert(day).inserted else { throw Problem(line: number, message: "\(cells[0]) appears twice") }
            guard cells.count - 1 <= columns.count else {
                throw Problem(line: number, message: "\(cells.count) cells, the header names \(columns.count + 1)")
            }
            var parsed: [(String, Fraction)] = []
            for (j, cell) in cells.enumerated().dropFirst() where !cell.isEmpty && cell != "N/A" {
                guard let code = columns[j - 1] else { throw Problem(line: number, message: "a value in the unnamed last column") }
                guard let rate = Fraction(decimal: cell[...]), !rate.isZero else {
                    throw Problem(line: number, message: "\(code): \"\(cell.prefix(20))\" is not a positive decimal rate (or N/A)")
                }
                parsed.append((code, rate))
            }
            rows.append((day, parsed))
        }
        rows.sort { $0.day < $1.day }
        var r = ExchangeRates()
        for row in rows {
            if !row.cells.isEmpty { r.dayCount += 1 }
            for (code, rate) in row.cells {
                r.days[code, default: []].append(row.day)
                r.rates[code, default: []].append(rate)
            }
        }
        return r
    }

    /// Units of `currency` for one euro on `day` (or the latest earlier day with a rate); the euro is 1.
    public func rate(_ currency: String, day: Int64) -> Fraction? {
        if currency == "EUR" { return .one }
        guard let d = days[currency] else { return nil }
        // The last day <= `day`.
        var lo = 0, hi = d.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if d[mid] <= day { lo = mid + 1 } else { hi = mid }
        }
        return lo == 0 ? nil : rates[currency]![lo - 1]
    }

    /// The factor that turns an amount in `from` into `to` on `day`: 1 for the same currency, else the target's
    /// rate over the source's; nil when either has no rate on or before the day.
    public func factor(from: String, to: String, day: Int64) -> Fraction? {
        if from == to { return .one }
        guard let source = rate(from, day: day), let target = rate(to, day: day) else { return nil }
        return target / source
    }
}

/// ISO 4217 alphabetic codes: three ASCII capital letters.
public enum CurrencyCode {
    public static func isValid(_ s: String) -> Bool {
        s.utf8.count == 3 && s.utf8.allSatisfy { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }
    }
}

extension Substring {
    var trimmingSpaces: String {
        var s = self[...]
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
}

/// UTC calendar arithmetic on day numbers (days since 1970-01-01), after Howard Hinnant's civil-date algorithms.
public enum CivilDate {
    public static let dayMs: Int64 = 86_400_000

    /// The UTC day an instant falls on (floor division: instants before 1970 too).
    public static func day(ofMs ms: Int64) -> Int64 { ms >= 0 ? ms / dayMs : -((-ms + dayMs - 1) / dayMs) }

    public static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    public static func civil(_ days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    /// "YYYY-MM-DD" (a real date) as a day number.
    public static func day(iso s: String) -> Int64? {
        let b = Array(s.utf8)
        guard b.count == 10, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-") else { return nil }
        func number(_ r: Range<Int>) -> Int64? {
            var v: Int64 = 0
            for i in r {
                guard b[i] >= 48, b[i] <= 57 else { return nil }
                v = v * 10 + Int64(b[i] - 48)
            }
            return v
        }
        guard let y = number(0..<4), let m = number(5..<7), let d = number(8..<10), (1...12).contains(m), d >= 1 else { return nil }
        let n = days(year: y, month: m, day: d)
        guard civil(n) == (y, m, d) else { return nil }
        return n
    }

    /// RFC 3339 in UTC with milliseconds: 2026-11-30T12:00:00.000Z.
    public static func rfc3339(ms: Int64) -> String {
        let day = day(ofMs: ms), rest = ms - day * dayMs
        let (y, m, d) = civil(day)
        func pad(_ v: Int64, _ width: Int) -> String {
            let s = String(v)
            return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
        }
        return
            "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(rest / 3_600_000, 2)):\(pad(rest / 60_000 % 60, 2)):\(pad(rest / 1000 % 60, 2)).\(pad(rest % 1000, 3))Z"
    }
}
