import Crypto
import Foundation
import GooglePlayAPI
import Testing

@Suite("RS256 in Crypto, and the service account's token assertion", .serialized)
struct RS256Tests {
    @Test("a PKCS#8 PEM RSA key signs RS256; OpenSSL's CLI verifies the signature")
    func signVerifiedByOpenSSL() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let pem = suiteKey.pem()
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let key = try PrivateKey.parsePEM(Array(pem.utf8))
        #expect(key.isRSA && key.bits == 2048 && !key.isP256)
        let message = Array("header.claims".utf8)
        let signature = try key.signRS256(message)
        #expect(signature.count == 256)
        let pub = try folder.write("pub.pem", key.publicKey.pem())
        let sig = folder.path + "/sig.bin"
        _ = FileManager.default.createFile(atPath: sig, contents: Data(signature))
        let verified = try run(["openssl", "dgst", "-sha256", "-verify", pub, "-signature", sig], input: message)
        #expect(verified.status == 0 && verified.output.contains("Verified OK"))
        #expect(key.publicKey.verifyRS256(signature: signature, message: message))
        #expect(!key.publicKey.verifyRS256(signature: signature, message: Array("header.claimz".utf8)))
    }

    @Test("EC keys do not sign RS256; RS256 refuses EC public keys, short signatures and small RSA keys")
    func refusals() throws {
        let ec = try PrivateKey.generateP256()
        #expect(throws: CryptoError.self) { try ec.signRS256([1, 2, 3]) }
        let signature = try suiteKey.signRS256([1, 2, 3])
        #expect(!ec.publicKey.verifyRS256(signature: signature, message: [1, 2, 3]))
        #expect(!suiteKey.publicKey.verifyRS256(signature: Array(signature.dropLast()), message: [1, 2, 3]))
        let small = try PrivateKey.generateRSA(bits: 1024)
        #expect(small.bits == 1024)
        #expect(!small.publicKey.verifyRS256(signature: try small.signRS256([1]), message: [1]))
    }

    @Test("an RSA public key from a JWK's n and e, and from an X.509 PEM certificate, verifies RS256")
    func jwkAndCertificate() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let keyFile = try folder.write("key.pem", suiteKey.pem())
        let modulus = try opensslModulus(keyFile)
        let jwk = try PublicKey.rsa(jwkModulus: b64url(modulus), exponent: "AQAB")
        #expect(jwk.isRSA && jwk.bits == 2048)
        let message = Array("a.b".utf8)
        let signature = try suiteKey.signRS256(message)
        #expect(jwk.verifyRS256(signature: signature, message: message))
        #expect(jwk.pem() == suiteKey.publicKey.pem())
        #expect(throws: CryptoError.self) { try PublicKey.rsa(jwkModulus: "!!", exponent: "AQAB") }
        let cert = folder.path + "/cert.pem"
        _ = try run(["openssl", "req", "-x509", "-key", keyFile, "-out", cert, "-days", "1", "-subj", "/CN=push"])
        let certificate = try Certificate.load(path: cert)
        #expect(certificate.publicKey!.verifyRS256(signature: signature, message: message))
    }

    @Test("the assertion: header alg RS256 + kid, claims iss/scope/aud/iat/exp = iat + 3600, signature checked by OpenSSL")
    func assertionShape() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let key = try ServiceAccountKey.parse(Array(keyFileJSON(tokenURI: "https://oauth2.googleapis.com/token").utf8))
        #expect(key.clientEmail == "billingd@fake-project.iam.gserviceaccount.com" && key.privateKeyID == "0123456789abcdef")
        #expect(!key.description.contains("PRIVATE"))
        let jwt = try key.assertion(issuedAt: 1_764_600_000)
        let parts = jwt.split(separator: ".")
        #expect(parts.count == 3)
        let header = jsonObject(unb64url(parts[0]))
        #expect(header["alg"] as? String == "RS256" && header["kid"] as? String == "0123456789abcdef" && header["typ"] as? String == "JWT")
        let claims = jsonObject(unb64url(parts[1]))
        #expect(claims["iss"] as? String == "billingd@fake-project.iam.gserviceaccount.com")
        #expect(claims["scope"] as? String == "https://www.googleapis.com/auth/androidpublisher")
        #expect(claims["aud"] as? String == "https://oauth2.googleapis.com/token")
        #expect(claims["iat"] as? Int == 1_764_600_000 && claims["exp"] as? Int == 1_764_603_600)
        let pub = try folder.write("pub.pem", suiteKey.publicKey.pem())
        let sig = folder.path + "/sig.bin"
        _ = FileManager.default.createFile(atPath: sig, contents: Data(unb64url(parts[2])))
        let verified = try run(["openssl", "dgst", "-sha256", "-verify", pub, "-signature", sig], input: Array((parts[0] + "." + parts[1]).utf8))
        #expect(verified.output.contains("Verified OK"))
    }

    @Test("key files: missing members, an EC key, a wrong type and non-JSON are refused without echoing the key")
    func keyFileRefusals() throws {
        let good = keyFileJSON(tokenURI: "https://oauth2.googleapis.com/token")
        let cases = [
            "not json", good.replacingOccurrences(of: "\"client_email\"", with: "\"email\""),
            good.replacingOccurrences(of: "\"private_key\":", with: "\"key\":"),
            good.replacingOccurrences(of: "service_account", with: "authorized_user"),
            keyFileJSON(tokenURI: "https://oauth2.googleapis.com/token", key: try PrivateKey.generateP256()),
        ]
        for text in cases {
            do {
                _ = try ServiceAccountKey.parse(Array(text.utf8))
                Issue.record("accepted: \(text.prefix(40))")
            } catch {
                #expect(!error.description.contains("BEGIN"))
            }
        }
    }
}
