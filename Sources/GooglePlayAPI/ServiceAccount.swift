public import Crypto
import Glibc
import JOSE
import ProtoWire

/// A service account's JSON key file, as the Google Cloud console writes it: the members billingd uses
/// (`client_email`, `private_key` (PKCS#8 RSA PEM), `private_key_id`, `token_uri`). The private key never appears
/// in a description, error or log line; `description` names only the account and the key id.
public struct ServiceAccountKey: Sendable, CustomStringConvertible {
    /// Why a key file was refused; the text names the member, never its value.
    public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    public var clientEmail: String
    public var privateKeyID: String
    public var tokenURI: String
    public var privateKey: PrivateKey

    /// Google's token endpoint, when a key file names none.
    public static let googleTokenURI = "https://oauth2.googleapis.com/token"

    public init(clientEmail: String, privateKeyID: String, tokenURI: String = googleTokenURI, privateKey: PrivateKey) {
        self.clientEmail = clientEmail
        self.privateKeyID = privateKeyID
        self.tokenURI = tokenURI
        self.privateKey = privateKey
    }

    public var description: String { "service account \(clientEmail) (key id \(privateKeyID))" }

    /// Parses the key file's JSON. The key must be RSA of at least 2048 bits (RS256).
    public static func parse(_ json: [UInt8]) throws(Problem) -> ServiceAccountKey {
        let o: GoogleJSON
        do { o = try GoogleJSON.object(json, "service account key") } catch { throw Problem("the key file is not a JSON object") }
        func text(_ k: String) throws(Problem) -> String? {
            do { return try o.string(k) } catch { throw Problem("the key file's \(k) is not a string") }
        }
        if let type = try text("type"), type != "service_account" { throw Problem("the key file's type is \(type), not service_account") }
        guard let email = try text("client_email"), !email.isEmpty else { throw Problem("the key file has no client_email") }
        guard let pem = try text("private_key"), !pem.isEmpty else { throw Problem("the key file has no private_key") }
        let key: PrivateKey
        do { key = try PrivateKey.parsePEM(Array(pem.utf8)) } catch { throw Problem("the key file's private_key is not a PEM private key") }
        guard key.isRSA, key.bits >= 2048 else { throw Problem("the key file's private_key is not an RSA key of 2048 bits or more") }
        let tokenURI = try text("token_uri") ?? googleTokenURI
        guard tokenURI.hasPrefix("https://") || tokenURI.hasPrefix("http://") else { throw Problem("the key file's token_uri is not a URL") }
        return ServiceAccountKey(clientEmail: email, privateKeyID: try text("private_key_id") ?? "", tokenURI: tokenURI, privateKey: key)
    }

    /// Reads and parses a key file.
    public static func load(path: String) throws(Problem) -> ServiceAccountKey {
        guard let f = fopen(path, "rb") else { throw Problem("cannot open \(path)") }
        defer { fclose(f) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = fread(&chunk, 1, chunk.count, f)
            if n <= 0 { break }
            bytes += chunk[0..<n]
            if bytes.count > 1 << 20 { throw Problem("\(path) is larger than 1 MiB") }
        }
        return try parse(bytes)
    }

    /// The OAuth 2.0 JWT-bearer assertion (RFC 7523) Google's token endpoint takes: RS256, header
    /// `{"alg":"RS256","kid":private_key_id,"typ":"JWT"}`, claims `iss` = client_email, `scope`, `aud` = token_uri,
    /// `iat`, `exp` = `iat` + 3600 (Google's most).
    public func assertion(scope: String = ServiceAccountKey.androidPublisherScope, issuedAt iat: Int64) throws(CryptoError) -> String {
        let claims =
            "{" + #""iss":"# + JSONString.quote(clientEmail) + #","scope":"# + JSONString.quote(scope) + #","aud":"# + JSONString.quote(tokenURI)
            + #","iat":"# + String(iat) + #","exp":"# + String(iat + Self.assertionLifetimeSeconds) + "}"
        return try RS256JWT.sign(keyID: privateKeyID, claims: claims, key: privateKey)
    }

    /// The scope of the Play Developer API.
    public static let androidPublisherScope = "https://www.googleapis.com/auth/androidpublisher"
    /// An assertion's life: Google refuses more than an hour.
    public static let assertionLifetimeSeconds: Int64 = 3600
}

/// A compact JWS signed with RS256 (RSASSA-PKCS1-v1_5, SHA-256): header `{"alg":"RS256","kid":KID,"typ":"JWT"}`
/// (no `kid` when empty), the claims as given, each part unpadded base64url.
public enum RS256JWT {
    /// `header.claims.signature`; `claims` is a JSON object's text.
    public static func sign(keyID: String, claims: String, key: PrivateKey) throws(CryptoError) -> String {
        try CompactJWS.join(header: CompactJWS.jwtHeader(algorithm: "RS256", keyID: keyID), payload: Array(claims.utf8)) {
            (input: [UInt8]) throws(CryptoError) in try key.signRS256(input)
        }
    }
}
