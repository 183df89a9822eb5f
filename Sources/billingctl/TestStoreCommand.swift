import AppStore
import BillingAPI
import Foundation
import HTTP2
import RPC

/// `billingctl teststore ...`: the local test store.
enum TestStoreCommand {
    static let types = [
        "consumable": "Consumable", "non_consumable": "Non-Consumable",
        "auto_renewable_subscription": "Auto-Renewable Subscription", "non_renewing_subscription": "Non-Renewing Subscription",
    ]
    static let environments = ["xcode": "Xcode", "sandbox": "Sandbox", "production": "Production"]

    /// Every flag `teststore` reads (Options.commandFlags["teststore"]).
    static let flags: Set<String> = [
        "store", "product", "type", "bundle-id", "environment", "transaction-id", "original-transaction-id",
        "app-account-token", "purchase-date", "expires-date", "revocation-date", "quantity", "receipt-type", "purchase",
        "subtype", "uuid", "signed-date", "product-type", "app-apple-id", "auto-renew-status", "grace-period-expires-date",
        // Transaction fields of JWSTransactionDecodedPayload.
        "in-app-ownership-type", "upgraded", "revocation-type", "revocation-percentage", "revocation-reason", "price",
        "currency", "storefront", "offer-type", "offer-identifier", "subscription-group-identifier",
        // Renewal info fields of JWSRenewalInfoDecodedPayload.
        "auto-renew-product-id", "billing-retry", "expiration-intent",
    ]

    /// The usage lines of `teststore transaction` and `teststore notification`.
    static let usage = """
          teststore transaction --product ID [--type non_consumable|consumable|auto_renewable_subscription|non_renewing_subscription]
                [--bundle-id ID] [--environment xcode|sandbox|production] [--transaction-id ID] [--original-transaction-id ID]
                [--app-account-token UUID] [--purchase-date MS] [--expires-date MS] [--revocation-date MS] [--quantity N]
                [--in-app-ownership-type PURCHASED|FAMILY_SHARED] [--upgraded true|false]
                [--revocation-type REFUND_FULL|REFUND_PRORATED|FAMILY_REVOKE] [--revocation-percentage 0-100000]
                [--revocation-reason 0|1] [--price MILLIUNITS] [--currency ISO4217] [--storefront ISO3166-ALPHA3]
                [--offer-type 1-4|INTRODUCTORY_OFFER|PROMOTIONAL_OFFER|OFFER_CODE|WIN_BACK_OFFER] [--offer-identifier ID]
                [--subscription-group-identifier ID] [--store DIR]
          teststore notification --type TYPE [--subtype S] [--uuid U] [--signed-date MS] [--environment E] [--bundle-id ID]
                [--app-apple-id N] [--product ID [--product-type T] ... (the transaction flags above)]
                [--auto-renew-status 0|1] [--auto-renew-product-id ID] [--billing-retry true|false]
                [--grace-period-expires-date MS] [--expiration-intent N]
                a signed notification, printed as the body Apple posts; RESCIND_CONSENT carries appData (with a signed
                app transaction) instead of data
        """

    static func nowMs() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    static func randomTransactionID() -> String { "2" + String(format: "%015llu", UInt64.random(in: 0..<1_000_000_000_000_000)) }

