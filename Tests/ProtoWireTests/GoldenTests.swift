import BillingAPI
import Foundation
import ProtoWire
import RPC
import Testing

/// Vectors encoded by Python protobuf (tests/golden/make_vectors.py); each case is built here the same way.
enum Golden {
    static let vectors: [String: String] = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("golden.json")
        let data = try! Data(contentsOf: url)
        let json = try! JSONSerialization.jsonObject(with: data) as! [String: Any]
        return json["vectors"] as! [String: String]
    }()

    static func bytes(_ name: String) -> [UInt8] {
        let hex = Array(vectors[name]!.utf8)
        var out: [UInt8] = []
        var i = 0
        while i < hex.count {
            out.append(UInt8(String(decoding: hex[i..<i + 2], as: UTF8.self), radix: 16)!)
            i += 2
        }
        return out
    }

    static var order: Order {
        var o = Order()
        o.orderID = "0f8fad5b-d9cb-469f-a165-70867728950e"
        o.accountID = "acct-42"
        o.productID = "com.example.premium"
        o.state = .completed
        o.createTimeMs = 1_700_000_000_123
        o.updateTimeMs = 1_700_000_000_456
        o.transactionID = "2000000123456789"
        o.environment = .sandbox
        o.quantity = 1
        return o
    }
}

/// One golden case: a Swift value that must encode to, and decode from, Python's bytes.
struct GoldenCase: CustomTestStringConvertible, Sendable {
    let name: String
    let encode: @Sendable () -> [UInt8]
    let roundTrips: @Sendable ([UInt8]) throws -> Bool
    var testDescription: String { name }

    init<M: ProtoMessage & Equatable>(_ name: String, _ value: M) {
        self.name = name
        encode = { value.encoded() }
        roundTrips = { bytes in try M(decoding: bytes) == value }
    }
}

