public import ProtoWire

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
