public import ProtoWire

// billing.v1.Support: the messages of the calls billingd serves so far (FindCustomers, GetCustomer,
// ListAuditEntries). Field numbers are the contract's (schemas/billing/v1/billing.proto).

/// billing.v1.Money.
public struct Money: ProtoMessage, Equatable {
    public var currency = ""
    public var milliunits: Int64 = 0

    public init() {}
    public init(currency: String, milliunits: Int64) {
        self.currency = currency
        self.milliunits = milliunits
    }

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); currency = try r.readString(field: 1)
            case 2: try expect(wt, .varint, field: 2); milliunits = try r.readInt64()
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int { ProtoSize.string(1, currency) + ProtoSize.int64(2, milliunits) }
    public func encode(to w: inout ProtoWriter) { w.string(1, currency); w.int64(2, milliunits) }
}

/// billing.v1.CustomerSummary: one account at a glance.
public struct CustomerSummary: ProtoMessage, Equatable {
    public var accountID = ""
    public var firstSeenTimeMs: Int64 = 0
    public var lastSeenTimeMs: Int64 = 0
    public var activeEntitlements: Int32 = 0
    public var orders: Int32 = 0
    public var transactions: Int32 = 0
    public var refundedTransactions: Int32 = 0
    public var spent: [Money] = []
    public var stores: [Store] = []
    public var deleted = false

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); accountID = try r.readString(field: 1)
            case 2: try expect(wt, .varint, field: 2); firstSeenTimeMs = try r.readInt64()
            case 3: try expect(wt, .varint, field: 3); lastSeenTimeMs = try r.readInt64()
            case 4: try expect(wt, .varint, field: 4); activeEntitlements = try r.readInt32(field: 4)
            case 5: try expect(wt, .varint, field: 5); orders = try r.readInt32(field: 5)
            case 6: try expect(wt, .varint, field: 6); transactions = try r.readInt32(field: 6)
            case 7: try expect(wt, .varint, field: 7); refundedTransactions = try r.readInt32(field: 7)
            case 8: try expect(wt, .lengthDelimited, field: 8); spent.append(try r.readMessage(Money.self))
            case 9:
                var raw: [UInt64] = []
                try r.readRepeatedVarints(wt, field: 9, into: &raw)
                stores += raw.map { Store(rawValue: Int32(truncatingIfNeeded: $0)) }
            case 10: try expect(wt, .varint, field: 10); deleted = try r.readBool()
            default: try r.skip(wt)
            }
        }
    }

    var storeValues: [UInt64] { stores.map { UInt64(bitPattern: Int64($0.rawValue)) } }

    public var encodedSize: Int {
        ProtoSize.string(1, accountID) + ProtoSize.int64(2, firstSeenTimeMs) + ProtoSize.int64(3, lastSeenTimeMs)
            + ProtoSize.int32(4, activeEntitlements) + ProtoSize.int32(5, orders) + ProtoSize.int32(6, transactions)
            + ProtoSize.int32(7, refundedTransactions) + spent.reduce(0) { $0 + ProtoSize.message(8, $1) }
            + ProtoSize.packedVarints(9, storeValues) + ProtoSize.bool(10, deleted)
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, accountID); w.int64(2, firstSeenTimeMs); w.int64(3, lastSeenTimeMs)
        w.int32(4, activeEntitlements); w.int32(5, orders); w.int32(6, transactions); w.int32(7, refundedTransactions)
        for m in spent { w.message(8, m) }
        w.packedVarints(9, storeValues); w.bool(10, deleted)
    }
}

/// billing.v1.FindCustomersRequest.
public struct FindCustomersRequest: ProtoMessage, Equatable {
    /// 1 to 512 bytes, surrounding spaces ignored.
    public var query = ""

    public init() {}
    public init(query: String) { self.query = query }

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            if field == 1 { try expect(wt, .lengthDelimited, field: 1); query = try r.readString(field: 1) } else { try r.skip(wt) }
        }
    }
    public var encodedSize: Int { ProtoSize.string(1, query) }
    public func encode(to w: inout ProtoWriter) { w.string(1, query) }
}

