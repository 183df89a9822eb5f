@testable import AppStoreAPI
import Crypto
import Foundation
import Synchronization
import Testing

@Suite("App Store Server API tokens")
struct APITokenTests {
    static let key = try! PrivateKey.generateP256()
    static let certificate: Certificate = {
        try! CertificateIssuer.issue(
            commonName: "api key", organization: "test", serial: 1, key: key, issuer: nil, isCA: false, markerOIDs: [],
            notBefore: 0, notAfter: 4_000_000_000)
    }()

    static func decode(_ part: Substring) -> [String: Any] {
        var s = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        return try! JSONSerialization.jsonObject(with: Data(base64Encoded: s)!) as! [String: Any]
    }

    static func signature(_ part: Substring) -> [UInt8] {
        var s = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        return Array(Data(base64Encoded: s)!)
    }

    @Test("header and claims exactly as Apple specifies; the ES256 signature verifies with the key's public half")
    func shape() throws {
        let token = APIToken(
            .init(
                keyID: "2X9R4HXF34", issuerID: "57246542-96fe-1a63-e053-0824d011072a", bundleID: "com.example.app",
                privateKey: Self.key), now: { 1_800_000_000 })
        let jwt = try token.token()
        let parts = jwt.split(separator: ".")
        #expect(parts.count == 3)
        let header = Self.decode(parts[0]), claims = Self.decode(parts[1])
        #expect(header as NSDictionary == ["alg": "ES256", "kid": "2X9R4HXF34", "typ": "JWT"] as NSDictionary)
        #expect(
            claims as NSDictionary == [
                "iss": "57246542-96fe-1a63-e053-0824d011072a", "iat": 1_800_000_000,
                "exp": 1_800_000_000 + 1200, "aud": "appstoreconnect-v1", "bid": "com.example.app",
            ] as NSDictionary)
        let input = Array((parts[0] + "." + parts[1]).utf8)
        let sig = Self.signature(parts[2])
        #expect(sig.count == 64)
        #expect(input.withUnsafeBytes { Self.certificate.publicKey!.verifyES256(signature: sig, message: $0) })
        // The key appears nowhere in the token or its description.
        #expect(!jwt.contains(Self.key.pem().split(separator: "\n")[1]))
    }

    @Test("one token reused until 5 minutes before it expires; a new one after; invalidate forces one")
    func reuse() throws {
        let clock = Mutex<Int64>(1_800_000_000)
        let token = APIToken(.init(keyID: "K", issuerID: "I", bundleID: "B", privateKey: Self.key), now: { clock.withLock { $0 } })
        let first = try token.token()
        clock.withLock { $0 += 14 * 60 }
        #expect(try token.token() == first)
        clock.withLock { $0 += 60 + 1 }  // 15 min + 1 s: within 5 minutes of the 20-minute expiry
        let second = try token.token()
        #expect(second != first)
        #expect(Self.decode(second.split(separator: ".")[1])["iat"] as? Int == 1_800_000_000 + 15 * 60 + 1)
        token.invalidate()
        let third = try token.token()
        #expect(third != second)  // made anew: ECDSA signatures are randomized
    }
}
