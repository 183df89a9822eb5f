@testable import AppStoreAPI
import Crypto
import Foundation
import Testing

/// Offer signatures as Apple's App Store Server Library makes them: the StoreKit 1 message byte for byte, the JWS
/// kinds' header and claims, every signature checked with the key's public half.
@Suite("Offer signatures")
struct OfferSignerTests {
    static let key = try! PrivateKey.generateP256()
    static let issuer = "57246542-96fe-1a63-e053-0824d011072a"
    static let signer = OfferSigner(keyID: "2X9R4HXF34", issuerID: issuer, privateKey: key)

    static func base64URL(_ part: Substring) -> [UInt8] {
        var s = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        return Array(Data(base64Encoded: s)!)
    }

    static func object(_ part: Substring) -> NSDictionary {
        try! JSONSerialization.jsonObject(with: Data(base64URL(part))) as! NSDictionary
    }

    /// The parts of a compact JWS, after checking its ES256 signature with the public key.
    static func verified(_ jws: String) -> (header: NSDictionary, claims: NSDictionary, claimsText: String)? {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        let input = Array((parts[0] + "." + parts[1]).utf8)
        let signature = base64URL(parts[2])
        guard signature.count == 64, input.withUnsafeBytes({ key.publicKey.verifyES256(signature: signature, message: $0) }) else { return nil }
        return (object(parts[0]), object(parts[1]), String(decoding: base64URL(parts[1]), as: UTF8.self))
    }

    @Test("the StoreKit 1 message: seven fields joined by U+2063, token and nonce lowercased, timestamp in decimal")
    func promotionalMessage() {
        let message = OfferSigner.promotionalMessage(
            bundleID: "com.example.app", keyID: "2X9R4HXF34", productID: "com.example.pro.monthly", offerID: "winback-50",
            appAccountToken: "0190A5B8-7C00-7000-8000-00000000000A", nonce: "D2B4B7C6-5F0E-4C8A-9E1A-3B2C1D0E9F8A",
            timestampMs: 1_767_225_600_000)
        let sep: [UInt8] = [0xE2, 0x81, 0xA3]  // U+2063 in UTF-8
        let expected =
            Array("com.example.app".utf8) + sep + Array("2X9R4HXF34".utf8) + sep + Array("com.example.pro.monthly".utf8) + sep
            + Array("winback-50".utf8) + sep + Array("0190a5b8-7c00-7000-8000-00000000000a".utf8) + sep
            + Array("d2b4b7c6-5f0e-4c8a-9e1a-3b2c1d0e9f8a".utf8) + sep + Array("1767225600000".utf8)
        #expect(Array(message.utf8) == expected)
        // An empty appAccountToken (Apple allows one) leaves its field empty, separators kept.
        let empty = OfferSigner.promotionalMessage(
            bundleID: "b", keyID: "k", productID: "p", offerID: "o", appAccountToken: "", nonce: "n", timestampMs: 1)
        #expect(empty == "b\u{2063}k\u{2063}p\u{2063}o\u{2063}\u{2063}n\u{2063}1")
    }

    @Test("the StoreKit 1 signature is padded base64 of a DER ECDSA signature that verifies over that message")
    func promotionalSignature() throws {
        let nonce = OfferSigner.nonce()
        let signature = try Self.signer.promotionalSignature(
            bundleID: "com.example.app", productID: "com.example.pro.monthly", offerID: "winback-50",
            appAccountToken: "0190a5b8-7c00-7000-8000-00000000000a", nonce: nonce, timestampMs: 1_767_225_600_000)
        #expect(signature.count % 4 == 0)
        let der = try #require(Data(base64Encoded: signature).map(Array.init))
        #expect(der.first == 0x30)
        let message = OfferSigner.promotionalMessage(
            bundleID: "com.example.app", keyID: "2X9R4HXF34", productID: "com.example.pro.monthly", offerID: "winback-50",
            appAccountToken: "0190a5b8-7c00-7000-8000-00000000000a", nonce: nonce, timestampMs: 1_767_225_600_000)
        #expect(Array(message.utf8).withUnsafeBytes { Self.key.publicKey.verifySHA256(signatureDER: der, message: $0) })
        // Any other field, or another key, fails.
        let other = OfferSigner.promotionalMessage(
            bundleID: "com.example.app", keyID: "2X9R4HXF34", productID: "com.example.pro.monthly", offerID: "winback-51",
            appAccountToken: "0190a5b8-7c00-7000-8000-00000000000a", nonce: nonce, timestampMs: 1_767_225_600_000)
        #expect(!Array(other.utf8).withUnsafeBytes { Self.key.publicKey.verifySHA256(signatureDER: der, message: $0) })
        let stranger = try PrivateKey.generateP256()
        #expect(!Array(message.utf8).withUnsafeBytes { stranger.publicKey.verifySHA256(signatureDER: der, message: $0) })
    }

