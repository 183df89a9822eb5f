package import Connect
package import HTTP2
package import IO
import Lifecycle
package import ProtoJSON
package import RPC
package import ProtoWire

/// One port, every protocol, in memory: a gRPC server session whose `HTTPService` is the Connect gateway, both on
/// the same `CallPipeline` (as billingd's App assembles them), behind an `InMemoryTransport` (a manual clock, no
/// socket, no thread). A test calls a method over gRPC, Connect or gRPC-Web through the same interceptors, limits,
/// deadline rule and in-flight count, and reads the call records the pipeline's observer saw.
package final class PipelineClient {
    package let pipeline: CallPipeline
    package let transport: InMemoryTransport
    package let client: Client

    /// - Parameters:
    ///   - router: the methods and interceptors (`router.intercept`, `router.authenticate`).
    ///   - registry: the descriptors Connect's JSON needs (empty: proto only).
    package init(
        router: Router, registry: Registry? = nil, maxInFlight: Int = 100, maxDeadlineNanoseconds: Int64 = 60_000_000_000,
        corsOrigins: [String] = []
    ) throws {
        pipeline = CallPipeline(router: router, admission: CallAdmission(limit: maxInFlight), maxDeadlineNanoseconds: maxDeadlineNanoseconds)
        var connect = ConnectConfiguration()
        connect.pipeline = pipeline
        connect.corsOrigins = corsOrigins
        connect.maxDeadlineNanoseconds = maxDeadlineNanoseconds
        let gateway = ConnectGateway(router: router, registry: try registry ?? Registry(files: []), configuration: connect)
        var configuration = ServerConfiguration()
        configuration.pipeline = pipeline
        configuration.http = gateway.service
        configuration.maxDeadlineNanoseconds = maxDeadlineNanoseconds
        transport = InMemoryTransport(configuration: configuration, router: router)
        client = transport.client()
    }

    /// The port a server configuration describes, with its pipeline and HTTP service (an App's `portConfiguration`).
    package init(serving configuration: ServerConfiguration) {
        let pipeline = configuration.pipeline ?? CallPipeline(router: Router(), admission: CallAdmission(limit: configuration.maxInFlight))
        self.pipeline = pipeline
        transport = InMemoryTransport(configuration: configuration, router: pipeline.router)
        client = transport.client()
    }

    /// A gRPC call (`application/grpc`, the message framed).
    package func grpc(
        _ method: String, _ message: [UInt8] = [], metadata: [(String, String)] = [], timeoutNanoseconds: Int64? = nil
    ) throws(SocketError) -> UnaryResponse {
        try client.unary(method, message: message, metadata: metadata, timeoutNanoseconds: timeoutNanoseconds)
    }

    /// A Connect or gRPC-Web call: `POST /method` with this content type, body and header fields, over the same
    /// HTTP/2 connection.
    package func http(
        _ method: String, contentType: String, body: [UInt8] = [], headers: [(String, String)] = []
    ) throws(SocketError) -> UnaryResponse {
        try client.request(
            "POST", path: "/" + method, headers: [("content-type", contentType)] + headers, body: body,
            deadline: Monotonic.now() &+ 30_000_000_000)
    }
}

extension PipelineClient {
    /// A unary gRPC call of `method` (`billing.v1.Support/FindCustomers`) through the whole pipeline (interceptors,
    /// request id, deadline, in-flight count), its answer decoded: what a test of a handler asks instead of resolving
    /// the route and unframing the bytes itself. A transport failure is `unavailable`; an answer that does not decode
    /// as `Response` is `internal`.
    package func call<Response: ProtoMessage>(
        _ method: String, _ request: some ProtoMessage, _: Response.Type, metadata: [(String, String)] = []
    ) -> Result<Response, RPCError> {
        let answer: UnaryResponse
        do {
            answer = try grpc(method, request.encoded(), metadata: metadata)
        } catch {
            return .failure(RPCError(code: .unavailable, message: "\(method): \(error)"))
        }
        if let error = answer.error { return .failure(error) }
        do {
            return .success(try Response(decoding: answer.message))
        } catch {
            return .failure(RPCError(code: .internal, message: "\(method): the answer is not a \(Response.self): \(error)"))
        }
    }

    /// `call` on a fresh client of `router`.
    package static func call<Response: ProtoMessage>(
        _ router: Router, _ method: String, _ request: some ProtoMessage, _: Response.Type, metadata: [(String, String)] = []
    ) -> Result<Response, RPCError> {
        do {
            return try PipelineClient(router: router).call(method, request, Response.self, metadata: metadata)
        } catch {
            return .failure(RPCError(code: .internal, message: "the pipeline client: \(error)"))
        }
    }
}
