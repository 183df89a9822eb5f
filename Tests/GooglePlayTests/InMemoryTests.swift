import GooglePlayAPI
import Testing

@Suite("InMemoryGooglePlayAPI: Google's rules in memory")
struct InMemoryTests {
    static func purchase(_ token: String, state: Int = 0, product: String = "coins100") -> GooglePlay.ProductPurchase {
        GooglePlay.ProductPurchase(
            orderID: state == 2 ? nil : "GPA.0000-0000-0000-" + token, purchaseState: state, purchaseTimeMillis: 1000, productID: product,
            purchaseToken: token)
    }

    @Test("get, acknowledge, consume once; consume acknowledges; states and tokens checked; calls recorded")
    func products() throws {
        let api = InMemoryGooglePlayAPI()
        api.add(Self.purchase("t1"))
        api.add(Self.purchase("t2", state: 2))
        #expect(try api.productPurchase(packageName: "com.example.app", productID: "coins100", token: "t1").orderID == "GPA.0000-0000-0000-t1")
        try api.consumeProduct(packageName: "com.example.app", productID: "coins100", token: "t1")
        #expect(api.product("t1")?.isConsumed == true && api.product("t1")?.isAcknowledged == true)
        #expect(
            throws: GooglePlayAPIError.rejected(
                status: 400, reason: "invalidPurchaseState", message: "The purchase is not in a valid state to perform the desired operation.")
        ) {
            try api.consumeProduct(packageName: "com.example.app", productID: "coins100", token: "t1")
        }
        #expect(throws: GooglePlayAPIError.self) {
            try api.acknowledgeProduct(packageName: "com.example.app", productID: "coins100", token: "t2", developerPayload: nil)
        }
        #expect(throws: GooglePlayAPIError.notFound(status: 400, reason: "invalid", message: "Invalid Value")) {
            try api.productPurchase(packageName: "com.example.app", productID: "coins100", token: "nope")
        }
        do {
            _ = try api.productPurchase(packageName: "com.example.app", productID: "gems", token: "t1")
            Issue.record("another product's token answered")
        } catch {
            #expect(error == .notFound(status: 400, reason: "purchaseTokenDoesNotMatchProductId", message: "The purchase token does not match the product ID."))
        }
        #expect(throws: GooglePlayAPIError.self) { try api.productPurchase(packageName: "com.other.app", productID: "coins100", token: "t1") }
        api.failNext("purchases.products.get", with: .unavailable("HTTP 503"))
        #expect(throws: GooglePlayAPIError.unavailable("HTTP 503")) {
            try api.productPurchase(packageName: "com.example.app", productID: "coins100", token: "t1")
        }
        #expect(api.calls("purchases.products.consume").count == 2 && api.calls.count == 8)
    }

    @Test("subscriptions: get, acknowledge with account ids, pending refused; voided paging by size and token")
    func subscriptionsAndVoided() throws {
        let api = InMemoryGooglePlayAPI()
        let item = GooglePlay.LineItem(productID: "pro.monthly", expiryTimeMillis: 5000)
        api.add(GooglePlay.SubscriptionPurchaseV2(subscriptionState: .active, lineItems: [item]), token: "s1")
        api.add(GooglePlay.SubscriptionPurchaseV2(subscriptionState: .pending, lineItems: [item]), token: "s2")
        try api.acknowledgeSubscription(
            packageName: "com.example.app", subscriptionID: "pro.monthly", token: "s1", developerPayload: nil,
            externalAccountIDs: GooglePlay.ExternalAccountIDs(obfuscatedAccountID: "ord_1"))
        let s1 = try api.subscriptionPurchase(packageName: "com.example.app", token: "s1")
        #expect(s1.isAcknowledged && s1.externalAccountIdentifiers?.obfuscatedExternalAccountID == "ord_1")
        #expect(throws: GooglePlayAPIError.self) {
            try api.acknowledgeSubscription(
                packageName: "com.example.app", subscriptionID: "pro.monthly", token: "s2", developerPayload: nil, externalAccountIDs: nil)
        }
        for i in 0..<5 {
            api.addVoided(GooglePlay.VoidedPurchase(purchaseToken: "v\(i)", orderID: "o\(i)", voidedTimeMillis: Int64(100 + i)), subscription: i == 4)
        }
        let all = try api.allVoidedPurchases(packageName: "com.example.app", GooglePlay.VoidedPurchasesQuery(startTimeMillis: 101, pageSize: 2))
        #expect(all.map(\.purchaseToken) == ["v1", "v2", "v3", "v4"])
        let products = try api.allVoidedPurchases(packageName: "com.example.app", GooglePlay.VoidedPurchasesQuery(type: 0, pageSize: 2))
        #expect(products.map(\.purchaseToken) == ["v0", "v1", "v2", "v3"])
        #expect(api.calls("purchases.voidedpurchases.list").count == 2 + 2)
        #expect(throws: GooglePlayAPIError.self) { try api.allVoidedPurchases(packageName: "com.example.app", .init(pageSize: 1), maxPurchases: 3) }
    }
}