    static func run(_ options: Options) throws {
        guard let sub = options.positional.first else { throw Usage(message: "teststore needs init, transaction, receipt or notification") }
        let dir = options.named["store"] ?? (sub == "init" ? options.positional.dropFirst().first : nil) ?? "teststore"
        switch sub {
        case "play-purchase": return try PlayCommands.fakePurchase(options, subscription: false)
        case "play-subscription": return try PlayCommands.fakePurchase(options, subscription: true)
        case "init":
            try TestStore.initialize(directory: dir)
            let store = try TestStore.open(directory: dir, create: false)
            print(
                JSON.object([
                    ("directory", JSON.quote(dir)), ("root", JSON.quote(store.rootPath)),
                    ("note", JSON.quote("start billingd with --dev --dev-store \(dir), or --trust-root \(store.rootPath) --environments xcode")),
                ]))
        case "transaction":
            let store = try TestStore.open(directory: dir, create: false)
            print(try store.signedTransaction(transaction(options)))
        case "notification":
            try notification(options, store: try TestStore.open(directory: dir, create: false))
        case "receipt":
            let store = try TestStore.open(directory: dir, create: false)
            var purchases: [AppReceipt.InAppPurchase] = []
            for spec in options.repeated["purchase"] ?? [] {
                let parts = spec.split(separator: ":").map(String.init)
                guard parts.count >= 2 else { throw Usage(message: "--purchase is PRODUCT:TRANSACTION_ID[:PURCHASE_MS[:EXPIRES_MS]]") }
                var p = AppReceipt.InAppPurchase()
                p.productID = parts[0]
                p.transactionID = parts[1]
                p.quantity = 1
                p.purchaseDate = parts.count > 2 ? Int64(parts[2]) : nowMs()
                if parts.count > 3 { p.expiresDate = Int64(parts[3]) }
                purchases.append(p)
            }
            print(
                try store.appReceipt(
                    bundleID: options.named["bundle-id"] ?? "com.example.app",
                    receiptType: options.named["receipt-type"] ?? "Xcode", inApp: purchases))
        default:
            throw Usage(message: "unknown teststore command '\(sub)'")
        }
    }

    static func transaction(_ options: Options) throws -> TestStore.Transaction {
        guard let product = options.named["product"] else { throw Usage(message: "teststore transaction needs --product") }
        guard let type = types[options.named["type"] ?? "non_consumable"] else {
            throw Usage(message: "--type is one of \(types.keys.sorted().joined(separator: ", "))")
        }
        guard let environment = environments[options.named["environment"] ?? "xcode"] else {
            throw Usage(message: "--environment is xcode, sandbox or production")
        }
        func ms(_ name: String) throws -> Int64? {
            guard let v = options.named[name] else { return nil }
            guard let n = Int64(v) else { throw Usage(message: "--\(name) takes milliseconds since 1970") }
            return n
        }
        var t = TestStore.Transaction(
            transactionID: options.named["transaction-id"] ?? randomTransactionID(), productID: product,
            type: type, bundleID: options.named["bundle-id"] ?? "com.example.app",
            environment: environment, purchaseDate: try ms("purchase-date") ?? nowMs())
        t.originalTransactionID = options.named["original-transaction-id"]
        t.appAccountToken = options.named["app-account-token"]
        t.expiresDate = try ms("expires-date")
        if type == "Auto-Renewable Subscription" && t.expiresDate == nil { t.expiresDate = t.purchaseDate + 30 * 86_400_000 }
        t.revocationDate = try ms("revocation-date")
        if t.revocationDate != nil { t.revocationReason = 0 }
        if let q = options.named["quantity"] {
            guard let n = Int(q), n > 0 else { throw Usage(message: "--quantity takes a positive number") }
            t.quantity = n
        }
        try transactionFields(options, into: &t)
        return t
    }

