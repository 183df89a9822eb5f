import BillingTesting
import Billing
import BillingAPI
import BillingService
import ProtoWire
import RPC
import Testing
import TestSupport

@Suite("ListTransactions page tokens")
struct PageTokenTests {
    @Test(
        "a cursor survives encode and decode",
        arguments: [
            HistoryCursor(purchaseTimeMs: 1_700_000_000_000, transactionID: "2000000000000001"),
            HistoryCursor(purchaseTimeMs: 0, transactionID: "1"),
            HistoryCursor(purchaseTimeMs: .max, transactionID: "GPA.1234-5678-9012-34567"),
            HistoryCursor(purchaseTimeMs: -5, transactionID: "a:b:c"),
            HistoryCursor(purchaseTimeMs: 7, transactionID: "\u{fc}-\u{6f22}-\u{1F600}"),
            HistoryCursor(purchaseTimeMs: 7, transactionID: String(repeating: "9", count: 128)),
        ])
    func roundTrip(_ cursor: HistoryCursor) {
        let token = PageToken.encode(cursor)
        #expect(token.utf8.allSatisfy { $0.isASCIIAlnum || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") })
        #expect(PageToken.decode(token) == cursor)
    }

    static func base64url(_ text: [UInt8]) -> String {
        String(Base64.encode(text).map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
    }

    @Test("anything encode would not make is refused")
    func malformed() {
        let good = PageToken.encode(HistoryCursor(purchaseTimeMs: 1_700_000_000_000, transactionID: "2000000000000001"))
        let bad: [String] = [
            "", "!!!!", "a", good + "=", good + "A", String(good.dropLast()) + "~",
            Base64.encode(Array("17:2000".utf8), padded: true),  // padded
            Self.base64url(Array("1700000000000".utf8)),  // no colon
            Self.base64url(Array("1700000000000:".utf8)),  // no id
            Self.base64url(Array(":2000".utf8)),  // no time
            Self.base64url(Array("017:2000".utf8)),  // a leading zero
            Self.base64url(Array("+17:2000".utf8)),  // a sign
            Self.base64url(Array("1e3:2000".utf8)),
            Self.base64url(Array("99999999999999999999:1".utf8)),  // beyond Int64
            Self.base64url(Array("17:\u{7}x".utf8)),  // a control character
            Self.base64url([0x31, 0x3A, 0xFF, 0xFE]),  // not UTF-8
            Self.base64url(Array(("17:" + String(repeating: "9", count: 129)).utf8)),  // id too long
            String(repeating: "A", count: 4096),
        ]
        for token in bad { #expect(PageToken.decode(token) == nil, "\(token)") }
        // The standard alphabet's `/` where base64url has `_`.
        let urlSafe = PageToken.encode(HistoryCursor(purchaseTimeMs: 1, transactionID: "?>"))
        #expect(urlSafe == "MTo_Pg")
        #expect(PageToken.decode("MTo_Pg") != nil)
        #expect(PageToken.decode("MTo/Pg") == nil)
    }
}

extension UInt8 {
    fileprivate var isASCIIAlnum: Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self)
    }
}

/// ListTransactions, GetTransaction, SignOffer and the Google Play refusals, through the router as the transport
/// calls them, over the in-memory store.
@Suite("ListTransactions, GetTransaction, SignOffer")
struct TransactionServiceTests {
    /// Refuses every proof: no test here gets as far as verifying one.
    final class RefusingVerifier: ProofVerifier {
        func verifySignedTransaction(_ jws: String) -> Result<StoreTransaction, BillingError> { .failure(.receiptMalformed(detail: "test")) }
        func verifyAppReceipt(_ base64: String) -> Result<[StoreTransaction], BillingError> { .failure(.receiptMalformed(detail: "test")) }
        func hasVerifiedChain(signedTransaction jws: String) -> Bool { false }
    }

    let store = InMemoryOrderStore()
    let orders: OrderService
    let router: Router

    init() {
        orders = OrderService(store: store, catalog: nil, clock: ManualClock(milliseconds: 1_700_000_000_000))
        var r = Router()
        BillingService(orders: orders, purchases: PurchaseEngine(orders: orders, verifier: RefusingVerifier())).register(in: &r)
        router = r
    }

    /// One call through the pipeline (BillingTesting's client: interceptors, request id, deadline, in-flight count).
    func call<Response: ProtoMessage>(_ method: String, _ request: some ProtoMessage, _: Response.Type) -> Result<Response, RPCError> {
        PipelineClient.call(router, "billing.v1.Billing/" + method, request, Response.self)
    }

