public import Crypto
import ProtoWire

/// Signs subscription offers and introductory-offer eligibility for StoreKit with an In-App Purchase key
/// (`.p8`), exactly as Apple's App Store Server Library does (`PromotionalOfferSignatureCreator`,
/// `PromotionalOfferV2SignatureCreator`, `IntroductoryOfferEligibilitySignatureCreator`, version 3.x):
/// - StoreKit 1 style: ECDSA P-256 SHA-256 over bundle id, key id, product id, offer id, appAccountToken
///   (lowercase), nonce (lowercase) and timestamp (ms) joined by U+2063; the DER signature in padded base64.
/// - The JWS kinds: `ES256JWT` (header `alg`, `kid`, `typ`) over the kind's own claims, then `bid`, `iss`,
///   `aud` (`promotional-offer` or `introductory-offer-eligibility`), `iat` (seconds) and `nonce`.
///
/// Callers check the fields; this type only assembles and signs. The key never leaves it: not in
/// descriptions, errors or logs.
public struct OfferSigner: Sendable {
    /// The key's id in App Store Connect: in the StoreKit 1 message and every JWS header.
    public let keyID: String
    /// The issuer id the JWS kinds carry (`iss`); nil: only the StoreKit 1 style kind can be signed.
    public let issuerID: String?
    private let key: PrivateKey

    /// U+2063 INVISIBLE SEPARATOR, between the StoreKit 1 message's fields.
    public static let separator: Unicode.Scalar = "\u{2063}"
    /// The `aud` of Apple's PromotionalOfferV2SignatureCreator.
    public static let promotionalOfferAudience = "promotional-offer"
    /// The `aud` of Apple's IntroductoryOfferEligibilitySignatureCreator.
    public static let introductoryOfferEligibilityAudience = "introductory-offer-eligibility"

    /// A signer for `privateKey` (P-256: the caller checks, as billingd does at start).
    public init(keyID: String, issuerID: String?, privateKey: PrivateKey) {
        self.keyID = keyID
        self.issuerID = issuerID
        self.key = privateKey
    }

    /// A fresh random (version 4) UUID in lowercase, as Apple's library makes nonces.
    public static func nonce() -> String {
        // Two draws of 8 bytes (each one getrandom call), not sixteen of one.
        var rng = SystemRandomNumberGenerator()
        let high = rng.next(), low = rng.next()
        var bytes = (0..<16).map { i in UInt8(truncatingIfNeeded: (i < 8 ? high : low) >> UInt64(8 * (i % 8))) }
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(36)
        for (i, b) in bytes.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 { out.append(UInt8(ascii: "-")) }
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: StoreKit 1 style (PromotionalOfferSignatureCreator)

    /// The text Apple's PromotionalOfferSignatureCreator signs: the seven fields joined by U+2063, the
    /// appAccountToken and the nonce lowercased.
    public static func promotionalMessage(
        bundleID: String, keyID: String, productID: String, offerID: String, appAccountToken: String, nonce: String, timestampMs: Int64
    ) -> String {
        [bundleID, keyID, productID, offerID, appAccountToken.lowercased(), nonce.lowercased(), String(timestampMs)]
            .joined(separator: String(separator))
    }

    /// The StoreKit 1 style signature: base64 (padded) of the DER ECDSA signature over `promotionalMessage`.
    public func promotionalSignature(
        bundleID: String, productID: String, offerID: String, appAccountToken: String, nonce: String, timestampMs: Int64
    ) throws(CryptoError) -> String {
        let message = Self.promotionalMessage(
            bundleID: bundleID, keyID: keyID, productID: productID, offerID: offerID, appAccountToken: appAccountToken, nonce: nonce,
            timestampMs: timestampMs)
        return Base64.encode(try key.signSHA256(Array(message.utf8)), padded: true)
    }

    // MARK: JWS kinds (PromotionalOfferV2SignatureCreator, IntroductoryOfferEligibilitySignatureCreator)

    /// The claims of a promotional offer JWS, in the order Apple's library writes them: `productId`,
    /// `offerIdentifier`, `transactionId` (only when given), then the common claims.
    public static func promotionalOfferClaims(
        bundleID: String, issuerID: String, productID: String, offerID: String, transactionID: String?, nonce: String, issuedAt: Int64
    ) -> String {
        var fields = [("productId", JSONText.quote(productID)), ("offerIdentifier", JSONText.quote(offerID))]
        if let transactionID { fields.append(("transactionId", JSONText.quote(transactionID))) }
        return claims(
            fields, bundleID: bundleID, issuerID: issuerID, audience: promotionalOfferAudience, nonce: nonce, issuedAt: issuedAt)
    }

    /// The claims of an introductory-offer eligibility JWS: `productId`, `allowIntroductoryOffer` (a JSON
    /// boolean), `transactionId`, then the common claims.
    public static func introductoryOfferEligibilityClaims(
        bundleID: String, issuerID: String, productID: String, allowIntroductoryOffer: Bool, transactionID: String, nonce: String,
        issuedAt: Int64
    ) -> String {
        claims(
            [
                ("productId", JSONText.quote(productID)), ("allowIntroductoryOffer", allowIntroductoryOffer ? "true" : "false"),
                ("transactionId", JSONText.quote(transactionID)),
            ], bundleID: bundleID, issuerID: issuerID, audience: introductoryOfferEligibilityAudience, nonce: nonce, issuedAt: issuedAt)
    }

    /// The kind's claims, then `bid`, `iss`, `aud`, `iat`, `nonce` (Apple's `_create_signature`).
    static func claims(
        _ specific: [(String, String)], bundleID: String, issuerID: String, audience: String, nonce: String, issuedAt: Int64
    ) -> String {
        JSONText.object(
            specific.map { ($0.0, Optional($0.1)) } + [
                ("bid", JSONText.quote(bundleID)), ("iss", JSONText.quote(issuerID)), ("aud", JSONText.quote(audience)),
                ("iat", String(issuedAt)), ("nonce", JSONText.quote(nonce)),
            ])
    }

    /// A promotional offer compact JWS for `Product.PurchaseOption.promotionalOffer(_:compactJWS:)`. Needs an
    /// issuer id (a precondition: callers check `issuerID` first).
    public func promotionalOfferJWS(
        bundleID: String, productID: String, offerID: String, transactionID: String?, nonce: String, issuedAt: Int64
    ) throws(CryptoError) -> String {
        guard let issuerID else { preconditionFailure("promotionalOfferJWS without an issuer id") }
        let claims = Self.promotionalOfferClaims(
            bundleID: bundleID, issuerID: issuerID, productID: productID, offerID: offerID, transactionID: transactionID, nonce: nonce,
            issuedAt: issuedAt)
        return try ES256JWT.sign(keyID: keyID, claims: claims, key: key)
    }

    /// An introductory-offer eligibility compact JWS for
    /// `Product.PurchaseOption.introductoryOfferEligibility(compactJWS:)`. Needs an issuer id (a precondition).
    public func introductoryOfferEligibilityJWS(
        bundleID: String, productID: String, allowIntroductoryOffer: Bool, transactionID: String, nonce: String, issuedAt: Int64
    ) throws(CryptoError) -> String {
        guard let issuerID else { preconditionFailure("introductoryOfferEligibilityJWS without an issuer id") }
        let claims = Self.introductoryOfferEligibilityClaims(
            bundleID: bundleID, issuerID: issuerID, productID: productID, allowIntroductoryOffer: allowIntroductoryOffer,
            transactionID: transactionID, nonce: nonce, issuedAt: issuedAt)
        return try ES256JWT.sign(keyID: keyID, claims: claims, key: key)
    }
}
