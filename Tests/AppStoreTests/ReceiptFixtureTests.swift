import AppStore
import Crypto
import Foundation
import Testing

struct ReceiptRow: Sendable, CustomTestStringConvertible {
    let file: String
    let encoding: String
    let roots: [String]
    let expect: [String: String]
    let contents: [String: String]
    var testDescription: String { file }

    static var all: [ReceiptRow] {
        guard Fixtures.available else { return [] }
        return (Fixtures.expectations["receipts"] as? [[String: Any]] ?? []).map { row in
            var expect: [String: String] = [:]
            for (k, v) in row["expect"] as? [String: Any] ?? [:] { expect[k] = v as? String ?? "\(v)" }
            var contents: [String: String] = [:]
            for (k, v) in row["contents"] as? [String: Any] ?? [:] {
                if let s = v as? String {
                    contents[k] = s
                } else if let n = v as? NSNumber {
                    contents[k] = n.stringValue
                } else if let a = v as? [Any] {
                    contents[k] = a.map { "\($0)" }.joined(separator: ",")
                }
            }
            return ReceiptRow(
                file: row["file"] as! String, encoding: row["encoding"] as? String ?? "",
                roots: row["trustRoots"] as? [String] ?? [], expect: expect, contents: contents)
        }
    }

    /// The receipt as a client would send it: base64 text.
    var base64: String {
        let raw = Fixtures.bytes(file)
        if encoding.hasPrefix("DER") { return Data(raw).base64EncodedString() }
        return String(decoding: raw, as: UTF8.self)
    }
}

@Suite("expectations.json: StoreKit 1 app receipts")
struct ReceiptFixtureTests {
    static let allEnvironments: Set<AppStoreEnvironment> = [.production, .sandbox, .xcode]

