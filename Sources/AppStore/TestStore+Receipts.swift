public import Crypto
import Foundation

/// StoreKit 1 app receipts the test store signs (PKCS#7 over the receipt's ASN.1, BER as Apple's are).
extension TestStore {
    /// A base64 app receipt (PKCS#7 SignedData over the ASN.1 payload) holding `inApp`.
    public func appReceipt(
        bundleID: String, receiptType: String = "Xcode", applicationVersion: String = "1",
        creationDate: Int64? = nil, inApp: [AppReceipt.InAppPurchase],
        encoding: ReceiptEncoding = .der
    ) throws(Failure) -> String {
        let creationDate = creationDate ?? Int64(Date().timeIntervalSince1970 * 1000)
        var payload = Self.receiptPayload(
            bundleID: bundleID, receiptType: receiptType, applicationVersion: applicationVersion,
            creationDate: creationDate, inApp: inApp)
        switch encoding {
        case .der, .ber: break
        case .wrappedPayload: payload = ASN1.octetString(payload)
        case .berWrappedPayload: payload = Self.segmentedOctetString(payload)
        }
        do {
            var signed = try ReceiptSigner.sign(content: payload, certificate: leaf, key: leafKey, chain: [intermediate])
            if encoding == .ber || encoding == .berWrappedPayload { signed = try Self.berContent(signed) }
            return Data(signed).base64EncodedString()
        } catch let error as Failure {
            throw error
        } catch {
            throw Failure(description: "signing failed: \(error)")
        }
    }

    /// A constructed OCTET STRING of short segments, with an indefinite length (BER).
    static func segmentedOctetString(_ bytes: [UInt8], segment: Int = 64) -> [UInt8] {
        var out: [UInt8] = [0x24, 0x80]
        var i = 0
        while i < bytes.count {
            out += ASN1.octetString(Array(bytes[i..<min(i + segment, bytes.count)]))
            i += segment
        }
        return out + [0, 0]
    }

    /// Re-encodes DER SignedData the way devices send receipts: ContentInfo, SignedData,
    /// EncapsulatedContentInfo and eContent with indefinite lengths, the content as a segmented
    /// OCTET STRING. Certificates and signer infos stay DER (their signatures cover those bytes).
    static func berContent(_ der: [UInt8]) throws(Failure) -> [UInt8] {
        func indefinite(_ tag: UInt8, _ parts: [[UInt8]]) -> [UInt8] { [tag, 0x80] + parts.flatMap { $0 } + [0, 0] }
        func children(_ e: ASN1.Element) throws(ASN1.ParseError) -> [(ASN1.Element, [UInt8])] {
            var out: [(ASN1.Element, [UInt8])] = []
            var i = e.content.startIndex
            while i < e.content.endIndex {
                let (child, next) = try ASN1.read(e.content, at: i)
                out.append((child, Array(e.content[i..<next])))
                i = next
            }
            return out
        }
        do throws(ASN1.ParseError) {
            let (contentInfo, _) = try ASN1.read(der[...], at: 0)
            let ci = try children(contentInfo)  // contentType, [0] content
            guard ci.count == 2 else { throw ASN1.ParseError(description: "ContentInfo") }
            let (signedData, _) = try ASN1.read(ci[1].0.content, at: ci[1].0.content.startIndex)
            var sd = try children(signedData).map(\.1)  // version, digestAlgorithms, encapContentInfo, ...
            guard sd.count >= 3 else { throw ASN1.ParseError(description: "SignedData") }
            let (encap, _) = try ASN1.read(sd[2][...], at: 0)
            let ec = try children(encap)  // eContentType, [0] eContent
            guard ec.count == 2 else { throw ASN1.ParseError(description: "EncapsulatedContentInfo") }
            let (octets, _) = try ASN1.read(ec[1].0.content, at: ec[1].0.content.startIndex)
            sd[2] = indefinite(0x30, [ec[0].1, indefinite(0xA0, [segmentedOctetString(Array(octets.content))])])
            return indefinite(0x30, [ci[0].1, indefinite(0xA0, [indefinite(0x30, sd)])])
        } catch {
            throw Failure(description: "cannot re-encode the receipt as BER: \(error)")
        }
    }

    /// The DER payload Apple's receipts carry (attribute numbers as documented).
    public static func receiptPayload(
        bundleID: String, receiptType: String, applicationVersion: String, creationDate: Int64,
        inApp: [AppReceipt.InAppPurchase]
    ) -> [UInt8] {
        func attribute(_ type: Int64, _ value: [UInt8]) -> [UInt8] {
            ASN1.sequence([ASN1.encodeInteger(type), ASN1.encodeInteger(1), ASN1.octetString(value)])
        }
        var attributes = [
            attribute(0, ASN1.utf8String(receiptType)), attribute(2, ASN1.utf8String(bundleID)),
            attribute(3, ASN1.utf8String(applicationVersion)), attribute(12, ASN1.ia5String(date(creationDate))),
            attribute(19, ASN1.utf8String("1.0")),
        ]
        for p in inApp {
            var fields = [attribute(1701, ASN1.encodeInteger(Int64(p.quantity ?? 1)))]
            if let v = p.productID { fields.append(attribute(1702, ASN1.utf8String(v))) }
            if let v = p.transactionID { fields.append(attribute(1703, ASN1.utf8String(v))) }
            if let v = p.purchaseDate { fields.append(attribute(1704, ASN1.ia5String(date(v)))) }
            fields.append(attribute(1705, ASN1.utf8String(p.originalTransactionID ?? p.transactionID ?? "")))
            if let v = p.originalPurchaseDate ?? p.purchaseDate { fields.append(attribute(1706, ASN1.ia5String(date(v)))) }
            if let v = p.expiresDate { fields.append(attribute(1708, ASN1.ia5String(date(v)))) }
            if let v = p.cancellationDate { fields.append(attribute(1712, ASN1.ia5String(date(v)))) }
            attributes.append(attribute(17, ASN1.set(fields)))
        }
        return ASN1.set(attributes)
    }

    /// `2025-12-26T18:39:47Z` for milliseconds since 1970.
    static func date(_ ms: Int64) -> String {
        var t = time_t(ms / 1000)
        var tm = tm()
        gmtime_r(&t, &tm)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec)
    }
}
