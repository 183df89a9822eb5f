/// Revenue's numbers from one environment's transactions, by the definitions of DESIGN.md "Revenue, defined"
/// (docs/REVENUE.md): fed every store transaction of the environment (`add`), then asked for series and summaries.
/// Pure: no clock, no database; the instant "now" is an argument.
public struct RevenueBook: Sendable {
    /// The rates and commission the next answers use (replaced when the rates file is read again).
    public var settings: RevenueSettings

    /// Compact transactions; strings interned.
    struct Tx: Sendable {
        var transactionID: String
        var purchase: Int64
        var expires: Int64
        var revocation: Int64
        var price: Int64
        var paid: Int64
        var percentage: Int32
        var revocationType: RevocationType
        var store: Store
        var trial: Bool
        var subscription: Bool
        var product: Int32
        var currency: Int32
        var storefront: Int32
        /// Index into `chains` for auto-renewable subscriptions, else -1.
        var chain: Int32
        /// Counted; false once a newer view of it no longer counts (kept in place: positions do not move).
        var live: Bool
    }

    var txs: [Tx] = []
    var strings: [String] = []
    var stringIDs: [String: Int32] = [:]
    var chainIDs: [String: Int32] = [:]
    /// Each transaction's index in `txs`.
    var positions: [String: Int32] = [:]
    /// Per chain: its live transactions' indexes, oldest first (ties by transaction id).
    var members: [[Int32]] = []
    /// Per chain: the first paid transaction's purchase time (Int64.max when none) and the grace period's end.
    var firstPaid: [Int64] = []
    var graceEnd: [Int64] = []

    public init(settings: RevenueSettings) {
        self.settings = settings
    }

    public var transactionCount: Int { txs.count { $0.live } }

    mutating func intern(_ s: String) -> Int32 {
        if let id = stringIDs[s] { return id }
        let id = Int32(strings.count)
        strings.append(s)
        stringIDs[s] = id
        return id
    }

    /// Takes one transaction, new or a newer view of one already taken (a refund, a renewal's expiry, a transfer):
    /// only what Revenue counts is kept (bought from a store, owned by an account, `OWNERSHIP_PURCHASED`); one that
    /// no longer counts is dropped. `graceEndMs` is its subscription's billing grace period end, 0 when none (nil:
    /// leave the subscription's as it is).
    public mutating func add(_ t: StoreTransaction, accountID: String, graceEndMs: Int64? = 0) {
        let existing = positions[t.transactionID]
        guard Self.counts(t, accountID: accountID) else {
            if let p = existing, txs[Int(p)].live { drop(Int(p)) }
            return
        }
        let subscription = t.productKind == .autoRenewableSubscription
        var chain: Int32 = -1
        if subscription {
            if let c = chainIDs[t.originalTransactionID] {
                chain = c
            } else {
                chain = Int32(firstPaid.count)
                chainIDs[t.originalTransactionID] = chain
                firstPaid.append(.max)
                graceEnd.append(0)
                members.append([])
            }
            if let graceEndMs { graceEnd[Int(chain)] = graceEndMs }
        }
        let tx = Tx(
            transactionID: t.transactionID, purchase: t.purchaseTimeMs, expires: t.expiresTimeMs, revocation: t.revocationTimeMs,
            price: t.price.priceMilliunits, paid: t.paidMilliunits, percentage: Int32(clamping: t.revocationPercentage),
            revocationType: t.revocationType, store: t.store, trial: t.price.priceMilliunits == 0 && !t.price.offerType.isEmpty,
            subscription: subscription, product: intern(t.productID), currency: intern(t.price.currency),
            storefront: intern(t.price.storefront), chain: chain, live: true)
        if let p = existing {
            if txs[Int(p)].live { drop(Int(p)) }
            txs[Int(p)] = tx
            join(Int(p))
        } else {
            positions[t.transactionID] = Int32(txs.count)
            txs.append(tx)
            join(txs.count - 1)
        }
    }

    /// A subscription's billing grace period end changed (its renewal state).
    public mutating func setGrace(originalTransactionID: String, endMs: Int64) {
        guard let c = chainIDs[originalTransactionID] else { return }
        graceEnd[Int(c)] = endMs
    }

    /// Puts transaction `i` (live) into its subscription, in purchase order.
    mutating func join(_ i: Int) {
        let t = txs[i]
        guard t.chain >= 0 else { return }
        let c = Int(t.chain)
        var at = members[c].count
        while at > 0 {
            let o = txs[Int(members[c][at - 1])]
            if o.purchase < t.purchase || (o.purchase == t.purchase && o.transactionID < t.transactionID) { break }
            at -= 1
        }
        members[c].insert(Int32(i), at: at)
        if t.price > 0 { firstPaid[c] = min(firstPaid[c], t.purchase) }
    }

