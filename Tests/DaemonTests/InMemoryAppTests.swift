import BillingAPI
import BillingTesting
import Daemon
import HTTP2
import ProtoWire
import RPC
import Testing

/// billingd assembled from its flags on an in-memory store, called without a port.
@Suite("the App in memory")
struct InMemoryAppTests {
    @Test("an order made over gRPC is read back over Connect and gRPC-Web from the same App; Health answers")
    func orderAcrossProtocols() throws {
        let harness = try InMemoryApp()
        var create = CreateOrderRequest()
        create.accountID = "acct-1"
        create.productID = "com.example.premium"
        let made = try harness.client.grpc("billing.v1.Billing/CreateOrder", create.encoded())
        #expect(made.code == .ok)
        let order = try #require(try CreateOrderResponse(decoding: made.message).order)
        #expect(order.accountID == "acct-1")
        let read = try harness.client.http(
            "billing.v1.Billing/GetOrder", contentType: "application/proto", body: GetOrderRequest(orderID: order.orderID).encoded())
        #expect(read.httpStatus == 200)
        #expect(try GetOrderResponse(decoding: read.body).order?.orderID == order.orderID)
        let web = try harness.client.http(
            "billing.v1.Billing/GetOrder", contentType: "application/grpc-web+proto",
            body: MessageFraming.frame(GetOrderRequest(orderID: order.orderID).encoded()))
        #expect(web.httpStatus == 200)
        // A message frame (flag 0, length, GetOrderResponse), then the trailer frame with grpc-status:0.
        let body = web.body
        try #require(body.count > 5 && body[0] == 0)
        let n = Int(body[1]) << 24 | Int(body[2]) << 16 | Int(body[3]) << 8 | Int(body[4])
        #expect(try GetOrderResponse(decoding: Array(body[5..<(5 + n)])).order?.orderID == order.orderID)
        #expect(String(decoding: body[(5 + n)...], as: UTF8.self).contains("grpc-status:0"))
        #expect(try harness.client.grpc("grpc.health.v1.Health/Check").code == .ok)
        // The App's own pipeline saw them all: one in-flight count, back to zero.
        #expect(harness.client.pipeline.admission.count == 0)
    }

    @Test("the App's limits apply in memory: --max-message-bytes refuses a larger request over every protocol")
    func limits() throws {
        let harness = try InMemoryApp(["--max-message-bytes", "64"])
        var create = CreateOrderRequest()
        create.accountID = String(repeating: "a", count: 70)  // over 64 bytes, under the HTTP body bound
        create.productID = "p"
        #expect(try harness.client.grpc("billing.v1.Billing/CreateOrder", create.encoded()).code == .resourceExhausted)
        let connect = try harness.client.http("billing.v1.Billing/CreateOrder", contentType: "application/proto", body: create.encoded())
        #expect(connect.httpStatus == 429)
    }
}
