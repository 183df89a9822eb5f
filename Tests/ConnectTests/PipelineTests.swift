import BillingTesting
import Connect
import HTTP2
import ProtoWire
import RPC
import Synchronization
import Testing

/// What the port's one call pipeline does for every protocol: the same handler, interceptors, records, in-flight
/// count and deadline rule over gRPC, Connect and gRPC-Web, driven in memory (`PipelineClient`: one HTTP/2
/// connection, a manual clock).
@Suite("the call pipeline, over every protocol")
struct PipelineTests {
    /// The protocols, as a client selects them (content type), and how each frames a unary request.
    enum Wire: String, CaseIterable, CustomStringConvertible {
        case grpc, connect = "application/proto", grpcWeb = "application/grpc-web+proto", grpcWebText = "application/grpc-web-text"
        var description: String { self == .grpc ? "grpc" : rawValue }
        var label: String {
            switch self {
            case .grpc: "grpc"
            case .connect: "connect"
            case .grpcWeb, .grpcWebText: "grpc-web"
            }
        }
        func body(_ message: [UInt8]) -> [UInt8] {
            switch self {
            case .grpc, .connect: message
            case .grpcWeb: MessageFraming.frame(message)
            case .grpcWebText: Array(Base64.encode(MessageFraming.frame(message), padded: true).utf8)
            }
        }
    }

    /// What a call came back as, whatever its protocol: its status code, reason, and message.
    struct Outcome: Equatable {
        var code: StatusCode
        var reason: String?
        var message: [UInt8]
    }

    final class Seen: Sendable {
        let records = Mutex<[(method: String, code: StatusCode, wire: String, prefix: String, number: UInt64)]>([])
        let held = Mutex<[Responder]>([])
        let deadlines = Mutex<[UInt64]>([])
    }

    static let message: [UInt8] = [0x0A, 0x03, 0x61, 0x62, 0x63]  // field 1: "abc"

    func router(_ seen: Seen) -> Router {
        var router = Router()
        router.register("t.Echo/Say") { _, bytes, responder in responder.succeed(framed: MessageFraming.frame(bytes)) }
        router.register("t.Echo/Refuse") { _, _, responder in
            responder.fail(RPCError(code: .failedPrecondition, message: "not now", reason: "ORDER_NOT_PENDING", metadata: ["order_id": "o-1"]))
        }
        // Never answers: the deadline (or the test's end) ends it.
        router.register("t.Echo/Hang") { _, _, responder in seen.held.withLock { $0.append(responder) } }
        router.register("t.Echo/Deadline") { context, _, responder in
            seen.deadlines.withLock { $0.append(context.monotonicDeadline) }
            responder.succeed(framed: MessageFraming.frame([]))
        }
        router.authenticate { context in
            context.metadata.contains { $0.name == "x-key" && $0.value == "good" }
                ? nil : RPCError(code: .unauthenticated, message: "no key", reason: "API_KEY_INVALID")
        }
        router.intercept(
            ServerInterceptor(finished: { record in
                seen.records.withLock {
                    $0.append((record.method, record.code, record.wireProtocol, record.requestIDPrefix, record.requestNumber))
                }
            }))
        return router
    }