    /// The optional fields of JWSTransactionDecodedPayload, each from the flag of the same name.
    static func transactionFields(_ options: Options, into t: inout TestStore.Transaction) throws {
        let named = options.named
        if let v = named["in-app-ownership-type"] {
            guard ["PURCHASED", "FAMILY_SHARED"].contains(v.uppercased()) else {
                throw Usage(message: "--in-app-ownership-type is PURCHASED or FAMILY_SHARED")
            }
            t.inAppOwnershipType = v.uppercased()
        }
        if let v = named["upgraded"] { t.isUpgraded = try bool(v, "upgraded") }
        if let v = named["revocation-type"] {
            guard ["REFUND_FULL", "REFUND_PRORATED", "FAMILY_REVOKE"].contains(v.uppercased()) else {
                throw Usage(message: "--revocation-type is REFUND_FULL, REFUND_PRORATED or FAMILY_REVOKE")
            }
            t.revocationType = v.uppercased()
        }
        if let v = named["revocation-percentage"] {
            guard let n = Int(v), (0...100_000).contains(n) else {
                throw Usage(message: "--revocation-percentage takes thousandths of a percent, 0 to 100000")
            }
            t.revocationPercentage = n
        }
        if let v = named["revocation-reason"] {
            guard let n = Int(v), n == 0 || n == 1 else { throw Usage(message: "--revocation-reason is 0 or 1") }
            t.revocationReason = n
        }
        if let v = named["price"] {
            guard let n = Int64(v), n >= 0 else { throw Usage(message: "--price takes milliunits of the currency (9990 is 9.99)") }
            t.price = n
        }
        if let v = named["currency"] { t.currency = v }
        if let v = named["storefront"] { t.storefront = v }
        if let v = named["offer-type"] {
            let names = ["INTRODUCTORY_OFFER": 1, "PROMOTIONAL_OFFER": 2, "OFFER_CODE": 3, "WIN_BACK_OFFER": 4]
            guard let n = Int(v) ?? names[v.uppercased()], n > 0 else {
                throw Usage(message: "--offer-type is a number (1-4) or \(names.keys.sorted().joined(separator: ", "))")
            }
            t.offerType = n
        }
        if let v = named["offer-identifier"] { t.offerIdentifier = v }
        if let v = named["subscription-group-identifier"] { t.subscriptionGroupIdentifier = v }
    }

    static func bool(_ v: String, _ flag: String) throws -> Bool {
        switch v.lowercased() {
        case "true", "1": return true
        case "false", "0": return false
        default: throw Usage(message: "--\(flag) is true or false")
        }
    }

    /// A signed App Store Server Notification v2 from the test store, printed as the body Apple posts.
    static func notification(_ options: Options, store: TestStore) throws {
        guard let type = options.named["type"] else { throw Usage(message: "teststore notification needs --type (REFUND, DID_RENEW, ...)") }
        guard let environment = environments[options.named["environment"] ?? "xcode"] else {
            throw Usage(message: "--environment is xcode, sandbox or production")
        }
        func ms(_ name: String) throws -> Int64? {
            guard let v = options.named[name] else { return nil }
            guard let n = Int64(v) else { throw Usage(message: "--\(name) takes milliseconds since 1970") }
            return n
        }
        let signed = try ms("signed-date") ?? nowMs()
        var n = TestStore.Notification(
            type: type, subtype: options.named["subtype"], uuid: options.named["uuid"], signedDate: signed,
            bundleID: options.named["bundle-id"] ?? "com.example.app", environment: environment)
        if let id = options.named["app-apple-id"] {
            guard let v = Int64(id) else { throw Usage(message: "--app-apple-id takes a number") }
            n.appAppleID = v
        }
        if n.container == .appData {
            // RESCIND_CONSENT: appData with the app transaction, as Apple sends it.
            var app = TestStore.AppTransaction(
                bundleID: n.bundleID, receiptType: environment, originalPurchaseDate: signed - 86_400_000, receiptCreationDate: signed)
            app.appAppleID = n.appAppleID
            n.appTransaction = app
        } else if options.named["product"] != nil {
            // --type names the notification here; the product's type is --product-type.
            var txOptions = options
            txOptions.named["type"] = options.named["product-type"]
            var t = try transaction(txOptions)
            t.environment = environment
            t.signedDate = signed
            n.transaction = t
            n.renewal = try renewal(options, for: t, environment: environment, signed: signed)
        }
        print(TestStore.notificationBody(try store.signedNotification(n)))
    }

