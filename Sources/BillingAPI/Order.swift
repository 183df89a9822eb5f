public import ProtoWire

/// billing.v1.Order.
public struct Order: ProtoMessage, Equatable {
    public var orderID = ""
    public var accountID = ""
    public var productID = ""
    public var state = OrderState.unspecified
    public var createTimeMs: Int64 = 0
    public var updateTimeMs: Int64 = 0
    public var transactionID = ""
    public var environment = Environment.unspecified
    public var quantity: Int32 = 0
    /// Units refunded so far (prorated refunds); `quantity` once REFUNDED.
    public var refundedQuantity: Int32 = 0
    /// The store of the transaction that completed it.
    public var store = Store.unspecified

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); orderID = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); accountID = try r.readString(field: 2)
            case 3: try expect(wt, .lengthDelimited, field: 3); productID = try r.readString(field: 3)
            case 4: try expect(wt, .varint, field: 4); state = OrderState(rawValue: try r.readEnum(field: 4))
            case 5: try expect(wt, .varint, field: 5); createTimeMs = try r.readInt64()
            case 6: try expect(wt, .varint, field: 6); updateTimeMs = try r.readInt64()
            case 7: try expect(wt, .lengthDelimited, field: 7); transactionID = try r.readString(field: 7)
            case 8: try expect(wt, .varint, field: 8); environment = Environment(rawValue: try r.readEnum(field: 8))
            case 9: try expect(wt, .varint, field: 9); quantity = try r.readInt32(field: 9)
            case 10: try expect(wt, .varint, field: 10); refundedQuantity = try r.readInt32(field: 10)
            case 11: try expect(wt, .varint, field: 11); store = Store(rawValue: try r.readEnum(field: 11))
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int {
        ProtoSize.string(1, orderID) + ProtoSize.string(2, accountID) + ProtoSize.string(3, productID)
            + ProtoSize.int32(4, state.rawValue) + ProtoSize.int64(5, createTimeMs) + ProtoSize.int64(6, updateTimeMs)
            + ProtoSize.string(7, transactionID) + ProtoSize.int32(8, environment.rawValue) + ProtoSize.int32(9, quantity)
            + ProtoSize.int32(10, refundedQuantity) + ProtoSize.int32(11, store.rawValue)
    }

    public func encode(to w: inout ProtoWriter) {
        w.string(1, orderID); w.string(2, accountID); w.string(3, productID)
        w.int32(4, state.rawValue); w.int64(5, createTimeMs); w.int64(6, updateTimeMs)
        w.string(7, transactionID); w.int32(8, environment.rawValue); w.int32(9, quantity)
        w.int32(10, refundedQuantity); w.int32(11, store.rawValue)
    }
}

