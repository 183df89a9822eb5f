public import AfterSale
public import AppStoreAPI
public import Billing
import BillingAPI
import Crypto
import RPC

/// SignOffer's settings: the In-App Purchase key, the apps it may sign for, where time and nonces come from.
public struct OfferSigning: Sendable {
    /// The In-App Purchase key, its id and the issuer id of the JWS kinds.
    public let signer: OfferSigner
    /// The apps served (`--bundle-id`); nil: any bundle id the caller names (`--dev` without `--bundle-id`).
    public let bundleIDs: [String]?
    /// The signed time: `timestamp_ms`, and `iat` in seconds.
    let clock: any WallClock
    /// A fresh lowercase UUID per call.
    let nonce: @Sendable () -> String

    /// `clock` and `nonce` are for tests; every call takes a fresh nonce.
    public init(
        signer: OfferSigner, bundleIDs: [String]?, clock: any WallClock = SystemClock(),
        nonce: @escaping @Sendable () -> String = { OfferSigner.nonce() }
    ) {
        self.signer = signer
        self.bundleIDs = bundleIDs
        self.clock = clock
        self.nonce = nonce
    }
}

/// A SignOffer request whose fields passed their checks: what is signed, and the order to check it against.
struct OfferToSign: Equatable {
    /// One of the three kinds.
    var kind: OfferSignatureKind
    /// The request's, or the only one served.
    var bundleID: String
    /// Checked against the catalog, when there is one.
    var productID: String
    /// Empty for INTRODUCTORY_ELIGIBILITY.
    var offerID: String
    /// Canonical (lowercase); required for PROMOTIONAL (it is signed as appAccountToken), checked when given for the
    /// JWS kinds (not signed: StoreKit takes it as the purchase's own appAccountToken option).
    var orderID: String?
    /// Digits; nil when not given (PROMOTIONAL never has one).
    var transactionID: String?
    /// INTRODUCTORY_ELIGIBILITY's answer; false for the other kinds.
    var allowIntroductoryOffer: Bool
}

extension BillingService {
    /// Longest offer id accepted (App Store Connect's are far shorter).
    static let maxOfferIDBytes = 255

    /// SignOffer: checks the fields, signs on the loop, then (when an order is named) reads the order, from the
    /// order cache as a rule, and answers the signature only if the order is PENDING and for the same product.
    /// Signing before the read keeps the ES256 work off the database threads; a refused call wasted one signature.
    func signOffer(_ context: CallContext, _ request: SignOfferRequest, _ responder: Responder) {
        if let id = OrderID.canonical(request.orderID) { context.note("order_id", id) }
        guard let kindName = Self.offerKindName(request.kind) else {
            return answer(
                .invalidField(field: "kind", problem: "must be PROMOTIONAL, PROMOTIONAL_JWS or INTRODUCTORY_ELIGIBILITY"), context, responder)
        }
        context.note("offer_kind", kindName)
        guard let offers else {
            return answer(
                .offerSigningNotConfigured(detail: "no In-App Purchase key (--offer-signing-key-id, --offer-signing-key)"), context, responder)
        }
        if request.kind != .promotional && offers.signer.issuerID == nil {
            return answer(
                .offerSigningNotConfigured(
                    detail: "the JWS kinds need an issuer id (--offer-signing-issuer-id or --appstore-api-issuer-id); PROMOTIONAL still signs"),
                context, responder)
        }
        let offer: OfferToSign
        do throws(BillingError) {
            offer = try Self.checkOffer(request, bundleIDs: offers.bundleIDs, catalog: orders.catalog)
        } catch {
            return answer(error, context, responder)
        }
        let response: SignOfferResponse
        do throws(CryptoError) {
            response = try Self.sign(offer, with: offers)
        } catch {
            // The key was checked at start: only OpenSSL itself can fail here. Never the key in the log.
            onInternalError(context.requestID, "SignOffer: \(error)")
            return responder.fail(.internal(requestID: context.requestID))
        }
        guard let orderID = offer.orderID else { return responder.succeed(response) }
        orders.getOrder(canonicalID: orderID) { [self] result in
            switch result {
            case .success(let order):
                context.note("account_id", order.accountID)
                if order.state != .pending {
                    answer(.orderNotPending(orderID: order.id, state: order.state), context, responder)
                } else if order.productID != offer.productID {
                    answer(.productMismatch(orderProduct: order.productID, proofProduct: offer.productID), context, responder)
                } else {
                    responder.succeed(response)
                }
            case .failure(let error): answer(error, context, responder)
            }
        }
    }

    /// The `offer_kind` log value; nil for a kind SignOffer does not sign.
    static func offerKindName(_ kind: OfferSignatureKind) -> String? {
        switch kind {
        case .promotional: "promotional"
        case .promotionalJWS: "promotional_jws"
        case .introductoryEligibility: "introductory_eligibility"
        default: nil
        }
    }

