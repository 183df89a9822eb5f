public import Crypto
import JOSE

/// A compact JWS signed with ES256 by an App Store Connect key (`.p8`), as Apple's libraries make them: the
/// header `{"alg":"ES256","kid":KEY_ID,"typ":"JWT"}` (PyJWT's, sorted keys), the claims as given, and the
/// 64-byte r||s signature, each part unpadded base64url. Shared by the API token and the offer signatures.
public enum ES256JWT {
    /// `header.claims.signature`; `claims` is a JSON object's text.
    public static func sign(keyID: String, claims: String, key: PrivateKey) throws(CryptoError) -> String {
        try CompactJWS.join(header: CompactJWS.jwtHeader(algorithm: "ES256", keyID: keyID), payload: Array(claims.utf8)) {
            (input: [UInt8]) throws(CryptoError) in try key.signES256(input)
        }
    }
}