    /// Takes transaction `i` out of the numbers.
    mutating func drop(_ i: Int) {
        txs[i].live = false
        let c = Int(txs[i].chain)
        guard c >= 0 else { return }
        members[c].removeAll { $0 == Int32(i) }
        var first = Int64.max
        for m in members[c] where txs[Int(m)].price > 0 { first = min(first, txs[Int(m)].purchase) }
        firstPaid[c] = first
    }

    /// Money and counts take only store transactions bought by their owner.
    public static func counts(_ t: StoreTransaction, accountID: String) -> Bool {
        t.ownership == .purchased && t.store != .grant && !accountID.isEmpty
    }

    // MARK: Money of one transaction

    /// The share of what a transaction paid that a revocation refunded: all of it (a full refund, or a revocation
    /// that does not say how), the prorated share, or none (Family Sharing, not revoked).
    static func refundedShare(_ type: RevocationType, _ percentage: Int32, revoked: Bool) -> Fraction? {
        guard revoked else { return nil }
        switch type {
        case .unspecified, .refundFull: return .one
        case .refundProrated: return Fraction(Int128(max(0, min(Int(percentage), 100_000))), 100_000)
        case .familyRevoke: return nil
        }
    }

    /// Whether the revocation was a refund (REFUNDED_TRANSACTIONS, REFUNDS).
    static func isRefund(_ type: RevocationType) -> Bool { type != .familyRevoke }

    /// The commission's LATER rate applies: a subscription transaction purchased 365 days or more after its
    /// original transaction's first paid one.
    func isLater(_ t: Tx) -> Bool {
        t.chain >= 0 && firstPaid[Int(t.chain)] != .max && t.purchase - firstPaid[Int(t.chain)] >= 365 * CivilDate.dayMs
    }

    public static func isLater(purchaseMs: Int64, firstPaidMs: Int64?, subscription: Bool) -> Bool {
        guard subscription, let first = firstPaidMs else { return false }
        return purchaseMs - first >= 365 * CivilDate.dayMs
    }

    /// `amount` (milliunits of `currency`) times `factor`, converted on `day`: the reporting currency's milliunits,
    /// or nil with what was left out (the same product in the currency paid).
    static func convert(
        _ amount: Int64, _ factor: Fraction, currency: String, day: Int64, into target: String, rates: ExchangeRates
    ) -> (converted: Int64?, leftOut: Int64) {
        guard let rate = rates.factor(from: currency, to: target, day: day) else { return (nil, factor.times(amount)) }
        return ((factor * rate).times(amount), 0)
    }

    // MARK: Series

    /// The instants each period is measured at for ACTIVE_*, MRR: its last millisecond, or now for a period not over.
    static func instants(_ periods: RevenuePeriods, nowMs: Int64) -> [Int64] {
        (0..<periods.count).map { min(periods.bounds[$0 + 1] - 1, nowMs) }
    }

    /// A filter with its product as an interned id (-2: a product the book has never seen, matching nothing).
    struct Match {
        var store: Store?
        var product: Int32?
        init(_ filter: RevenueFilter, _ book: RevenueBook) {
            store = filter.store
            product = filter.productID.map { book.stringIDs[$0] ?? -2 }
        }
        func passes(_ t: Tx) -> Bool {
            if let store, t.store != store { return false }
            if let product, t.product != product { return false }
            return true
        }
    }

    /// Converts amounts for one answer: each (currency, day, extra factor) pair's combined factor computed once.
    struct Converter {
        let rates: ExchangeRates
        let target: String
        let strings: [String]
        var cache: [Int64: Fraction?] = [:]

        /// `amount` x `extra` in the reporting currency, or nil with what was left out; `extraKey` names `extra`
        /// among the few this answer uses (below 2^10).
        mutating func convert(_ amount: Int64, currency: Int32, day: Int64, extraKey: Int64, extra: Fraction) -> (Int64?, Int64) {
            guard let f = factor(currency: currency, day: day, extraKey: extraKey, extra: extra) else { return (nil, extra.times(amount)) }
            return (f.times(amount), 0)
        }

        /// The day's rate times `extra`, or nil without a rate.
        mutating func factor(currency: Int32, day: Int64, extraKey: Int64, extra: Fraction) -> Fraction? {
            let key = Int64(currency) << 44 | extraKey << 34 | (day & 0x3_FFFF_FFFF)
            if let cached = cache[key] { return cached }
            let f = rates.factor(from: strings[Int(currency)], to: target, day: day).map { $0 * extra }
            cache[key] = f
            return f
        }
    }

