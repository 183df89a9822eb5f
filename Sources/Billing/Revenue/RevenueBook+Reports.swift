/// The reports read from the book: a series per group, the summary, flows (money by period) and stocks
/// (counts at instants), MRR's monthly factors.
extension RevenueBook {
    /// One metric over `periods`, split by `dimension`, in `currency` (the reporting currency when nil).
    public func series(
        _ metric: RevenueMetric, periods: RevenuePeriods, dimension: RevenueDimension = .none, filter: RevenueFilter = RevenueFilter(),
        currency: String? = nil, nowMs: Int64
    ) -> RevenueSeriesResult {
        var acc = Accumulator(count: periods.count, book: self, dimension: dimension, currency: currency ?? settings.reportingCurrency)
        switch metric {
        case .gross, .refunds, .net, .proceeds, .refundedTransactions:
            flows(metric, periods: periods, filter: filter, into: &acc)
        case .mrr, .activeSubscriptions, .activeTrials:
            let at = Self.instants(periods, nowMs: nowMs)
            stocks(metric, at: at, filter: filter, into: &acc)
        case .newSubscriptions, .trialStarts, .trialConversions, .churnedSubscriptions:
            chainEvents(metric, periods: periods, filter: filter, nowMs: nowMs, into: &acc)
        }
        return acc.result(dimension: dimension)
    }

