import AppStore
import Crypto
import Foundation
import ProtoWire
import Testing

/// A PKI minted for one test: root, intermediate and leaf with chosen OIDs and dates.
struct MintedChain {
    let root: Certificate
    let intermediate: Certificate
    let leaf: Certificate
    let leafKey: PrivateKey

    static let year: Int64 = 365 * 86400

    static func make(
        leafOIDs: [String] = [AppleOID.receiptSigningLeaf], intermediateOIDs: [String] = [AppleOID.wwdrIntermediate],
        leafNotAfter: Int64 = 2_100_000_000, rootName: String = "Minted Root", rootKey: PrivateKey? = nil
    ) throws -> MintedChain {
        let rk = try rootKey ?? PrivateKey.generateP256(), ik = try PrivateKey.generateP256(), lk = try PrivateKey.generateP256()
        let root = try CertificateIssuer.issue(
            commonName: rootName, organization: "t", serial: 1, key: rk, issuer: nil, isCA: true,
            markerOIDs: [], notBefore: 946_684_800, notAfter: 2_200_000_000)
        let intermediate = try CertificateIssuer.issue(
            commonName: "Minted Intermediate", organization: "t", serial: 2, key: ik,
            issuer: .init(certificate: root, key: rk), isCA: true, markerOIDs: intermediateOIDs,
            notBefore: 946_684_800, notAfter: 2_150_000_000)
        let leaf = try CertificateIssuer.issue(
            commonName: "Minted Leaf", organization: "t", serial: 3, key: lk,
            issuer: .init(certificate: intermediate, key: ik), isCA: false, markerOIDs: leafOIDs,
            notBefore: 946_684_800, notAfter: leafNotAfter)
        return MintedChain(root: root, intermediate: intermediate, leaf: leaf, leafKey: lk)
    }

    nonisolated(unsafe) static let payload: [String: Any] = [
        "transactionId": "1", "originalTransactionId": "1", "productId": "p", "bundleId": "com.example",
        "environment": "Sandbox", "purchaseDate": 1_700_000_000_000, "signedDate": 1_700_000_000_000, "type": "Non-Consumable",
    ]

    func jws(payload: [String: Any] = MintedChain.payload, alg: String = "ES256", x5c: [[UInt8]]? = nil, key: PrivateKey? = nil) throws -> String {
        let chain = (x5c ?? [leaf.der, intermediate.der, root.der]).map { Data($0).base64EncodedString() }
        let h = try JSONSerialization.data(withJSONObject: ["alg": alg, "x5c": chain])
        let p = try JSONSerialization.data(withJSONObject: payload)
        let input = JWS.base64URL([UInt8](h)) + "." + JWS.base64URL([UInt8](p))
        return input + "." + JWS.base64URL(try (key ?? leafKey).signES256(Array(input.utf8)))
    }

    func verifier(roots: [Certificate]? = nil) -> SignedDataVerifier {
        SignedDataVerifier(
            settings: VerifierSettings(
                anchors: TrustAnchors(roots: roots ?? [root]), bundleIDs: ["com.example"],
                environments: [.sandbox], now: { 1_700_000_000_000 }))
    }
}

func isUntrusted<T>(_ r: Result<T, VerificationFailure>) -> Bool { if case .failure(.untrusted) = r { return true }; return false }
func isMalformed<T>(_ r: Result<T, VerificationFailure>) -> Bool { if case .failure(.malformed) = r { return true }; return false }

@Suite("Negative vectors minted here")
struct NegativeVectorTests {
    @Test("the minted good chain verifies (control)")
    func control() throws {
        let c = try MintedChain.make()
        let r = c.verifier().verifyTransaction(try c.jws())
        #expect((try? r.get())?.transactionID == "1")
    }

