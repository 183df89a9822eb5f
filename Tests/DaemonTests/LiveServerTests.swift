import Logging
import IO
import BillingAPI
import Daemon
import Foundation
import HTTP2
import ProtoWire
import RPC
import Testing

/// billingd's App on a free loopback port with a fresh SQLite file; stopped in `deinit`-free `stop()`.
final class LiveApp {
    let app: App
    let address: String
    let directory: URL

    init(maxMessageBytes: Int = 4 << 20, catalog: String? = nil) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-live-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var config = Configuration()
        config.server.listen = "127.0.0.1:0"
        config.store.database = .sqlite(path: directory.appendingPathComponent("billing.db").path)
        config.server.threads = 2
        config.limits.maxMessageBytes = maxMessageBytes
        config.server.shutdownGrace = 5
        if let catalog {
            let path = directory.appendingPathComponent("catalog.json")
            try Data(catalog.utf8).write(to: path)
            config.purchases.catalogPath = path.path
        }
        app = try App(configuration: config, logger: Logger(level: .error))
        address = try app.start()
    }

    func client() throws -> Client { try Client(address: address) }

    func stop() { app.stop() }
}

extension Client {
    func call<Response: ProtoMessage>(_ method: String, _ request: some ProtoMessage, _ type: Response.Type) throws -> (Response?, RPCError?) {
        let r = try unary(method, message: request.encoded(), timeoutNanoseconds: 10_000_000_000)
        if let e = r.error { return (nil, e) }
        return (try Response(decoding: r.message), nil)
    }
}

@Suite("billingd on a real port", .serialized)
struct LiveServerTests {
    @Test("health answers SERVING; an unknown service is NOT_FOUND")
    func health() throws {
        let live = try LiveApp()
        defer { live.stop() }
        let c = try live.client()
        let (ok, _) = try c.call("grpc.health.v1.Health/Check", HealthCheckRequest(), HealthCheckResponse.self)
        #expect(ok?.status == .serving)
        let (billing, _) = try c.call("grpc.health.v1.Health/Check", HealthCheckRequest(service: "billing.v1.Billing"), HealthCheckResponse.self)
        #expect(billing?.status == .serving)
        let (_, error) = try c.call("grpc.health.v1.Health/Check", HealthCheckRequest(service: "nope"), HealthCheckResponse.self)
        #expect(error?.code == .notFound)
    }

    @Test("CreateOrder, GetOrder and an idempotent replay over HTTP/2")
    func createAndGet() throws {
        let live = try LiveApp()
        defer { live.stop() }
        let c = try live.client()
        var req = CreateOrderRequest()
        req.accountID = "acct-1"; req.productID = "com.example.premium"; req.idempotencyKey = "k-1"; req.quantity = 2
        let (created, e1) = try c.call("billing.v1.Billing/CreateOrder", req, CreateOrderResponse.self)
        #expect(e1 == nil)
        let order = try #require(created?.order)
        #expect(order.state == .pending)
        #expect(order.quantity == 2)
        let (got, _) = try c.call("billing.v1.Billing/GetOrder", GetOrderRequest(orderID: order.orderID), GetOrderResponse.self)
        #expect(got?.order == order)
        let (replay, _) = try c.call("billing.v1.Billing/CreateOrder", req, CreateOrderResponse.self)
        #expect(replay?.order == order)
        req.quantity = 3
        let (_, reused) = try c.call("billing.v1.Billing/CreateOrder", req, CreateOrderResponse.self)
        #expect(reused?.code == .failedPrecondition)
        #expect(reused?.reason == "IDEMPOTENCY_KEY_REUSED")
    }