    func refusal<Response: ProtoMessage>(_ method: String, _ request: some ProtoMessage, _ type: Response.Type) -> RPCError? {
        if case .failure(let e) = call(method, request, type) { return e }
        return nil
    }

    static func tx(_ id: String, original: String? = nil, product: String = "com.example.coins", at ms: Int64) -> StoreTransaction {
        StoreTransaction(
            transactionID: id, originalTransactionID: original ?? id, productID: product, productKind: .consumable, purchaseTimeMs: ms,
            environment: .sandbox, bundleID: "com.example.app")
    }

    func insert(_ t: StoreTransaction, account: String, orderID: String? = nil) {
        let result: Result<Void, BillingError> = wait { done in
            store.write(
                abandoned: { false },
                { ledger throws(BillingError) in
                    try ledger.insert(OwnedTransaction(transaction: t, accountID: account, orderID: orderID))
                    return .success(())
                }, completion: done)
        }
        #expect((try? result.get()) != nil)
    }

    func page(_ account: String, limit: Int32, token: String = "") -> Result<ListTransactionsResponse, RPCError> {
        var req = ListTransactionsRequest()
        req.accountID = account
        req.limit = limit
        req.pageToken = token
        return call("ListTransactions", req, ListTransactionsResponse.self)
    }

    @Test("pages run newest purchase first (ties by id), each token continues, the last page has none")
    func paging() throws {
        // Seven purchases, two at the same millisecond; another account's purchase in between.
        let times: [(String, Int64)] = [("11", 1000), ("12", 5000), ("13", 3000), ("14", 3000), ("15", 7000), ("16", 2000), ("17", 6000)]
        for (id, ms) in times { insert(Self.tx(id, at: ms), account: "acct-p") }
        insert(Self.tx("99", at: 4000), account: "someone-else")
        var seen: [String] = []
        var token = ""
        var pages = 0
        repeat {
            let r = try page("acct-p", limit: 3, token: token).get()
            #expect(r.transactions.count == (pages < 2 ? 3 : 1))
            seen += r.transactions.map(\.transactionID)
            token = r.nextPageToken
            pages += 1
        } while !token.isEmpty && pages < 10
        #expect(pages == 3)
        #expect(seen == ["15", "17", "12", "14", "13", "16", "11"])
        // A page that ends exactly at the last transaction says so: no token to a page of nothing.
        let six = try page("acct-p", limit: 7).get()
        #expect(six.transactions.count == 7 && six.nextPageToken.isEmpty)
        // 0 means 100; more than 1000 is cut to 1000.
        #expect(try page("acct-p", limit: 0).get().transactions.count == 7)
        #expect(try page("acct-p", limit: 5000).get().transactions.count == 7)
        #expect(try page("nobody", limit: 0).get() == ListTransactionsResponse())
    }

    @Test("a bad account, limit or token is INVALID_FIELD naming the field")
    func invalid() {
        #expect(refusal("ListTransactions", ListTransactionsRequest(), ListTransactionsResponse.self)?.metadata["field"] == "account_id")
        var long = ListTransactionsRequest()
        long.accountID = String(repeating: "a", count: 129)
        #expect(refusal("ListTransactions", long, ListTransactionsResponse.self)?.metadata["field"] == "account_id")
        let negative = page("acct", limit: -1)
        #expect(negative.failure?.reason == "INVALID_FIELD" && negative.failure?.metadata["field"] == "limit")
        let token = page("acct", limit: 1, token: "not a token")
        #expect(token.failure?.code == .invalidArgument)
        #expect(token.failure?.reason == "INVALID_FIELD" && token.failure?.metadata["field"] == "page_token")
    }