/// billing.v1.CustomerMatch: an account the query names, and what it matched.
public struct CustomerMatch: ProtoMessage, Equatable {
    public var customer: CustomerSummary?
    /// "account_id", "order_id", "transaction_id", "original_transaction_id", "purchase_token", "stripe_id",
    /// "grant_id", "app_account_token" or "apple_order_id".
    public var matched = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); customer = try r.readMessage(CustomerSummary.self)
            case 2: try expect(wt, .lengthDelimited, field: 2); matched = try r.readString(field: 2)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int { (customer.map { ProtoSize.message(1, $0) } ?? 0) + ProtoSize.string(2, matched) }
    public func encode(to w: inout ProtoWriter) {
        if let customer { w.message(1, customer) }
        w.string(2, matched)
    }
}

/// billing.v1.FindCustomersResponse.
public struct FindCustomersResponse: ProtoMessage, Equatable {
    public var matches: [CustomerMatch] = []

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            if field == 1 { try expect(wt, .lengthDelimited, field: 1); matches.append(try r.readMessage(CustomerMatch.self)) } else { try r.skip(wt) }
        }
    }
    public var encodedSize: Int { matches.reduce(0) { $0 + ProtoSize.message(1, $1) } }
    public func encode(to w: inout ProtoWriter) { for m in matches { w.message(1, m) } }
}

/// billing.v1.GetCustomerRequest.
public struct GetCustomerRequest: ProtoMessage, Equatable {
    public var accountID = ""

    public init() {}
    public init(accountID: String) { self.accountID = accountID }

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            if field == 1 { try expect(wt, .lengthDelimited, field: 1); accountID = try r.readString(field: 1) } else { try r.skip(wt) }
        }
    }
    public var encodedSize: Int { ProtoSize.string(1, accountID) }
    public func encode(to w: inout ProtoWriter) { w.string(1, accountID) }
}

/// billing.v1.Grant: access an operator gave without a purchase.
public struct Grant: ProtoMessage, Equatable {
    public var grantID = ""
    public var accountID = ""
    public var productID = ""
    public var startTimeMs: Int64 = 0
    /// 0: no end.
    public var expiresTimeMs: Int64 = 0
    public var revocationTimeMs: Int64 = 0
    public var reason = ""
    public var operatorName = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); grantID = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); accountID = try r.readString(field: 2)
            case 3: try expect(wt, .lengthDelimited, field: 3); productID = try r.readString(field: 3)
            case 4: try expect(wt, .varint, field: 4); startTimeMs = try r.readInt64()
            case 5: try expect(wt, .varint, field: 5); expiresTimeMs = try r.readInt64()
            case 6: try expect(wt, .varint, field: 6); revocationTimeMs = try r.readInt64()
            case 7: try expect(wt, .lengthDelimited, field: 7); reason = try r.readString(field: 7)
            case 8: try expect(wt, .lengthDelimited, field: 8); operatorName = try r.readString(field: 8)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, grantID) + ProtoSize.string(2, accountID) + ProtoSize.string(3, productID) + ProtoSize.int64(4, startTimeMs)
            + ProtoSize.int64(5, expiresTimeMs) + ProtoSize.int64(6, revocationTimeMs) + ProtoSize.string(7, reason)
            + ProtoSize.string(8, operatorName)
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, grantID); w.string(2, accountID); w.string(3, productID); w.int64(4, startTimeMs)
        w.int64(5, expiresTimeMs); w.int64(6, revocationTimeMs); w.string(7, reason); w.string(8, operatorName)
    }
}

/// billing.v1.GetCustomerResponse: the summary, every entitlement (inactive ones too) and the grants.
public struct GetCustomerResponse: ProtoMessage, Equatable {
    public var customer: CustomerSummary?
    public var entitlements: [Entitlement] = []
    public var grants: [Grant] = []

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); customer = try r.readMessage(CustomerSummary.self)
            case 2: try expect(wt, .lengthDelimited, field: 2); entitlements.append(try r.readMessage(Entitlement.self))
            case 3: try expect(wt, .lengthDelimited, field: 3); grants.append(try r.readMessage(Grant.self))
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        (customer.map { ProtoSize.message(1, $0) } ?? 0) + entitlements.reduce(0) { $0 + ProtoSize.message(2, $1) }
            + grants.reduce(0) { $0 + ProtoSize.message(3, $1) }
    }
    public func encode(to w: inout ProtoWriter) {
        if let customer { w.message(1, customer) }
        for e in entitlements { w.message(2, e) }
        for g in grants { w.message(3, g) }
    }
}

