import BillingAPI
import Foundation
import Testing

/// The golden cases of the fields and messages added with the subscription model, Google Play and the support
/// RPCs (ListTransactions, GetTransaction, SignOffer): every new field set, so each is checked both ways.
extension Golden {
    static var orderFull: Order {
        var o = Order()
        o.orderID = "0f8fad5b-d9cb-469f-a165-70867728950e"; o.accountID = "acct-42"; o.productID = "com.example.coins"
        o.state = .completed; o.createTimeMs = 1_700_000_000_123; o.updateTimeMs = 1_700_000_000_456
        o.transactionID = "GPA.1234-5678-9012-34567"; o.environment = .production; o.quantity = 5
        o.refundedQuantity = 2; o.store = .googlePlay
        return o
    }

    static var transactionFull: Transaction {
        var t = Transaction()
        t.transactionID = "2000000000000002"; t.originalTransactionID = "2000000000000000"; t.productID = "com.example.pro.yearly"
        t.productType = .autoRenewableSubscription; t.purchaseTimeMs = 1_700_000_000_000; t.expiresTimeMs = 1_731_536_000_000
        t.revocationTimeMs = 1_700_000_500_000; t.quantity = 1; t.environment = .sandbox
        t.appAccountToken = "0f8fad5b-d9cb-469f-a165-70867728950e"; t.bundleID = "com.example.app"
        t.store = .appStore; t.ownership = .familyShared; t.priceMilliunits = 49_990; t.currency = "EUR"; t.storefront = "DEU"
        t.offerID = "intro-1"; t.offerType = "INTRODUCTORY_OFFER"; t.subscriptionGroupID = "21000001"; t.upgraded = true
        t.revocationType = .refundProrated; t.revocationPercentage = 33_333; t.revocationReason = "APP_ISSUE"
        return t
    }

    static var googlePlay: GooglePlayPurchase {
        GooglePlayPurchase(packageName: "com.example.android", productID: "com.example.coins", purchaseToken: "opaque-token.AO-J1Oy")
    }
}

