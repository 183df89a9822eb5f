import Crypto
import ProtoWire

/// A StoreKit 1 app receipt's ASN.1 payload (the attributes Apple documents).
public struct AppReceipt: Sendable, Equatable {
    /// One in-app purchase record (attribute 17).
    public struct InAppPurchase: Sendable, Equatable {
        public var quantity: Int?
        public var productID: String?
        public var transactionID: String?
        public var originalTransactionID: String?
        public var purchaseDate: Int64?
        public var originalPurchaseDate: Int64?
        public var expiresDate: Int64?
        public var webOrderLineItemID: Int64?
        public var cancellationDate: Int64?
        public var isTrialPeriod: Bool?
        public var isInIntroOfferPeriod: Bool?
        public var promotionalOfferID: String?
        public init() {}
    }

    public var receiptType: String?
    public var appItemID: Int64?
    public var bundleID: String?
    public var applicationVersion: String?
    public var opaqueValue: [UInt8]?
    public var sha1Hash: [UInt8]?
    /// Milliseconds since 1970.
    public var creationDate: Int64?
    public var originalApplicationVersion: String?
    public var expirationDate: Int64?
    public var inApp: [InAppPurchase] = []

    public init() {}

    /// The environment the receipt type names; a receipt without a type is production.
    public var environment: AppStoreEnvironment? {
        switch receiptType {
        case nil, "Production", "ProductionVPP": .production
        case "ProductionSandbox", "ProductionVPPSandbox": .sandbox
        case "Xcode": .xcode
        default: nil
        }
    }

    /// Parses the payload: SET OF SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }, in DER
    /// or BER, bare or wrapped in one more OCTET STRING (StoreKit Testing in Xcode writes it so).
    public static func parse(payload: [UInt8]) throws(VerificationFailure) -> AppReceipt {
        var receipt = AppReceipt()
        do throws(ASN1.ParseError) {
            for (type, value) in try attributes(try unwrapped(payload[...])) {
                switch type {
                case 0: receipt.receiptType = try string(value)
                case 1: receipt.appItemID = try integer(value)
                case 2: receipt.bundleID = try string(value)
                case 3: receipt.applicationVersion = try string(value)
                case 4: receipt.opaqueValue = Array(value)
                case 5: receipt.sha1Hash = Array(value)
                case 12: receipt.creationDate = try date(value)
                case 17: receipt.inApp.append(try inAppPurchase(value))
                case 19: receipt.originalApplicationVersion = try string(value)
                case 21: receipt.expirationDate = try date(value)
                default: continue
                }
            }
        } catch {
            throw .malformed("receipt payload: \(error.description)")
        }
        return receipt
    }

    /// The payload without the one OCTET STRING Xcode may wrap around it.
    static func unwrapped(_ payload: ArraySlice<UInt8>) throws(ASN1.ParseError) -> ArraySlice<UInt8> {
        guard let first = payload.first, first & 0xDF == 0x04 else { return payload }
        let (wrapper, next) = try ASN1.read(payload, at: payload.startIndex)
        guard next == payload.endIndex else { throw ASN1.ParseError(description: "trailing bytes after the payload") }
        return try ASN1.octets(wrapper)
    }

    static func attributes(_ bytes: ArraySlice<UInt8>) throws(ASN1.ParseError) -> [(Int64, ArraySlice<UInt8>)] {
        let top = try ASN1.elements(bytes)
        guard top.count == 1, top[0].tag == 0x31 else { throw ASN1.ParseError(description: "not a SET of attributes") }
        var out: [(Int64, ArraySlice<UInt8>)] = []
        for attribute in try ASN1.elements(top[0].content, depth: 1) {
            guard attribute.tag == 0x30 else { throw ASN1.ParseError(description: "attribute is not a SEQUENCE") }
            let fields = try ASN1.elements(attribute.content, depth: 2)
            guard fields.count == 3, fields[2].tag & 0xDF == 0x04 else { throw ASN1.ParseError(description: "malformed attribute") }
            out.append((try ASN1.integer(fields[0]), try ASN1.octets(fields[2], depth: 2)))
        }
        return out
    }

