import Billing
import BillingService
import Foundation
import RPC
import Synchronization
import Testing
import TestSupport

@Suite("Order rules")
struct OrderServiceTests {
    let clock = ManualClock(milliseconds: 1_700_000_000_000)

    func service(catalog: Catalog? = nil) -> OrderService {
        OrderService(store: InMemoryOrderStore(), catalog: catalog, clock: clock)
    }

    func create(_ s: OrderService, _ r: OrderService.CreateRequest) -> Result<Billing.Order, BillingError> {
        wait { done in s.createOrder(r, completion: done) }
    }

    @Test("a new order is PENDING with a lowercase, time-ordered UUID v7 and the clock's time")
    func newOrder() throws {
        let order = try create(service(), .init(accountID: "acct", productID: "p")).get()
        #expect(order.state == .pending)
        #expect(order.quantity == 1)
        #expect(order.createTimeMs == 1_700_000_000_000)
        #expect(order.updateTimeMs == order.createTimeMs)
        let uuid = try #require(UUID(uuidString: order.id))
        #expect(order.id == uuid.uuidString.lowercased())
        #expect(Array(order.id.utf8)[14] == UInt8(ascii: "7"))
        #expect("89ab".utf8.contains(Array(order.id.utf8)[19]))
        // The first 48 bits are the creation time in milliseconds.
        let millis = UInt64(order.id.replacingOccurrences(of: "-", with: "").prefix(12), radix: 16)
        #expect(millis == 1_700_000_000_000)
    }

    @Test("ids sort by creation time")
    func timeOrdered() {
        let ids = (0..<100).map { OrderID.make(milliseconds: 1_700_000_000_000 + Int64($0)) }
        #expect(ids == ids.sorted())
    }

    @Test("ids do not repeat")
    func uniqueIDs() {
        let ids = Set((0..<10_000).map { _ in OrderID.make() })
        #expect(ids.count == 10_000)
    }

    @Test(
        "invalid fields name the field",
        arguments: [
            (OrderService.CreateRequest(accountID: "", productID: "p"), "account_id"),
            (OrderService.CreateRequest(accountID: String(repeating: "a", count: 129), productID: "p"), "account_id"),
            (OrderService.CreateRequest(accountID: "a\u{0}b", productID: "p"), "account_id"),
            (OrderService.CreateRequest(accountID: "a", productID: ""), "product_id"),
            (OrderService.CreateRequest(accountID: "a", productID: String(repeating: "p", count: 256)), "product_id"),
            (OrderService.CreateRequest(accountID: "a", productID: "p", idempotencyKey: String(repeating: "k", count: 129)), "idempotency_key"),
            (OrderService.CreateRequest(accountID: "a", productID: "p", quantity: -1), "quantity"),
            (OrderService.CreateRequest(accountID: "a", productID: "p", quantity: 1001), "quantity"),
        ])
    func invalid(_ request: OrderService.CreateRequest, _ field: String) {
        guard case .failure(.invalidField(let f, _)) = create(service(), request) else {
            Issue.record("expected INVALID_FIELD")
            return
        }
        #expect(f == field)
    }

    @Test(
        "account ids refuse controls, format characters, line and paragraph separators, and white space at either end",
        arguments: [
            "\u{202E}gnp.exe", "a\u{200B}b", "a\u{2028}b", "a\u{2029}b", "\u{FEFF}a", "a\u{2066}b\u{2069}", "a\u{85}b",
            "a\u{7F}", " a", "a ", "a\u{A0}", "\u{3000}a", "a\t",
        ])
    func invisibleAccountIDs(_ accountID: String) {
        guard case .failure(.invalidField(let field, let problem)) = create(service(), .init(accountID: accountID, productID: "p")) else {
            Issue.record("expected INVALID_FIELD for \(accountID.unicodeScalars.map { String($0.value, radix: 16) })")
            return
        }
        #expect(field == "account_id")
        // The message names the code point, never the character itself.
        #expect(!problem.unicodeScalars.contains { $0.value > 0x7E })
    }