    /// Renewal info for `t`: for auto-renewable subscriptions, and whenever a renewal flag is given.
    static func renewal(
        _ options: Options, for t: TestStore.Transaction, environment: String, signed: Int64
    ) throws
        -> TestStore.RenewalInfo?
    {
        let named = options.named
        let given = ["auto-renew-status", "auto-renew-product-id", "billing-retry", "grace-period-expires-date", "expiration-intent"]
            .contains { named[$0] != nil }
        guard given || t.type == "Auto-Renewable Subscription" else { return nil }
        let status = named["auto-renew-status"] ?? "1"
        guard let s = Int(status), s == 0 || s == 1 else { throw Usage(message: "--auto-renew-status is 0 or 1") }
        var r = TestStore.RenewalInfo(
            originalTransactionID: t.originalTransactionID ?? t.transactionID, productID: t.productID, autoRenewStatus: s,
            environment: environment, signedDate: signed)
        if let g = named["grace-period-expires-date"] {
            guard let v = Int64(g) else { throw Usage(message: "--grace-period-expires-date takes milliseconds since 1970") }
            r.gracePeriodExpiresDate = v
        }
        if let v = named["billing-retry"] { r.isInBillingRetryPeriod = try bool(v, "billing-retry") }
        r.autoRenewProductID = named["auto-renew-product-id"]
        if let v = named["expiration-intent"] {
            guard let i = Int(v) else { throw Usage(message: "--expiration-intent takes a number") }
            r.expirationIntent = i
        }
        return r
    }
}

/// `billingctl demo`: the whole purchase flow against a running `billingd --dev`.
enum Demo {
    static func run(_ options: Options) throws {
        let dir = options.named["store"] ?? "teststore"
        let store = try TestStore.open(directory: dir, create: false)
        let bundle = options.named["bundle-id"] ?? "com.example.app"
        let product = options.named["product"] ?? "com.example.premium"
        let account = "demo-" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let client = try options.client()

        print("1. CreateOrder for \(account), \(product)")
        var create = CreateOrderRequest()
        create.accountID = account
        create.productID = product
        create.idempotencyKey = "demo-checkout"
        let order = try call(options, "billing.v1.Billing/CreateOrder", create, CreateOrderResponse.self, client: client).order!
        print(JSON.order(order))

        print("2. The app buys with StoreKit; the test store signs the transaction (appAccountToken = order id)")
        var t = TestStore.Transaction(
            transactionID: TestStoreCommand.randomTransactionID(), productID: product, bundleID: bundle,
            environment: "Xcode", purchaseDate: TestStoreCommand.nowMs())
        t.appAccountToken = order.orderID
        let jws = try store.signedTransaction(t)
        print("   signed transaction \(t.transactionID): \(jws.prefix(48))... (\(jws.utf8.count) bytes)")

        print("3. SubmitReceipt")
        var submit = SubmitReceiptRequest()
        submit.orderID = order.orderID
        submit.proof = .signedTransaction(jws)
        let first = try call(options, "billing.v1.Billing/SubmitReceipt", submit, SubmitReceiptResponse.self, client: client)
        print(JSON.submitResponse(first))

        print("4. SubmitReceipt again (the app retries after a crash)")
        let again = try call(options, "billing.v1.Billing/SubmitReceipt", submit, SubmitReceiptResponse.self, client: client)
        print(JSON.submitResponse(again))

        print("5. RestorePurchases with the same signed transaction")
        var restore = RestorePurchasesRequest()
        restore.accountID = account
        restore.signedTransactions = [jws]
        let restored = try call(options, "billing.v1.Billing/RestorePurchases", restore, RestorePurchasesResponse.self, client: client)
        print(JSON.restoreResponse(restored))
        guard first.order?.state == .completed, again.alreadyProcessed, restored.entitlements.contains(where: { $0.productID == product && $0.active })
        else {
            FileHandle.standardError.write(Data("demo: the flow did not end as expected\n".utf8))
            exit(1)
        }
        print("demo: order completed once, retry answered already_processed, entitlement active")
    }
}