    static func inAppPurchase(_ bytes: ArraySlice<UInt8>) throws(ASN1.ParseError) -> InAppPurchase {
        var p = InAppPurchase()
        for (type, value) in try attributes(bytes) {
            switch type {
            case 1701: p.quantity = Int(clamping: try integer(value) ?? 0)
            case 1702: p.productID = try string(value)
            case 1703: p.transactionID = try string(value)
            case 1704: p.purchaseDate = try date(value)
            case 1705: p.originalTransactionID = try string(value)
            case 1706: p.originalPurchaseDate = try date(value)
            case 1708: p.expiresDate = try date(value)
            case 1711: p.webOrderLineItemID = try integer(value)
            case 1712: p.cancellationDate = try date(value)
            case 1713: p.isTrialPeriod = try integer(value).map { $0 != 0 }
            case 1719: p.isInIntroOfferPeriod = try integer(value).map { $0 != 0 }
            case 1721: p.promotionalOfferID = try string(value)
            default: continue
            }
        }
        return p
    }

    static func single(_ value: ArraySlice<UInt8>) throws(ASN1.ParseError) -> ASN1.Element? {
        if value.isEmpty { return nil }
        let (e, next) = try ASN1.read(value, at: value.startIndex, depth: 3)
        guard next == value.endIndex else { throw ASN1.ParseError(description: "trailing bytes in a value") }
        return e
    }

    static func string(_ value: ArraySlice<UInt8>) throws(ASN1.ParseError) -> String? {
        guard let e = try single(value) else { return nil }
        guard let s = ASN1.string(e) else { throw ASN1.ParseError(description: "expected a string") }
        return s
    }

    static func integer(_ value: ArraySlice<UInt8>) throws(ASN1.ParseError) -> Int64? {
        guard let e = try single(value) else { return nil }
        return try ASN1.integer(e)
    }

    static func date(_ value: ArraySlice<UInt8>) throws(ASN1.ParseError) -> Int64? {
        guard let s = try string(value), !s.isEmpty else { return nil }
        guard let ms = RFC3339.milliseconds(s) else { throw ASN1.ParseError(description: "bad date '\(s)'") }
        return ms
    }
}

