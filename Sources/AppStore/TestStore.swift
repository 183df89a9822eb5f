public import Crypto
import Foundation
import JOSE

/// A local test store, like StoreKit Testing in Xcode: a root, an intermediate and a leaf with
/// Apple's marker OIDs, kept as PEM files in one directory, signing StoreKit 2 transactions and
/// StoreKit 1 app receipts that billingd accepts only when this root is configured (`--dev`).
public final class TestStore: Sendable {
    public let directory: String
    public let root: Certificate
    public let intermediate: Certificate
    public let leaf: Certificate
    let leafKey: PrivateKey

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    static let files = ["root.pem", "root.key", "intermediate.pem", "intermediate.key", "leaf.pem", "leaf.key"]

    /// The root certificate's path (what `--trust-root` takes).
    public var rootPath: String { directory + "/root.pem" }

    /// Opens the store in `directory`, creating the CA there first if `create` and it is missing.
    public static func open(directory: String, create: Bool) throws(Failure) -> TestStore {
        let fm = FileManager.default
        let exists = files.allSatisfy { fm.fileExists(atPath: directory + "/" + $0) }
        if !exists {
            guard create else { throw Failure(description: "no test store in \(directory): run `billingctl teststore init \(directory)`") }
            try initialize(directory: directory)
        }
        var contents: [String: [UInt8]] = [:]
        for name in files {
            guard let data = fm.contents(atPath: directory + "/" + name) else { throw Failure(description: "cannot read \(directory)/\(name)") }
            contents[name] = [UInt8](data)
        }
        do throws(CryptoError) {
            return TestStore(
                directory: directory, root: try Certificate.parse(contents["root.pem"]!),
                intermediate: try Certificate.parse(contents["intermediate.pem"]!),
                leaf: try Certificate.parse(contents["leaf.pem"]!), leafKey: try PrivateKey.parsePEM(contents["leaf.key"]!))
        } catch {
            throw Failure(description: "test store in \(directory) is damaged: \(error)")
        }
    }

    private init(directory: String, root: Certificate, intermediate: Certificate, leaf: Certificate, leafKey: PrivateKey) {
        self.directory = directory
        self.root = root
        self.intermediate = intermediate
        self.leaf = leaf
        self.leafKey = leafKey
    }