    @Test("validation errors carry ErrorInfo with the field")
    func validation() throws {
        let live = try LiveApp(catalog: #"{"products": [{"id": "p", "type": "consumable"}]}"#)
        defer { live.stop() }
        let c = try live.client()
        var req = CreateOrderRequest()
        req.productID = "p"
        let (_, missing) = try c.call("billing.v1.Billing/CreateOrder", req, CreateOrderResponse.self)
        #expect(missing?.code == .invalidArgument)
        #expect(missing?.reason == "INVALID_FIELD")
        #expect(missing?.metadata["field"] == "account_id")
        req.accountID = "a"; req.productID = "q"
        let (_, unknown) = try c.call("billing.v1.Billing/CreateOrder", req, CreateOrderResponse.self)
        #expect(unknown?.reason == "PRODUCT_NOT_FOUND")
        let (_, notFound) = try c.call("billing.v1.Billing/GetOrder", GetOrderRequest(orderID: "00000000-0000-4000-8000-000000000000"), GetOrderResponse.self)
        #expect(notFound?.code == .notFound)
        #expect(notFound?.reason == "ORDER_NOT_FOUND")
    }

    @Test("transport errors: unknown method, content type, framing, undecodable, size")
    func transportErrors() throws {
        let live = try LiveApp(maxMessageBytes: 1024)
        defer { live.stop() }
        let c = try live.client()
        let unknown = try c.unary("billing.v1.Billing/Nope", message: [])
        #expect(unknown.code == .unimplemented)
        #expect(unknown.httpStatus == 200)

        // A content type no protocol knows is 415; application/json is Connect's (400: an empty GetOrder).
        let text = try c.start("billing.v1.Billing/GetOrder", body: Array("{}".utf8), contentType: "text/plain")
        try c.run { c.isDone(text) }
        #expect(c.finish(text).httpStatus == 415)
        let json = try c.start("billing.v1.Billing/GetOrder", body: Array("{}".utf8), contentType: "application/json")
        try c.run { c.isDone(json) }
        #expect(c.finish(json).httpStatus == 400)

        let short = try c.start("billing.v1.Billing/GetOrder", body: [0, 0, 0, 0, 9, 1, 2])
        try c.run { c.isDone(short) }
        #expect(c.finish(short).code == .internal)

        let garbage = try c.unary("billing.v1.Billing/GetOrder", message: [0x0A, 0x05, 0x01])
        #expect(garbage.code == .invalidArgument)

        var big = CreateOrderRequest()
        big.accountID = String(repeating: "a", count: 2000)
        let tooLarge = try c.unary("billing.v1.Billing/CreateOrder", message: big.encoded())
        #expect(tooLarge.code == .resourceExhausted)
        #expect(tooLarge.details?.errorInfo?.reason == "MESSAGE_TOO_LARGE")

        // The connection still serves.
        let (health, _) = try c.call("grpc.health.v1.Health/Check", HealthCheckRequest(), HealthCheckResponse.self)
        #expect(health?.status == .serving)
    }

    @Test("without --bundle-id, proofs are refused with WRONG_APP (never accepted unchecked)")
    func unconfigured() throws {
        let live = try LiveApp()
        defer { live.stop() }
        let c = try live.client()
        var create = CreateOrderRequest()
        create.accountID = "a"; create.productID = "p"
        let (order, _) = try c.call("billing.v1.Billing/CreateOrder", create, CreateOrderResponse.self)
        var submit = SubmitReceiptRequest()
        submit.orderID = order!.order!.orderID
        submit.proof = .signedTransaction("a.b.c")
        let (_, error) = try c.call("billing.v1.Billing/SubmitReceipt", submit, SubmitReceiptResponse.self)
        #expect(error?.reason == "WRONG_APP")
    }

    @Test("many concurrent streams on one connection all complete")
    func concurrentStreams() throws {
        let live = try LiveApp()
        defer { live.stop() }
        let c = try live.client()
        var ids: [Int32] = []
        for i in 0..<300 {
            var req = CreateOrderRequest()
            req.accountID = "acct-\(i % 7)"; req.productID = "p"; req.idempotencyKey = "key-\(i % 50)"
            ids.append(try c.start("billing.v1.Billing/CreateOrder", body: MessageFraming.frame(req.encoded())))
        }
        try c.run { ids.allSatisfy { c.isDone($0) } }
        var orders: [String: String] = [:]
        for (i, id) in ids.enumerated() {
            let r = c.finish(id)
            #expect(r.code == .ok)
            let order = try CreateOrderResponse(decoding: r.message).order!
            let key = "acct-\(i % 7)/key-\(i % 50)"
            if let seen = orders[key] { #expect(seen == order.orderID) } else { orders[key] = order.orderID }
        }
        #expect(live.app.count(of: .ok) == 300)
    }

    @Test("TLS with ALPN h2")
    func tls() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("billingd-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let cert = dir.appendingPathComponent("cert.pem").path, key = dir.appendingPathComponent("key.pem").path
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
            "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout", key, "-out", cert,
        ]
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        try #require(p.terminationStatus == 0)

        var config = Configuration()
        config.server.listen = "127.0.0.1:0"
        config.store.database = .sqlite(path: dir.appendingPathComponent("b.db").path)
        config.server.threads = 1
        config.server.tlsCert = cert
        config.server.tlsKey = key
        let app = try App(configuration: config, logger: Logger(level: .error))
        let address = try app.start()
        defer { app.stop() }
        let client = try Client(address: address, tls: TLSContext(clientCAPath: cert, insecure: false), serverName: "localhost")
        let (health, _) = try client.call("grpc.health.v1.Health/Check", HealthCheckRequest(), HealthCheckResponse.self)
        #expect(health?.status == .serving)
        // A client that trusts another CA is refused during the handshake.
        #expect(throws: SocketError.self) {
            _ = try Client(address: address, tls: TLSContext(clientCAPath: nil, insecure: false), serverName: "localhost")
        }
    }
}
