import AppStoreAPI
import AppStoreHTTP
import BillingAPI
import Crypto
import Foundation

/// `billingctl admin ...` (billing.admin.v1.Admin on billingd) and `billingctl appstore ...` (the App Store
/// Server API called directly, with the operator's key: what billingd would see).
enum AppStoreCommands {
    static func admin(_ options: Options) throws {
        guard let sub = options.positional.first else {
            throw Usage(
                message:
                    "admin needs reconcile, lookup-order, test-notification, test-notification-status, extend, extend-all, extension-status, set-token or app-transaction"
            )
        }
        let env = try environment(options.named["environment"])
        switch sub {
        case "reconcile":
            var req = ReconcileRequest()
            if let s = options.named["since"] {
                guard let ms = Int64(s), ms >= 0 else { throw Usage(message: "--since takes milliseconds since 1970") }
                req.sinceTimeMs = ms
            }
            let r = try call(options, "billing.admin.v1.Admin/Reconcile", req, ReconcileResponse.self)
            print(
                JSON.object([
                    ("startTimeMs", JSON.quote(String(r.startTimeMs))), ("endTimeMs", JSON.quote(String(r.endTimeMs))),
                    ("pages", String(r.pages)), ("applied", String(r.applied)), ("duplicate", String(r.duplicate)),
                    ("ignored", String(r.ignored)), ("rejected", String(r.rejected)),
                ]))
        case "lookup-order":
            guard options.positional.count == 2 else { throw Usage(message: "admin lookup-order needs the ORDER_ID of a receipt email") }
            var req = LookUpOrderRequest()
            req.customerOrderID = options.positional[1]
            let r = try call(options, "billing.admin.v1.Admin/LookUpOrder", req, LookUpOrderResponse.self)
            print(
                JSON.object([
                    ("found", String(r.found)), ("environment", r.found ? JSON.quote(r.environment.description) : nil),
                    ("transactions", "[" + r.transactions.map { JSON.transaction($0, indent: 1) }.joined(separator: ", ") + "]"),
                    ("orders", "[" + r.orders.map { JSON.order($0, indent: 1) }.joined(separator: ", ") + "]"),
                    ("accountIds", "[" + r.accountIDs.map(JSON.quote).joined(separator: ", ") + "]"),
                ]))
        case "test-notification":
            var req = RequestTestNotificationRequest()
            req.environment = env == .production ? .production : .sandbox
            let r = try call(options, "billing.admin.v1.Admin/RequestTestNotification", req, RequestTestNotificationResponse.self)
            print(JSON.object([("testNotificationToken", JSON.quote(r.testNotificationToken)), ("environment", JSON.quote(r.environment.description))]))
        case "test-notification-status":
            guard options.positional.count == 2 else { throw Usage(message: "admin test-notification-status needs a TOKEN") }
            var req = GetTestNotificationStatusRequest()
            req.testNotificationToken = options.positional[1]
            req.environment = env == .production ? .production : .sandbox
            let r = try call(options, "billing.admin.v1.Admin/GetTestNotificationStatus", req, GetTestNotificationStatusResponse.self)
            print(
                JSON.object([
                    ("sendAttemptResults", "[" + r.sendAttemptResults.map(JSON.quote).joined(separator: ", ") + "]"),
                    ("notificationUuid", JSON.quote(r.notificationUUID)),
                ]))
        default:
            guard try support(sub, options, env) else { throw Usage(message: "unknown admin command '\(sub)'") }
        }
    }

    static func environment(_ raw: String?) throws -> AppStoreAPIEnvironment {
        switch raw?.lowercased() ?? "sandbox" {
        case "sandbox": return .sandbox
        case "production": return .production
        default: throw Usage(message: "--environment is sandbox or production")
        }
    }