    /// Makes a fresh CA: EC P-256 root, intermediate (…6.2.1) and leaf (…6.11.1), valid from 2000 for decades.
    public static func initialize(directory: String) throws(Failure) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw Failure(description: "cannot create \(directory)")
        }
        let now = Int64(Date().timeIntervalSince1970)
        let year: Int64 = 365 * 86400
        do throws(CryptoError) {
            let rootKey = try PrivateKey.generateP256(), intermediateKey = try PrivateKey.generateP256(), leafKey = try PrivateKey.generateP256()
            let serial = Int(now % 1_000_000) * 10
            let root = try CertificateIssuer.issue(
                commonName: "billingd Test Store Root CA", organization: "billingd local test store", serial: serial + 1, key: rootKey,
                issuer: nil, isCA: true, markerOIDs: [], notBefore: 946_684_800, notAfter: now + 30 * year)
            let intermediate = try CertificateIssuer.issue(
                commonName: "billingd Test Store Intermediate", organization: "billingd local test store", serial: serial + 2,
                key: intermediateKey, issuer: .init(certificate: root, key: rootKey), isCA: true,
                markerOIDs: [AppleOID.wwdrIntermediate], notBefore: 946_684_800, notAfter: now + 20 * year)
            let leaf = try CertificateIssuer.issue(
                commonName: "billingd Test Store Signing", organization: "billingd local test store", serial: serial + 3, key: leafKey,
                issuer: .init(certificate: intermediate, key: intermediateKey), isCA: false,
                markerOIDs: [AppleOID.receiptSigningLeaf], notBefore: 946_684_800, notAfter: now + 10 * year)
            let contents: [(String, String)] = [
                ("root.pem", CertificateIssuer.pem(root)), ("root.key", rootKey.pem()),
                ("intermediate.pem", CertificateIssuer.pem(intermediate)), ("intermediate.key", intermediateKey.pem()),
                ("leaf.pem", CertificateIssuer.pem(leaf)), ("leaf.key", leafKey.pem()),
            ]
            for (name, text) in contents {
                let path = directory + "/" + name
                guard
                    FileManager.default.createFile(
                        atPath: path, contents: Data(text.utf8),
                        attributes: [.posixPermissions: name.hasSuffix(".key") ? 0o600 : 0o644])
                else {
                    throw CryptoError.library("cannot write \(path)")
                }
            }
        } catch {
            throw Failure(description: "cannot create the test store: \(error)")
        }
    }

    /// A transaction to sign; names follow Apple's JWSTransactionDecodedPayload.
    public struct Transaction: Sendable {
        public var transactionID: String
        public var originalTransactionID: String?
        public var productID: String
        /// `Consumable`, `Non-Consumable`, `Auto-Renewable Subscription`, `Non-Renewing Subscription`.
        public var type: String
        public var bundleID: String
        public var environment: String
        public var appAccountToken: String?
        public var purchaseDate: Int64
        public var expiresDate: Int64?
        public var revocationDate: Int64?
        public var revocationReason: Int?
        public var quantity: Int
        public var signedDate: Int64?
        /// `PURCHASED` or `FAMILY_SHARED`.
        public var inAppOwnershipType = "PURCHASED"
        /// Superseded by an upgrade; left out when nil.
        public var isUpgraded: Bool?
        /// `REFUND_FULL`, `REFUND_PRORATED` or `FAMILY_REVOKE`; left out when nil.
        public var revocationType: String?
        /// Thousandths of a percent (REFUND_PRORATED); left out when nil.
        public var revocationPercentage: Int?
        /// Milliunits of `currency` (Apple's price); left out when nil.
        public var price: Int64?
        /// ISO 4217; left out when nil.
        public var currency: String?
        /// ISO 3166-1 alpha-3.
        public var storefront = "USA"
        public var storefrontID = "143441"
        /// 1 introductory, 2 promotional, 3 offer code, 4 win-back; left out when nil.
        public var offerType: Int?
        public var offerIdentifier: String?
        public var subscriptionGroupIdentifier: String?
        /// `PURCHASE` or `RENEWAL`.
        public var transactionReason = "PURCHASE"

        public init(
            transactionID: String, productID: String, type: String = "Non-Consumable", bundleID: String,
            environment: String = "Xcode", purchaseDate: Int64
        ) {
            self.transactionID = transactionID
            self.productID = productID
            self.type = type
            self.bundleID = bundleID
            self.environment = environment
            self.purchaseDate = purchaseDate
            self.quantity = 1
        }

        var json: [String: Any] {
            var o: [String: Any] = [
                "transactionId": transactionID, "originalTransactionId": originalTransactionID ?? transactionID,
                "productId": productID, "type": type, "bundleId": bundleID, "environment": environment,
                "purchaseDate": purchaseDate, "originalPurchaseDate": purchaseDate, "quantity": quantity,
                "signedDate": signedDate ?? Int64(Date().timeIntervalSince1970 * 1000),
                "inAppOwnershipType": inAppOwnershipType, "transactionReason": transactionReason, "storefront": storefront,
                "storefrontId": storefrontID,
            ]
            if let appAccountToken { o["appAccountToken"] = appAccountToken }
            if let expiresDate { o["expiresDate"] = expiresDate }
            if let revocationDate { o["revocationDate"] = revocationDate }
            if let revocationReason { o["revocationReason"] = revocationReason }
            if let isUpgraded { o["isUpgraded"] = isUpgraded }
            if let revocationType { o["revocationType"] = revocationType }
            if let revocationPercentage { o["revocationPercentage"] = revocationPercentage }
            if let price { o["price"] = price }
            if let currency { o["currency"] = currency }
            if let offerType { o["offerType"] = offerType }
            if let offerIdentifier { o["offerIdentifier"] = offerIdentifier }
            if let subscriptionGroupIdentifier { o["subscriptionGroupIdentifier"] = subscriptionGroupIdentifier }
            return o
        }
    }

    /// A compact JWS of `payload`, signed by the leaf, with x5c = [leaf, intermediate, root].
    public func signJWS(_ payload: [String: Any], algorithm: String = "ES256") throws(Failure) -> String {
        let header: [String: Any] = ["alg": algorithm, "x5c": [leaf.der, intermediate.der, root.der].map { Data($0).base64EncodedString() }]
        guard let h = try? JSONSerialization.data(withJSONObject: header, options: [.sortedKeys]),
            let p = try? JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys])
        else {
            throw Failure(description: "payload is not JSON")
        }
        do {
            return try CompactJWS.join(header: [UInt8](h), payload: [UInt8](p)) { (input: [UInt8]) throws(CryptoError) in try leafKey.signES256(input) }
        } catch {
            throw Failure(description: "signing failed: \(error)")
        }
    }

    public func signedTransaction(_ t: Transaction) throws(Failure) -> String { try signJWS(t.json) }

    /// The decoded payload of `t`'s JWS, for tests that alter it before signing it with `signJWS`.
    public func transactionPayload(_ t: Transaction) -> [String: Any] { t.json }

    /// Signed renewal info (`signedRenewalInfo`) as the App Store sends it.
    public struct RenewalInfo: Sendable {
        public var originalTransactionID: String
        public var productID: String
        public var autoRenewStatus: Int
        public var environment: String
        public var signedDate: Int64
        public var gracePeriodExpiresDate: Int64?
        public var isInBillingRetryPeriod: Bool?
        /// The product of the next renewal; `productID` when nil.
        public var autoRenewProductID: String?
        /// Why it expired (1 voluntary, 2 billing error, 3 price increase, 4 not for sale, 5 other); left out when nil.
        public var expirationIntent: Int?

        public init(
            originalTransactionID: String, productID: String, autoRenewStatus: Int = 1, environment: String = "Xcode",
            signedDate: Int64
        ) {
            self.originalTransactionID = originalTransactionID
            self.productID = productID
            self.autoRenewStatus = autoRenewStatus
            self.environment = environment
            self.signedDate = signedDate
        }

        var json: [String: Any] {
            var o: [String: Any] = [
                "originalTransactionId": originalTransactionID, "productId": productID,
                "autoRenewProductId": autoRenewProductID ?? productID, "autoRenewStatus": autoRenewStatus,
                "environment": environment, "signedDate": signedDate, "recentSubscriptionStartDate": signedDate,
            ]
            if let gracePeriodExpiresDate { o["gracePeriodExpiresDate"] = gracePeriodExpiresDate }
            if let isInBillingRetryPeriod { o["isInBillingRetryPeriod"] = isInBillingRetryPeriod }
            if let expirationIntent { o["expirationIntent"] = expirationIntent }
            return o
        }
    }

    /// An app transaction (JWSAppTransaction), as RESCIND_CONSENT's `appData` nests it.
    public struct AppTransaction: Sendable {
        public var bundleID: String
        /// `Production`, `Sandbox`, `Xcode` (the app transaction's `receiptType`).
        public var receiptType: String
        public var appAppleID: Int64?
        public var appTransactionID: String?
        public var applicationVersion = "1"
        public var originalApplicationVersion = "1"
        public var originalPurchaseDate: Int64
        public var receiptCreationDate: Int64

        public init(bundleID: String, receiptType: String = "Xcode", originalPurchaseDate: Int64, receiptCreationDate: Int64) {
            self.bundleID = bundleID
            self.receiptType = receiptType
            self.originalPurchaseDate = originalPurchaseDate
            self.receiptCreationDate = receiptCreationDate
        }

        var json: [String: Any] {
            var o: [String: Any] = [
                "bundleId": bundleID, "receiptType": receiptType, "applicationVersion": applicationVersion,
                "originalApplicationVersion": originalApplicationVersion, "originalPurchaseDate": originalPurchaseDate,
                "receiptCreationDate": receiptCreationDate, "originalPlatform": "iOS",
            ]
            if let appAppleID { o["appAppleId"] = appAppleID }
            if let appTransactionID { o["appTransactionId"] = appTransactionID }
            return o
        }
    }

    /// A signed app transaction.
    public func signedAppTransaction(_ a: AppTransaction) throws(Failure) -> String { try signJWS(a.json) }

    /// An App Store Server Notification v2, as `{"signedPayload": ...}` carries it.
    public struct Notification: Sendable {
        public var type: String
        public var subtype: String?
        public var uuid: String
        public var signedDate: Int64
        public var bundleID: String
        public var environment: String
        public var appAppleID: Int64?
        public var transaction: Transaction?
        public var renewal: RenewalInfo?
        /// Where the app's metadata goes: `data` (with `transaction` and `renewal`), or `appData` (with
        /// `appTransaction`), as Apple sends RESCIND_CONSENT.
        public var container: Container
        /// Nested in `appData` as `signedAppTransactionInfo`; left out when nil.
        public var appTransaction: AppTransaction?

        /// The object a notification carries the app's metadata in.
        public enum Container: Sendable {
            case data
            case appData
        }

        /// A new random UUID when `uuid` is nil; `appData` for RESCIND_CONSENT, `data` otherwise.
        public init(
            type: String, subtype: String? = nil, uuid: String? = nil, signedDate: Int64,
            bundleID: String, environment: String = "Xcode"
        ) {
            self.type = type
            self.subtype = subtype
            self.uuid = uuid ?? UUID().uuidString.lowercased()
            self.signedDate = signedDate
            self.bundleID = bundleID
            self.environment = environment
            container = type == "RESCIND_CONSENT" ? .appData : .data
        }
    }

    /// The outer JWS of `n`, with its transaction and renewal info signed and nested the way Apple nests them.
    public func signedNotification(_ n: Notification) throws(Failure) -> String { try signJWS(notificationPayload(n)) }

    /// The decoded payload of `n`'s outer JWS (its nested items already signed), for tests that alter it before
    /// signing it with `signJWS`.
    public func notificationPayload(_ n: Notification) throws(Failure) -> [String: Any] {
        var payload: [String: Any] = [
            "notificationType": n.type, "notificationUUID": n.uuid, "version": "2.0", "signedDate": n.signedDate,
        ]
        if let subtype = n.subtype { payload["subtype"] = subtype }
        switch n.container {
        case .data:
            var data: [String: Any] = ["bundleId": n.bundleID, "environment": n.environment, "bundleVersion": "1", "status": 1]
            if let id = n.appAppleID { data["appAppleId"] = id }
            if var t = n.transaction {
                if t.signedDate == nil { t.signedDate = n.signedDate }
                data["signedTransactionInfo"] = try signedTransaction(t)
            }
            if let r = n.renewal { data["signedRenewalInfo"] = try signJWS(r.json) }
            payload["data"] = data
        case .appData:
            var app: [String: Any] = ["bundleId": n.bundleID, "environment": n.environment]
            if let id = n.appAppleID { app["appAppleId"] = id }
            if let a = n.appTransaction { app["signedAppTransactionInfo"] = try signedAppTransaction(a) }
            payload["appData"] = app
        }
        return payload
    }

    /// The HTTP body Apple posts: `{"signedPayload": "<JWS>"}`.
    public static func notificationBody(_ signedPayload: String) -> String { "{\"signedPayload\":\"\(signedPayload)\"}" }

    /// How a receipt's bytes are laid out; every layout carries the same payload and signature.
    public enum ReceiptEncoding: Sendable, CaseIterable {
        /// DER throughout (OpenSSL's output).
        case der
        /// The payload wrapped in one more OCTET STRING, as StoreKit Testing in Xcode writes it.
        case wrappedPayload
        /// BER as devices send it: indefinite lengths down to the content, which is a constructed
        /// OCTET STRING of segments.
        case ber
        /// Both: BER around a payload wrapped in one more (segmented) OCTET STRING.
        case berWrappedPayload
    }
}