    /// NEW_SUBSCRIPTIONS, TRIAL_STARTS, TRIAL_CONVERSIONS, CHURNED_SUBSCRIPTIONS: one per subscription.
    func chainEvents(_ metric: RevenueMetric, periods: RevenuePeriods, filter: RevenueFilter, nowMs: Int64, into acc: inout Accumulator) {
        let match = Match(filter, self)
        func passes(_ t: Tx, _: RevenueFilter) -> Bool { match.passes(t) }
        for (c, chain) in chains().enumerated() where !chain.isEmpty {
            let firstPaidIndex = chain.firstIndex { txs[Int($0)].price > 0 }
            switch metric {
            case .newSubscriptions, .trialConversions:
                guard let f = firstPaidIndex else { continue }
                if metric == .trialConversions && !chain[..<f].contains(where: { txs[Int($0)].trial }) { continue }
                let t = txs[Int(chain[f])]
                if passes(t, filter), let k = periods.index(of: t.purchase) { acc.add(t, k, 1, leftOut: 0) }
            case .trialStarts:
                let t = txs[Int(chain[0])]
                if t.trial, passes(t, filter), let k = periods.index(of: t.purchase) { acc.add(t, k, 1, leftOut: 0) }
            case .churnedSubscriptions:
                guard let l = chain.lastIndex(where: { txs[Int($0)].price > 0 }) else { continue }
                let t = txs[Int(chain[l])]
                let end = accessEnd(t, chain: c, last: l == chain.count - 1)
                guard end <= nowMs, !chain.contains(where: { txs[Int($0)].purchase >= end }) else { continue }
                if passes(t, filter), let k = periods.index(of: end) { acc.add(t, k, 1, leftOut: 0) }
            default: continue
            }
        }
    }

    /// Per group: values (flows) and a difference array (stocks), and what was left unconverted.
    struct Accumulator {
        let count: Int
        let book: RevenueBook
        let dimension: RevenueDimension
        let currency: String
        var values: [Int64: [Int64]] = [:]
        var diffs: [Int64: [Int64]] = [:]
        var unconverted: [String: Int64] = [:]

        init(count: Int, book: RevenueBook, dimension: RevenueDimension, currency: String) {
            self.count = count
            self.book = book
            self.dimension = dimension
            self.currency = currency
            if dimension == .none { values[0] = Array(repeating: 0, count: count) }
        }

        func key(_ t: Tx) -> Int64 {
            switch dimension {
            case .none: 0
            case .product: Int64(t.product)
            case .store: Int64(t.store.rawValue)
            case .storefront: Int64(t.storefront)
            case .currency: Int64(t.currency)
            }
        }

        mutating func add(_ t: Tx, _ k: Int, _ v: Int64?, leftOut: Int64, negate: Bool = false) {
            let g = key(t)
            if values[g] == nil { values[g] = Array(repeating: 0, count: count) }
            if let v { values[g]![k] += negate ? -v : v }
            if leftOut != 0 { unconverted[book.strings[Int(t.currency)], default: 0] += negate ? -leftOut : leftOut }
        }

        mutating func addRange(_ t: Tx, _ from: Int, _ to: Int, _ v: Int64?, leftOut: Int64) {
            let g = key(t)
            if values[g] == nil { values[g] = Array(repeating: 0, count: count) }
            if diffs[g] == nil { diffs[g] = Array(repeating: 0, count: count + 1) }
            if let v {
                diffs[g]![from] += v
                diffs[g]![to] -= v
            }
            if leftOut != 0 { unconverted[book.strings[Int(t.currency)], default: 0] += leftOut * Int64(to - from) }
        }

        func name(_ g: Int64) -> String {
            switch dimension {
            case .none: ""
            case .store: Store(rawValue: Int(g)).map(RevenueBook.storeName) ?? ""
            default: book.strings[Int(g)]
            }
        }

        func result(dimension: RevenueDimension) -> RevenueSeriesResult {
            var series: [RevenueSeries] = []
            for (g, flat) in values {
                var v = flat
                if let d = diffs[g] {
                    var running: Int64 = 0
                    for k in 0..<count {
                        running += d[k]
                        v[k] += running
                    }
                }
                series.append(RevenueSeries(group: name(g), values: v))
            }
            series.sort { $0.group < $1.group }
            return RevenueSeriesResult(currency: currency, series: series, unconverted: unconverted.filter { $0.value != 0 })
        }
    }

    /// The store as Revenue's dimension names it.
    public static func storeName(_ store: Store) -> String {
        switch store {
        case .appStore: "APP_STORE"
        case .googlePlay: "GOOGLE_PLAY"
        case .grant: "GRANT"
        }
    }
}

extension RevenuePeriods {
    /// Periods with the given bounds (the summary's 30 days).
    init(bounds: [Int64]) { self.bounds = bounds }
}
