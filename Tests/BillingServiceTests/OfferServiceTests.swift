import AppStoreAPI
import Billing
import BillingAPI
@testable import BillingService
import Crypto
import Foundation
import ProtoWire
import RPC
import Testing
import TestSupport

/// SignOffer through the router as the transport calls it, over the in-memory store: each kind signs what Apple's
/// library would, the order binds the StoreKit 1 kind, and every refusal has its reason and field.
@Suite("SignOffer")
struct OfferServiceTests {
    static let key = try! PrivateKey.generateP256()
    static let issuer = "57246542-96fe-1a63-e053-0824d011072a"
    static let now: Int64 = 1_767_225_600_123
    static let sub = "com.example.pro.monthly"

    let store = InMemoryOrderStore()
    let orders: OrderService

    init() {
        orders = OrderService(store: store, catalog: nil, clock: ManualClock(milliseconds: Self.now))
    }

    func router(
        issuer: String? = Self.issuer, bundleIDs: [String]? = ["com.example.app"], catalog: Catalog? = nil, configured: Bool = true
    ) -> Router {
        let orders = catalog == nil ? self.orders : OrderService(store: store, catalog: catalog, clock: ManualClock(milliseconds: Self.now))
        let offers = OfferSigning(
            signer: OfferSigner(keyID: "2X9R4HXF34", issuerID: issuer, privateKey: Self.key), bundleIDs: bundleIDs,
            clock: ManualClock(milliseconds: Self.now))
        var r = Router()
        BillingService(orders: orders, offers: configured ? offers : nil).register(in: &r)
        return r
    }

    func sign(_ request: SignOfferRequest, router: Router? = nil) -> (Result<SignOfferResponse, RPCError>, [(String, String)]) {
        let r = router ?? self.router()
        guard case .unary(_, let handler) = r.resolve(path: "/billing.v1.Billing/SignOffer") else {
            return (.failure(RPCError(code: .unimplemented, message: "SignOffer")), [])
        }
        let context = CallContext(method: "billing.v1.Billing/SignOffer")
        let bytes = request.encoded()
        let result: Result<[UInt8], RPCError> = wait { done in handler(context, bytes, Responder { done($0) }) }
        return (result.map { try! SignOfferResponse(decoding: Array($0.dropFirst(5))) }, context.cancellation.noted)
    }

    func refusal(_ request: SignOfferRequest, router: Router? = nil) -> RPCError? {
        if case .failure(let e) = sign(request, router: router).0 { return e }
        return nil
    }

    func openOrder(product: String = Self.sub, account: String = "user-42") -> Billing.Order {
        let result: Result<Billing.Order, BillingError> = wait { done in
            orders.createOrder(OrderService.CreateRequest(accountID: account, productID: product), completion: done)
        }
        return try! result.get()
    }

    static func request(
        _ kind: OfferSignatureKind, product: String = sub, offer: String = "", order: String = "", transaction: String = "",
        bundle: String = "", allow: Bool = false
    ) -> SignOfferRequest {
        var r = SignOfferRequest()
        r.kind = kind
        r.productID = product
        r.offerID = offer
        r.orderID = order
        r.transactionID = transaction
        r.bundleID = bundle
        r.allowIntroductoryOffer = allow
        return r
    }

    static func claims(_ jws: String) -> (header: NSDictionary, claims: NSDictionary, verifies: Bool) {
        let parts = jws.split(separator: ".")
        func bytes(_ p: Substring) -> [UInt8] { Base64.decode(String(p)) ?? [] }
        func object(_ p: Substring) -> NSDictionary { (try? JSONSerialization.jsonObject(with: Data(bytes(p)))) as? NSDictionary ?? [:] }
        let verifies = Array((parts[0] + "." + parts[1]).utf8).withUnsafeBytes { key.publicKey.verifyES256(signature: bytes(parts[2]), message: $0) }
        return (object(parts[0]), object(parts[1]), verifies)
    }

    @Test("PROMOTIONAL: the order id (lowercase) is the signed appAccountToken; key id, nonce, timestamp answered; verifies")
    func promotional() throws {
        let order = openOrder()
        let (result, notes) = sign(Self.request(.promotional, offer: "winback-50", order: order.id.uppercased()))
        let r = try result.get()
        #expect(r.keyID == "2X9R4HXF34" && r.timestampMs == Self.now && r.compactJWS.isEmpty)
        #expect(UUID(uuidString: r.nonce) != nil && r.nonce == r.nonce.lowercased())
        let message = OfferSigner.promotionalMessage(
            bundleID: "com.example.app", keyID: "2X9R4HXF34", productID: Self.sub, offerID: "winback-50", appAccountToken: order.id,
            nonce: r.nonce, timestampMs: Self.now)
        let der = try #require(Base64.decode(r.signature))
        #expect(Array(message.utf8).withUnsafeBytes { Self.key.publicKey.verifySHA256(signatureDER: der, message: $0) })
        // The log line: order id and kind (and the order's account), never the signature.
        #expect(notes.contains { $0 == ("order_id", order.id) } && notes.contains { $0 == ("offer_kind", "promotional") })
        #expect(notes.contains { $0 == ("account_id", "user-42") } && !notes.contains { $0.1.contains(r.signature) })
        // A fresh nonce each call.
        let again = try sign(Self.request(.promotional, offer: "winback-50", order: order.id)).0.get()
        #expect(again.nonce != r.nonce)
    }

