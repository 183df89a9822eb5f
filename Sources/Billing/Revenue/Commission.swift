/// The stores' commission in percent for PROCEEDS (`--commission`, `STORE=FIRST/LATER,...`): FIRST for a one-time
/// purchase and a subscription's first year of paid service, LATER for a subscription transaction purchased 365
/// days or more after the first paid transaction of its original transaction. Decimals allowed (15.5).
public struct Commission: Sendable, Equatable {
    public struct Rate: Sendable, Equatable {
        /// As written ("30", "15.5"), for the export's `commission_percent`.
        public var first: String
        public var later: String
    }

    /// By the flag's store names: app_store, google_play, stripe.
    public private(set) var rates: [String: Rate]

    public static let defaultList = "app_store=30/15,google_play=15/15,stripe=0/0"
    public static let storeNames = ["app_store", "google_play", "stripe"]

    public init(rates: [String: Rate]) { self.rates = rates }

    /// The default, then each store the list names.
    public static func parse(_ list: String) throws(Problem) -> Commission {
        var c = try! Commission.parseEntries(defaultList, onto: [:])
        c = try Commission.parseEntries(list, onto: c.rates)
        return c
    }

    public struct Problem: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    private static func parseEntries(_ list: String, onto base: [String: Rate]) throws(Problem) -> Commission {
        var rates = base
        for entry in list.split(separator: ",") {
            let parts = entry.split(separator: "=", maxSplits: 1)
            let name = parts.first.map { String($0).trimmingCharacters } ?? ""
            guard storeNames.contains(name), parts.count == 2 else {
                throw Problem(description: "\"\(entry.prefix(40))\": expected STORE=FIRST/LATER with STORE one of \(storeNames.joined(separator: ", "))")
            }
            let pair = parts[1].split(separator: "/", omittingEmptySubsequences: false)
            guard pair.count == 2, let first = percent(pair[0]), let later = percent(pair[1]) else {
                throw Problem(description: "\"\(entry.prefix(40))\": FIRST/LATER are percentages from 0 to 100 (decimals allowed), such as 30/15")
            }
            rates[name] = Rate(first: first, later: later)
        }
        return Commission(rates: rates)
    }

    private static func percent(_ s: Substring) -> String? {
        let t = String(s).trimmingCharacters
        guard let f = Fraction(decimal: t[...]), f.numerator <= 100 * f.denominator else { return nil }
        return t
    }

    /// The flag's name of a store.
    public static func name(_ store: Store) -> String? {
        switch store {
        case .appStore: "app_store"
        case .googlePlay: "google_play"
        case .grant: nil
        }
    }

    /// The percentage as written, or "0" for a store the list has no rate for.
    public func percent(_ store: Store, later: Bool) -> String {
        guard let name = Self.name(store), let r = rates[name] else { return "0" }
        return later ? r.later : r.first
    }

    /// What is kept: 1 - commission / 100.
    public func kept(_ store: Store, later: Bool) -> Fraction {
        let p = Fraction(decimal: percent(store, later: later)[...]) ?? Fraction(0, 1)
        return Fraction(p.denominator * 100 - p.numerator, p.denominator * 100)
    }
}

extension String {
    var trimmingCharacters: String { self[...].trimmingSpaces }
}