    @Test("promotional offer JWS: Apple's header, claims and claim order; transactionId only when given")
    func promotionalJWS() throws {
        let jws = try Self.signer.promotionalOfferJWS(
            bundleID: "com.example.app", productID: "com.example.pro.monthly", offerID: "winback-50", transactionID: "2000000000000001",
            nonce: "d2b4b7c6-5f0e-4c8a-9e1a-3b2c1d0e9f8a", issuedAt: 1_767_225_600)
        let parts = try #require(Self.verified(jws))
        #expect(parts.header == ["alg": "ES256", "kid": "2X9R4HXF34", "typ": "JWT"] as NSDictionary)
        #expect(
            parts.claims == [
                "productId": "com.example.pro.monthly", "offerIdentifier": "winback-50", "transactionId": "2000000000000001",
                "bid": "com.example.app", "iss": Self.issuer, "aud": "promotional-offer", "iat": 1_767_225_600,
                "nonce": "d2b4b7c6-5f0e-4c8a-9e1a-3b2c1d0e9f8a",
            ] as NSDictionary)
        #expect(
            parts.claimsText
                == #"{"productId":"com.example.pro.monthly","offerIdentifier":"winback-50","transactionId":"2000000000000001","bid":"com.example.app","iss":"57246542-96fe-1a63-e053-0824d011072a","aud":"promotional-offer","iat":1767225600,"nonce":"d2b4b7c6-5f0e-4c8a-9e1a-3b2c1d0e9f8a"}"#
        )
        let bare = try Self.signer.promotionalOfferJWS(
            bundleID: "com.example.app", productID: "p", offerID: "o", transactionID: nil, nonce: "n", issuedAt: 1)
        let claims = try #require(Self.verified(bare)).claims
        #expect(claims["transactionId"] == nil && claims.count == 7)
    }

    @Test("introductory-offer eligibility JWS: allowIntroductoryOffer is a JSON boolean; its own audience")
    func introductoryJWS() throws {
        for allow in [false, true] {
            let jws = try Self.signer.introductoryOfferEligibilityJWS(
                bundleID: "com.example.app", productID: "com.example.pro.monthly", allowIntroductoryOffer: allow,
                transactionID: "2000000000000001", nonce: "d2b4b7c6-5f0e-4c8a-9e1a-3b2c1d0e9f8a", issuedAt: 1_767_225_600)
            let parts = try #require(Self.verified(jws))
            #expect(parts.header == ["alg": "ES256", "kid": "2X9R4HXF34", "typ": "JWT"] as NSDictionary)
            #expect(
                parts.claimsText
                    == #"{"productId":"com.example.pro.monthly","allowIntroductoryOffer":\#(allow),"transactionId":"2000000000000001","bid":"com.example.app","iss":"57246542-96fe-1a63-e053-0824d011072a","aud":"introductory-offer-eligibility","iat":1767225600,"nonce":"d2b4b7c6-5f0e-4c8a-9e1a-3b2c1d0e9f8a"}"#
            )
        }
    }

    @Test("JSON text is escaped; the key is nowhere in what is signed")
    func escaping() throws {
        let jws = try Self.signer.promotionalOfferJWS(
            bundleID: "com.example.app", productID: "a\"b\\c", offerID: "é", transactionID: nil, nonce: "n", issuedAt: 1)
        let claims = try #require(Self.verified(jws)).claims
        #expect(claims["productId"] as? String == "a\"b\\c" && claims["offerIdentifier"] as? String == "é")
        #expect(!jws.contains(Self.key.pem().split(separator: "\n")[1]))
    }

    @Test("nonces: version 4 UUIDs in lowercase, a new one each time")
    func nonces() {
        let all = (0..<1000).map { _ in OfferSigner.nonce() }
        #expect(Set(all).count == 1000)
        for n in all.prefix(50) {
            #expect(n == n.lowercased() && UUID(uuidString: n) != nil)
            let u = Array(n.utf8)
            #expect(u[14] == UInt8(ascii: "4") && "89ab".utf8.contains(u[19]))
        }
    }

    @Test("only P-256 keys are P-256: P-384 and secp256k1 (also 256 bits) are not")
    func curves() throws {
        #expect(Self.key.isP256)
        let p384 = """
            -----BEGIN PRIVATE KEY-----
            MIG2AgEAMBAGByqGSM49AgEGBSuBBAAiBIGeMIGbAgEBBDC3qk0mxnxsnd9nK1yV
            Q7A0HEw/LVgfiPKC0ISkSpNSdWlnlpesmErn9ScB4RQJF+2hZANiAARG+Hl87V0j
            1ROVq9qmz7MUiK2doTTGmSxkxV/daTmY3HV5nQcLIjyHUxSYvroivPStPtIAQYWB
            MBlTCFpYU7rozO6TjTsy1SFIO4i4mvRjZdq74OGR6N/y0V41J9AhThw=
            -----END PRIVATE KEY-----
            """
        let k1 = """
            -----BEGIN PRIVATE KEY-----
            MIGEAgEAMBAGByqGSM49AgEGBSuBBAAKBG0wawIBAQQgW/ttUcijkYM1w1yjuvRF
            Qcan0g0YFKRMRinj/wtWUcGhRANCAATgrZt6DLwdRAA2elJzu7ZjKf2tm+xtzyBN
            joNAHzROPql5f0IV1KRBSB61UdzrlvzwK0D9fnztrDiBqtvGo7a5
            -----END PRIVATE KEY-----
            """
        #expect(!(try PrivateKey.parsePEM(Array(p384.utf8))).isP256)
        #expect(!(try PrivateKey.parsePEM(Array(k1.utf8))).isP256)
        // A P-256 key read back from its PEM (the .p8 form) still is.
        #expect(try PrivateKey.parsePEM(Array(Self.key.pem().utf8)).isP256)
    }

    @Test("the API token is made by the same JWS code: same header, verifies")
    func sharedJWS() throws {
        let jwt = try ES256JWT.sign(keyID: "K1", claims: #"{"a":1}"#, key: Self.key)
        let parts = try #require(Self.verified(jwt))
        #expect(parts.header == ["alg": "ES256", "kid": "K1", "typ": "JWT"] as NSDictionary && parts.claimsText == #"{"a":1}"#)
    }
}