/// billing.v1.Transaction.
public struct Transaction: ProtoMessage, Equatable {
    public var transactionID = ""
    public var originalTransactionID = ""
    public var productID = ""
    public var productType = ProductType.unspecified
    public var purchaseTimeMs: Int64 = 0
    public var expiresTimeMs: Int64 = 0
    public var revocationTimeMs: Int64 = 0
    public var quantity: Int32 = 0
    public var environment = Environment.unspecified
    public var appAccountToken = ""
    /// App Store bundle id, or Google Play package name.
    public var bundleID = ""
    public var store = Store.unspecified
    public var ownership = Ownership.unspecified
    /// What the customer paid, in thousandths of the currency unit; 0 when unknown.
    public var priceMilliunits: Int64 = 0
    /// ISO 4217; empty when unknown.
    public var currency = ""
    /// ISO 3166-1 alpha-3 country of the store account; empty when unknown.
    public var storefront = ""
    public var offerID = ""
    /// The store's offer type name (App Store: INTRODUCTORY_OFFER, PROMOTIONAL_OFFER, OFFER_CODE, WIN_BACK_OFFER).
    public var offerType = ""
    public var subscriptionGroupID = ""
    /// Superseded at once by an upgrade in its subscription group.
    public var upgraded = false
    public var revocationType = RevocationType.unspecified
    /// Prorated refunds: the refunded share in thousandths of a percent (33333 = 33.333%).
    public var revocationPercentage: Int32 = 0
    /// The store's reason, when it gives one.
    public var revocationReason = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); transactionID = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); originalTransactionID = try r.readString(field: 2)
            case 3: try expect(wt, .lengthDelimited, field: 3); productID = try r.readString(field: 3)
            case 4: try expect(wt, .varint, field: 4); productType = ProductType(rawValue: try r.readEnum(field: 4))
            case 5: try expect(wt, .varint, field: 5); purchaseTimeMs = try r.readInt64()
            case 6: try expect(wt, .varint, field: 6); expiresTimeMs = try r.readInt64()
            case 7: try expect(wt, .varint, field: 7); revocationTimeMs = try r.readInt64()
            case 8: try expect(wt, .varint, field: 8); quantity = try r.readInt32(field: 8)
            case 9: try expect(wt, .varint, field: 9); environment = Environment(rawValue: try r.readEnum(field: 9))
            case 10: try expect(wt, .lengthDelimited, field: 10); appAccountToken = try r.readString(field: 10)
            case 11: try expect(wt, .lengthDelimited, field: 11); bundleID = try r.readString(field: 11)
            case 12: try expect(wt, .varint, field: 12); store = Store(rawValue: try r.readEnum(field: 12))
            case 13: try expect(wt, .varint, field: 13); ownership = Ownership(rawValue: try r.readEnum(field: 13))
            case 14: try expect(wt, .varint, field: 14); priceMilliunits = try r.readInt64()
            case 15: try expect(wt, .lengthDelimited, field: 15); currency = try r.readString(field: 15)
            case 16: try expect(wt, .lengthDelimited, field: 16); storefront = try r.readString(field: 16)
            case 17: try expect(wt, .lengthDelimited, field: 17); offerID = try r.readString(field: 17)
            case 18: try expect(wt, .lengthDelimited, field: 18); offerType = try r.readString(field: 18)
            case 19: try expect(wt, .lengthDelimited, field: 19); subscriptionGroupID = try r.readString(field: 19)
            case 20: try expect(wt, .varint, field: 20); upgraded = try r.readBool()
            case 21: try expect(wt, .varint, field: 21); revocationType = RevocationType(rawValue: try r.readEnum(field: 21))
            case 22: try expect(wt, .varint, field: 22); revocationPercentage = try r.readInt32(field: 22)
            case 23: try expect(wt, .lengthDelimited, field: 23); revocationReason = try r.readString(field: 23)
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int {
        ProtoSize.string(1, transactionID) + ProtoSize.string(2, originalTransactionID) + ProtoSize.string(3, productID)
            + ProtoSize.int32(4, productType.rawValue) + ProtoSize.int64(5, purchaseTimeMs) + ProtoSize.int64(6, expiresTimeMs)
            + ProtoSize.int64(7, revocationTimeMs) + ProtoSize.int32(8, quantity) + ProtoSize.int32(9, environment.rawValue)
            + ProtoSize.string(10, appAccountToken) + ProtoSize.string(11, bundleID) + ProtoSize.int32(12, store.rawValue)
            + ProtoSize.int32(13, ownership.rawValue) + ProtoSize.int64(14, priceMilliunits) + ProtoSize.string(15, currency)
            + ProtoSize.string(16, storefront) + ProtoSize.string(17, offerID) + ProtoSize.string(18, offerType)
            + ProtoSize.string(19, subscriptionGroupID) + ProtoSize.bool(20, upgraded) + ProtoSize.int32(21, revocationType.rawValue)
            + ProtoSize.int32(22, revocationPercentage) + ProtoSize.string(23, revocationReason)
    }

    public func encode(to w: inout ProtoWriter) {
        w.string(1, transactionID); w.string(2, originalTransactionID); w.string(3, productID)
        w.int32(4, productType.rawValue); w.int64(5, purchaseTimeMs); w.int64(6, expiresTimeMs)
        w.int64(7, revocationTimeMs); w.int32(8, quantity); w.int32(9, environment.rawValue)
        w.string(10, appAccountToken); w.string(11, bundleID); w.int32(12, store.rawValue)
        w.int32(13, ownership.rawValue); w.int64(14, priceMilliunits); w.string(15, currency)
        w.string(16, storefront); w.string(17, offerID); w.string(18, offerType)
        w.string(19, subscriptionGroupID); w.bool(20, upgraded); w.int32(21, revocationType.rawValue)
        w.int32(22, revocationPercentage); w.string(23, revocationReason)
    }
}