    /// `appstore transaction|history|statuses|lookup ID`: one call with the operator's own key. Signed items are
    /// printed with their payloads decoded but NOT verified (use `billingctl verify` for a verdict).
    static func appStore(_ options: Options) throws {
        if options.positional.first == "test-notification" {
            return try testNotification(options)
        }
        guard options.positional.count == 2 else {
            throw Usage(message: "appstore needs transaction, history, statuses or lookup, and an id")
        }
        let (sub, id) = (options.positional[0], options.positional[1])
        guard let keyID = options.named["key-id"], let issuer = options.named["issuer-id"], let keyPath = options.named["private-key"],
            let bundle = options.named["bundle-id"]
        else {
            throw Usage(message: "appstore needs --key-id, --issuer-id, --private-key PATH and --bundle-id")
        }
        guard let pem = FileManager.default.contents(atPath: keyPath) else { throw Usage(message: "cannot read \(keyPath)") }
        let key: PrivateKey
        do { key = try PrivateKey.parsePEM(Array(pem)) } catch { throw Usage(message: "\(keyPath) is not a PEM private key (.p8)") }
        var config = AppStoreAPIConfiguration(credentials: .init(keyID: keyID, issuerID: issuer, bundleID: bundle, privateKey: key))
        if let url = options.named["url"] {
            config.productionURL = url
            config.sandboxURL = url
        }
        config.caPath = options.ca
        config.attemptTimeoutSeconds = Int(options.timeout.rounded(.up))
        let client = try AppStoreAPIClient(config)
        let env = try environment(options.named["environment"])
        var signed: [String] = []
        switch sub {
        case "transaction": signed = [try client.transactionInfo(id, in: env)]
        case "history": signed = try client.fullHistory(id, in: env)
        case "statuses":
            for s in try client.subscriptionStatuses(id, in: env) {
                print(
                    JSON.object([
                        ("subscriptionGroupIdentifier", JSON.quote(s.groupID)), ("status", String(s.status)),
                        ("originalTransactionId", JSON.quote(s.originalTransactionID)),
                        ("transaction", decoded(s.signedTransactionInfo)), ("renewalInfo", decoded(s.signedRenewalInfo)),
                    ]))
            }
            return
        case "lookup":
            guard let found = try client.lookUpOrder(id, in: env) else {
                print(JSON.object([("found", "false")]))
                return
            }
            signed = found
        default: throw Usage(message: "unknown appstore command '\(sub)'")
        }
        for jws in signed { print(decoded(jws)) }
    }

    /// `appstore test-notification`: RequestTestNotification through billingd, then (with --wait) its status until
    /// Apple reports a send attempt.
    static func testNotification(_ options: Options) throws {
        let env: BillingAPI.Environment = try environment(options.named["environment"]) == .production ? .production : .sandbox
        var req = RequestTestNotificationRequest()
        req.environment = env
        let token = try call(options, "billing.admin.v1.Admin/RequestTestNotification", req, RequestTestNotificationResponse.self).testNotificationToken
        var fields: [(String, String?)] = [("testNotificationToken", JSON.quote(token)), ("environment", JSON.quote(env.description))]
        if options.named["wait"] != nil {
            var status = GetTestNotificationStatusRequest()
            status.testNotificationToken = token
            status.environment = env
            let deadline = Date().addingTimeInterval(options.timeout)
            var r = GetTestNotificationStatusResponse()
            repeat {
                r = try call(options, "billing.admin.v1.Admin/GetTestNotificationStatus", status, GetTestNotificationStatusResponse.self)
                if !r.sendAttemptResults.isEmpty { break }
                Thread.sleep(forTimeInterval: 0.5)
            } while Date() < deadline
            fields += [
                ("sendAttemptResults", "[" + r.sendAttemptResults.map(JSON.quote).joined(separator: ", ") + "]"),
                ("notificationUuid", JSON.quote(r.notificationUUID)),
            ]
        }
        print(JSON.object(fields))
    }

    /// A JWS's payload as it is (JSON text), unverified.
    static func decoded(_ jws: String) -> String {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return "null" }
        var s = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        guard let data = Data(base64Encoded: s) else { return "null" }
        return String(decoding: data, as: UTF8.self)
    }
}