let goldenCases: [GoldenCase] = {
    var create = CreateOrderRequest()
    create.accountID = "acct-42"; create.productID = "com.example.premium"; create.idempotencyKey = "key-1"; create.quantity = 3
    var unicode = CreateOrderRequest()
    unicode.accountID = "\u{fc}ser-\u{6f22}\u{5b57}-\u{1F600}"; unicode.productID = "p"
    var negative = CreateOrderRequest()
    negative.accountID = "a"; negative.productID = "p"; negative.quantity = -1
    var tx = Transaction()
    tx.transactionID = "2000000000000001"; tx.originalTransactionID = "2000000000000000"
    tx.productID = "com.example.pro.monthly"; tx.productType = .autoRenewableSubscription
    tx.purchaseTimeMs = 1_700_000_000_000; tx.expiresTimeMs = 1_702_592_000_000; tx.quantity = 1
    tx.environment = .production; tx.appAccountToken = "0f8fad5b-d9cb-469f-a165-70867728950e"; tx.bundleID = "com.example.app"
    var jws = SubmitReceiptRequest()
    jws.orderID = "o"; jws.proof = .signedTransaction("eyJ.a.b"); jws.sandbox = true
    var receipt = SubmitReceiptRequest()
    receipt.orderID = "o"; receipt.proof = .appReceipt("MIIT"); receipt.transactionID = "1"
    var emptyOneof = SubmitReceiptRequest()
    emptyOneof.orderID = "o"; emptyOneof.proof = .signedTransaction("")
    var submitResponse = SubmitReceiptResponse()
    submitResponse.order = Golden.order
    var t1 = Transaction(); t1.transactionID = "1"
    submitResponse.transaction = t1
    submitResponse.alreadyProcessed = true
    var restore = RestorePurchasesRequest()
    restore.accountID = "acct"; restore.appReceipt = "MIIT"; restore.signedTransactions = ["a.b.c", "", "d.e.f"]
    var e1 = Entitlement()
    e1.productID = "com.example.premium"; e1.productType = .nonConsumable; e1.originalTransactionID = "1"
    e1.latestTransactionID = "1"; e1.purchaseTimeMs = 1; e1.active = true; e1.orderID = "0f8fad5b-d9cb-469f-a165-70867728950e"
    var e2 = Entitlement()
    e2.productID = "sub"; e2.productType = .autoRenewableSubscription; e2.expiresTimeMs = 99
    var restoreResponse = RestorePurchasesResponse()
    restoreResponse.entitlements = [e1, e2]
    let info = ErrorInfo(reason: "INVALID_FIELD", domain: "billing.v1", metadata: ["field": "account_id", "a": "1", "z": "\u{e9}"])
    let status = RichStatus(
        code: 3, message: "account_id is required",
        details: [AnyMessage(typeURL: ErrorInfo.typeURL, value: info.encoded())])
    var all = WireAll()
    all.i32 = -5; all.i64 = -(1 << 40); all.u32 = 4_000_000_000; all.u64 = UInt64.max; all.s32 = -64; all.s64 = -(1 << 62)
    all.f32 = 0xDEAD_BEEF; all.f64 = 0x0123_4567_89AB_CDEF; all.sf32 = -2; all.sf64 = -(1 << 50); all.b = true
    all.s = "h\u{e9}llo"; all.by = Array(0...255); all.d = 3.141592653589793; all.f = 1.5
    all.inner = Inner(name: "in", value: 7); all.packed = [1, -1, 300, 0, 2_147_483_647]
    all.inners = [Inner(name: "x"), Inner(value: -1)]; all.labels = ["b": "2", "a": "1"]; all.names = ["one", "", "three"]
    var extremes = WireAll()
    extremes.i32 = .min; extremes.i64 = .min; extremes.u32 = 1; extremes.u64 = 1 << 63; extremes.s32 = .max
    extremes.s64 = .max; extremes.sf32 = .min; extremes.sf64 = .max; extremes.d = -0.0
    var emptyOrder = GetOrderResponse(); emptyOrder.order = Order()
    return [
        GoldenCase("create_order_request", create),
        GoldenCase("create_order_request_unicode", unicode),
        GoldenCase("create_order_request_negative_quantity", negative),
        GoldenCase("empty", CreateOrderRequest()),
        GoldenCase("order", Golden.order),
        GoldenCase("create_order_response", CreateOrderResponse(order: Golden.order)),
        GoldenCase("get_order_response_empty_order", emptyOrder),
        GoldenCase("get_order_request", GetOrderRequest(orderID: "0f8fad5b-d9cb-469f-a165-70867728950e")),
        GoldenCase("transaction", tx),
        GoldenCase("submit_receipt_request_jws", jws),
        GoldenCase("submit_receipt_request_receipt", receipt),
        GoldenCase("submit_receipt_request_empty_oneof", emptyOneof),
        GoldenCase("submit_receipt_response", submitResponse),
        GoldenCase("restore_request", restore),
        GoldenCase("restore_response", restoreResponse),
        GoldenCase("health_request", HealthCheckRequest(service: "billing.v1.Billing")),
        GoldenCase("health_response", HealthCheckResponse(status: .notServing)),
        GoldenCase("error_info", info),
        GoldenCase("status", status),
        GoldenCase("wire_all", all),
        GoldenCase("wire_extremes", extremes),
    ] + transactionGoldenCases + adminGoldenCases
}()

@Suite("Golden vectors from Python protobuf")
struct GoldenTests {
    @Test("Swift encodes exactly Python's bytes", arguments: goldenCases)
    func encodesLikePython(_ c: GoldenCase) {
        #expect(c.encode() == Golden.bytes(c.name))
    }

    @Test("Swift decodes Python's bytes to the same value", arguments: goldenCases)
    func decodesPython(_ c: GoldenCase) throws {
        #expect(try c.roundTrips(Golden.bytes(c.name)))
    }

    @Test("every vector in golden.json has a Swift case")
    func everyVectorCovered() {
        let covered = Set(goldenCases.map(\.name)).union(["create_order_request_future"])
        #expect(Set(Golden.vectors.keys) == covered)
    }

    @Test("unknown fields of every wire type are skipped")
    func skipsUnknownFields() throws {
        let decoded = try CreateOrderRequest(decoding: Golden.bytes("create_order_request_future"))
        #expect(decoded.accountID == "acct-42")
        #expect(decoded.productID == "com.example.premium")
        #expect(decoded.idempotencyKey == "key-1")
        #expect(decoded.quantity == 3)
    }

    @Test("the ErrorInfo inside a Status decodes")
    func statusDetails() throws {
        let status = try RichStatus(decoding: Golden.bytes("status"))
        #expect(status.errorInfo?.reason == "INVALID_FIELD")
        #expect(status.errorInfo?.metadata["field"] == "account_id")
    }
}
