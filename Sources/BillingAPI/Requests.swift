public import ProtoWire

/// billing.v1.CreateOrderRequest.
public struct CreateOrderRequest: ProtoMessage, Equatable {
    public var accountID = ""
    public var productID = ""
    public var idempotencyKey = ""
    public var quantity: Int32 = 0

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); accountID = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); productID = try r.readString(field: 2)
            case 3: try expect(wt, .lengthDelimited, field: 3); idempotencyKey = try r.readString(field: 3)
            case 4: try expect(wt, .varint, field: 4); quantity = try r.readInt32(field: 4)
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int {
        ProtoSize.string(1, accountID) + ProtoSize.string(2, productID) + ProtoSize.string(3, idempotencyKey)
            + ProtoSize.int32(4, quantity)
    }

    public func encode(to w: inout ProtoWriter) {
        w.string(1, accountID); w.string(2, productID); w.string(3, idempotencyKey); w.int32(4, quantity)
    }
}

/// A response that carries one optional `Order` in field 1 (CreateOrder and GetOrder answers).
public protocol OrderEnvelope: ProtoMessage {
    var order: Order? { get set }
}

extension OrderEnvelope {
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            if field == 1 {
                try expect(wt, .lengthDelimited, field: 1)
                order = try r.readMessage(Order.self)
            } else {
                try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int { order.map { ProtoSize.message(1, $0) } ?? 0 }
    public func encode(to w: inout ProtoWriter) { if let order { w.message(1, order) } }
}

/// billing.v1.CreateOrderResponse.
public struct CreateOrderResponse: OrderEnvelope, Equatable {
    public var order: Order?
    public init() {}
    public init(order: Order) { self.order = order }
}

/// billing.v1.GetOrderResponse.
public struct GetOrderResponse: OrderEnvelope, Equatable {
    public var order: Order?
    public init() {}
    public init(order: Order) { self.order = order }
}

/// billing.v1.GetOrderRequest.
public struct GetOrderRequest: ProtoMessage, Equatable {
    public var orderID = ""
    public init() {}
    public init(orderID: String) { self.orderID = orderID }
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            if field == 1 { try expect(wt, .lengthDelimited, field: 1); orderID = try r.readString(field: 1) } else { try r.skip(wt) }
        }
    }
    public var encodedSize: Int { ProtoSize.string(1, orderID) }
    public func encode(to w: inout ProtoWriter) { w.string(1, orderID) }
}

/// billing.v1.GooglePlayPurchase: a purchase as the app's Play Billing Library hands it over.
public struct GooglePlayPurchase: ProtoMessage, Equatable, Sendable {
    public var packageName = ""
    /// The in-app product id, or the subscription id.
    public var productID = ""
    public var purchaseToken = ""

    public init() {}
    public init(packageName: String, productID: String, purchaseToken: String) {
        self.packageName = packageName
        self.productID = productID
        self.purchaseToken = purchaseToken
    }

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); packageName = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); productID = try r.readString(field: 2)
            case 3: try expect(wt, .lengthDelimited, field: 3); purchaseToken = try r.readString(field: 3)
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int { ProtoSize.string(1, packageName) + ProtoSize.string(2, productID) + ProtoSize.string(3, purchaseToken) }
    public func encode(to w: inout ProtoWriter) { w.string(1, packageName); w.string(2, productID); w.string(3, purchaseToken) }
}

/// billing.v1.SubmitReceiptRequest.
public struct SubmitReceiptRequest: ProtoMessage, Equatable {
    /// The `proof` oneof.
    public enum Proof: Equatable, Sendable {
        case signedTransaction(String)
        case appReceipt(String)
        case googlePlay(GooglePlayPurchase)
    }
    public var orderID = ""
    public var proof: Proof?
    public var transactionID = ""
    public var sandbox = false

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); orderID = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); proof = .signedTransaction(try r.readString(field: 2))
            case 3: try expect(wt, .lengthDelimited, field: 3); proof = .appReceipt(try r.readString(field: 3))
            case 4: try expect(wt, .lengthDelimited, field: 4); transactionID = try r.readString(field: 4)
            case 5: try expect(wt, .varint, field: 5); sandbox = try r.readBool()
            case 6: try expect(wt, .lengthDelimited, field: 6); proof = .googlePlay(try r.readMessage(GooglePlayPurchase.self))
            default: try r.skip(wt)
            }
        }
    }

    /// A oneof member is written even when empty, so its presence survives.
    private func proofSize() -> Int {
        switch proof {
        case .signedTransaction(let s): ProtoWriter.tagSize(2) + ProtoWriter.varintSize(UInt64(s.utf8.count)) + s.utf8.count
        case .appReceipt(let s): ProtoWriter.tagSize(3) + ProtoWriter.varintSize(UInt64(s.utf8.count)) + s.utf8.count
        case .googlePlay(let p): ProtoSize.message(6, p)
        case nil: 0
        }
    }

    public var encodedSize: Int {
        ProtoSize.string(1, orderID) + proofSize() + ProtoSize.string(4, transactionID) + ProtoSize.bool(5, sandbox)
    }

    public func encode(to w: inout ProtoWriter) {
        w.string(1, orderID)
        switch proof {
        case .signedTransaction(let s):
            w.writeTag(2, .lengthDelimited); w.writeVarint(UInt64(s.utf8.count)); w.writeRaw(s.utf8)
        case .appReceipt(let s):
            w.writeTag(3, .lengthDelimited); w.writeVarint(UInt64(s.utf8.count)); w.writeRaw(s.utf8)
        case .googlePlay, nil: break
        }
        w.string(4, transactionID); w.bool(5, sandbox)
        // Fields in number order, as Python protobuf writes them: the message member comes last.
        if case .googlePlay(let p) = proof { w.message(6, p) }
    }
}

