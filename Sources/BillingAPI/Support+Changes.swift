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

/// billing.v1.TransferPurchasesRequest: moves store purchases to another account.
public struct TransferPurchasesRequest: ProtoMessage, Equatable {
    public var fromAccountID = ""
    public var toAccountID = ""
    public var originalTransactionIDs: [String] = []
    public var reason = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); fromAccountID = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); toAccountID = try r.readString(field: 2)
            case 3: try expect(wt, .lengthDelimited, field: 3); originalTransactionIDs.append(try r.readString(field: 3))
            case 4: try expect(wt, .lengthDelimited, field: 4); reason = try r.readString(field: 4)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, fromAccountID)
            + ProtoSize.string(2, toAccountID)
            + originalTransactionIDs.reduce(0) { $0 + ProtoWriter.tagSize(3) + ProtoWriter.varintSize(UInt64($1.utf8.count)) + $1.utf8.count }
            + ProtoSize.string(4, reason)
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, fromAccountID)
        w.string(2, toAccountID)
        for s in originalTransactionIDs { w.writeTag(3, .lengthDelimited); w.writeVarint(UInt64(s.utf8.count)); w.writeRaw(s.utf8) }
        w.string(4, reason)
    }
}

/// billing.v1.TransferPurchasesResponse: what moved, and the receiving account's entitlements.
public struct TransferPurchasesResponse: ProtoMessage, Equatable {
    public var transferred: Int32 = 0
    public var entitlements: [Entitlement] = []

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .varint, field: 1); transferred = try r.readInt32(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); entitlements.append(try r.readMessage(Entitlement.self))
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.int32(1, transferred)
            + entitlements.reduce(0) { $0 + ProtoSize.message(2, $1) }
    }
    public func encode(to w: inout ProtoWriter) {
        w.int32(1, transferred)
        for m in entitlements { w.message(2, m) }
    }
}

/// billing.v1.RefundPurchaseRequest: refunds a purchase through its store.
public struct RefundPurchaseRequest: ProtoMessage, Equatable {
    public var transactionID = ""
    public var revokeAccess = false
    public var reason = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); transactionID = try r.readString(field: 1)
            case 2: try expect(wt, .varint, field: 2); revokeAccess = try r.readBool()
            case 3: try expect(wt, .lengthDelimited, field: 3); reason = try r.readString(field: 3)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, transactionID)
            + ProtoSize.bool(2, revokeAccess)
            + ProtoSize.string(3, reason)
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, transactionID)
        w.bool(2, revokeAccess)
        w.string(3, reason)
    }
}

/// billing.v1.RefundPurchaseResponse: the transaction as recorded after the refund, and its order.
public struct RefundPurchaseResponse: ProtoMessage, Equatable {
    public var transaction: Transaction?
    public var order: Order?

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); transaction = try r.readMessage(Transaction.self)
            case 2: try expect(wt, .lengthDelimited, field: 2); order = try r.readMessage(Order.self)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        (transaction.map { ProtoSize.message(1, $0) } ?? 0)
            + (order.map { ProtoSize.message(2, $0) } ?? 0)
    }
    public func encode(to w: inout ProtoWriter) {
        if let transaction { w.message(1, transaction) }
        if let order { w.message(2, order) }
    }
}

/// billing.v1.DeleteCustomerRequest: erases an account.
public struct DeleteCustomerRequest: ProtoMessage, Equatable {
    public var accountID = ""
    public var reason = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); accountID = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); reason = try r.readString(field: 2)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, accountID)
            + ProtoSize.string(2, reason)
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, accountID)
        w.string(2, reason)
    }
}

/// billing.v1.DeleteCustomerResponse: the pseudonym and the records rewritten.
public struct DeleteCustomerResponse: ProtoMessage, Equatable {
    public var pseudonym = ""
    public var orders: Int32 = 0
    public var transactions: Int32 = 0
    public var events: Int32 = 0

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); pseudonym = try r.readString(field: 1)
            case 2: try expect(wt, .varint, field: 2); orders = try r.readInt32(field: 2)
            case 3: try expect(wt, .varint, field: 3); transactions = try r.readInt32(field: 3)
            case 4: try expect(wt, .varint, field: 4); events = try r.readInt32(field: 4)
            default: try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int {
        ProtoSize.string(1, pseudonym)
            + ProtoSize.int32(2, orders)
            + ProtoSize.int32(3, transactions)
            + ProtoSize.int32(4, events)
    }
    public func encode(to w: inout ProtoWriter) {
        w.string(1, pseudonym)
        w.int32(2, orders)
        w.int32(3, transactions)
        w.int32(4, events)
    }
}