/// RFC 3339 dates as receipts write them: `2025-12-26T18:39:47Z`, `2020-07-22T18:33:15+0100`, fractions allowed.
public enum RFC3339 {
    public static func milliseconds(_ s: String) -> Int64? {
        let c = Array(s.utf8)
        func num(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= c.count else { return nil }
            var v = 0
            for i in from..<(from + count) {
                guard c[i] >= 0x30, c[i] <= 0x39 else { return nil }
                v = v * 10 + Int(c[i] - 0x30)
            }
            return v
        }
        guard c.count >= 19, c[4] == 0x2D, c[7] == 0x2D, c[10] == 0x54 || c[10] == 0x20, c[13] == 0x3A, c[16] == 0x3A,
            let y = num(0, 4), let mo = num(5, 2), let d = num(8, 2), let h = num(11, 2), let mi = num(14, 2),
            let sec = num(17, 2), (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, sec < 61
        else { return nil }
        var i = 19
        var fraction = 0
        if i < c.count, c[i] == 0x2E {
            i += 1
            var digits = 0
            while i < c.count, c[i] >= 0x30, c[i] <= 0x39 {
                if digits < 3 { fraction = fraction * 10 + Int(c[i] - 0x30) }
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
            if digits < 3 { for _ in digits..<3 { fraction *= 10 } }
        }
        var offset = 0
        if i < c.count {
            if c[i] == 0x5A && i == c.count - 1 {
                offset = 0
            } else if c[i] == 0x2B || c[i] == 0x2D {
                let sign = c[i] == 0x2B ? 1 : -1
                let rest = c.count - i - 1
                guard let oh = num(i + 1, 2) else { return nil }
                var om = 0
                if rest == 5, c[i + 3] == 0x3A, let m = num(i + 4, 2) {
                    om = m
                } else if rest == 4, let m = num(i + 3, 2) {
                    om = m
                } else if rest != 2 {
                    return nil
                }
                offset = sign * (oh * 3600 + om * 60)
            } else {
                return nil
            }
        }
        // Days from civil (Howard Hinnant's algorithm).
        let yy = mo <= 2 ? y - 1 : y
        let era = (yy >= 0 ? yy : yy - 399) / 400
        let yoe = yy - era * 400
        let doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146097 + doe - 719468
        let seconds = days * 86400 + h * 3600 + mi * 60 + sec - offset
        return Int64(seconds) * 1000 + Int64(fraction)
    }
}

/// Verifies StoreKit 1 app receipts: base64 -> PKCS#7 -> signature and chain to a configured root
/// at the receipt's creation date -> leaf marker OID -> payload, bundle id, environment.
public final class AppReceiptVerifier: Sendable {
    public let settings: VerifierSettings

    /// The largest receipt accepted, base64 (real ones are a few KiB; long-lived apps reach hundreds).
    public static let maxBase64Bytes = 4 << 20

    public init(settings: VerifierSettings) { self.settings = settings }

    public func verify(base64 text: String) -> Result<AppReceipt, VerificationFailure> {
        do throws(VerificationFailure) {
            return .success(try verifyOrThrow(text))
        } catch {
            return .failure(error)
        }
    }

    private func verifyOrThrow(_ text: String) throws(VerificationFailure) -> AppReceipt {
        guard text.utf8.count <= Self.maxBase64Bytes else { throw .malformed("receipt larger than \(Self.maxBase64Bytes) bytes") }
        let compact = String(String.UnicodeScalarView(text.unicodeScalars.filter { !$0.properties.isWhitespace }))
        guard !compact.isEmpty else { throw .malformed("empty receipt") }
        guard let der = Base64.decode(compact), !der.isEmpty else { throw .malformed("the receipt is not base64") }
        if der.first == UInt8(ascii: "{") {
            throw .malformed("this is a legacy iOS 6 transaction receipt; send the app receipt or a StoreKit 2 signed transaction")
        }
        let message: SignedMessage
        do {
            message = try SignedMessage(der: der)
        } catch {
            throw .malformed("the receipt is not PKCS#7 SignedData")
        }
        guard let content = message.content, !content.isEmpty else { throw .malformed("the receipt has no content") }
        let receipt = try AppReceipt.parse(payload: content)
        let at = (receipt.creationDate ?? settings.now()) / 1000
        let signer: Certificate
        switch message.verify(anchors: settings.anchors, at: at) {
        case .success(let s): signer = s
        case .failure(let e): throw .untrusted("receipt signature or chain: \(e)")
        }
        let xcode = receipt.environment == .xcode
        if !signer.hasExtension(oid: AppleOID.receiptSigningLeaf) && !(xcode && settings.environments.contains(.xcode)) {
            throw .untrusted("the receipt signer lacks Apple's marker OID \(AppleOID.receiptSigningLeaf)")
        }
        if !settings.bundleIDs.isEmpty {
            guard let bundle = receipt.bundleID, settings.bundleIDs.contains(bundle) else {
                throw .wrongApp("bundle id \(receipt.bundleID ?? "(none)") is not served here")
            }
        }
        guard let environment = receipt.environment, settings.environments.contains(environment) else {
            throw .environmentNotAllowed("receipt type \(receipt.receiptType ?? "(none)") is not accepted")
        }
        if environment == .production, let expected = settings.appAppleID, let item = receipt.appItemID, item != 0, item != expected {
            throw .wrongApp("app item id \(item) is not \(expected)")
        }
        return receipt
    }
}