/// billing.v1.SubmitReceiptResponse.
public struct SubmitReceiptResponse: ProtoMessage, Equatable {
    public var order: Order?
    public var transaction: Transaction?
    public var alreadyProcessed = false

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); order = try r.readMessage(Order.self)
            case 2: try expect(wt, .lengthDelimited, field: 2); transaction = try r.readMessage(Transaction.self)
            case 3: try expect(wt, .varint, field: 3); alreadyProcessed = try r.readBool()
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int {
        (order.map { ProtoSize.message(1, $0) } ?? 0) + (transaction.map { ProtoSize.message(2, $0) } ?? 0)
            + ProtoSize.bool(3, alreadyProcessed)
    }

    public func encode(to w: inout ProtoWriter) {
        if let order { w.message(1, order) }
        if let transaction { w.message(2, transaction) }
        w.bool(3, alreadyProcessed)
    }
}

/// billing.v1.RestorePurchasesRequest.
public struct RestorePurchasesRequest: ProtoMessage, Equatable {
    public var accountID = ""
    public var appReceipt = ""
    public var signedTransactions: [String] = []
    public var transactionIDs: [String] = []
    public var googlePlayPurchases: [GooglePlayPurchase] = []

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); accountID = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); appReceipt = try r.readString(field: 2)
            case 3: try expect(wt, .lengthDelimited, field: 3); signedTransactions.append(try r.readString(field: 3))
            case 4: try expect(wt, .lengthDelimited, field: 4); transactionIDs.append(try r.readString(field: 4))
            case 5: try expect(wt, .lengthDelimited, field: 5); googlePlayPurchases.append(try r.readMessage(GooglePlayPurchase.self))
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int {
        var n = ProtoSize.string(1, accountID) + ProtoSize.string(2, appReceipt)
        for s in signedTransactions { n += ProtoWriter.tagSize(3) + ProtoWriter.varintSize(UInt64(s.utf8.count)) + s.utf8.count }
        for s in transactionIDs { n += ProtoWriter.tagSize(4) + ProtoWriter.varintSize(UInt64(s.utf8.count)) + s.utf8.count }
        for p in googlePlayPurchases { n += ProtoSize.message(5, p) }
        return n
    }

    public func encode(to w: inout ProtoWriter) {
        w.string(1, accountID); w.string(2, appReceipt)
        // Repeated strings keep empty elements.
        for s in signedTransactions { w.writeTag(3, .lengthDelimited); w.writeVarint(UInt64(s.utf8.count)); w.writeRaw(s.utf8) }
        for s in transactionIDs { w.writeTag(4, .lengthDelimited); w.writeVarint(UInt64(s.utf8.count)); w.writeRaw(s.utf8) }
        for p in googlePlayPurchases { w.message(5, p) }
    }
}

/// A response that is a list of entitlements in field 1 (RestorePurchases and GetEntitlements answers).
public protocol EntitlementList: ProtoMessage {
    var entitlements: [Entitlement] { get set }
}

extension EntitlementList {
    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            if field == 1 {
                try expect(wt, .lengthDelimited, field: 1)
                entitlements.append(try r.readMessage(Entitlement.self))
            } else {
                try r.skip(wt)
            }
        }
    }
    public var encodedSize: Int { entitlements.reduce(0) { $0 + ProtoSize.message(1, $1) } }
    public func encode(to w: inout ProtoWriter) { for e in entitlements { w.message(1, e) } }
}

/// billing.v1.RestorePurchasesResponse.
public struct RestorePurchasesResponse: EntitlementList, Equatable {
    public var entitlements: [Entitlement] = []
    public init() {}
}