    /// The business at `asOfMs`: MRR, active subscriptions and trials, the 30 days' gross and net before it.
    public func summary(asOfMs: Int64, nowMs: Int64, currency: String? = nil, activeGrants: Int) -> RevenueSummary {
        let target = currency ?? settings.reportingCurrency
        var s = RevenueSummary(currency: target)
        var unconverted: [String: Int64] = [:]
        var converter = Converter(rates: settings.rates, target: target, strings: strings)
        // At the instant: each subscription's current transaction, found by purchase time in its ordered members
        // (the same rule as `stocks`, one instant).
        for (c, chain) in members.enumerated() where !chain.isEmpty {
            var lo = 0, hi = chain.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if txs[Int(chain[mid])].purchase <= asOfMs { lo = mid + 1 } else { hi = mid }
            }
            guard lo > 0 else { continue }
            let t = txs[Int(chain[lo - 1])]
            guard asOfMs < accessEnd(t, chain: c, last: lo == chain.count) else { continue }
            if t.trial { s.activeTrials += 1 }
            guard t.price > 0 else { continue }
            s.activeSubscriptions += 1
            let (key, monthly) = Self.monthlyClass(purchaseMs: t.purchase, expiresMs: t.expires)
            let (v, left) = converter.convert(t.paid, currency: t.currency, day: CivilDate.day(ofMs: t.purchase), extraKey: key, extra: monthly)
            s.mrr += v ?? 0
            if left != 0 { unconverted[strings[Int(t.currency)], default: 0] += left }
        }
        s.activeGrants = activeGrants
        // The 30 days before: GROSS and REFUNDS in one pass (NET = GROSS - REFUNDS).
        let from = asOfMs - 30 * CivilDate.dayMs
        var refunds: Int64 = 0
        for t in txs where t.live && t.paid > 0 {
            if t.purchase >= from && t.purchase < asOfMs {
                let (v, left) = converter.convert(t.paid, currency: t.currency, day: CivilDate.day(ofMs: t.purchase), extraKey: 0, extra: .one)
                s.grossLast30Days += v ?? 0
                if left != 0 { unconverted[strings[Int(t.currency)], default: 0] += left }
            }
            if t.revocation >= from && t.revocation < asOfMs && t.revocation > 0 && Self.isRefund(t.revocationType),
                let share = Self.refundedShare(t.revocationType, t.percentage, revoked: true),
                let f = converter.factor(currency: t.currency, day: CivilDate.day(ofMs: t.revocation), extraKey: 0, extra: .one)
            {
                refunds += (f * share).times(t.paid)
            }
        }
        s.netLast30Days = s.grossLast30Days - refunds
        s.unconverted = unconverted.filter { $0.value != 0 }
        _ = nowMs
        return s
    }

    /// The commission's kept share of a transaction's store and tier, and its key for the converter.
    func kept(_ t: Tx, _ table: inout [Int64: Fraction]) -> (Int64, Fraction) {
        let key = Int64(t.store.rawValue) << 1 | (isLater(t) ? 1 : 0)
        if let f = table[key] { return (key + 1, f) }
        let f = settings.commission.kept(t.store, later: isLater(t))
        table[key] = f
        return (key + 1, f)
    }

    /// GROSS, REFUNDS, NET, PROCEEDS and REFUNDED_TRANSACTIONS: by the day the money moved.
    func flows(_ metric: RevenueMetric, periods: RevenuePeriods, filter: RevenueFilter, into acc: inout Accumulator) {
        var converter = Converter(rates: settings.rates, target: acc.currency, strings: strings)
        var keptTable: [Int64: Fraction] = [:]
        let match = Match(filter, self)
        for t in txs where t.live && match.passes(t) {
            let known = t.price > 0 || t.trial
            guard known else { continue }
            let (keptKey, kept): (Int64, Fraction) = metric == .proceeds ? self.kept(t, &keptTable) : (0, .one)
            if metric != .refunds && metric != .refundedTransactions, let k = periods.index(of: t.purchase), t.paid > 0 {
                let (v, left) = converter.convert(t.paid, currency: t.currency, day: CivilDate.day(ofMs: t.purchase), extraKey: keptKey, extra: kept)
                acc.add(t, k, v, leftOut: left)
            }
            guard metric != .gross, t.revocation > 0, Self.isRefund(t.revocationType), let k = periods.index(of: t.revocation) else { continue }
            if metric == .refundedTransactions {
                acc.add(t, k, 1, leftOut: 0)
                continue
            }
            guard let share = Self.refundedShare(t.revocationType, t.percentage, revoked: true), t.paid > 0 else { continue }
            // The refunded share is the transaction's own: applied to the cached factor.
            let v: Int64?, left: Int64
            if let f = converter.factor(currency: t.currency, day: CivilDate.day(ofMs: t.revocation), extraKey: keptKey, extra: kept) {
                (v, left) = ((f * share).times(t.paid), 0)
            } else {
                (v, left) = (nil, (share * kept).times(t.paid))
            }
            acc.add(t, k, v.map { -$0 }, leftOut: -left, negate: metric == .refunds)
        }
    }

    /// The transactions of each subscription, oldest first (ties by transaction id).
    func chains() -> [[Int32]] { members }

    /// When paid access through transaction `i` (of chain `c`, `last` when no later one) ends: its expiry, or the
    /// grace period's end that follows the newest one, cut short by its revocation.
    func accessEnd(_ t: Tx, chain c: Int, last: Bool) -> Int64 {
        var end = t.expires
        if last { end = max(end, graceEnd[c]) }
        if t.revocation > 0 { end = min(end, t.revocation) }
        return end
    }

    /// ACTIVE_SUBSCRIPTIONS, ACTIVE_TRIALS, MRR at each instant of `at` (non-decreasing).
    func stocks(_ metric: RevenueMetric, at: [Int64], filter: RevenueFilter, into acc: inout Accumulator) {
        func firstIndex(atOrAfter v: Int64) -> Int {
            var lo = 0, hi = at.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if at[mid] < v { lo = mid + 1 } else { hi = mid }
            }
            return lo
        }
        var converter = Converter(rates: settings.rates, target: acc.currency, strings: strings)
        let match = Match(filter, self)
        for (c, chain) in chains().enumerated() {
            for (j, i) in chain.enumerated() {
                let t = txs[Int(i)]
                let paid = t.price > 0
                guard match.passes(t), metric == .activeTrials ? t.trial : paid else { continue }
                let last = j == chain.count - 1
                let until = min(last ? Int64.max : txs[Int(chain[j + 1])].purchase, accessEnd(t, chain: c, last: last))
                guard until > t.purchase else { continue }
                let from = firstIndex(atOrAfter: t.purchase), to = firstIndex(atOrAfter: until)
                guard from < to else { continue }
                if metric == .mrr {
                    let (key, monthly) = Self.monthlyClass(purchaseMs: t.purchase, expiresMs: t.expires)
                    let (v, left) = converter.convert(t.paid, currency: t.currency, day: CivilDate.day(ofMs: t.purchase), extraKey: key, extra: monthly)
                    acc.addRange(t, from, to, v, leftOut: left)
                } else {
                    acc.addRange(t, from, to, 1, leftOut: 0)
                }
            }
        }
    }

    /// A subscription period's price made monthly: D = days between purchase and expiry, rounded.
    public static func monthly(purchaseMs: Int64, expiresMs: Int64) -> Fraction { monthlyClass(purchaseMs: purchaseMs, expiresMs: expiresMs).1 }

    static let monthlyFactors = [Fraction(52, 12), .one, Fraction(1, 2), Fraction(1, 3), Fraction(1, 6), Fraction(1, 12)]

    /// The period table's row (1 to 6, the converter's key) and its factor.
    static func monthlyClass(purchaseMs: Int64, expiresMs: Int64) -> (Int64, Fraction) {
        let span = max(0, expiresMs - purchaseMs)
        let d = (span + CivilDate.dayMs / 2) / CivilDate.dayMs
        let row: Int
        switch d {
        case ...8: row = 0
        case ...35: row = 1
        case ...65: row = 2
        case ...100: row = 3
        case ...200: row = 4
        default: row = 5
        }
        return (Int64(row + 1), monthlyFactors[row])
    }
}
