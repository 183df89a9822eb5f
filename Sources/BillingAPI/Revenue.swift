public import ProtoWire

// billing.v1.Revenue: GetRevenueSummary, GetRevenueSeries, ExportTransactions. Field numbers are the contract's
// (schemas/billing/v1/billing.proto).

/// billing.v1.RevenueMetric.
public struct RevenueMetric: ProtoEnum, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let unspecified = RevenueMetric(rawValue: 0)
    public static let names = [
        "UNSPECIFIED", "GROSS", "REFUNDS", "NET", "PROCEEDS", "MRR", "ACTIVE_SUBSCRIPTIONS", "ACTIVE_TRIALS", "NEW_SUBSCRIPTIONS",
        "TRIAL_STARTS", "TRIAL_CONVERSIONS", "CHURNED_SUBSCRIPTIONS", "REFUNDED_TRANSACTIONS",
    ]
    public var description: String { Self.names.indices.contains(Int(rawValue)) ? "REVENUE_METRIC_" + Self.names[Int(rawValue)] : "\(rawValue)" }
}

/// billing.v1.Granularity.
public struct Granularity: ProtoEnum, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let names = ["UNSPECIFIED", "DAY", "WEEK", "MONTH"]
    public var description: String { Self.names.indices.contains(Int(rawValue)) ? "GRANULARITY_" + Self.names[Int(rawValue)] : "\(rawValue)" }
}

/// billing.v1.RevenueDimension.
public struct RevenueDimension: ProtoEnum, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let names = ["UNSPECIFIED", "PRODUCT", "STORE", "STOREFRONT", "CURRENCY"]
    public var description: String {
        Self.names.indices.contains(Int(rawValue)) ? "REVENUE_DIMENSION_" + Self.names[Int(rawValue)] : "\(rawValue)"
    }
}

/// billing.v1.GetRevenueSeriesRequest.
public struct GetRevenueSeriesRequest: ProtoMessage, Equatable {
    public var metric = RevenueMetric.unspecified
    public var startTimeMs: Int64 = 0
    public var endTimeMs: Int64 = 0
    public var granularity = Granularity(rawValue: 0)
    public var groupBy = RevenueDimension(rawValue: 0)
    public var currency = ""
    public var environment = Environment.unspecified
    public var store = Store.unspecified
    public var productID = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .varint, field: 1); metric = RevenueMetric(rawValue: try r.readEnum(field: 1))
            case 2: try expect(wt, .varint, field: 2); startTimeMs = try r.readInt64()
            case 3: try expect(wt, .varint, field: 3); endTimeMs = try r.readInt64()
            case 4: try expect(wt, .varint, field: 4); granularity = Granularity(rawValue: try r.readEnum(field: 4))
            case 5: try expect(wt, .varint, field: 5); groupBy = RevenueDimension(rawValue: try r.readEnum(field: 5))
            case 6: try expect(wt, .lengthDelimited, field: 6); currency = try r.readString(field: 6)
            case 7: try expect(wt, .varint, field: 7); environment = Environment(rawValue: try r.readEnum(field: 7))
            case 8: try expect(wt, .varint, field: 8); store = Store(rawValue: try r.readEnum(field: 8))
            case 9: try expect(wt, .lengthDelimited, field: 9); productID = try r.readString(field: 9)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.int32(1, metric.rawValue) + ProtoSize.int64(2, startTimeMs) + ProtoSize.int64(3, endTimeMs)
            + ProtoSize.int32(4, granularity.rawValue) + ProtoSize.int32(5, groupBy.rawValue) + ProtoSize.string(6, currency)
            + ProtoSize.int32(7, environment.rawValue) + ProtoSize.int32(8, store.rawValue) + ProtoSize.string(9, productID)
    }
    public func encode(to w: inout ProtoWriter) {
        w.int32(1, metric.rawValue); w.int64(2, startTimeMs); w.int64(3, endTimeMs); w.int32(4, granularity.rawValue)
        w.int32(5, groupBy.rawValue); w.string(6, currency); w.int32(7, environment.rawValue); w.int32(8, store.rawValue)
        w.string(9, productID)
    }
}

/// billing.v1.SeriesPoint.
public struct SeriesPoint: ProtoMessage, Equatable {
    public var startTimeMs: Int64 = 0
    public var value: Int64 = 0

    public init() {}
    public init(startTimeMs: Int64, value: Int64) {
        self.startTimeMs = startTimeMs
        self.value = value
    }

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .varint, field: 1); startTimeMs = try r.readInt64()
            case 2: try expect(wt, .varint, field: 2); value = try r.readInt64()
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int { ProtoSize.int64(1, startTimeMs) + ProtoSize.int64(2, value) }
    public func encode(to w: inout ProtoWriter) { w.int64(1, startTimeMs); w.int64(2, value) }
}

/// billing.v1.Series.
public struct Series: ProtoMessage, Equatable {
    public var group = ""
    public var points: [SeriesPoint] = []

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); group = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); points.append(try r.readMessage(SeriesPoint.self))
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int { ProtoSize.string(1, group) + points.reduce(0) { $0 + ProtoSize.message(2, $1) } }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, group)
        for p in points { w.message(2, p) }
    }
}