    @Test("wrong OID on the leaf or the intermediate")
    func wrongOIDs() throws {
        let leaf = try MintedChain.make(leafOIDs: ["1.2.840.113635.100.6.11.2"])
        #expect(isUntrusted(leaf.verifier().verifyTransaction(try leaf.jws())))
        let intermediate = try MintedChain.make(intermediateOIDs: ["1.2.840.113635.100.6.2.2"])
        #expect(isUntrusted(intermediate.verifier().verifyTransaction(try intermediate.jws())))
        let none = try MintedChain.make(leafOIDs: [], intermediateOIDs: [])
        #expect(isUntrusted(none.verifier().verifyTransaction(try none.jws())))
    }

    @Test("a leaf expired before signedDate")
    func expiredLeaf() throws {
        let c = try MintedChain.make(leafNotAfter: 1_600_000_000)
        #expect(isUntrusted(c.verifier().verifyTransaction(try c.jws())))
    }

    @Test("a foreign root with the same names (another key) is not trusted")
    func foreignKey() throws {
        let real = try MintedChain.make(rootName: "Apple Root CA - G3")
        let impostor = try MintedChain.make(rootName: "Apple Root CA - G3")
        // The impostor's chain, verified against the real root only.
        #expect(isUntrusted(real.verifier().verifyTransaction(try impostor.jws())))
        // The impostor carries the real root in x5c[2]: still refused, x5c[2] is never trusted.
        #expect(isUntrusted(real.verifier().verifyTransaction(try impostor.jws(x5c: [impostor.leaf.der, impostor.intermediate.der, real.root.der]))))
    }

    @Test("a tampered payload or signature")
    func tampered() throws {
        let c = try MintedChain.make()
        let jws = try c.jws()
        let parts = jws.split(separator: ".").map(String.init)
        var other = MintedChain.payload
        other["productId"] = "com.example.gold"
        let forgedPayload = JWS.base64URL([UInt8](try JSONSerialization.data(withJSONObject: other)))
        #expect(isUntrusted(c.verifier().verifyTransaction(parts[0] + "." + forgedPayload + "." + parts[2])))
        var sig = Base64.decode(parts[2])!
        sig[10] ^= 0x01
        #expect(isUntrusted(c.verifier().verifyTransaction(parts[0] + "." + parts[1] + "." + JWS.base64URL(sig))))
        // A signature by a key that is not the leaf's.
        #expect(isUntrusted(c.verifier().verifyTransaction(try c.jws(key: PrivateKey.generateP256()))))
        // A DER signature instead of JOSE r||s.
        let der = try c.leafKey.signSHA256(Array((parts[0] + "." + parts[1]).utf8))
        #expect(isUntrusted(c.verifier().verifyTransaction(parts[0] + "." + parts[1] + "." + JWS.base64URL(der))))
    }

    @Test("two-certificate and one-certificate chains")
    func shortChains() throws {
        let c = try MintedChain.make()
        #expect(isUntrusted(c.verifier().verifyTransaction(try c.jws(x5c: [c.leaf.der, c.intermediate.der]))))
        #expect(isUntrusted(c.verifier().verifyTransaction(try c.jws(x5c: [c.leaf.der]))))
        #expect(isUntrusted(c.verifier().verifyTransaction(try c.jws(x5c: []))))
    }

    @Test("alg other than ES256", arguments: ["ES384", "RS256", "none", "HS256"])
    func wrongAlg(_ alg: String) throws {
        let c = try MintedChain.make()
        #expect(isUntrusted(c.verifier().verifyTransaction(try c.jws(alg: alg))))
    }

    @Test(
        "non-base64, non-JWS and truncated input",
        arguments: [
            "", "a.b.c", "a.b.c.d", "....", "%%%.%%%.%%%", "eyJhbGciOiJFUzI1NiJ9..sig", "not a jws at all",
        ])
    func garbage(_ text: String) throws {
        let c = try MintedChain.make()
        #expect(isMalformed(c.verifier().verifyTransaction(text)) || isUntrusted(c.verifier().verifyTransaction(text)))
    }