    @Test("every receipt fixture gets its expected verdict and contents", arguments: ReceiptRow.all)
    func row(_ row: ReceiptRow) {
        guard Fixtures.require() else { return }
        let verifier = AppReceiptVerifier(settings: Fixtures.settings(roots: row.roots, environments: Self.allEnvironments, bundle: nil))
        let result = verifier.verify(base64: row.base64)
        let verdict = row.expect["signature"] ?? row.expect["verdict"] ?? row.expect["againstStoreKitTestCertificate"]
        if row.roots.isEmpty || row.encoding.contains("iOS 6") {
            // Legacy transaction receipts and unsigned mocks are not app receipts.
            guard case .failure(.malformed) = result else { Issue.record("expected RECEIPT_MALFORMED, got \(result)"); return }
            return
        }
        if let verdict, verdict.hasPrefix("VALID") {
            guard case .success(let receipt) = result else { Issue.record("expected VALID, got \(result)"); return }
            if let bundle = row.contents["bundleId"] { #expect(receipt.bundleID == bundle) }
            if let type = row.contents["receiptType"] { #expect(receipt.receiptType == type) }
            if let version = row.contents["appVersion"] { #expect(receipt.applicationVersion == version) }
            if let n = row.contents["inApp"] { #expect(receipt.inApp.count == Int(n)) }
            if let ids = row.contents["transactionIds"] {
                let expected = Set(ids.split(separator: ",").map(String.init))
                #expect(expected.isSubset(of: Set(receipt.inApp.compactMap(\.transactionID))))
            }
            if let products = row.contents["productIds"] {
                #expect(Set(products.split(separator: ",").map(String.init)) == Set(receipt.inApp.compactMap(\.productID)))
            }
            if verdict.hasSuffix("receipt_type Production") { #expect(receipt.receiptType == "Production") }
            if verdict.contains("ProductionVPP") { #expect(receipt.receiptType == "ProductionVPP") }
            if verdict.contains("absent") { #expect(receipt.receiptType == nil) }
        } else if row.expect["verdict"]?.hasPrefix("REJECT") == true {
            guard case .failure(.untrusted) = result else { Issue.record("expected RECEIPT_UNTRUSTED, got \(result)"); return }
        } else if let id = row.expect["receiptUtility.extractTransactionId"] {
            // Xcode receipts: no verdict against their own root in the table; check the content we parse.
            if case .success(let receipt) = result {
                #expect(receipt.inApp.compactMap(\.transactionID) == (id.contains("nil") ? [] : [id.trimmingCharacters(in: ["\""])]))
            }
        }
    }

    @Test("Apple-signed receipts are refused against the G3 root and by Xcode's self-signed root")
    func wrongRoots() {
        guard Fixtures.require() else { return }
        let sandbox = ReceiptRow.all.first { $0.file.hasSuffix("receipt-sandbox-g5") }!
        let g3 = AppReceiptVerifier(settings: Fixtures.settings(roots: ["roots/AppleRootCA-G3.cer"], environments: Self.allEnvironments, bundle: nil))
        guard case .failure(.untrusted) = g3.verify(base64: sandbox.base64) else { Issue.record("G3"); return }
        let xcode = ReceiptRow.all.first { $0.file.hasSuffix("receipt-xcode") }!
        let apple = AppReceiptVerifier(
            settings: Fixtures.settings(roots: ["roots/AppleIncRootCertificate.cer"], environments: Self.allEnvironments, bundle: nil))
        guard case .failure(.untrusted) = apple.verify(base64: xcode.base64) else { Issue.record("xcode vs apple"); return }
    }

    @Test("the sandbox receipt: every in-app field, bundle and environment checks")
    func sandboxDetails() throws {
        guard Fixtures.require() else { return }
        let sandbox = ReceiptRow.all.first { $0.file.hasSuffix("receipt-sandbox-g5") }!
        let ok = AppReceiptVerifier(
            settings: Fixtures.settings(
                roots: ["roots/AppleIncRootCertificate.cer"], environments: [.sandbox],
                bundle: "dev.bonzer.weeka.app"))
        let receipt = try ok.verify(base64: sandbox.base64).get()
        #expect(receipt.creationDate == 1_766_774_387_000)
        let first = try #require(receipt.inApp.first { $0.transactionID == "2000001092134138" })
        #expect(first.productID == "dev.bonzer.weeka.app.subscription.pro.annual")
        #expect(first.originalTransactionID == "2000001092134138")
        #expect(first.quantity == 1)
        #expect(first.purchaseDate != nil && first.expiresDate != nil)
        let wrongBundle = AppReceiptVerifier(
            settings: Fixtures.settings(
                roots: ["roots/AppleIncRootCertificate.cer"], environments: [.sandbox],
                bundle: "com.example.other"))
        guard case .failure(.wrongApp) = wrongBundle.verify(base64: sandbox.base64) else { Issue.record("bundle"); return }
        let productionOnly = AppReceiptVerifier(
            settings: Fixtures.settings(
                roots: ["roots/AppleIncRootCertificate.cer"], environments: [.production],
                bundle: "dev.bonzer.weeka.app"))
        guard case .failure(.environmentNotAllowed) = productionOnly.verify(base64: sandbox.base64) else { Issue.record("env"); return }
    }

    @Test(
        "RFC 3339 dates as receipts write them",
        arguments: [
            ("2025-12-26T18:39:47Z", Int64(1_766_774_387_000)), ("2020-07-22T18:33:15+0100", 1_595_439_195_000),
            ("2020-07-22T18:33:15+01:00", 1_595_439_195_000), ("2020-07-22T18:33:15.250Z", 1_595_442_795_250),
            ("1970-01-01T00:00:00Z", 0),
        ])
    func dates(_ text: String, _ ms: Int64) {
        #expect(RFC3339.milliseconds(text) == ms)
    }

    @Test("bad dates are refused", arguments: ["", "2020-13-01T00:00:00Z", "2020-07-22", "2020-07-22T18:33:15X", "2020-07-22T18:33:15.Z"])
    func badDates(_ text: String) {
        #expect(RFC3339.milliseconds(text) == nil)
    }
}
