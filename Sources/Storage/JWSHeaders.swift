import Crypto
import Glibc
import Synchronization

/// The JWS headers notifications carry, kept once by SHA-256 (schema step 5). A notification's header (alg and
/// the x5c chain, about 2.7 KiB) is the same on every notification until Apple rotates its certificates, so the
/// digest is computed once per distinct header and the `notifications` row stores only the rest of the JWS.
enum JWSHeaders {
    /// Headers seen lately and their digests; a hit is confirmed byte for byte.
    private static let recent = Mutex<[(header: [UInt8], digest: String)]>([])
    private static let maxRecent = 8

    /// Where the header of compact JWS `jws` ends (the index of its first dot) and the header's digest
    /// (lowercase hex SHA-256); nil when `jws` has no header part to split off (it is then stored whole).
    static func split(_ jws: String) -> (headerLength: Int, digest: String)? {
        var jws = jws
        return jws.withUTF8 { bytes -> (Int, String)? in
            guard let base = bytes.baseAddress, let hit = memchr(base, Int32(UInt8(ascii: ".")), bytes.count) else { return nil }
            let length = UnsafeRawPointer(hit) - UnsafeRawPointer(base)
            guard length > 0 else { return nil }
            return (length, digest(of: UnsafeBufferPointer(rebasing: bytes[..<length])))
        }
    }

    /// The digest of `header`, from the recent list when it was seen before.
    static func digest(of header: UnsafeBufferPointer<UInt8>) -> String {
        let known = recent.withLock { list -> String? in
            for entry in list where entry.header.count == header.count {
                let same = entry.header.withUnsafeBufferPointer { memcmp($0.baseAddress!, header.baseAddress!, header.count) == 0 }
                if same { return entry.digest }
            }
            return nil
        }
        if let known { return known }
        let bytes = Array(header)
        let digest = Digest.hex(Digest.sha256(bytes))
        recent.withLock { list in
            if list.count >= maxRecent { list.removeFirst() }
            list.append((bytes, digest))
        }
        return digest
    }
}