/// billing.v1.Entitlement.
public struct Entitlement: ProtoMessage, Equatable {
    public var productID = ""
    public var productType = ProductType.unspecified
    public var originalTransactionID = ""
    public var latestTransactionID = ""
    public var purchaseTimeMs: Int64 = 0
    public var expiresTimeMs: Int64 = 0
    public var active = false
    public var orderID = ""
    public var revocationTimeMs: Int64 = 0
    public var gracePeriodExpiresTimeMs: Int64 = 0
    public var autoRenew = false
    public var environment = Environment.unspecified
    /// `active` is true exactly for ACTIVE and GRACE_PERIOD.
    public var state = EntitlementState.unspecified
    public var ownership = Ownership.unspecified
    public var store = Store.unspecified
    public var subscriptionGroupID = ""
    /// The product the subscription renews into when it differs from `productID`; empty otherwise.
    public var pendingProductID = ""
    /// STORE_GRANT: the grant (also its original transaction id).
    public var grantID = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); productID = try r.readString(field: 1)
            case 2: try expect(wt, .varint, field: 2); productType = ProductType(rawValue: try r.readEnum(field: 2))
            case 3: try expect(wt, .lengthDelimited, field: 3); originalTransactionID = try r.readString(field: 3)
            case 4: try expect(wt, .lengthDelimited, field: 4); latestTransactionID = try r.readString(field: 4)
            case 5: try expect(wt, .varint, field: 5); purchaseTimeMs = try r.readInt64()
            case 6: try expect(wt, .varint, field: 6); expiresTimeMs = try r.readInt64()
            case 7: try expect(wt, .varint, field: 7); active = try r.readBool()
            case 8: try expect(wt, .lengthDelimited, field: 8); orderID = try r.readString(field: 8)
            case 9: try expect(wt, .varint, field: 9); revocationTimeMs = try r.readInt64()
            case 10: try expect(wt, .varint, field: 10); gracePeriodExpiresTimeMs = try r.readInt64()
            case 11: try expect(wt, .varint, field: 11); autoRenew = try r.readBool()
            case 12: try expect(wt, .varint, field: 12); environment = Environment(rawValue: try r.readEnum(field: 12))
            case 13: try expect(wt, .varint, field: 13); state = EntitlementState(rawValue: try r.readEnum(field: 13))
            case 14: try expect(wt, .varint, field: 14); ownership = Ownership(rawValue: try r.readEnum(field: 14))
            case 15: try expect(wt, .varint, field: 15); store = Store(rawValue: try r.readEnum(field: 15))
            case 16: try expect(wt, .lengthDelimited, field: 16); subscriptionGroupID = try r.readString(field: 16)
            case 17: try expect(wt, .lengthDelimited, field: 17); pendingProductID = try r.readString(field: 17)
            case 18: try expect(wt, .lengthDelimited, field: 18); grantID = try r.readString(field: 18)
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int {
        ProtoSize.string(1, productID) + ProtoSize.int32(2, productType.rawValue) + ProtoSize.string(3, originalTransactionID)
            + ProtoSize.string(4, latestTransactionID) + ProtoSize.int64(5, purchaseTimeMs) + ProtoSize.int64(6, expiresTimeMs)
            + ProtoSize.bool(7, active) + ProtoSize.string(8, orderID) + ProtoSize.int64(9, revocationTimeMs)
            + ProtoSize.int64(10, gracePeriodExpiresTimeMs) + ProtoSize.bool(11, autoRenew) + ProtoSize.int32(12, environment.rawValue)
            + ProtoSize.int32(13, state.rawValue) + ProtoSize.int32(14, ownership.rawValue) + ProtoSize.int32(15, store.rawValue)
            + ProtoSize.string(16, subscriptionGroupID) + ProtoSize.string(17, pendingProductID) + ProtoSize.string(18, grantID)
    }

    public func encode(to w: inout ProtoWriter) {
        w.string(1, productID); w.int32(2, productType.rawValue); w.string(3, originalTransactionID)
        w.string(4, latestTransactionID); w.int64(5, purchaseTimeMs); w.int64(6, expiresTimeMs)
        w.bool(7, active); w.string(8, orderID); w.int64(9, revocationTimeMs)
        w.int64(10, gracePeriodExpiresTimeMs); w.bool(11, autoRenew); w.int32(12, environment.rawValue)
        w.int32(13, state.rawValue); w.int32(14, ownership.rawValue); w.int32(15, store.rawValue)
        w.string(16, subscriptionGroupID); w.string(17, pendingProductID); w.string(18, grantID)
    }
}
