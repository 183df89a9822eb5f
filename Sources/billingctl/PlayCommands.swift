import Foundation
import GooglePlayAPI
import GooglePlayHTTP
import HTTPClient

/// `billingctl play verify` (the Play Developer API called directly with the operator's service account) and
/// `billingctl teststore play-purchase|play-subscription` (purchases made in the local Google Play fake,
/// IntegrationTests/googleplay_fake.py, through its control API).
enum PlayCommands {
    static let flags: Set<String> = ["service-account", "api-url", "subscription", "fake", "product", "order", "state", "quantity", "test", "package"]

    static let usage = """
          play verify PACKAGE PRODUCT TOKEN --service-account KEY.json [--api-url URL] [--ca PATH] [--subscription]
                the Play Developer API called directly (purchases.products.get, or subscriptionsv2.get with --subscription);
                the purchase printed as Google answered it, NOT applied to billingd
          teststore play-purchase --fake URL --product ID [--order ORDER_ID] [--state purchased|pending|canceled] [--quantity N]
                [--test] [--package P] [--ca PATH]      a one-time purchase in the local Google Play fake; prints its token
          teststore play-subscription --fake URL --product ID [--order ORDER_ID] [--test] [--package P] [--ca PATH]
        """

    static func verify(_ options: Options) throws {
        guard options.positional.count == 4, options.positional[0] == "verify" else {
            throw Usage(message: "play verify needs PACKAGE PRODUCT TOKEN and --service-account KEY.json")
        }
        guard let keyPath = options.named["service-account"] else { throw Usage(message: "play verify needs --service-account KEY.json") }
        let (package, product, token) = (options.positional[1], options.positional[2], options.positional[3])
        let key: ServiceAccountKey
        do { key = try ServiceAccountKey.load(path: keyPath) } catch { throw Usage(message: "--service-account: \(error)") }
        var config = GooglePlayAPIConfiguration(serviceAccount: key)
        if let url = options.named["api-url"] { config.baseURL = url }
        config.caPath = options.ca
        config.attemptTimeoutMilliseconds = Int(options.timeout * 1000)
        let client = try GooglePlayAPIClient(config)
        defer { client.shutdown() }
        if options.named["subscription"] == "true" {
            let s = try client.subscriptionPurchase(packageName: package, token: token)
            print(
                JSON.object([
                    ("subscriptionState", JSON.quote(s.subscriptionState.rawValue)), ("orderId", s.orderID.map(JSON.quote)),
                    ("linkedPurchaseToken", s.linkedPurchaseToken.map(JSON.quote)), ("testPurchase", String(s.isTestPurchase)),
                    ("acknowledgementState", JSON.quote(s.acknowledgementState.rawValue)),
                    ("obfuscatedExternalAccountId", s.externalAccountIdentifiers?.obfuscatedExternalAccountID.map(JSON.quote)),
                    (
                        "lineItems",
                        "["
                            + s.lineItems.map { item in
                                JSON.object([
                                    ("productId", JSON.quote(item.productID)), ("expiryTimeMillis", item.expiryTimeMillis.map { JSON.quote(String($0)) }),
                                    ("autoRenewEnabled", item.autoRenewEnabled.map(String.init)),
                                ])
                            }.joined(separator: ", ") + "]"
                    ),
                ]))
        } else {
            let p = try client.productPurchase(packageName: package, productID: product, token: token)
            print(
                JSON.object([
                    ("orderId", p.orderID.map(JSON.quote)), ("purchaseState", String(p.purchaseState)), ("consumptionState", String(p.consumptionState)),
                    ("acknowledgementState", String(p.acknowledgementState)), ("purchaseTimeMillis", JSON.quote(String(p.purchaseTimeMillis))),
                    ("purchaseType", p.purchaseType.map(String.init)), ("quantity", String(p.quantity)),
                    ("obfuscatedExternalAccountId", p.obfuscatedExternalAccountID.map(JSON.quote)), ("regionCode", p.regionCode.map(JSON.quote)),
                ]))
        }
    }

    /// `teststore play-purchase` / `play-subscription`: POST /fake/products or /fake/subscriptions to the fake.
    static func fakePurchase(_ options: Options, subscription: Bool) throws {
        guard let base = options.named["fake"], let product = options.named["product"] else {
            throw Usage(message: "teststore play-\(subscription ? "subscription" : "purchase") needs --fake URL and --product ID")
        }
        var fields: [(String, String?)] = [("productId", JSON.quote(product))]
        if let order = options.named["order"] { fields.append(("obfuscatedExternalAccountId", JSON.quote(order))) }
        if let package = options.named["package"] { fields.append(("packageName", JSON.quote(package))) }
        if options.named["test"] == "true" { fields.append(("test", "true")) }
        if let state = options.named["state"] { fields.append(("state", JSON.quote(state))) }
        if let q = options.named["quantity"] {
            guard let n = Int(q), n >= 1 else { throw Usage(message: "--quantity takes a positive number") }
            fields.append(("quantity", String(n)))
        }
        var settings = HTTPClientConfiguration()
        settings.extraCAPath = options.ca
        settings.allowCleartext = true
        let client = try HTTPClient(configuration: settings, name: "play-fake")
        defer { client.shutdown() }
        let url = base.hasSuffix("/") ? String(base.dropLast()) : base
        let request = HTTPClientRequest(
            method: "POST", url: url + (subscription ? "/fake/subscriptions" : "/fake/products"), headers: [("content-type", "application/json")],
            body: Array(JSON.object(fields).utf8), timeoutMilliseconds: Int(options.timeout * 1000))
        let answer = try client.sendAndWait(request).get()
        guard answer.status == 200 else {
            throw Usage(message: "the fake answered \(answer.status): \(String(decoding: answer.body.prefix(300), as: UTF8.self))")
        }
        print(String(decoding: answer.body, as: UTF8.self))
    }
}