    /// Calls `method` over `wire` and reads the answer the way that protocol's clients do.
    func call(
        _ client: PipelineClient, _ wire: Wire, _ method: String, key: String = "good", timeout: String? = nil
    ) throws -> Outcome {
        var headers = [("x-key", key)]
        switch wire {
        case .grpc:
            if let timeout { headers.append(("grpc-timeout", timeout)) }
            let r = try client.client.unary(method, message: Self.message, metadata: headers)
            return Outcome(code: r.code, reason: r.details?.errorInfo?.reason, message: r.message)
        case .connect:
            if let timeout { headers.append(("connect-timeout-ms", timeout)) }
            let r = try client.http(method, contentType: wire.rawValue, body: wire.body(Self.message), headers: headers)
            if r.httpStatus == 200 { return Outcome(code: .ok, reason: nil, message: r.body) }
            let json = String(decoding: r.body, as: UTF8.self)
            let code = StatusCode.allCases.first { json.contains("\"code\":\"\(ConnectError.codeName($0))\"") } ?? .unknown
            #expect(r.httpStatus == ConnectError.httpStatus(code), "\(method): HTTP \(r.httpStatus) for \(code)")
            let reason = ["API_KEY_INVALID", "ORDER_NOT_PENDING"].first { json.contains("\"reason\":\"\($0)\"") }
            return Outcome(code: code, reason: reason, message: [])
        case .grpcWeb, .grpcWebText:
            if let timeout { headers.append(("grpc-timeout", timeout)) }
            let r = try client.http(method, contentType: wire.rawValue, body: wire.body(Self.message), headers: headers)
            #expect(r.httpStatus == 200)
            var body = r.body
            if wire == .grpcWebText { body = try #require(body.withUnsafeBytes { Base64.decode($0) }) }
            // Frames: messages (flag 0), then the trailer frame (flag 0x80) with grpc-status.
            var message: [UInt8] = []
            var trailers = ""
            var at = 0
            while at + 5 <= body.count {
                let n = Int(body[at + 1]) << 24 | Int(body[at + 2]) << 16 | Int(body[at + 3]) << 8 | Int(body[at + 4])
                let payload = Array(body[(at + 5)..<min(body.count, at + 5 + n)])
                if body[at] & 0x80 != 0 { trailers = String(decoding: payload, as: UTF8.self) } else { message = payload }
                at += 5 + n
            }
            let status = trailers.split(separator: "\r\n").first { $0.hasPrefix("grpc-status:") }.flatMap { Int32($0.dropFirst(12)) }
            let code = StatusCode(rawValue: status ?? -1) ?? .unknown
            let details = r.headers.first { $0.name == "grpc-status-details-bin" }.flatMap { Base64.decode($0.value) }
            let reason = details.flatMap { try? RichStatus(decoding: $0) }?.errorInfo?.reason
            return Outcome(code: code, reason: reason, message: message)
        }
    }

    @Test("the same handler and interceptors answer the same over gRPC, Connect, gRPC-Web and gRPC-Web text", arguments: Wire.allCases)
    func sameAnswers(_ wire: Wire) throws {
        let seen = Seen()
        let client = try PipelineClient(router: router(seen))
        #expect(try call(client, wire, "t.Echo/Say") == Outcome(code: .ok, reason: nil, message: Self.message))
        #expect(try call(client, wire, "t.Echo/Refuse") == Outcome(code: .failedPrecondition, reason: "ORDER_NOT_PENDING", message: []))
        #expect(try call(client, wire, "t.Echo/Say", key: "bad") == Outcome(code: .unauthenticated, reason: "API_KEY_INVALID", message: []))
        #expect(try call(client, wire, "t.Echo/Nope").code == .unimplemented)
        // One record per call, each with its protocol and the pipeline's request-id prefix, numbered in order (gRPC
        // numbers a call when it is dispatched: a refused or unknown one has no request id).
        let records = seen.records.withLock { $0 }
        #expect(records.map(\.method) == ["t.Echo/Say", "t.Echo/Refuse", "t.Echo/Say", "t.Echo/Nope"])
        #expect(records.map(\.code) == [.ok, .failedPrecondition, .unauthenticated, .unimplemented])
        #expect(records.allSatisfy { $0.wire == wire.label && $0.prefix == client.pipeline.requestIDPrefix })
        let numbers = records.map(\.number).filter { $0 != 0 }
        #expect(numbers == numbers.sorted() && numbers.count >= 2)
    }

    @Test("one in-flight count: a gRPC call holding the only slot makes a Connect and a gRPC-Web call OVERLOADED")
    func oneInFlightCount() throws {
        let seen = Seen()
        let client = try PipelineClient(router: router(seen), maxInFlight: 1)
        _ = try client.client.start("t.Echo/Hang", body: MessageFraming.frame(Self.message), metadata: [("x-key", "good")])
        for wire in [Wire.connect, .grpcWeb] {
            let outcome = try call(client, wire, "t.Echo/Say")
            #expect(outcome.code == .resourceExhausted, "\(wire)")
        }
        #expect(seen.held.withLock { $0.count } == 1)
        #expect(client.pipeline.admission.count == 1)
        seen.held.withLock { $0 }.first?.succeed(framed: MessageFraming.frame([]))
        client.transport.host.runReady()
        #expect(client.pipeline.admission.count == 0)
        #expect(try call(client, .connect, "t.Echo/Say").code == .ok)
    }

    @Test("a timeout asked over each protocol ends a call that does not answer, on the manual clock", arguments: Wire.allCases)
    func deadline(_ wire: Wire) throws {
        let seen = Seen()
        let client = try PipelineClient(router: router(seen))
        let started = client.transport.host.now()
        let outcome = try call(client, wire, "t.Echo/Hang", timeout: wire == .connect ? "1500" : "1500m")
        #expect(outcome.code == .deadlineExceeded)
        #expect(client.transport.host.now() - started == 1_500_000_000)
        #expect(seen.records.withLock { $0.last?.code } == .deadlineExceeded)
        #expect(client.pipeline.admission.count == 0)
    }

    @Test("a malformed timeout is refused before the handler, with each protocol's status", arguments: Wire.allCases)
    func malformedTimeout(_ wire: Wire) throws {
        let seen = Seen()
        let client = try PipelineClient(router: router(seen))
        let outcome = try call(client, wire, "t.Echo/Say", timeout: "soon")
        #expect(outcome.code == (wire == .grpc ? .internal : .invalidArgument))
        #expect(seen.held.withLock { $0.isEmpty })
    }

    @Test("without a timeout a unary call runs under the cap (--max-deadline) over every protocol; a smaller timeout wins")
    func cap() throws {
        let seen = Seen()
        let client = try PipelineClient(router: router(seen), maxDeadlineNanoseconds: 5_000_000_000)
        for wire in Wire.allCases {
            let now = client.transport.host.now()
            #expect(try call(client, wire, "t.Echo/Deadline").code == .ok)
            let deadline = try #require(seen.deadlines.withLock { $0.last })
            // gRPC counts the cap from the request's headers on the host's clock; Connect from its own read of it.
            #expect(deadline > 0, "\(wire)")
            if wire == .grpc { #expect(deadline - now == 5_000_000_000) }
        }
        #expect(try call(client, .grpc, "t.Echo/Deadline", timeout: "1S").code == .ok)
        let asked = try #require(seen.deadlines.withLock { $0.last })
        #expect(asked - client.transport.host.now() <= 1_000_000_000)
    }
}
