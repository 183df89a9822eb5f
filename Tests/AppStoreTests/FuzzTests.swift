import AppStore
import Crypto
import Foundation
import ProtoWire
import Testing
import TestSupport

/// Deterministic random-mutation fuzzing of the JWS, PKCS#7 and ASN.1 parsers: bit flips, byte
/// changes, truncations, duplications and splices of valid seeds. Every input must yield a verdict,
/// never a crash or a hang. Seeds: Tests/AppStoreTests/corpus (minted here) and, when present,
/// the fixtures in ../shared. With FUZZ_SAVE=1 the first input of every distinct verdict is written
/// to the corpus folder, so what the fuzzer found stays in the repository.
@Suite("Fuzzing the parsers")
struct FuzzTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("corpus")

    /// Seeds: (bytes, minted here). Only finds from minted seeds are saved; fixtures stay in ../shared.
    static func seeds(_ suffix: String) -> [([UInt8], Bool)] {
        var out: [([UInt8], Bool)] = []
        if let files = try? FileManager.default.contentsOfDirectory(atPath: corpus.path) {
            for f in files.sorted() where f.hasSuffix(suffix) {
                if let d = FileManager.default.contents(atPath: corpus.appendingPathComponent(f).path) { out.append(([UInt8](d), true)) }
            }
        }
        if Fixtures.available {
            let extra =
                suffix == ".jws"
                ? ["real-jws/sandbox-session-pro/notifications/01-DID_RENEW.jws", "apple-library/mock_signed_data/transactionInfo"]
                : ["receipts/tpinappreceipt/receipt-sandbox-g5", "receipts/tpinappreceipt/receipt-xcode"]
            out += extra.map { (Array(Fixtures.text($0).utf8), false) }
        }
        return out
    }

    static func mutate(_ input: [UInt8], _ rng: inout SplitMix) -> [UInt8] {
        var b = input
        if b.isEmpty { return [UInt8(truncatingIfNeeded: rng.next())] }
        for _ in 0..<(1 + Int(rng.next() % 4)) {
            let i = Int(rng.next() % UInt64(b.count))
            switch rng.next() % 6 {
            case 0: b[i] ^= UInt8(1 << (rng.next() % 8))
            case 1: b[i] = UInt8(truncatingIfNeeded: rng.next())
            case 2: b = Array(b.prefix(i))
            case 3: b.insert(contentsOf: b[i..<min(b.count, i + Int(rng.next() % 16))], at: i)
            case 4: b.remove(at: i)
            default: b[i] = [0x00, 0xFF, 0x80, 0x7F, 0x2E, 0x3D][Int(rng.next() % 6)]
            }
            if b.isEmpty { break }
        }
        return b
    }

    /// Runs `verify` over mutations of every seed; returns the distinct verdicts seen.
    static func fuzz(
        _ suffix: String, iterations: Int, prepare: ([UInt8]) -> [UInt8] = { $0 },
        verify: ([UInt8]) -> String
    ) -> [String: [UInt8]] {
        var found: [String: [UInt8]] = [:]
        var saved: [String: [UInt8]] = [:]
        var rng = SplitMix(seed: 0xB111_46D)
        for (raw, minted) in seeds(suffix) {
            let seed = prepare(raw)
            for _ in 0..<iterations {
                let input = mutate(seed, &rng)
                let verdict = verify(input)
                if found[verdict] == nil { found[verdict] = input }
                if minted && saved[verdict] == nil { saved[verdict] = input }
            }
        }
        if ProcessInfo.processInfo.environment["FUZZ_SAVE"] == "1" {
            for (verdict, input) in saved {
                let name = "found-" + Digest.hex(Array(Digest.sha256(Array(verdict.utf8)).prefix(6))) + suffix
                try? Data(input).write(to: corpus.appendingPathComponent(name))
            }
        }
        return found
    }

    static func settings(_ roots: [Certificate]) -> VerifierSettings {
        VerifierSettings(
            anchors: TrustAnchors(roots: roots), bundleIDs: [], environments: Set(AppStoreEnvironment.allCases),
            now: { 1_760_000_000_000 })
    }

    static var roots: [Certificate] {
        var r: [Certificate] = []
        if let pem = FileManager.default.contents(atPath: corpus.appendingPathComponent("root.pem").path) {
            r.append(try! Certificate.parse([UInt8](pem)))
        }
        if Fixtures.available {
            r += [
                "roots/AppleRootCA-G3.cer", "roots/AppleIncRootCertificate.cer", "apple-library/certs/testCA.der",
                "receipts/tpinappreceipt/StoreKitTestCertificate.cer",
            ].map(Fixtures.certificate)
        }
        return r
    }

    @Test("JWS: 2,000 mutations per seed, every one answered")
    func jws() {
        let verifier = SignedDataVerifier(settings: Self.settings(Self.roots))
        let found = Self.fuzz(".jws", iterations: 2000) { input in
            let text = String(decoding: input, as: UTF8.self)
            switch verifier.verifyTransaction(text) {
            case .success: return "valid"
            case .failure(let f): return f.kind + ":" + String(f.description.prefix(40))
            }
        }
        #expect(found.count > 3)
    }

    @Test("app receipts: 500 mutations of the DER per seed, every one answered")
    func receipts() {
        let verifier = AppReceiptVerifier(settings: Self.settings(Self.roots))
        let found = Self.fuzz(
            ".receipt", iterations: 500,
            prepare: { text in
                Base64.decode(String(decoding: text, as: UTF8.self).filter { !$0.isWhitespace }) ?? text
            }
        ) { der in
            switch verifier.verify(base64: Data(der).base64EncodedString()) {
            case .success: return "valid"
            case .failure(let f): return f.kind + ":" + String(f.description.prefix(40))
            }
        }
        #expect(found.count > 3)
    }

    @Test("receipt payload ASN.1: 20,000 random mutations of a minted payload")
    func asn1() {
        var p = AppReceipt.InAppPurchase()
        p.productID = "p"; p.transactionID = "1"; p.purchaseDate = 1_700_000_000_000; p.quantity = 1
        let payload = TestStore.receiptPayload(
            bundleID: "com.example", receiptType: "Production", applicationVersion: "1",
            creationDate: 1_700_000_000_000, inApp: [p, p])
        var rng = SplitMix(seed: 7)
        var outcomes = Set<String>()
        for _ in 0..<20_000 {
            let input = Self.mutate(payload, &rng)
            do {
                _ = try AppReceipt.parse(payload: input)
                outcomes.insert("parsed")
            } catch {
                outcomes.insert("refused")
            }
        }
        #expect(outcomes == ["parsed", "refused"])
    }
}