    @Test("account ids may hold inner spaces and any visible script", arguments: ["user 42", "José", "用户-7", "a\u{301}"])
    func visibleAccountIDs(_ accountID: String) throws {
        let order = try create(service(), .init(accountID: accountID, productID: "p")).get()
        #expect(order.accountID == accountID)
        try OrderService.checkAccountID(accountID, required: true)
    }

    @Test("every ASCII character inside and at either end of an account id: controls refused anywhere, a space only at the ends")
    func asciiAccountIDs() {
        for byte in UInt8(0)...0x7F {
            let c = String(UnicodeScalar(byte))
            for (id, atEnd) in [("a\(c)b", false), ("\(c)ab", true), ("ab\(c)", true), (c, true)] {
                let refused = byte < 0x20 || byte == 0x7F || (byte == 0x20 && atEnd)
                var threw = false
                do { try OrderService.checkAccountID(id, required: true) } catch { threw = true }
                #expect(threw == refused, "byte \(byte) in \(Array(id.utf8))")
            }
        }
    }

    @Test("128-byte account ids and 1000 items are allowed")
    func limits() throws {
        let order = try create(service(), .init(accountID: String(repeating: "é", count: 64), productID: "p", quantity: 1000)).get()
        #expect(order.quantity == 1000)
    }

    @Test("same key and same fields answer the same order")
    func idempotentReplay() throws {
        let s = service()
        let first = try create(s, .init(accountID: "a", productID: "p", idempotencyKey: "k", quantity: 2)).get()
        clock.advance(milliseconds: 5)
        let again = try create(s, .init(accountID: "a", productID: "p", idempotencyKey: "k", quantity: 2)).get()
        #expect(again == first)
    }

    @Test("quantity 0 and 1 are the same fields for a replay")
    func zeroMeansOne() throws {
        let s = service()
        let first = try create(s, .init(accountID: "a", productID: "p", idempotencyKey: "k", quantity: 0)).get()
        #expect(try create(s, .init(accountID: "a", productID: "p", idempotencyKey: "k", quantity: 1)).get() == first)
    }

    @Test("same key with other fields is IDEMPOTENCY_KEY_REUSED")
    func keyReused() throws {
        let s = service()
        _ = try create(s, .init(accountID: "a", productID: "p", idempotencyKey: "k")).get()
        #expect(create(s, .init(accountID: "a", productID: "q", idempotencyKey: "k")) == .failure(.idempotencyKeyReused(key: "k")))
        #expect(create(s, .init(accountID: "a", productID: "p", idempotencyKey: "k", quantity: 3)) == .failure(.idempotencyKeyReused(key: "k")))
    }

    @Test("keys are scoped to the account")
    func keyScope() throws {
        let s = service()
        let a = try create(s, .init(accountID: "a", productID: "p", idempotencyKey: "k")).get()
        let b = try create(s, .init(accountID: "b", productID: "p", idempotencyKey: "k")).get()
        #expect(a.id != b.id)
    }

    @Test("without a key every call opens a new order")
    func noKey() throws {
        let s = service()
        let a = try create(s, .init(accountID: "a", productID: "p")).get()
        let b = try create(s, .init(accountID: "a", productID: "p")).get()
        #expect(a.id != b.id)
    }

