import AppStore
import Crypto
import Foundation

/// `billingctl verify`: checks one proof offline with billingd's verifiers and prints the verdict
/// and the decoded fields (Apple's JSON names), so operators and the agreement tests can compare.
enum VerifyCommand {
    static func run(_ options: Options) throws {
        guard let source = options.positional.first else { throw Usage(message: "verify needs a FILE (or - for stdin)") }
        let text: String
        if source == "-" {
            text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        } else {
            text = try readValue("@" + source)
        }
        var roots: [Certificate] = []
        for path in options.repeated["root"] ?? [] { roots.append(try Certificate.load(path: path)) }
        var environments = Set<AppStoreEnvironment>()
        for e in (options.named["environment"] ?? "sandbox").split(separator: ",") {
            guard let env = AppStoreEnvironment(configName: String(e)) ?? AppStoreEnvironment(rawValue: String(e)) else {
                throw Usage(message: "--environment is production, sandbox, xcode or localtesting")
            }
            environments.insert(env)
        }
        let now = Int64(options.named["now"] ?? "") ?? Int64(Date().timeIntervalSince1970 * 1000)
        var settings = VerifierSettings(
            anchors: TrustAnchors(roots: roots), bundleIDs: Set(options.repeated["bundle-id"] ?? []),
            appAppleID: options.named["app-apple-id"].flatMap { Int64($0) }, environments: environments,
            now: { now })
        settings.decodeXcodeWithoutVerification = options.named["xcode-decode-only"] == "true"
        let text2 = text.trimmingCharacters(in: .whitespacesAndNewlines)
        let verifier = SignedDataVerifier(settings: settings)
        var fields: [(String, String?)] = []
        let failure: VerificationFailure?
        switch options.named["kind"] ?? "transaction" {
        case "transaction":
            switch verifier.verifyTransaction(text2) {
            case .success(let p):
                failure = nil
                fields = [
                    ("transactionId", q(p.transactionID)), ("originalTransactionId", q(p.originalTransactionID)),
                    ("productId", q(p.productID)), ("bundleId", q(p.bundleID)), ("purchaseDate", n(p.purchaseDate)),
                    ("expiresDate", n(p.expiresDate)), ("environment", q(p.environment)), ("appAccountToken", q(p.appAccountToken)),
                    ("type", q(p.type)), ("quantity", n(p.quantity.map(Int64.init))), ("revocationDate", n(p.revocationDate)),
                    ("signedDate", n(p.signedDate)), ("transactionReason", q(p.transactionReason)), ("price", n(p.price)),
                    ("currency", q(p.currency)), ("storefront", q(p.storefront)),
                ]
            case .failure(let f): failure = f
            }
        case "renewal":
            switch verifier.verifyRenewalInfo(text2) {
            case .success(let p):
                failure = nil
                fields = [
                    ("originalTransactionId", q(p.originalTransactionID)), ("productId", q(p.productID)),
                    ("autoRenewProductId", q(p.autoRenewProductID)), ("autoRenewStatus", n(p.autoRenewStatus.map(Int64.init))),
                    ("expirationIntent", n(p.expirationIntent.map(Int64.init))), ("environment", q(p.environment)),
                    ("signedDate", n(p.signedDate)), ("renewalPrice", n(p.renewalPrice)),
                ]
            case .failure(let f): failure = f
            }
        case "notification":
            switch verifier.verifyNotification(text2) {
            case .success(let p):
                failure = nil
                fields = [
                    ("notificationType", q(p.notificationType)), ("subtype", q(p.subtype)),
                    ("notificationUUID", q(p.notificationUUID)), ("signedDate", n(p.signedDate)),
                    ("data.bundleId", q(p.data?.bundleID)), ("data.environment", q(p.data?.environment)),
                    ("data.appAppleId", n(p.data?.appAppleID)), ("data.status", n(p.data?.status.map(Int64.init))),
                ]
            case .failure(let f): failure = f
            }
        case "app-transaction":
            switch verifier.verifyAppTransaction(text2) {
            case .success(let p):
                failure = nil
                fields = [
                    ("receiptType", q(p.receiptType)), ("bundleId", q(p.bundleID)), ("appAppleId", n(p.appAppleID)),
                    ("applicationVersion", q(p.applicationVersion)), ("receiptCreationDate", n(p.receiptCreationDate)),
                ]
            case .failure(let f): failure = f
            }
        case "receipt":
            switch AppReceiptVerifier(settings: settings).verify(base64: text2) {
            case .success(let r):
                failure = nil
                fields = [
                    ("receiptType", q(r.receiptType)), ("bundleId", q(r.bundleID)), ("applicationVersion", q(r.applicationVersion)),
                    ("creationDate", n(r.creationDate)), ("inApp", String(r.inApp.count)),
                    ("transactionIds", "[" + r.inApp.compactMap { q($0.transactionID) }.joined(separator: ", ") + "]"),
                ]
            case .failure(let f): failure = f
            }
        default:
            throw Usage(message: "--kind is transaction, renewal, notification, app-transaction or receipt")
        }
        let decoded = JSON.object(fields, indent: 1)
        print(
            JSON.object([
                ("verdict", JSON.quote(failure?.kind ?? "valid")), ("detail", failure.map { JSON.quote($0.description) }),
                ("decoded", failure == nil ? decoded : nil),
            ]))
        if failure != nil { exit(3) }
    }

    static func q(_ s: String?) -> String? { s.map(JSON.quote) }
    static func n(_ v: Int64?) -> String? { v.map { String($0) } }
}
