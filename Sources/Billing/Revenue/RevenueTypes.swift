/// billing.v1.RevenueMetric.
public enum RevenueMetric: Int, Sendable, Equatable, CaseIterable {
    case gross = 1
    case refunds = 2
    case net = 3
    case proceeds = 4
    case mrr = 5
    case activeSubscriptions = 6
    case activeTrials = 7
    case newSubscriptions = 8
    case trialStarts = 9
    case trialConversions = 10
    case churnedSubscriptions = 11
    case refundedTransactions = 12

    /// Milliunits of the reporting currency; the others are counts.
    public var isMoney: Bool { self == .gross || self == .refunds || self == .net || self == .proceeds || self == .mrr }
}

/// billing.v1.RevenueDimension.
public enum RevenueDimension: Int, Sendable, Equatable {
    case none = 0
    case product = 1
    case store = 2
    case storefront = 3
    case currency = 4
}

/// What Revenue converts and deducts with: the reporting currency (`--reporting-currency`), the day's rates
/// (`--exchange-rates`) and the stores' commission (`--commission`).
public struct RevenueSettings: Sendable {
    public var reportingCurrency: String
    public var rates: ExchangeRates
    public var commission: Commission

    public init(reportingCurrency: String = "USD", rates: ExchangeRates = .none, commission: Commission = try! .parse(Commission.defaultList)) {
        self.reportingCurrency = reportingCurrency
        self.rates = rates
        self.commission = commission
    }
}

/// One series of a GetRevenueSeries answer.
public struct RevenueSeries: Sendable, Equatable {
    /// The dimension's value; "" without one.
    public var group: String
    /// One value per period, oldest first.
    public var values: [Int64]
}

/// A GetRevenueSeries answer.
public struct RevenueSeriesResult: Sendable, Equatable {
    public var currency: String
    public var series: [RevenueSeries]
    /// Money left out for want of a rate, per currency paid, in its milliunits.
    public var unconverted: [String: Int64]
}

/// A GetRevenueSummary answer.
public struct RevenueSummary: Sendable, Equatable {
    public var currency: String
    public var mrr: Int64 = 0
    public var activeSubscriptions = 0
    public var activeTrials = 0
    public var activeGrants = 0
    public var grossLast30Days: Int64 = 0
    public var netLast30Days: Int64 = 0
    public var unconverted: [String: Int64] = [:]
}

/// The filters of a series: the transaction that decides each number must match them.
public struct RevenueFilter: Sendable, Equatable {
    public var store: Store?
    public var productID: String?
    public init(store: Store? = nil, productID: String? = nil) {
        self.store = store
        self.productID = productID
    }
}