/// billing.v1.GetRevenueSeriesResponse.
public struct GetRevenueSeriesResponse: ProtoMessage, Equatable {
    public var currency = ""
    public var series: [Series] = []
    public var unconverted: [Money] = []

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); currency = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); series.append(try r.readMessage(Series.self))
            case 3: try expect(wt, .lengthDelimited, field: 3); unconverted.append(try r.readMessage(Money.self))
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, currency) + series.reduce(0) { $0 + ProtoSize.message(2, $1) }
            + unconverted.reduce(0) { $0 + ProtoSize.message(3, $1) }
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, currency)
        for s in series { w.message(2, s) }
        for m in unconverted { w.message(3, m) }
    }
}

/// billing.v1.GetRevenueSummaryRequest.
public struct GetRevenueSummaryRequest: ProtoMessage, Equatable {
    public var asOfTimeMs: Int64 = 0
    public var currency = ""
    public var environment = Environment.unspecified

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .varint, field: 1); asOfTimeMs = try r.readInt64()
            case 2: try expect(wt, .lengthDelimited, field: 2); currency = try r.readString(field: 2)
            case 3: try expect(wt, .varint, field: 3); environment = Environment(rawValue: try r.readEnum(field: 3))
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int { ProtoSize.int64(1, asOfTimeMs) + ProtoSize.string(2, currency) + ProtoSize.int32(3, environment.rawValue) }
    public func encode(to w: inout ProtoWriter) { w.int64(1, asOfTimeMs); w.string(2, currency); w.int32(3, environment.rawValue) }
}

/// billing.v1.GetRevenueSummaryResponse.
public struct GetRevenueSummaryResponse: ProtoMessage, Equatable {
    public var currency = ""
    public var mrrMilliunits: Int64 = 0
    public var arrMilliunits: Int64 = 0
    public var activeSubscriptions: Int32 = 0
    public var activeTrials: Int32 = 0
    public var activeGrants: Int32 = 0
    public var grossLast30DaysMilliunits: Int64 = 0
    public var netLast30DaysMilliunits: Int64 = 0
    public var unconverted: [Money] = []

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); currency = try r.readString(field: 1)
            case 2: try expect(wt, .varint, field: 2); mrrMilliunits = try r.readInt64()
            case 3: try expect(wt, .varint, field: 3); arrMilliunits = try r.readInt64()
            case 4: try expect(wt, .varint, field: 4); activeSubscriptions = try r.readInt32(field: 4)
            case 5: try expect(wt, .varint, field: 5); activeTrials = try r.readInt32(field: 5)
            case 6: try expect(wt, .varint, field: 6); activeGrants = try r.readInt32(field: 6)
            case 7: try expect(wt, .varint, field: 7); grossLast30DaysMilliunits = try r.readInt64()
            case 8: try expect(wt, .varint, field: 8); netLast30DaysMilliunits = try r.readInt64()
            case 9: try expect(wt, .lengthDelimited, field: 9); unconverted.append(try r.readMessage(Money.self))
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, currency) + ProtoSize.int64(2, mrrMilliunits) + ProtoSize.int64(3, arrMilliunits)
            + ProtoSize.int32(4, activeSubscriptions) + ProtoSize.int32(5, activeTrials) + ProtoSize.int32(6, activeGrants)
            + ProtoSize.int64(7, grossLast30DaysMilliunits) + ProtoSize.int64(8, netLast30DaysMilliunits)
            + unconverted.reduce(0) { $0 + ProtoSize.message(9, $1) }
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, currency); w.int64(2, mrrMilliunits); w.int64(3, arrMilliunits); w.int32(4, activeSubscriptions)
        w.int32(5, activeTrials); w.int32(6, activeGrants); w.int64(7, grossLast30DaysMilliunits); w.int64(8, netLast30DaysMilliunits)
        for m in unconverted { w.message(9, m) }
    }
}

/// billing.v1.ExportTransactionsRequest.
public struct ExportTransactionsRequest: ProtoMessage, Equatable {
    public var startTimeMs: Int64 = 0
    public var endTimeMs: Int64 = 0
    public var environment = Environment.unspecified
    public var format = ""
    public var currency = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .varint, field: 1); startTimeMs = try r.readInt64()
            case 2: try expect(wt, .varint, field: 2); endTimeMs = try r.readInt64()
            case 3: try expect(wt, .varint, field: 3); environment = Environment(rawValue: try r.readEnum(field: 3))
            case 4: try expect(wt, .lengthDelimited, field: 4); format = try r.readString(field: 4)
            case 5: try expect(wt, .lengthDelimited, field: 5); currency = try r.readString(field: 5)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.int64(1, startTimeMs) + ProtoSize.int64(2, endTimeMs) + ProtoSize.int32(3, environment.rawValue)
            + ProtoSize.string(4, format) + ProtoSize.string(5, currency)
    }
    public func encode(to w: inout ProtoWriter) {
        w.int64(1, startTimeMs); w.int64(2, endTimeMs); w.int32(3, environment.rawValue); w.string(4, format); w.string(5, currency)
    }
}

/// billing.v1.ExportTransactionsChunk.
public struct ExportTransactionsChunk: ProtoMessage, Equatable {
    public var data: [UInt8] = []

    public init() {}
    public init(data: [UInt8]) { self.data = data }

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            if field == 1 { try expect(wt, .lengthDelimited, field: 1); data = try r.readBytes() } else { try r.skip(wt) }
        }
    }
    public var encodedSize: Int { ProtoSize.bytes(1, data) }
    public func encode(to w: inout ProtoWriter) { w.bytesField(1, data) }
}
