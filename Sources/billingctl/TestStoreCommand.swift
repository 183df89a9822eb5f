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

    static func nowMs() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    static func randomTransactionID() -> String { "2" + String(format: "%015llu", UInt64.random(in: 0..<1_000_000_000_000_000)) }

    static func run(_ options: Options) throws {
        guard let sub = options.positional.first else { throw Usage(message: "teststore needs init, transaction, receipt or notification") }
        let dir = options.named["store"] ?? (sub == "init" ? options.positional.dropFirst().first : nil) ?? "teststore"
        switch sub {
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
            try AfterSaleCommands.notification(options, store: try TestStore.open(directory: dir, create: false))
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
        return t
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