    @Test("GetTransaction answers by transaction id or original transaction id, with the account and the order")
    func getTransaction() throws {
        let order = try wait { done in
            orders.createOrder(OrderService.CreateRequest(accountID: "acct-g", productID: "com.example.pro")) {
                done($0)
            }
        }.get()
        var first = Self.tx("301", original: "300", product: "com.example.pro", at: 1000)
        first.productKind = .autoRenewableSubscription
        first.price = PriceFacts(priceMilliunits: 4990, currency: "USD", storefront: "USA", offerID: "intro", offerType: "INTRODUCTORY_OFFER")
        first.ownership = .familyShared
        first.subscriptionGroupID = "21000001"
        first.revocationTimeMs = 1500
        first.revocationReason = 1
        first.revocationType = .refundProrated
        first.revocationPercentage = 33_333
        first.upgraded = true
        insert(first, account: "acct-g", orderID: order.id)
        var renewal = Self.tx("302", original: "300", product: "com.example.pro", at: 2000)
        renewal.productKind = .autoRenewableSubscription
        insert(renewal, account: "acct-g")
        insert(Self.tx("400", at: 5), account: "")

        let exact = try call("GetTransaction", GetTransactionRequest(transactionID: "301"), GetTransactionResponse.self).get()
        #expect(exact.accountID == "acct-g")
        #expect(exact.order?.orderID == order.id)
        let t = try #require(exact.transaction)
        #expect(t.transactionID == "301" && t.originalTransactionID == "300")
        #expect(t.store == .appStore && t.ownership == .familyShared)
        #expect(t.priceMilliunits == 4990 && t.currency == "USD" && t.storefront == "USA")
        #expect(t.offerID == "intro" && t.offerType == "INTRODUCTORY_OFFER" && t.subscriptionGroupID == "21000001")
        #expect(t.upgraded && t.revocationType == .refundProrated && t.revocationPercentage == 33_333)
        #expect(t.revocationReason == "APP_ISSUE")

        let original = try call("GetTransaction", GetTransactionRequest(transactionID: "300"), GetTransactionResponse.self).get()
        #expect(original.transaction?.transactionID == "302")
        #expect(original.accountID == "acct-g" && original.order == nil)

        let unowned = try call("GetTransaction", GetTransactionRequest(transactionID: "400"), GetTransactionResponse.self).get()
        #expect(unowned.accountID.isEmpty && unowned.transaction?.transactionID == "400")

        let unknown = refusal("GetTransaction", GetTransactionRequest(transactionID: "999"), GetTransactionResponse.self)
        #expect(unknown?.code == .notFound && unknown?.reason == "TRANSACTION_NOT_FOUND")
        #expect(unknown?.metadata["transaction_id"] == "999")
        // 512 bytes: a Google Play purchase token (often ~150 characters, unbounded by Google) fits.
        for bad in ["", String(repeating: "1", count: 513), "1\n2"] {
            let e = refusal("GetTransaction", GetTransactionRequest(transactionID: bad), GetTransactionResponse.self)
            #expect(e?.reason == "INVALID_FIELD" && e?.metadata["field"] == "transaction_id")
        }
        let longest = GetTransactionRequest(transactionID: String(repeating: "1", count: 512))
        #expect(refusal("GetTransaction", longest, GetTransactionResponse.self)?.reason == "TRANSACTION_NOT_FOUND")
    }

    @Test("Apple's revocation reason as text")
    func revocationReasons() {
        for (i, (reason, text)) in ([(nil, ""), (0, "OTHER"), (1, "APP_ISSUE"), (7, "7")] as [(Int?, String)]).enumerated() {
            var t = Self.tx("50\(i)", at: 1)
            t.revocationReason = reason
            insert(t, account: "r\(text)")
        }
        for text in ["", "OTHER", "APP_ISSUE", "7"] {
            let got = try? page("r\(text)", limit: 1).get().transactions.first?.revocationReason
            #expect(got == text)
        }
    }

    @Test("SignOffer is OFFER_SIGNING_NOT_CONFIGURED; Google Play proofs are GOOGLE_PLAY_NOT_CONFIGURED")
    func notConfigured() {
        var sign = SignOfferRequest()
        sign.kind = .promotional
        sign.productID = "com.example.pro"
        let offer = refusal("SignOffer", sign, SignOfferResponse.self)
        #expect(offer?.code == .failedPrecondition && offer?.reason == "OFFER_SIGNING_NOT_CONFIGURED")
        var submit = SubmitReceiptRequest()
        submit.orderID = "0190a5b8-7c00-7000-8000-000000000001"
        submit.proof = .googlePlay(GooglePlayPurchase(packageName: "com.example.android", productID: "p", purchaseToken: "t"))
        let play = refusal("SubmitReceipt", submit, SubmitReceiptResponse.self)
        #expect(play?.code == .failedPrecondition && play?.reason == "GOOGLE_PLAY_NOT_CONFIGURED")
        var restore = RestorePurchasesRequest()
        restore.accountID = "acct"
        restore.googlePlayPurchases = [GooglePlayPurchase(packageName: "com.example.android", productID: "p", purchaseToken: "t")]
        let restored = refusal("RestorePurchases", restore, RestorePurchasesResponse.self)
        #expect(restored?.code == .failedPrecondition && restored?.reason == "GOOGLE_PLAY_NOT_CONFIGURED")
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let e) = self { return e }
        return nil
    }
}
