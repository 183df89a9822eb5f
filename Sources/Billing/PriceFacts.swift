/// What the store signed about the money of a transaction; app receipts carry none (all empty).
public struct PriceFacts: Sendable, Equatable {
    /// Thousandths of the currency unit; 0 when unknown.
    public var priceMilliunits: Int64 = 0
    /// ISO 4217; empty when unknown.
    public var currency = ""
    /// ISO 3166-1 alpha-3; empty when unknown.
    public var storefront = ""
    public var offerID = ""
    /// The store's offer type name (App Store: INTRODUCTORY_OFFER, PROMOTIONAL_OFFER, OFFER_CODE, WIN_BACK_OFFER).
    public var offerType = ""

    public init(priceMilliunits: Int64 = 0, currency: String = "", storefront: String = "", offerID: String = "", offerType: String = "") {
        self.priceMilliunits = priceMilliunits
        self.currency = currency
        self.storefront = storefront
        self.offerID = offerID
        self.offerType = offerType
    }
}
