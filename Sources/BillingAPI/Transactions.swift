public import ProtoWire

/// billing.v1.ListTransactionsRequest: one page of an account's purchase history.
public struct ListTransactionsRequest: ProtoMessage, Equatable {
    /// Required.
    public var accountID = ""
    /// 0 means 100; larger than 1000 means 1000.
    public var limit: Int32 = 0
    /// From the previous answer; empty for the first page.
    public var pageToken = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); accountID = try r.readString(field: 1)
            case 2: try expect(wt, .varint, field: 2); limit = try r.readInt32(field: 2)
            case 3: try expect(wt, .lengthDelimited, field: 3); pageToken = try r.readString(field: 3)
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int { ProtoSize.string(1, accountID) + ProtoSize.int32(2, limit) + ProtoSize.string(3, pageToken) }
    public func encode(to w: inout ProtoWriter) { w.string(1, accountID); w.int32(2, limit); w.string(3, pageToken) }
}

/// billing.v1.ListTransactionsResponse: newest purchase first.
public struct ListTransactionsResponse: ProtoMessage, Equatable {
    public var transactions: [Transaction] = []
    /// Empty on the last page.
    public var nextPageToken = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); transactions.append(try r.readMessage(Transaction.self))
            case 2: try expect(wt, .lengthDelimited, field: 2); nextPageToken = try r.readString(field: 2)
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int { transactions.reduce(0) { $0 + ProtoSize.message(1, $1) } + ProtoSize.string(2, nextPageToken) }
    public func encode(to w: inout ProtoWriter) {
        for t in transactions { w.message(1, t) }
        w.string(2, nextPageToken)
    }
}

/// billing.v1.GetTransactionRequest.
public struct GetTransactionRequest: ProtoMessage, Equatable {
    /// A transaction id, or an original transaction id (its newest transaction answers).
    public var transactionID = ""

    public init() {}
    public init(transactionID: String) { self.transactionID = transactionID }

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            if field == 1 { try expect(wt, .lengthDelimited, field: 1); transactionID = try r.readString(field: 1) } else { try r.skip(wt) }
        }
    }
    public var encodedSize: Int { ProtoSize.string(1, transactionID) }
    public func encode(to w: inout ProtoWriter) { w.string(1, transactionID) }
}

/// billing.v1.GetTransactionResponse: the transaction, who owns it and the order it paid.
public struct GetTransactionResponse: ProtoMessage, Equatable {
    public var transaction: Transaction?
    /// Empty when no account owns it yet.
    public var accountID = ""
    /// The order it paid, when any.
    public var order: Order?

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); transaction = try r.readMessage(Transaction.self)
            case 2: try expect(wt, .lengthDelimited, field: 2); accountID = try r.readString(field: 2)
            case 3: try expect(wt, .lengthDelimited, field: 3); order = try r.readMessage(Order.self)
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int {
        (transaction.map { ProtoSize.message(1, $0) } ?? 0) + ProtoSize.string(2, accountID) + (order.map { ProtoSize.message(3, $0) } ?? 0)
    }

    public func encode(to w: inout ProtoWriter) {
        if let transaction { w.message(1, transaction) }
        w.string(2, accountID)
        if let order { w.message(3, order) }
    }
}