    @Test("PROMOTIONAL_JWS: Apple's claims, transactionId when given; an order, when named, is checked but not signed")
    func promotionalJWS() throws {
        let r = try sign(Self.request(.promotionalJWS, offer: "winback-50", transaction: "2000000000000001")).0.get()
        #expect(r.keyID.isEmpty && r.signature.isEmpty && r.nonce.isEmpty && r.timestampMs == 0)
        let c = Self.claims(r.compactJWS)
        #expect(c.verifies)
        #expect(c.header == ["alg": "ES256", "kid": "2X9R4HXF34", "typ": "JWT"] as NSDictionary)
        #expect(c.claims["productId"] as? String == Self.sub && c.claims["offerIdentifier"] as? String == "winback-50")
        #expect(c.claims["transactionId"] as? String == "2000000000000001" && c.claims["bid"] as? String == "com.example.app")
        #expect(c.claims["iss"] as? String == Self.issuer && c.claims["aud"] as? String == "promotional-offer")
        #expect(c.claims["iat"] as? Int == Int(Self.now / 1000) && UUID(uuidString: c.claims["nonce"] as? String ?? "") != nil)
        let bare = try sign(Self.request(.promotionalJWS, offer: "o")).0.get()
        #expect(Self.claims(bare.compactJWS).claims["transactionId"] == nil)
        let order = openOrder()
        let bound = try sign(Self.request(.promotionalJWS, offer: "o", order: order.id)).0.get()
        #expect(Self.claims(bound.compactJWS).claims.count == 7)
        #expect(refusal(Self.request(.promotionalJWS, offer: "o", order: "0190a5b8-7c00-7000-8000-00000000dead"))?.reason == "ORDER_NOT_FOUND")
    }

    @Test("INTRODUCTORY_ELIGIBILITY: allowIntroductoryOffer as a boolean, transactionId, its own audience")
    func introductory() throws {
        for allow in [false, true] {
            let r = try sign(Self.request(.introductoryEligibility, transaction: "2000000000000001", allow: allow)).0.get()
            let c = Self.claims(r.compactJWS)
            #expect(c.verifies && c.claims["aud"] as? String == "introductory-offer-eligibility")
            #expect(c.claims["allowIntroductoryOffer"] as? Bool == allow && c.claims["transactionId"] as? String == "2000000000000001")
            #expect(c.claims["offerIdentifier"] == nil && c.claims.count == 8)
        }
    }

    @Test("bundle id: the only one served, the one asked for when served, any under --dev without --bundle-id")
    func bundles() throws {
        let several = router(bundleIDs: ["com.example.app", "com.example.lite"])
        let r = try sign(Self.request(.promotionalJWS, offer: "o", bundle: "com.example.lite"), router: several).0.get()
        #expect(Self.claims(r.compactJWS).claims["bid"] as? String == "com.example.lite")
        let missing = refusal(Self.request(.promotionalJWS, offer: "o"), router: several)
        #expect(missing?.reason == "INVALID_FIELD" && missing?.metadata["field"] == "bundle_id")
        #expect(refusal(Self.request(.promotionalJWS, offer: "o", bundle: "com.other"), router: several)?.reason == "WRONG_APP")
        #expect(refusal(Self.request(.promotionalJWS, offer: "o"), router: router(bundleIDs: []))?.reason == "WRONG_APP")
        let dev = router(bundleIDs: nil)
        let any = try sign(Self.request(.promotionalJWS, offer: "o", bundle: "com.other"), router: dev).0.get()
        #expect(Self.claims(any.compactJWS).claims["bid"] as? String == "com.other")
        #expect(refusal(Self.request(.promotionalJWS, offer: "o"), router: dev)?.metadata["field"] == "bundle_id")
    }

    @Test("not configured: no key at all, or no issuer id for the JWS kinds (PROMOTIONAL still signs)")
    func notConfigured() throws {
        let order = openOrder()
        for kind in [OfferSignatureKind.promotional, .promotionalJWS, .introductoryEligibility] {
            let e = refusal(Self.request(kind, offer: "o", order: order.id, transaction: "1"), router: router(configured: false))
            #expect(e?.code == .failedPrecondition && e?.reason == "OFFER_SIGNING_NOT_CONFIGURED")
        }
        let noIssuer = router(issuer: nil)
        #expect(refusal(Self.request(.promotionalJWS, offer: "o"), router: noIssuer)?.reason == "OFFER_SIGNING_NOT_CONFIGURED")
        #expect(refusal(Self.request(.introductoryEligibility, transaction: "1"), router: noIssuer)?.reason == "OFFER_SIGNING_NOT_CONFIGURED")
        #expect((try? sign(Self.request(.promotional, offer: "o", order: order.id), router: noIssuer).0.get()) != nil)
    }