let transactionGoldenCases: [GoldenCase] = {
    var e = Entitlement()
    e.productID = "com.example.pro.yearly"; e.productType = .autoRenewableSubscription; e.originalTransactionID = "2000000000000000"
    e.latestTransactionID = "2000000000000002"; e.purchaseTimeMs = 1_700_000_000_000; e.expiresTimeMs = 1_731_536_000_000
    e.active = true; e.orderID = "0f8fad5b-d9cb-469f-a165-70867728950e"; e.gracePeriodExpiresTimeMs = 1_731_968_000_000
    e.autoRenew = true; e.environment = .production; e.state = .gracePeriod; e.ownership = .purchased; e.store = .appStore
    e.subscriptionGroupID = "21000001"; e.pendingProductID = "com.example.pro.monthly"
    var submit = SubmitReceiptRequest()
    submit.orderID = "o"; submit.proof = .googlePlay(Golden.googlePlay); submit.transactionID = "GPA.1"; submit.sandbox = true
    var submitEmpty = SubmitReceiptRequest()
    submitEmpty.orderID = "o"; submitEmpty.proof = .googlePlay(GooglePlayPurchase())
    var restore = RestorePurchasesRequest()
    restore.accountID = "acct"; restore.signedTransactions = ["a.b.c"]; restore.transactionIDs = ["2000000000000001"]
    restore.googlePlayPurchases = [Golden.googlePlay, GooglePlayPurchase(), GooglePlayPurchase(packageName: "", productID: "", purchaseToken: "t2")]
    var event = Event()
    event.cursor = 42; event.type = EventType(rawValue: 13); event.timeMs = 1_700_000_000_999; event.accountID = "acct-42"
    event.order = Golden.orderFull; event.cause = "notification:REFUND"; event.transactionID = "GPA.1234-5678-9012-34567"
    var list = ListTransactionsRequest()
    list.accountID = "acct-42"; list.limit = 1000; list.pageToken = "MTcwMDowMDE"
    var page = ListTransactionsResponse()
    var one = Transaction(); one.transactionID = "1"
    page.transactions = [Golden.transactionFull, one]; page.nextPageToken = "MTcwMDowMDE"
    var found = GetTransactionResponse()
    found.transaction = Golden.transactionFull; found.accountID = "acct-42"; found.order = Golden.orderFull
    var unowned = GetTransactionResponse()
    unowned.transaction = one
    var sign = SignOfferRequest()
    sign.kind = .introductoryEligibility; sign.bundleID = "com.example.app"; sign.productID = "com.example.pro.monthly"
    sign.offerID = "winback-1"; sign.orderID = "0f8fad5b-d9cb-469f-a165-70867728950e"; sign.transactionID = "2000000000000001"
    sign.allowIntroductoryOffer = true
    var signed = SignOfferResponse()
    signed.compactJWS = "eyJ.a.b"; signed.keyID = "ABC123DEFG"; signed.nonce = "5f3c1b9e-0000-4000-8000-000000000001"
    signed.timestampMs = 1_700_000_000_000; signed.signature = "MEUCIQ=="
    return [
        GoldenCase("order_full", Golden.orderFull),
        GoldenCase("transaction_full", Golden.transactionFull),
        GoldenCase("entitlement_full", e),
        GoldenCase("google_play_purchase", Golden.googlePlay),
        GoldenCase("submit_receipt_request_google_play", submit),
        GoldenCase("submit_receipt_request_empty_google_play", submitEmpty),
        GoldenCase("restore_request_google_play", restore),
        GoldenCase("event_partially_refunded", event),
        GoldenCase("list_transactions_request", list),
        GoldenCase("list_transactions_response", page),
        GoldenCase("get_transaction_request", GetTransactionRequest(transactionID: "2000000000000000")),
        GoldenCase("get_transaction_response", found),
        GoldenCase("get_transaction_response_unowned", unowned),
        GoldenCase("sign_offer_request", sign),
        GoldenCase("sign_offer_response", signed),
    ]
}()

/// Every value of billing.proto's enums prints as its proto name (billingctl's JSON and the logs use them).
@Suite("Enum names match billing.proto")
struct EnumNameTests {
    /// `NAME = N;` lines of `enum <name> { ... }` in the repository's billing.proto.
    static func values(of name: String) throws -> [(Int32, String)] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../schemas/billing/v1/billing.proto")
        let text = try String(contentsOf: url, encoding: .utf8)
        let start = try #require(text.range(of: "enum \(name) {"))
        let body = text[start.upperBound...].prefix { $0 != "}" }
        return body.split(separator: "\n").compactMap { line -> (Int32, String)? in
            let code = line.split(separator: "//").first ?? ""
            let parts = code.split(separator: "=").map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, let n = Int32(parts[1].dropLast()) else { return nil }
            return (n, parts[0])
        }
    }

    @Test(
        "each value's description is its proto name",
        arguments: ["Store", "Ownership", "EntitlementState", "RevocationType", "OfferSignatureKind", "EventType", "Environment", "ProductType", "OrderState"]
    )
    func names(_ name: String) throws {
        let described: (Int32) -> String =
            switch name {
            case "Store": { Store(rawValue: $0).description }
            case "Ownership": { Ownership(rawValue: $0).description }
            case "EntitlementState": { EntitlementState(rawValue: $0).description }
            case "RevocationType": { RevocationType(rawValue: $0).description }
            case "OfferSignatureKind": { OfferSignatureKind(rawValue: $0).description }
            case "EventType": { EventType(rawValue: $0).description }
            case "Environment": { Environment(rawValue: $0).description }
            case "ProductType": { ProductType(rawValue: $0).description }
            default: { OrderState(rawValue: $0).description }
            }
        let values = try Self.values(of: name)
        #expect(values.count >= 3)
        for (n, proto) in values { #expect(described(n) == proto) }
        // A number the proto does not name prints as the number.
        #expect(described(99) == "99")
    }
}
