import Crypto
import Glibc
import GooglePlayAPI
import HTTPClient
import Synchronization
import Lifecycle

/// The service account's OAuth 2.0 access token: made by POSTing an RS256 JWT assertion to the key file's
/// `token_uri` (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=...`), cached until
/// `renewBefore` seconds before `expires_in` ends, one refresh at a time (callers that find the cache stale
/// wait for that refresh rather than start their own). `invalidate` drops a token the API refused.
/// The token and the assertion never leave this type and the Authorization header.
final class AccessTokens: Sendable {
    private let key: ServiceAccountKey
    private let exchange: Exchange
    private let renewBefore: Int64
    private let now: @Sendable () -> Int64
    private let cached = Mutex<(token: String, renewAt: Int64)?>(nil)
    /// Held by the one thread refreshing.
    private let refreshing = Signal(1)

    init(key: ServiceAccountKey, exchange: Exchange, renewBefore: Int64, now: @escaping @Sendable () -> Int64) {
        self.key = key
        self.exchange = exchange
        self.renewBefore = renewBefore
        self.now = now
    }

    /// A token valid for a while yet: the cached one, or a fresh one.
    func token() throws(GooglePlayAPIError) -> String {
        if let c = cached.withLock({ $0 }), c.renewAt > now() { return c.token }
        refreshing.wait()
        defer { refreshing.signal() }
        // Another caller may have refreshed while this one waited.
        if let c = cached.withLock({ $0 }), c.renewAt > now() { return c.token }
        let (token, lifetime) = try fetch()
        let t = now()
        cached.withLock { $0 = (token, t + max(1, lifetime - renewBefore)) }
        return token
    }

    /// Forgets `token` if it is still the cached one (an API answer of 401 or 403 to it).
    func invalidate(_ token: String) {
        cached.withLock { if $0?.token == token { $0 = nil } }
    }

    /// One token from the token endpoint, with the exchange's retries.
    private func fetch() throws(GooglePlayAPIError) -> (String, Int64) {
        let assertion: String
        do { assertion = try key.assertion(issuedAt: now()) } catch { throw .unauthorized("cannot sign the token assertion with the service account's key") }
        let body = "grant_type=" + FormEncoding.encode("urn:ietf:params:oauth:grant-type:jwt-bearer") + "&assertion=" + FormEncoding.encode(assertion)
        let answer = try exchange.run("oauth2.token", authorized: false) { _ in
            HTTPClientRequest(
                method: "POST", url: key.tokenURI, headers: [("content-type", "application/x-www-form-urlencoded"), ("accept", "application/json")],
                body: Array(body.utf8))
        }
        switch answer.status {
        case 200..<300:
            let o = try GoogleJSON.object(answer.body, "token answer")
            guard let token = try o.string("access_token"), !token.isEmpty else { throw .invalidAnswer("the token endpoint answered no access_token") }
            let lifetime = try o.int64("expires_in") ?? 3600
            return (token, lifetime)
        default:
            // {"error": "invalid_grant", "error_description": "..."}: Google's words, never the assertion.
            let o = try? GoogleJSON.object(answer.body, "token error")
            let error = (try? o?.string("error")).flatMap { $0 } ?? ""
            let description = (try? o?.string("error_description")).flatMap { $0 } ?? ""
            throw .unauthorized(
                "the token endpoint refused \(key.clientEmail): HTTP \(answer.status) \(Exchange.cap(error)) \(Exchange.cap(description))")
        }
    }
}

/// application/x-www-form-urlencoded values.
enum FormEncoding {
    static func encode(_ s: String) -> String { PathSegment.encode(s) }
}