    @Test("the order: unknown, not PENDING, another product")
    func orderRules() {
        let unknown = refusal(Self.request(.promotional, offer: "o", order: "0190a5b8-7c00-7000-8000-00000000dead"))
        #expect(unknown?.code == .notFound && unknown?.reason == "ORDER_NOT_FOUND")
        let other = openOrder(product: "com.example.pro.yearly")
        let mismatch = refusal(Self.request(.promotional, offer: "o", order: other.id))
        #expect(mismatch?.reason == "PRODUCT_MISMATCH" && mismatch?.metadata["order_product_id"] == "com.example.pro.yearly")
        let old = openOrder()
        let expired: Result<Int, BillingError> = wait { done in
            store.expire(createdBeforeMs: Self.now + 1, nowMs: Self.now + 1, limit: 100, completion: done)
        }
        #expect((try? expired.get()) ?? 0 >= 1)
        let notPending = refusal(Self.request(.promotional, offer: "o", order: old.id))
        #expect(notPending?.code == .failedPrecondition && notPending?.reason == "ORDER_NOT_PENDING")
        #expect(notPending?.metadata["order_id"] == old.id)
    }

    @Test("catalog: the product must be listed, and be an auto-renewable subscription")
    func catalog() {
        let json = #"{"products": [{"id": "com.example.pro.monthly", "type": "auto_renewable_subscription"}, {"id": "coins", "type": "consumable"}]}"#
        let catalog = try! Catalog(json: Data(json.utf8))
        let r = router(catalog: catalog)
        #expect(refusal(Self.request(.promotionalJWS, offer: "o"), router: r) == nil)
        #expect(refusal(Self.request(.promotionalJWS, product: "unlisted", offer: "o"), router: r)?.reason == "PRODUCT_NOT_FOUND")
        let consumable = refusal(Self.request(.promotionalJWS, product: "coins", offer: "o"), router: r)
        #expect(consumable?.reason == "INVALID_FIELD" && consumable?.metadata["field"] == "product_id")
    }

    /// A request and the field its INVALID_FIELD names.
    static let invalid: [(String, SignOfferRequest, String)] = [
        ("no kind", request(.unspecified, offer: "o"), "kind"),
        ("unknown kind", request(OfferSignatureKind(rawValue: 9), offer: "o"), "kind"),
        ("no product", request(.promotionalJWS, product: "", offer: "o"), "product_id"),
        ("product too long", request(.promotionalJWS, product: String(repeating: "p", count: 256), offer: "o"), "product_id"),
        ("product with U+2063", request(.promotionalJWS, product: "a\u{2063}b", offer: "o"), "product_id"),
        ("no offer (promotional)", request(.promotional, order: "0190a5b8-7c00-7000-8000-000000000001"), "offer_id"),
        ("no offer (promotional JWS)", request(.promotionalJWS), "offer_id"),
        ("offer with a control character", request(.promotionalJWS, offer: "a\u{1}"), "offer_id"),
        ("offer for eligibility", request(.introductoryEligibility, offer: "o", transaction: "1"), "offer_id"),
        ("no order (promotional)", request(.promotional, offer: "o"), "order_id"),
        ("order not a UUID", request(.promotional, offer: "o", order: "order-7"), "order_id"),
        ("order not a UUID (JWS)", request(.promotionalJWS, offer: "o", order: "order-7"), "order_id"),
        (
            "transaction id for promotional", request(.promotional, offer: "o", order: "0190a5b8-7c00-7000-8000-000000000001", transaction: "1"),
            "transaction_id"
        ),
        ("transaction id not digits", request(.promotionalJWS, offer: "o", transaction: "abc"), "transaction_id"),
        ("no transaction id (eligibility)", request(.introductoryEligibility), "transaction_id"),
        ("allow for promotional JWS", request(.promotionalJWS, offer: "o", allow: true), "allow_introductory_offer"),
        ("bundle with U+2063", request(.promotionalJWS, offer: "o", bundle: "com.example.app\u{2063}"), "bundle_id"),
    ]

    @Test("every missing or malformed field is INVALID_FIELD naming it", arguments: 0..<invalid.count)
    func invalidFields(_ i: Int) {
        let (_, request, field) = Self.invalid[i]
        let e = refusal(request)
        #expect(e?.code == .invalidArgument && e?.reason == "INVALID_FIELD" && e?.metadata["field"] == field, "\(Self.invalid[i].0)")
    }

    @Test("the rules alone: the checked offer carries the canonical order id and the resolved bundle id")
    func checked() throws {
        let offer = try BillingService.checkOffer(
            Self.request(.promotional, offer: "o", order: "0190A5B8-7C00-7000-8000-00000000000A"), bundleIDs: ["com.example.app"],
            catalog: nil)
        #expect(offer.orderID == "0190a5b8-7c00-7000-8000-00000000000a" && offer.bundleID == "com.example.app")
    }
}
