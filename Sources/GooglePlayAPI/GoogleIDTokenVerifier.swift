import Crypto
import JOSE
import Glibc
import ProtoWire
import Synchronization

/// Checks the OIDC ID token Pub/Sub sends with a push (`authorization: Bearer <JWT>`), as Google's libraries do
/// (`google.oauth2.id_token.verify_token`) plus the push subscription's service account: RS256 by a key of the
/// current `GoogleKeySet` (by `kid`), `aud` = the configured audience, `iss` `accounts.google.com` or
/// `https://accounts.google.com`, `email` = the configured service account with `email_verified` true, `iat` not in
/// the future and `exp` not past (each within `clockSkewSeconds`).
///
/// Fetching Google's keys is the caller's: `replaceKeys` swaps in a new set (Google rotates them every few days)
/// while checks go on. Any thread; no I/O. The token is never put in a refusal's text.
public final class GoogleIDTokenVerifier: Sendable {
    /// What the verifier holds a token to.
    public struct Configuration: Sendable {
        /// The push subscription's audience (`--rtdn-audience`).
        public var audience: String
        /// The push subscription's service account (`--rtdn-service-account`).
        public var serviceAccountEmail: String
        /// Clock difference forgiven on `iat` and `exp`.
        public var clockSkewSeconds: Int64 = 60
        /// Longest token accepted (Google's are valid for an hour).
        public var maxLifetimeSeconds: Int64 = 2 * 3600

        public init(audience: String, serviceAccountEmail: String) {
            self.audience = audience
            self.serviceAccountEmail = serviceAccountEmail
        }
    }

    /// The claims of an accepted token.
    public struct Claims: Sendable, Equatable {
        public var issuer: String
        public var audience: String
        public var email: String
        public var subject: String?
        public var authorizedParty: String?
        public var issuedAt: Int64
        public var expiresAt: Int64
        public var keyID: String
    }

    /// Why a token was refused (each an HTTP 401 for the push).
    public enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        /// No `authorization: Bearer` header, or an empty token.
        case noToken
        /// Not a compact JWS of JSON parts, not RS256, or a claim missing or of the wrong type.
        case malformed(String)
        /// No key of the current set has the token's `kid`.
        case unknownKey(String)
        case badSignature
        case wrongAudience
        case wrongIssuer
        /// `email` is not the configured service account, or `email_verified` is not true.
        case wrongEmail
        /// `exp` passed, `iat` in the future, or a lifetime longer than allowed.
        case expired

        public var description: String {
            switch self {
            case .noToken: "no bearer token"
            case .malformed(let why): "malformed token: \(why)"
            case .unknownKey(let kid): "unknown key id \(kid)"
            case .badSignature: "bad signature"
            case .wrongAudience: "wrong audience"
            case .wrongIssuer: "wrong issuer"
            case .wrongEmail: "wrong or unverified email"
            case .expired: "expired or not yet valid"
            }
        }

        /// The metric label.
        public var kind: String {
            switch self {
            case .noToken: "no_token"
            case .malformed: "malformed"
            case .unknownKey: "unknown_key"
            case .badSignature: "bad_signature"
            case .wrongAudience: "wrong_audience"
            case .wrongIssuer: "wrong_issuer"
            case .wrongEmail: "wrong_email"
            case .expired: "expired"
            }
        }
    }

    /// The verdict on one token.
    public enum Verdict: Sendable, Equatable {
        case valid(Claims)
        case invalid(Refusal)
    }

    public static let issuers: Set<String> = ["accounts.google.com", "https://accounts.google.com"]

    public let configuration: Configuration
    private let keySet: Mutex<GoogleKeySet>
    private let now: @Sendable () -> Int64

    /// `now`: Unix seconds (tests pass their own clock).
    public init(_ configuration: Configuration, keys: GoogleKeySet, now: (@Sendable () -> Int64)? = nil) {
        self.configuration = configuration
        keySet = Mutex(keys)
        self.now = now ?? { Int64(time(nil)) }
    }

    /// The key set in use.
    public var keys: GoogleKeySet { keySet.withLock { $0 } }

    /// Uses `keys` for the checks that follow.
    public func replaceKeys(_ keys: GoogleKeySet) { keySet.withLock { $0 = keys } }

    /// Checks the value of an `authorization` header (`Bearer <token>`, the scheme in any case).
    public func verify(authorization: String?) -> Verdict {
        guard let authorization, authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else { return .invalid(.noToken) }
        return verify(token: String(authorization.dropFirst(7)).trimmingSpaces)
    }

    /// Checks a compact JWS.
    public func verify(token: String) -> Verdict {
        do { return .valid(try check(token)) } catch { return .invalid(error) }
    }

    private func check(_ token: String) throws(Refusal) -> Claims {
        guard !token.isEmpty else { throw .noToken }
        guard token.utf8.count <= 16384 else { throw .malformed("longer than 16 KiB") }
        guard let jws = try? CompactJWS.split(token, maxBytes: 16384), !jws.signature.isEmpty else { throw .malformed("not a compact JWS") }
        let (payload, signature) = (jws.payload, jws.signature)
        guard case .object(let header)? = try? JSONReader.parse(jws.header) else { throw .malformed("the header is not a JSON object") }
        guard case .string("RS256")? = header["alg"] else { throw .malformed("alg is not RS256") }
        guard case .string(let kid)? = header["kid"], !kid.isEmpty else { throw .unknownKey("(none)") }
        guard let key = keys[kid] else { throw .unknownKey(String(kid.prefix(64))) }
        guard key.verifyRS256(signature: signature, message: jws.signingInput) else { throw .badSignature }
        guard case .object(let claims)? = try? JSONReader.parse(payload) else { throw .malformed("the claims are not a JSON object") }
        func text(_ k: String) -> String? { if case .string(let s)? = claims[k] { s } else { nil } }
        func seconds(_ k: String) throws(Refusal) -> Int64 {
            switch claims[k] {
            case .integer(let n)?: return n
            case .number(let d)? where d.isFinite && abs(d) < 1e15: return Int64(d)
            default: throw .malformed("\(k) is not a number")
            }
        }
        guard let iss = text("iss"), Self.issuers.contains(iss) else { throw .wrongIssuer }
        // aud is a string in Google's tokens; an array holding the audience is taken as RFC 7519 allows.
        var audiences: [String] = []
        switch claims["aud"] {
        case .string(let a)?: audiences = [a]
        case .array(let items)?: for case .string(let a) in items { audiences.append(a) }
        default: break
        }
        guard audiences.contains(configuration.audience) else { throw .wrongAudience }
        guard let email = text("email"), email == configuration.serviceAccountEmail,
            claims["email_verified"] == .bool(true) || claims["email_verified"] == .string("true")
        else { throw .wrongEmail }
        let iat = try seconds("iat")
        let exp = try seconds("exp")
        let t = now()
        let skew = configuration.clockSkewSeconds
        guard exp > iat, exp - iat <= configuration.maxLifetimeSeconds, iat <= t + skew, exp > t - skew else { throw .expired }
        return Claims(
            issuer: iss, audience: configuration.audience, email: email, subject: text("sub"), authorizedParty: text("azp"), issuedAt: iat,
            expiresAt: exp, keyID: kid)
    }
}

extension String {
    fileprivate var trimmingSpaces: String {
        String(self.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