    @Test("truncated DER and garbage in x5c")
    func badCertificates() throws {
        let c = try MintedChain.make()
        #expect(isUntrusted(c.verifier().verifyTransaction(try c.jws(x5c: [Array(c.leaf.der.prefix(100)), c.intermediate.der, c.root.der]))))
        #expect(isUntrusted(c.verifier().verifyTransaction(try c.jws(x5c: [[0x30, 0x84, 0xFF, 0xFF, 0xFF, 0xFF], c.intermediate.der, c.root.der]))))
        let header = #"{"alg":"ES256","x5c":["!!!","@@@","***"]}"#
        let h = JWS.base64URL(Array(header.utf8))
        #expect(isUntrusted(c.verifier().verifyTransaction(h + ".e30.AAAA")))
    }

    @Test("numbers beyond Int64 in the payload are absent, not a crash (a fuzzer find)", arguments: [1e300, -1e300, 9.3e18])
    func hugeNumbers(_ value: Double) throws {
        let c = try MintedChain.make()
        var payload = MintedChain.payload
        payload["purchaseDate"] = value
        payload["expiresDate"] = value
        payload["quantity"] = value
        let r = c.verifier().verifyTransaction(try c.jws(payload: payload))
        let decoded = try r.get()
        #expect(decoded.purchaseDate == nil)
        #expect(decoded.quantity == nil)
    }

    @Test("huge inputs are refused before work")
    func huge() throws {
        let c = try MintedChain.make()
        let big = String(repeating: "A", count: 70_000) + ".e30.AAAA"
        #expect(isMalformed(c.verifier().verifyTransaction(big)))
        // An ASN.1 length of 2^32-1 inside a receipt payload.
        #expect(throws: VerificationFailure.self) { try AppReceipt.parse(payload: [0x31, 0x84, 0xFF, 0xFF, 0xFF, 0xFF, 0x30]) }
        #expect(throws: VerificationFailure.self) { try AppReceipt.parse(payload: [0x31, 0x89, 0x01]) }
        // Nesting bomb: 40 levels of indefinite-length SETs.
        let bomb = Array(repeating: [UInt8]([0x31, 0x80]), count: 40).flatMap { $0 }
        #expect(throws: VerificationFailure.self) { try AppReceipt.parse(payload: bomb) }
    }

    @Test("receipts: minted chain good, wrong leaf OID refused, tampered content refused, legacy iOS 6 refused")
    func receipts() throws {
        let good = try MintedChain.make()
        let payload = TestStore.receiptPayload(
            bundleID: "com.example", receiptType: "ProductionSandbox", applicationVersion: "1",
            creationDate: 1_700_000_000_000, inApp: [])
        func receipt(_ c: MintedChain, _ content: [UInt8] = payload) throws -> String {
            Data(try ReceiptSigner.sign(content: content, certificate: c.leaf, key: c.leafKey, chain: [c.intermediate])).base64EncodedString()
        }
        func verifier(_ c: MintedChain) -> AppReceiptVerifier {
            AppReceiptVerifier(
                settings: VerifierSettings(
                    anchors: TrustAnchors(roots: [c.root]), bundleIDs: ["com.example"],
                    environments: [.sandbox], now: { 1_700_000_000_000 }))
        }
        #expect((try? verifier(good).verify(base64: try receipt(good)).get())?.bundleID == "com.example")
        let noOID = try MintedChain.make(leafOIDs: [])
        #expect(isUntrusted(verifier(noOID).verify(base64: try receipt(noOID))))
        var der = Base64.decode(try receipt(good))!
        if let i = der.firstIndex(of: UInt8(ascii: "P")) { der[i] = UInt8(ascii: "Q") }  // "ProductionSandbox" -> "QroductionSandbox"
        let r = verifier(good).verify(base64: Data(der).base64EncodedString())
        #expect(isUntrusted(r) || isMalformed(r))
        let legacy = Data(#"{ "signature" = "AAAA"; "purchase-info" = "BBBB"; }"#.utf8).base64EncodedString()
        #expect(isMalformed(verifier(good).verify(base64: legacy)))
        #expect(isMalformed(verifier(good).verify(base64: "MIIT")))
        #expect(isMalformed(verifier(good).verify(base64: "@@@@")))
    }
}
