import AppStore
import Crypto
import Foundation
import Testing

/// One test store for the suite; receipts in every layout devices and Xcode produce.
enum EncodingShop {
    static let store: TestStore = {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("billing-encodings-\(UUID().uuidString)").path
        return try! TestStore.open(directory: dir, create: true)
    }()
    static let now: Int64 = 1_790_000_000_000

    static var purchases: [AppReceipt.InAppPurchase] {
        (1...3).map { i in
            var p = AppReceipt.InAppPurchase()
            p.productID = "com.example.p\(i)"
            p.transactionID = "10\(i)"
            p.quantity = 1
            p.purchaseDate = now - Int64(i) * 60_000
            if i == 3 { p.expiresDate = now + 86_400_000 }
            return p
        }
    }

    static func verifier() -> AppReceiptVerifier {
        AppReceiptVerifier(
            settings: VerifierSettings(
                anchors: TrustAnchors(roots: [store.root]), bundleIDs: ["com.example.app"],
                environments: [.xcode], now: { now }))
    }

    static func receipt(_ encoding: TestStore.ReceiptEncoding) throws -> String {
        try store.appReceipt(bundleID: "com.example.app", receiptType: "Xcode", creationDate: now, inApp: purchases, encoding: encoding)
    }
}

@Suite("App receipts in every encoding")
struct ReceiptEncodingTests {
    @Test("each layout verifies and decodes like DER", arguments: TestStore.ReceiptEncoding.allCases)
    func layout(_ encoding: TestStore.ReceiptEncoding) throws {
        let reference = try EncodingShop.verifier().verify(base64: try EncodingShop.receipt(.der)).get()
        #expect(reference.inApp.count == 3)
        let text = try EncodingShop.receipt(encoding)
        let raw = try #require(Data(base64Encoded: text))
        switch encoding {
        case .ber, .berWrappedPayload:
            // Really BER: an indefinite-length ContentInfo, and a constructed OCTET STRING inside.
            #expect(Array(raw.prefix(2)) == [0x30, 0x80])
            #expect(raw.range(of: Data([0x24, 0x80, 0x04])) != nil)
        case .der, .wrappedPayload:
            #expect(Array(raw.prefix(2)) != [0x30, 0x80])
        }
        let decoded = EncodingShop.verifier().verify(base64: text)
        #expect((try? decoded.get()) == reference, "\(decoded)")
    }

    @Test("the payload parser takes the bare SET, the wrapped SET, and segmented wrappers alike")
    func payloadLayouts() throws {
        let bare = TestStore.receiptPayload(
            bundleID: "b", receiptType: "Xcode", applicationVersion: "1",
            creationDate: EncodingShop.now, inApp: EncodingShop.purchases)
        let reference = try AppReceipt.parse(payload: bare)
        #expect(reference.inApp.map(\.transactionID) == ["101", "102", "103"])
        var segmented: [UInt8] = [0x24, 0x80]
        for chunk in stride(from: 0, to: bare.count, by: 100) { segmented += ASN1.octetString(Array(bare[chunk..<min(chunk + 100, bare.count)])) }
        segmented += [0, 0]
        #expect(try AppReceipt.parse(payload: ASN1.octetString(bare)) == reference)
        #expect(try AppReceipt.parse(payload: segmented) == reference)
        // Only one wrapper, and nothing after it.
        #expect(throws: VerificationFailure.self) { try AppReceipt.parse(payload: ASN1.octetString(bare) + [0x05, 0x00]) }
        #expect(throws: VerificationFailure.self) { try AppReceipt.parse(payload: [0x24, 0x80, 0x02, 0x01, 0x00, 0x00, 0x00]) }
    }
}