/// billing.v1.AuditEntry: one operator call.
public struct AuditEntry: ProtoMessage, Equatable {
    public var auditID = ""
    public var timeMs: Int64 = 0
    public var operatorName = ""
    public var method = ""
    public var accountID = ""
    public var target = ""
    public var reason = ""
    public var outcome = ""
    public var requestJSON = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); auditID = try r.readString(field: 1)
            case 2: try expect(wt, .varint, field: 2); timeMs = try r.readInt64()
            case 3: try expect(wt, .lengthDelimited, field: 3); operatorName = try r.readString(field: 3)
            case 4: try expect(wt, .lengthDelimited, field: 4); method = try r.readString(field: 4)
            case 5: try expect(wt, .lengthDelimited, field: 5); accountID = try r.readString(field: 5)
            case 6: try expect(wt, .lengthDelimited, field: 6); target = try r.readString(field: 6)
            case 7: try expect(wt, .lengthDelimited, field: 7); reason = try r.readString(field: 7)
            case 8: try expect(wt, .lengthDelimited, field: 8); outcome = try r.readString(field: 8)
            case 9: try expect(wt, .lengthDelimited, field: 9); requestJSON = try r.readString(field: 9)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, auditID) + ProtoSize.int64(2, timeMs) + ProtoSize.string(3, operatorName) + ProtoSize.string(4, method)
            + ProtoSize.string(5, accountID) + ProtoSize.string(6, target) + ProtoSize.string(7, reason)
            + ProtoSize.string(8, outcome) + ProtoSize.string(9, requestJSON)
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, auditID); w.int64(2, timeMs); w.string(3, operatorName); w.string(4, method)
        w.string(5, accountID); w.string(6, target); w.string(7, reason); w.string(8, outcome); w.string(9, requestJSON)
    }
}

/// billing.v1.ListAuditEntriesRequest: optional filters, one page.
public struct ListAuditEntriesRequest: ProtoMessage, Equatable {
    public var accountID = ""
    public var operatorName = ""
    public var method = ""
    public var sinceTimeMs: Int64 = 0
    public var untilTimeMs: Int64 = 0
    /// 0 means 100; larger than 1000 means 1000.
    public var limit: Int32 = 0
    public var pageToken = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); accountID = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); operatorName = try r.readString(field: 2)
            case 3: try expect(wt, .lengthDelimited, field: 3); method = try r.readString(field: 3)
            case 4: try expect(wt, .varint, field: 4); sinceTimeMs = try r.readInt64()
            case 5: try expect(wt, .varint, field: 5); untilTimeMs = try r.readInt64()
            case 6: try expect(wt, .varint, field: 6); limit = try r.readInt32(field: 6)
            case 7: try expect(wt, .lengthDelimited, field: 7); pageToken = try r.readString(field: 7)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, accountID) + ProtoSize.string(2, operatorName) + ProtoSize.string(3, method)
            + ProtoSize.int64(4, sinceTimeMs) + ProtoSize.int64(5, untilTimeMs) + ProtoSize.int32(6, limit) + ProtoSize.string(7, pageToken)
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, accountID); w.string(2, operatorName); w.string(3, method)
        w.int64(4, sinceTimeMs); w.int64(5, untilTimeMs); w.int32(6, limit); w.string(7, pageToken)
    }
}

/// billing.v1.ListAuditEntriesResponse: newest first.
public struct ListAuditEntriesResponse: ProtoMessage, Equatable {
    public var entries: [AuditEntry] = []
    /// Empty on the last page.
    public var nextPageToken = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); entries.append(try r.readMessage(AuditEntry.self))
            case 2: try expect(wt, .lengthDelimited, field: 2); nextPageToken = try r.readString(field: 2)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int { entries.reduce(0) { $0 + ProtoSize.message(1, $1) } + ProtoSize.string(2, nextPageToken) }
    public func encode(to w: inout ProtoWriter) {
        for e in entries { w.message(1, e) }
        w.string(2, nextPageToken)
    }
}
