public import ProtoWire

// billing.v1.Support: the messages of the calls that explain and change an account. Field numbers are the
// contract's (schemas/billing/v1/billing.proto).

/// billing.v1.ExplainAccessRequest: why an account has, or lacks, access.
public struct ExplainAccessRequest: ProtoMessage, Equatable {
    public var accountID = ""
    public var productID = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); accountID = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); productID = try r.readString(field: 2)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, accountID)
            + ProtoSize.string(2, productID)
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, accountID)
        w.string(2, productID)
    }
}

/// billing.v1.AccessFact: one entitlement that could give access, with the fact that decides it.
public struct AccessFact: ProtoMessage, Equatable {
    public var productID = ""
    public var store = Store.unspecified
    public var originalTransactionID = ""
    public var transactionID = ""
    public var state = EntitlementState.unspecified
    public var grantsAccess = false
    public var reason = AccessReason.unspecified
    public var untilTimeMs: Int64 = 0
    public var why = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); productID = try r.readString(field: 1)
            case 2: try expect(wt, .varint, field: 2); store = Store(rawValue: try r.readEnum(field: 2))
            case 3: try expect(wt, .lengthDelimited, field: 3); originalTransactionID = try r.readString(field: 3)
            case 4: try expect(wt, .lengthDelimited, field: 4); transactionID = try r.readString(field: 4)
            case 5: try expect(wt, .varint, field: 5); state = EntitlementState(rawValue: try r.readEnum(field: 5))
            case 6: try expect(wt, .varint, field: 6); grantsAccess = try r.readBool()
            case 7: try expect(wt, .varint, field: 7); reason = AccessReason(rawValue: try r.readEnum(field: 7))
            case 8: try expect(wt, .varint, field: 8); untilTimeMs = try r.readInt64()
            case 9: try expect(wt, .lengthDelimited, field: 9); why = try r.readString(field: 9)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, productID)
            + ProtoSize.int32(2, store.rawValue)
            + ProtoSize.string(3, originalTransactionID)
            + ProtoSize.string(4, transactionID)
            + ProtoSize.int32(5, state.rawValue)
            + ProtoSize.bool(6, grantsAccess)
            + ProtoSize.int32(7, reason.rawValue)
            + ProtoSize.int64(8, untilTimeMs)
            + ProtoSize.string(9, why)
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, productID)
        w.int32(2, store.rawValue)
        w.string(3, originalTransactionID)
        w.string(4, transactionID)
        w.int32(5, state.rawValue)
        w.bool(6, grantsAccess)
        w.int32(7, reason.rawValue)
        w.int64(8, untilTimeMs)
        w.string(9, why)
    }
}

/// billing.v1.ExplainAccessResponse: the facts, the granting ones first.
public struct ExplainAccessResponse: ProtoMessage, Equatable {
    public var hasAccess = false
    public var facts: [AccessFact] = []

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .varint, field: 1); hasAccess = try r.readBool()
            case 2: try expect(wt, .lengthDelimited, field: 2); facts.append(try r.readMessage(AccessFact.self))
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.bool(1, hasAccess)
            + facts.reduce(0) { $0 + ProtoSize.message(2, $1) }
    }
    public func encode(to w: inout ProtoWriter) {
        w.bool(1, hasAccess)
        for m in facts { w.message(2, m) }
    }
}

/// billing.v1.GrantEntitlementRequest: access without a purchase.
public struct GrantEntitlementRequest: ProtoMessage, Equatable {
    public var accountID = ""
    public var productID = ""
    public var expiresTimeMs: Int64 = 0
    public var durationSeconds: Int64 = 0
    public var reason = ""
    public var idempotencyKey = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); accountID = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); productID = try r.readString(field: 2)
            case 3: try expect(wt, .varint, field: 3); expiresTimeMs = try r.readInt64()
            case 4: try expect(wt, .varint, field: 4); durationSeconds = try r.readInt64()
            case 5: try expect(wt, .lengthDelimited, field: 5); reason = try r.readString(field: 5)
            case 6: try expect(wt, .lengthDelimited, field: 6); idempotencyKey = try r.readString(field: 6)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, accountID)
            + ProtoSize.string(2, productID)
            + ProtoSize.int64(3, expiresTimeMs)
            + ProtoSize.int64(4, durationSeconds)
            + ProtoSize.string(5, reason)
            + ProtoSize.string(6, idempotencyKey)
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, accountID)
        w.string(2, productID)
        w.int64(3, expiresTimeMs)
        w.int64(4, durationSeconds)
        w.string(5, reason)
        w.string(6, idempotencyKey)
    }
}

/// billing.v1.GrantEntitlementResponse: the grant and its entitlement.
public struct GrantEntitlementResponse: ProtoMessage, Equatable {
    public var grant: Grant?
    public var entitlement: Entitlement?

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); grant = try r.readMessage(Grant.self)
            case 2: try expect(wt, .lengthDelimited, field: 2); entitlement = try r.readMessage(Entitlement.self)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        (grant.map { ProtoSize.message(1, $0) } ?? 0)
            + (entitlement.map { ProtoSize.message(2, $0) } ?? 0)
    }
    public func encode(to w: inout ProtoWriter) {
        if let grant { w.message(1, grant) }
        if let entitlement { w.message(2, entitlement) }
    }
}

/// billing.v1.RevokeGrantRequest: ends a grant now.
public struct RevokeGrantRequest: ProtoMessage, Equatable {
    public var grantID = ""
    public var reason = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); grantID = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); reason = try r.readString(field: 2)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, grantID)
            + ProtoSize.string(2, reason)
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, grantID)
        w.string(2, reason)
    }
}

/// billing.v1.RevokeGrantResponse: the grant and its entitlement after.
public struct RevokeGrantResponse: ProtoMessage, Equatable {
    public var grant: Grant?
    public var entitlement: Entitlement?

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); grant = try r.readMessage(Grant.self)
            case 2: try expect(wt, .lengthDelimited, field: 2); entitlement = try r.readMessage(Entitlement.self)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        (grant.map { ProtoSize.message(1, $0) } ?? 0)
            + (entitlement.map { ProtoSize.message(2, $0) } ?? 0)
    }
    public func encode(to w: inout ProtoWriter) {
        if let grant { w.message(1, grant) }
        if let entitlement { w.message(2, entitlement) }
    }
}