    @Test("a catalog refuses unknown products")
    func catalog() throws {
        let catalog = try Catalog(json: Data(#"{"products": [{"id": "com.example.premium", "type": "non_consumable"}]}"#.utf8))
        let s = service(catalog: catalog)
        #expect(create(s, .init(accountID: "a", productID: "nope")) == .failure(.productNotFound(productID: "nope")))
        _ = try create(s, .init(accountID: "a", productID: "com.example.premium")).get()
    }

    @Test("get-order: canonical, upper-case, malformed and unknown ids")
    func getOrder() throws {
        let s = service()
        let order = try create(s, .init(accountID: "a", productID: "p")).get()
        let got: Result<Billing.Order, BillingError> = wait { s.getOrder(id: order.id, completion: $0) }
        #expect(try got.get() == order)
        let upper: Result<Billing.Order, BillingError> = wait { s.getOrder(id: order.id.uppercased(), completion: $0) }
        #expect(try upper.get() == order)
        let bad: Result<Billing.Order, BillingError> = wait { s.getOrder(id: "nope", completion: $0) }
        #expect(bad == .failure(.invalidField(field: "order_id", problem: "is not a UUID")))
        let empty: Result<Billing.Order, BillingError> = wait { s.getOrder(id: "", completion: $0) }
        #expect(empty == .failure(.invalidField(field: "order_id", problem: "is required")))
        let missing = "00000000-0000-4000-8000-000000000000"
        let unknown: Result<Billing.Order, BillingError> = wait { s.getOrder(id: missing, completion: $0) }
        #expect(unknown == .failure(.orderNotFound(orderID: missing)))
    }

    @Test("state graph has only the documented edges")
    func stateGraph() {
        let allowed: Set<String> = ["1>2", "2>3", "1>4"]
        for from in OrderState.allCases {
            for to in OrderState.allCases {
                #expect(from.canMove(to: to) == allowed.contains("\(from.rawValue)>\(to.rawValue)"))
            }
        }
    }
}

@Suite("Catalog files")
struct CatalogTests {
    @Test("the CONFIG.md example parses")
    func example() throws {
        let json = """
            { "products": [
                { "id": "com.example.coins100", "type": "consumable" },
                { "id": "com.example.premium",  "type": "non_consumable" },
                { "id": "com.example.pro.monthly", "type": "auto_renewable_subscription" },
                { "id": "com.example.season.pass", "type": "non_renewing_subscription", "duration_days": 90 }
            ] }
            """
        let c = try Catalog(json: Data(json.utf8))
        #expect(c.products.count == 4)
        #expect(c.product("com.example.season.pass")?.durationDays == 90)
        #expect(c.product("com.example.pro.monthly")?.kind == .autoRenewableSubscription)
    }

    @Test(
        "bad catalogs are refused",
        arguments: [
            #"{"products": [{"id": "a", "type": "gift"}]}"#, #"{"products": [{"id": "a", "type": "consumable"}, {"id": "a", "type": "consumable"}]}"#,
            #"[]"#, #"{"products": [{"id": "", "type": "consumable"}]}"#, "not json",
        ])
    func bad(_ json: String) {
        #expect(throws: Catalog.LoadError.self) { try Catalog(json: Data(json.utf8)) }
    }
}

@Suite("Error table (ERRORS.md)")
struct ErrorTableTests {
    @Test(
        "each domain error has its documented code and reason",
        arguments: [
            (BillingError.invalidField(field: "account_id", problem: "is required"), StatusCode.invalidArgument, "INVALID_FIELD"),
            (.productNotFound(productID: "p"), .notFound, "PRODUCT_NOT_FOUND"),
            (.orderNotFound(orderID: "o"), .notFound, "ORDER_NOT_FOUND"),
            (.idempotencyKeyReused(key: "k"), .failedPrecondition, "IDEMPOTENCY_KEY_REUSED"),
            (.storageUnavailable(detail: "disk I/O error"), .unavailable, "STORAGE_UNAVAILABLE"),
            (.notPurchasedByAccount(transactionID: "1"), .failedPrecondition, "NOT_PURCHASED_BY_ACCOUNT"),
            (.transactionUnknown(transactionID: "1"), .notFound, "TRANSACTION_NOT_FOUND"),
            (.googlePlayNotConfigured, .failedPrecondition, "GOOGLE_PLAY_NOT_CONFIGURED"),
            (.offerSigningNotConfigured(detail: "no key"), .failedPrecondition, "OFFER_SIGNING_NOT_CONFIGURED"),
            (.appStoreAPIRefused(code: 4_030_005, detail: "Subscription max extension."), .failedPrecondition, "APPSTORE_API_REFUSED"),
        ])
    func mapping(_ error: BillingError, _ code: StatusCode, _ reason: String) {
        #expect(error.rpcError.code == code)
        #expect(error.rpcError.reason == reason)
    }

    @Test("storage details never reach the caller")
    func noLeak() {
        let e = BillingError.storageUnavailable(detail: "INSERT INTO orders failed: disk I/O error").rpcError
        #expect(!e.message.contains("INSERT"))
        #expect(e.metadata.isEmpty)
    }

    @Test("a transaction id no App Store environment knows is TRANSACTION_NOT_FOUND, and says nothing of an order")
    func restoreByUnknownID() {
        let e = BillingError.appStoreTransactionUnknown(transactionID: "7999999999").rpcError
        #expect(e.code == .notFound && e.reason == "TRANSACTION_NOT_FOUND")
        #expect(e.metadata == ["transaction_id": "7999999999"])
        #expect(e.message == "no accepted App Store environment knows transaction 7999999999")
        #expect(!e.message.contains("order"))
    }

    @Test("an environment refusal says it once")
    func environmentOnce() {
        let message = BillingError.environmentNotAllowed(environment: "environment Sandbox is not accepted").description
        #expect(message == "environment Sandbox is not accepted by this service")
    }

    @Test("APPSTORE_API_REFUSED carries Apple's error code")
    func appleCode() {
        #expect(BillingError.appStoreAPIRefused(code: 4_030_004, detail: "x").rpcError.metadata == ["apple_error_code": "4030004"])
    }

    @Test("INVALID_FIELD names the field in metadata")
    func fieldMetadata() {
        #expect(BillingError.invalidField(field: "quantity", problem: "x").rpcError.metadata == ["field": "quantity"])
    }
}

@Suite("Order id canonical form")
struct OrderIDCanonicalTests {
    /// The rule written plainly: 8-4-4-4-12 hex digits in either case, lowercased.
    static func reference(_ bytes: [UInt8]) -> [UInt8]? {
        guard bytes.count == 36 else { return nil }
        var out: [UInt8] = []
        for (i, c) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(i) {
                guard c == UInt8(ascii: "-") else { return nil }
                out.append(c)
            } else if (0x30...0x39).contains(c) || (0x61...0x66).contains(c) {
                out.append(c)
            } else if (0x41...0x46).contains(c) {
                out.append(c + 0x20)
            } else {
                return nil
            }
        }
        return out
    }

    @Test("every byte value at every position agrees with the plain rule")
    func everyByteEverywhere() {
        let base = Array("0190c3f2-7a1b-7c2d-8e3f-4a5b6c7d8e9f".utf8)
        #expect(OrderID.canonical(String(decoding: base, as: UTF8.self)) == String(decoding: base, as: UTF8.self))
        for position in 0..<36 {
            for value in 0...127 {
                var bytes = base
                bytes[position] = UInt8(value)
                let text = String(decoding: bytes, as: UTF8.self)
                let expected = Self.reference(bytes).map { String(decoding: $0, as: UTF8.self) }
                #expect(OrderID.canonical(text) == expected, "position \(position) byte \(value)")
            }
        }
        #expect(OrderID.canonical(String(decoding: base.dropLast(), as: UTF8.self)) == nil)
        #expect(OrderID.canonical(String(decoding: base + [0x30], as: UTF8.self)) == nil)
        #expect(OrderID.canonical("0190C3F2-7A1B-7C2D-8E3F-4A5B6C7D8E9F") == "0190c3f2-7a1b-7c2d-8e3f-4a5b6c7d8e9f")
        #expect(OrderID.canonical("0190c3f2-7a1b-7c2d-8e3f-4a5b6c7d8é") == nil)
    }
}