    /// The per-kind field rules (docs/OFFERS.md); pure, so tests run every refusal without a store.
    static func checkOffer(_ request: SignOfferRequest, bundleIDs: [String]?, catalog: Catalog?) throws(BillingError) -> OfferToSign {
        let kind = request.kind
        guard offerKindName(kind) != nil else {
            throw .invalidField(field: "kind", problem: "must be PROMOTIONAL, PROMOTIONAL_JWS or INTRODUCTORY_ELIGIBILITY")
        }
        let kindName = kind == .promotional ? "PROMOTIONAL" : kind == .promotionalJWS ? "PROMOTIONAL_JWS" : "INTRODUCTORY_ELIGIBILITY"
        func text(_ value: String, _ field: String, max: Int, required: Bool) throws(BillingError) {
            try OrderService.checkText(value, field: field, max: max, required: required)
            // U+2063 separates the StoreKit 1 message's fields: a value holding it could stand for two fields.
            if value.unicodeScalars.contains(OfferSigner.separator) {
                throw .invalidField(field: field, problem: "contains U+2063, the separator of the signed message")
            }
        }
        func unused(_ isSet: Bool, _ field: String) throws(BillingError) {
            if isSet { throw .invalidField(field: field, problem: "is not signed for \(kindName); leave it empty") }
        }

        try text(request.productID, "product_id", max: OrderService.Limits.productID, required: true)
        if kind == .introductoryEligibility {
            try unused(!request.offerID.isEmpty, "offer_id")
        } else {
            try text(request.offerID, "offer_id", max: maxOfferIDBytes, required: true)
        }
        var transactionID: String?
        switch kind {
        case .promotional:
            try unused(!request.transactionID.isEmpty, "transaction_id")
        default:
            if request.transactionID.isEmpty {
                if kind == .introductoryEligibility {
                    throw .invalidField(field: "transaction_id", problem: "is required: any transaction id of the customer, or its appTransactionId")
                }
            } else {
                guard AppStoreLink.isTransactionID(request.transactionID) else {
                    throw .invalidField(field: "transaction_id", problem: "is not a transaction id (up to 32 digits)")
                }
                transactionID = request.transactionID
            }
        }
        if kind != .introductoryEligibility { try unused(request.allowIntroductoryOffer, "allow_introductory_offer") }
        var orderID: String?
        if request.orderID.isEmpty {
            if kind == .promotional {
                throw .invalidField(field: "order_id", problem: "is required: the order the purchase is for, signed as appAccountToken")
            }
        } else {
            guard let id = OrderID.canonical(request.orderID) else { throw .invalidField(field: "order_id", problem: "is not a UUID") }
            orderID = id
        }
        let bundleID = try resolveBundleID(request.bundleID, served: bundleIDs, check: text)
        if let catalog {
            guard let product = catalog.product(request.productID) else { throw .productNotFound(productID: request.productID) }
            guard product.kind == .autoRenewableSubscription else {
                throw .invalidField(
                    field: "product_id", problem: "is a \(product.kind.rawValue) in the catalog; offers are for auto-renewable subscriptions")
            }
        }
        return OfferToSign(
            kind: kind, bundleID: bundleID, productID: request.productID, offerID: request.offerID, orderID: orderID,
            transactionID: transactionID, allowIntroductoryOffer: request.allowIntroductoryOffer)
    }

    /// The request's bundle id, which must be served; or, when empty, the only one served.
    static func resolveBundleID(
        _ given: String, served: [String]?,
        check: (String, String, Int, Bool) throws(BillingError) -> Void
    ) throws(BillingError) -> String {
        guard given.isEmpty else {
            try check(given, "bundle_id", 255, true)
            if let served, !served.contains(given) {
                throw .wrongApp(detail: "bundle id \(given) is not one this billingd serves (--bundle-id)")
            }
            return given
        }
        guard let served else { throw .invalidField(field: "bundle_id", problem: "is required: billingd serves no --bundle-id") }
        switch served.count {
        case 1: return served[0]
        case 0: throw .wrongApp(detail: "billingd serves no app: start it with --bundle-id")
        default: throw .invalidField(field: "bundle_id", problem: "is required: billingd serves \(served.count) apps (--bundle-id)")
        }
    }

    /// Signs `offer` with a fresh nonce at the clock's time.
    static func sign(_ offer: OfferToSign, with offers: OfferSigning) throws(CryptoError) -> SignOfferResponse {
        let nonce = offers.nonce()
        let nowMs = offers.clock.nowMilliseconds()
        var response = SignOfferResponse()
        let signer = offers.signer
        switch offer.kind {
        case .promotional:
            response.keyID = signer.keyID
            response.nonce = nonce
            response.timestampMs = nowMs
            response.signature = try signer.promotionalSignature(
                bundleID: offer.bundleID, productID: offer.productID, offerID: offer.offerID, appAccountToken: offer.orderID ?? "",
                nonce: nonce, timestampMs: nowMs)
        case .promotionalJWS:
            response.compactJWS = try signer.promotionalOfferJWS(
                bundleID: offer.bundleID, productID: offer.productID, offerID: offer.offerID, transactionID: offer.transactionID,
                nonce: nonce, issuedAt: nowMs / 1000)
        default:
            response.compactJWS = try signer.introductoryOfferEligibilityJWS(
                bundleID: offer.bundleID, productID: offer.productID, allowIntroductoryOffer: offer.allowIntroductoryOffer,
                transactionID: offer.transactionID ?? "", nonce: nonce, issuedAt: nowMs / 1000)
        }
        return response
    }
}
