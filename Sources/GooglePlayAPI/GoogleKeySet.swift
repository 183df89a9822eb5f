public import Crypto
import JOSE

/// The public keys Google signs ID tokens (Pub/Sub push tokens) with, by key id: from Google's JWKS
/// (`https://www.googleapis.com/oauth2/v3/certs`: `{"keys": [{"kid", "n", "e", "alg", "kty", "use"}]}`) or its PEM
/// map (`https://www.googleapis.com/oauth2/v1/certs`: `{"kid": "-----BEGIN CERTIFICATE-----..."}`). Only RSA keys
/// of 2048 bits or more are kept; JWKS entries for another `kty`, `alg` or `use` are skipped.
public struct GoogleKeySet: Sendable {
    /// Why a key set was refused.
    public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    public private(set) var keys: [String: PublicKey]

    public init(keys: [String: PublicKey]) { self.keys = keys }

    /// The key ids, sorted.
    public var keyIDs: [String] { keys.keys.sorted() }

    public subscript(kid: String) -> PublicKey? { keys[kid] }

    /// Parses either form; a set with no usable key is refused.
    public static func parse(_ json: [UInt8]) throws(Problem) -> GoogleKeySet {
        guard let value = try? JSONReader.parse(json), case .object(let top) = value else { throw Problem("the key set is not a JSON object") }
        var keys: [String: PublicKey] = [:]
        if case .array(let entries)? = top["keys"] {
            for case .object(let k) in entries {
                func text(_ name: String) -> String? { if case .string(let s)? = k[name] { s } else { nil } }
                guard let kid = text("kid"), text("kty") == "RSA", let n = text("n"), let e = text("e") else { continue }
                if let alg = text("alg"), alg != "RS256" { continue }
                if let use = text("use"), use != "sig" { continue }
                guard let key = try? PublicKey.rsa(jwkModulus: n, exponent: e), key.bits >= 2048 else { continue }
                keys[kid] = key
            }
        } else {
            for member in top.members {
                guard case .string(let pem) = member.value, pem.contains("-----BEGIN CERTIFICATE-----"),
                    let certificate = try? Certificate.parse(Array(pem.utf8)), let key = certificate.publicKey, key.isRSA, key.bits >= 2048
                else { continue }
                keys[member.key] = key
            }
        }
        guard !keys.isEmpty else { throw Problem("the key set holds no RSA key of 2048 bits or more") }
        return GoogleKeySet(keys: keys)
    }
}
