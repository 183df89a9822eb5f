public import Crypto
import AppStore
import Glibc
import ProtoWire
import Synchronization

/// The App Store Server API's bearer token: an ES256 JWT made with the `.p8` key from App Store Connect, exactly
/// as Apple specifies it: header `{"alg":"ES256","kid":KEY_ID,"typ":"JWT"}`, claims `iss` (issuer id), `iat`,
/// `exp` (here `iat` + 20 minutes; Apple refuses more than 60), `aud` `appstoreconnect-v1`, `bid` (bundle id).
/// One token is reused until 5 minutes before it expires. The key never leaves this type: not in
/// descriptions, errors or logs.
public final class APIToken: Sendable {
    public struct Credentials: Sendable {
        public var keyID: String
        public var issuerID: String
        public var bundleID: String
        public var privateKey: PrivateKey
        public init(keyID: String, issuerID: String, bundleID: String, privateKey: PrivateKey) {
            self.keyID = keyID
            self.issuerID = issuerID
            self.bundleID = bundleID
            self.privateKey = privateKey
        }
    }

    /// How long a token is valid, and how long before its end a new one is made.
    public static let lifetimeSeconds: Int64 = 20 * 60
    public static let renewBeforeSeconds: Int64 = 5 * 60

    private let credentials: Credentials
    private let now: @Sendable () -> Int64
    private let cached = Mutex<(token: String, expires: Int64)?>(nil)

    /// `now` gives Unix seconds (tests may pass another clock).
    public init(_ credentials: Credentials, now: (@Sendable () -> Int64)? = nil) {
        self.credentials = credentials
        self.now = now ?? { Int64(time(nil)) }
    }

    /// The current token, made anew when none is cached or the cached one is within 5 minutes of its end.
    public func token() throws(CryptoError) -> String {
        let t = now()
        if let c = cached.withLock({ $0 }), c.expires - Self.renewBeforeSeconds > t { return c.token }
        let fresh = try make(issuedAt: t)
        cached.withLock { $0 = (fresh, t + Self.lifetimeSeconds) }
        return fresh
    }

    /// Forgets the cached token (after the API answered 401, a clock step, a key change).
    public func invalidate() { cached.withLock { $0 = nil } }

    func make(issuedAt iat: Int64) throws(CryptoError) -> String {
        let claims =
            "{"
            + [
                #""iss":"# + JSONText.quote(credentials.issuerID),
                #""iat":"# + String(iat),
                #""exp":"# + String(iat + Self.lifetimeSeconds),
                #""aud":"appstoreconnect-v1""#,
                #""bid":"# + JSONText.quote(credentials.bundleID),
            ].joined(separator: ",") + "}"
        return try ES256JWT.sign(keyID: credentials.keyID, claims: claims, key: credentials.privateKey)
    }
}

/// JSON text for request bodies and tokens (AppStoreHTTP writes its request bodies with it too).
package enum JSONText {
    /// `s` as a JSON string literal (`JSONString.quote`).
    package static func quote(_ s: String) -> String { JSONString.quote(s) }

    /// An object from already-encoded values; nil values are left out.
    package static func object(_ fields: [(String, String?)]) -> String {
        "{" + fields.compactMap { k, v in v.map { quote(k) + ":" + $0 } }.joined(separator: ",") + "}"
    }
}
