import Billing
import Testing

/// Revenue's arithmetic and calendar: exact fractions rounded once, the ECB file, the commission list, periods,
/// and the book's definitions on a few hand-made transactions (the full agreement is test_revenue.py's).
@Suite("Revenue: fractions, rates, commission, periods, the book")
struct RevenueTests {
    @Test("fractions multiply exactly and round once, half away from zero")
    func fractions() {
        #expect(Fraction(decimal: "1.0523") == Fraction(10523, 10000))
        #expect(Fraction(decimal: "160.12") == Fraction(16012, 100))
        #expect(Fraction(decimal: "15") == Fraction(15, 1))
        for bad in ["", ".", "1.2.3", "-1", "1e3", "1,05", " 1"] { #expect(Fraction(decimal: bad[...]) == nil, "\(bad)") }
        #expect(Fraction(5, 2).rounded == 3)
        #expect(Fraction(-5, 2).rounded == -3)
        #expect(Fraction(7, 3).rounded == 2)
        #expect(Fraction(1980 * 11, 8).rounded == 2723)  // 2722.5
        // 1.1 / 0.8 x 0.7 exactly: 1905.75 -> 1906, where two roundings would give 1906 or 1905.
        #expect((Fraction(11, 10) / Fraction(8, 10) * Fraction(7, 10)).times(1980) == 1906)
        // Large amounts stay exact: a billion units at a rate of 160.1234 over 0.85432.
        let f = Fraction(decimal: "160.1234")! / Fraction(decimal: "0.85432")!
        #expect(f.times(1_000_000_000_000) == 187_427_895_870_400)  // 187427895870399.84
    }

    @Test("the ECB file: newest first, trailing commas, N/A, weekends from Friday; errors name the line")
    func rates() throws {
        let text = "Date,USD,JPY,GBP,\n2026-11-30,1.0523,160.12,N/A,\n2026-11-27,1.0500,159.00,0.8312,\n\n"
        let r = try ExchangeRates.parse(text)
        let friday = CivilDate.day(iso: "2026-11-27")!, saturday = friday + 1, monday = friday + 3
        #expect(r.rate("USD", day: saturday) == Fraction(10500, 10000))
        #expect(r.rate("USD", day: monday) == Fraction(10523, 10000))
        #expect(r.rate("GBP", day: monday) == Fraction(8312, 10000))  // N/A on Monday: Friday's
        #expect(r.rate("USD", day: friday - 1) == nil)
        #expect(r.rate("EUR", day: 0) == .one)
        #expect(r.factor(from: "CHF", to: "CHF", day: 0) == .one)
        #expect(r.factor(from: "EUR", to: "USD", day: monday) == Fraction(10523, 10000))
        #expect(r.factor(from: "CHF", to: "USD", day: monday) == nil)
        #expect(r.currencies == ["GBP", "JPY", "USD"])
        let bad: [(String, Int)] = [
            ("", 1), ("Day,USD\n", 1), ("Date,usd\n", 1), ("Date,USD,USD\n", 1), ("Date,USD\n2026-13-01,1\n", 2),
            ("Date,USD\n2026-11-30,1\n2026-11-27,x\n", 3), ("Date,USD\n2026-11-30,1\n2026-11-30,1\n", 3),
            ("Date,USD\n2026-11-30,1,2\n", 2), ("Date,USD\n2026-11-30,0\n", 2), ("Date,USD\n2026-02-30,1\n", 2),
        ]
        for (t, line) in bad {
            #expect(throws: ExchangeRates.Problem.self, "\(t)") { try ExchangeRates.parse(t) }
            do { _ = try ExchangeRates.parse(t) } catch { #expect(error.line == line, "\(t): \(error)") }
        }
    }

    @Test("the commission list: defaults, decimals, refusals")
    func commission() throws {
        let c = try Commission.parse("app_store=15/15,google_play=15.5/10")
        #expect(c.percent(.appStore, later: false) == "15" && c.percent(.googlePlay, later: false) == "15.5")
        #expect(c.kept(.googlePlay, later: false) == Fraction(845, 1000))
        #expect(c.kept(.googlePlay, later: true) == Fraction(9, 10))
        #expect(try Commission.parse("").percent(.appStore, later: false) == "30")
        for bad in ["app_store=30", "amazon=30/15", "app_store=101/15", "app_store=-1/15", "app_store=a/b"] {
            #expect(throws: Commission.Problem.self, "\(bad)") { try Commission.parse(bad) }
        }
    }

    @Test("periods: days, ISO weeks from Monday, calendar months; at most 1,000")
    func periods() throws {
        let ms = { (s: String) in CivilDate.day(iso: s)! * CivilDate.dayMs }
        let edge = ms("2026-03-31") + CivilDate.dayMs - 1
        #expect(RevenuePeriods.align(edge, .day) == ms("2026-03-31"))
        #expect(RevenuePeriods.align(edge, .week) == ms("2026-03-30"))  // a Monday
        #expect(RevenuePeriods.align(ms("2026-03-30"), .week) == ms("2026-03-30"))
        #expect(RevenuePeriods.align(edge, .month) == ms("2026-03-01"))
        let year = try RevenuePeriods(startMs: ms("2025-12-15"), endMs: ms("2026-12-01"), granularity: .month)
        #expect(year.count == 12 && year.bounds.first == ms("2025-12-01") && year.bounds.last == ms("2026-12-01"))
        #expect(year.index(of: ms("2026-02-28") + 5) == 2 && year.index(of: ms("2026-12-01")) == nil)
        #expect(CivilDate.rfc3339(ms: edge) == "2026-03-31T23:59:59.999Z")
        #expect(CivilDate.rfc3339(ms: -1) == "1969-12-31T23:59:59.999Z")
        #expect(throws: BillingError.self) { try RevenuePeriods(startMs: 0, endMs: 1001 * CivilDate.dayMs, granularity: .day) }
        #expect(throws: BillingError.self) { try RevenuePeriods(startMs: 5, endMs: 5, granularity: .day) }
        _ = try RevenuePeriods(startMs: 0, endMs: 1000 * CivilDate.dayMs, granularity: .day)
    }

    static func sub(
        _ id: String, _ original: String, purchase: Int64, days: Int64, price: Int64, offer: String = "", revoked: Int64 = 0
    ) -> StoreTransaction {
        var t = StoreTransaction(
            transactionID: id, originalTransactionID: original, productID: "pro", productKind: .autoRenewableSubscription,
            purchaseTimeMs: purchase, expiresTimeMs: purchase + days * CivilDate.dayMs, revocationTimeMs: revoked,
            environment: .production, bundleID: "b")
        t.price = PriceFacts(priceMilliunits: price, currency: "USD", offerType: offer)
        return t
    }

    @Test("the book: trials, conversion, churn only after the end, grace, grants and family copies left out")
    func book() throws {
        let d = CivilDate.dayMs, t0 = 100 * d
        var book = RevenueBook(settings: RevenueSettings())
        book.add(Self.sub("a1", "a1", purchase: t0, days: 7, price: 0, offer: "INTRODUCTORY_OFFER"), accountID: "ann")
        book.add(Self.sub("a2", "a1", purchase: t0 + 7 * d, days: 30, price: 4990), accountID: "ann", graceEndMs: t0 + 53 * d)
        var family = Self.sub("f1", "a1", purchase: t0, days: 30, price: 4990)
        family.ownership = .familyShared
        book.add(family, accountID: "kid")
        var grant = Self.sub("g1", "g1", purchase: t0, days: 30, price: 4990)
        grant.store = .grant
        book.add(grant, accountID: "ann")
        book.add(Self.sub("u1", "u1", purchase: t0, days: 30, price: 4990), accountID: "")  // unowned
        #expect(book.transactionCount == 2)
        let days = try RevenuePeriods(startMs: t0, endMs: t0 + 60 * d, granularity: .day)
        let now = t0 + 100 * d
        let trials = book.series(.activeTrials, periods: days, nowMs: now).series[0].values
        #expect(trials[0] == 1 && trials[6] == 1 && trials[7] == 0)
        let active = book.series(.activeSubscriptions, periods: days, nowMs: now).series[0].values
        // Paid from day 7; expires day 37; grace until day 53.
        #expect(active[6] == 0 && active[7] == 1 && active[52] == 1 && active[53] == 0)
        let churn = book.series(.churnedSubscriptions, periods: days, nowMs: now).series[0].values
        #expect(churn.reduce(0, +) == 1 && churn[53] == 1)
        #expect(book.series(.churnedSubscriptions, periods: days, nowMs: t0 + 50 * d).series[0].values.reduce(0, +) == 0)
        #expect(book.series(.trialConversions, periods: days, nowMs: now).series[0].values[7] == 1)
        #expect(book.series(.gross, periods: days, nowMs: now).series[0].values.reduce(0, +) == 4990)
        #expect(book.series(.mrr, periods: days, nowMs: now).series[0].values[10] == 4990)
        let summary = book.summary(asOfMs: t0 + 10 * d, nowMs: now, activeGrants: 4)
        #expect(summary.mrr == 4990 && summary.activeSubscriptions == 1 && summary.activeGrants == 4)
    }

    @Test("MRR's period table")
    func monthly() {
        let d = CivilDate.dayMs
        #expect(RevenueBook.monthly(purchaseMs: 0, expiresMs: 7 * d) == Fraction(52, 12))
        #expect(RevenueBook.monthly(purchaseMs: 0, expiresMs: 8 * d + d / 2 - 1) == Fraction(52, 12))
        #expect(RevenueBook.monthly(purchaseMs: 0, expiresMs: 31 * d) == .one)
        #expect(RevenueBook.monthly(purchaseMs: 0, expiresMs: 61 * d) == Fraction(1, 2))
        #expect(RevenueBook.monthly(purchaseMs: 0, expiresMs: 92 * d) == Fraction(1, 3))
        #expect(RevenueBook.monthly(purchaseMs: 0, expiresMs: 183 * d) == Fraction(1, 6))
        #expect(RevenueBook.monthly(purchaseMs: 0, expiresMs: 365 * d) == Fraction(1, 12))
    }

    @Test("what a commit changed travels to other replicas in notices under 8000 bytes, and back")
    func notices() {
        let ids = (0..<2000).map { "tx-\($0)-\(String(repeating: "x", count: 20))" }
        let changes = RevenueChanges(transactionIDs: ids + ids, originalTransactionIDs: ["o1", "o2"])
        let payloads = changes.payloads
        #expect(payloads.count > 1 && payloads.allSatisfy { $0.utf8.count <= 7900 })
        let back = payloads.map(RevenueChanges.init(payload:))
        #expect(Set(back.flatMap(\.transactionIDs)) == Set(ids))
        #expect(Set(back.flatMap(\.originalTransactionIDs)) == ["o1", "o2"])
        #expect(RevenueChanges(transactionIDs: ["a,b"]).payloads == ["*"])
        #expect(RevenueChanges(payload: "*").all && RevenueChanges.everything.payloads == ["*"])
    }
}
