import Crypto
import Foundation
import GooglePlayAPI
import ProtoWire
import Testing

/// The JWKS of `key` (n from OpenSSL's CLI: an independent source) and its PEM map (a self-signed certificate).
func keySets(_ key: PrivateKey, kid: String) throws -> (jwks: String, pemMap: String) {
    let folder = try TemporaryFolder()
    defer { folder.remove() }
    let file = try folder.write("key.pem", key.pem())
    let modulus = try opensslModulus(file)
    let jwks = #"{"keys": [{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": "\#(kid)", "n": "\#(b64url(modulus))", "e": "AQAB"}]}"#
    _ = try run(["openssl", "req", "-x509", "-key", file, "-out", folder.path + "/cert.pem", "-days", "1", "-subj", "/CN=push"])
    let pem = try String(contentsOfFile: folder.path + "/cert.pem", encoding: .utf8)
    return (jwks, "{" + JSONString.quote(kid) + ": " + JSONString.quote(pem) + "}")
}

@Suite("GoogleIDTokenVerifier: Pub/Sub push tokens", .serialized)
struct IDTokenVerifierTests {
    static let now: Int64 = 1_796_157_786
    static let audience = "https://billing.example.com/googleplay/rtdn"
    static let email = "rtdn-push@fake-project.iam.gserviceaccount.com"
    static let kid = "f2e11986282de93f27b264fd2a4de192993dcb8c"
    static let sets = try! keySets(suiteKey, kid: kid)

    static func claims(_ change: (inout [String: String]) -> Void = { _ in }) -> String {
        var c: [String: String] = [
            "aud": JSONString.quote(audience), "azp": #""1122334455""#, "email": JSONString.quote(email), "email_verified": "true",
            "exp": String(now + 3000), "iat": String(now - 600), "iss": #""https://accounts.google.com""#, "sub": #""1122334455""#,
        ]
        change(&c)
        return "{" + c.sorted { $0.key < $1.key }.map { JSONString.quote($0.key) + ":" + $0.value }.joined(separator: ",") + "}"
    }

    static func token(kid: String = kid, key: PrivateKey = suiteKey, _ change: (inout [String: String]) -> Void = { _ in }) throws -> String {
        try RS256JWT.sign(keyID: kid, claims: claims(change), key: key)
    }

    func verifier(_ json: String = sets.jwks) throws -> GoogleIDTokenVerifier {
        GoogleIDTokenVerifier(
            .init(audience: Self.audience, serviceAccountEmail: Self.email), keys: try GoogleKeySet.parse(Array(json.utf8)), now: { Self.now })
    }

    @Test("a valid token is accepted with either key set form; the claims come back")
    func valid() throws {
        for form in [Self.sets.jwks, Self.sets.pemMap] {
            let v = try verifier(form)
            #expect(v.keys.keyIDs == [Self.kid])
            guard case .valid(let claims) = v.verify(authorization: "Bearer " + (try Self.token())) else {
                Issue.record("refused")
                continue
            }
            #expect(claims.email == Self.email && claims.issuer == "https://accounts.google.com" && claims.subject == "1122334455")
            #expect(claims.expiresAt == Self.now + 3000 && claims.keyID == Self.kid)
        }
        let plainIssuer = try Self.token { $0["iss"] = #""accounts.google.com""# }
        #expect(try verifier().verify(token: plainIssuer) != .invalid(.wrongIssuer))
    }

    @Test("every refusal")
    func refusals() throws {
        let v = try verifier()
        let stranger = try PrivateKey.generateRSA()
        let good = try Self.token()
        let parts = good.split(separator: ".")
        var signature = unb64url(parts[2])
        signature[5] ^= 1
        let tampered = parts[0] + "." + parts[1] + "." + b64url(signature)
        let otherClaims = b64url(Array(Self.claims { $0["email"] = #""x@y""# }.utf8))
        let cases: [(String?, GoogleIDTokenVerifier.Refusal)] = [
            (nil, .noToken), ("", .noToken), ("Basic abc", .noToken), ("Bearer ", .noToken),
            ("Bearer abc", .malformed("not a compact JWS")),
            ("Bearer " + b64url(Array(#"{"alg":"none","kid":"x"}"#.utf8)) + "." + parts[1] + ".AAAA", .malformed("alg is not RS256")),
            ("Bearer " + (try Self.token(kid: "stranger", key: stranger)), .unknownKey("stranger")),
            ("Bearer " + (try Self.token(kid: Self.kid, key: stranger)), .badSignature),
            ("Bearer " + tampered, .badSignature),
            ("Bearer " + parts[0] + "." + otherClaims + "." + parts[2], .badSignature),
            ("Bearer " + (try Self.token { $0["aud"] = JSONString.quote(Self.audience + "/elsewhere") }), .wrongAudience),
            ("Bearer " + (try Self.token { $0["iss"] = #""https://evil.example.com""# }), .wrongIssuer),
            ("Bearer " + (try Self.token { $0["email"] = #""someone-else@fake-project.iam.gserviceaccount.com""# }), .wrongEmail),
            ("Bearer " + (try Self.token { $0["email_verified"] = "false" }), .wrongEmail),
            ("Bearer " + (try Self.token { $0["email"] = nil }), .wrongEmail),
            (
                "Bearer "
                    + (try Self.token {
                        $0["exp"] = String(Self.now - 3600); $0["iat"] = String(Self.now - 7200)
                    }), .expired
            ),
            (
                "Bearer "
                    + (try Self.token {
                        $0["iat"] = String(Self.now + 600); $0["exp"] = String(Self.now + 4200)
                    }), .expired
            ),
            (
                "Bearer "
                    + (try Self.token {
                        $0["iat"] = String(Self.now - 86_400); $0["exp"] = String(Self.now + 86_400)
                    }), .expired
            ),
            ("Bearer " + (try Self.token { $0["exp"] = #""later""# }), .malformed("exp is not a number")),
        ]
        for (header, refusal) in cases {
            #expect(v.verify(authorization: header) == .invalid(refusal), "\(refusal)")
        }
        // Within the skew: just expired, and issued a little ahead of this clock.
        #expect(v.verify(token: try Self.token { $0["exp"] = String(Self.now - 30) }) != .invalid(.expired))
        #expect(v.verify(token: try Self.token { $0["iat"] = String(Self.now + 30) }) != .invalid(.expired))
    }

    @Test("replaceKeys: a rotated key is unknown until the new set is given, then accepted; key sets refuse junk")
    func rotation() throws {
        let v = try verifier()
        let next = try PrivateKey.generateRSA()
        let rotated = try Self.token(kid: "next", key: next)
        #expect(v.verify(token: rotated) == .invalid(.unknownKey("next")))
        v.replaceKeys(try GoogleKeySet.parse(Array(try keySets(next, kid: "next").pemMap.utf8)))
        #expect(v.verify(token: rotated) != .invalid(.unknownKey("next")))
        #expect(v.verify(token: try Self.token()) == .invalid(.unknownKey(Self.kid)))
        for junk in ["[]", "{}", #"{"keys": [{"kty": "EC", "kid": "a", "x": "AA", "y": "AA"}]}"#, #"{"a": "not a certificate"}"#, "nope"] {
            #expect(throws: GoogleKeySet.Problem.self) { try GoogleKeySet.parse(Array(junk.utf8)) }
        }
    }
}
