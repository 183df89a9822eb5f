public import ProtoWire

/// billing.v1.SignOfferRequest: a subscription offer, or an introductory-offer eligibility, to sign.
public struct SignOfferRequest: ProtoMessage, Equatable {
    public var kind = OfferSignatureKind.unspecified
    /// Empty: the only bundle id served.
    public var bundleID = ""
    public var productID = ""
    /// The promotional kinds.
    public var offerID = ""
    /// The order the purchase is for: signed as appAccountToken where the kind has one.
    public var orderID = ""
    /// PROMOTIONAL_JWS: optional; INTRODUCTORY_ELIGIBILITY: required.
    public var transactionID = ""
    /// INTRODUCTORY_ELIGIBILITY.
    public var allowIntroductoryOffer = false

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .varint, field: 1); kind = OfferSignatureKind(rawValue: try r.readEnum(field: 1))
            case 2: try expect(wt, .lengthDelimited, field: 2); bundleID = try r.readString(field: 2)
            case 3: try expect(wt, .lengthDelimited, field: 3); productID = try r.readString(field: 3)
            case 4: try expect(wt, .lengthDelimited, field: 4); offerID = try r.readString(field: 4)
            case 5: try expect(wt, .lengthDelimited, field: 5); orderID = try r.readString(field: 5)
            case 6: try expect(wt, .lengthDelimited, field: 6); transactionID = try r.readString(field: 6)
            case 7: try expect(wt, .varint, field: 7); allowIntroductoryOffer = try r.readBool()
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int {
        ProtoSize.int32(1, kind.rawValue) + ProtoSize.string(2, bundleID) + ProtoSize.string(3, productID) + ProtoSize.string(4, offerID)
            + ProtoSize.string(5, orderID) + ProtoSize.string(6, transactionID) + ProtoSize.bool(7, allowIntroductoryOffer)
    }

    public func encode(to w: inout ProtoWriter) {
        w.int32(1, kind.rawValue); w.string(2, bundleID); w.string(3, productID); w.string(4, offerID)
        w.string(5, orderID); w.string(6, transactionID); w.bool(7, allowIntroductoryOffer)
    }
}

/// billing.v1.SignOfferResponse: a compact JWS (the JWS kinds) or the StoreKit 1 style signature and its inputs.
public struct SignOfferResponse: ProtoMessage, Equatable {
    public var compactJWS = ""
    public var keyID = ""
    /// Lowercase UUID.
    public var nonce = ""
    public var timestampMs: Int64 = 0
    /// Base64 DER ECDSA signature.
    public var signature = ""

    public init() {}

    public mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wt) = try r.nextTag() {
            switch field {
            case 1: try expect(wt, .lengthDelimited, field: 1); compactJWS = try r.readString(field: 1)
            case 2: try expect(wt, .lengthDelimited, field: 2); keyID = try r.readString(field: 2)
            case 3: try expect(wt, .lengthDelimited, field: 3); nonce = try r.readString(field: 3)
            case 4: try expect(wt, .varint, field: 4); timestampMs = try r.readInt64()
            case 5: try expect(wt, .lengthDelimited, field: 5); signature = try r.readString(field: 5)
            default: try r.skip(wt)
            }
        }
    }

    public var encodedSize: Int {
        ProtoSize.string(1, compactJWS) + ProtoSize.string(2, keyID) + ProtoSize.string(3, nonce) + ProtoSize.int64(4, timestampMs)
            + ProtoSize.string(5, signature)
    }

    public func encode(to w: inout ProtoWriter) {
        w.string(1, compactJWS); w.string(2, keyID); w.string(3, nonce); w.int64(4, timestampMs); w.string(5, signature)
    }
}
