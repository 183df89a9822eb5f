import Gzip
public import HTTP2
public import ProtoJSON
import ProtoWire
public import RPC
import Synchronization

/// Where and how the gRPC port serves Connect and gRPC-Web.
public struct ConnectConfiguration: Sendable {
    /// The protocols served (`--protocols`); gRPC itself is served by the session core.
    public var protocols: Set<WireProtocol> = Set(WireProtocol.allCases)
    /// Browser origins allowed to call (`--cors-origins`); `*` allows any. Empty: no CORS headers.
    public var corsOrigins: [String] = []
    /// The largest request message (`--max-message-bytes`), as for gRPC.
    public var maxMessageBytes = 4 << 20
    /// The longest a call may run: a larger or missing `connect-timeout-ms` / `grpc-timeout` is capped to this.
    public var maxDeadlineNanoseconds: Int64 = 60_000_000_000
    /// Calls dispatched and not yet answered; more answer RESOURCE_EXHAUSTED OVERLOADED. Used when `admission` is nil.
    public var maxInFlight = 10_000
    /// The port's one in-flight count and limit, shared with its gRPC calls (`ServerConfiguration.admission`).
    /// Used when `pipeline` is nil.
    public var admission: CallAdmission?
    /// The port's call pipeline, the one its gRPC calls go through (`ServerConfiguration.pipeline`); nil: one of
    /// its own from the router, `admission` and `maxDeadlineNanoseconds`.
    public var pipeline: CallPipeline?

    public init() {}
}

/// One handler, three protocols (as connect-go serves them): the router's methods, called over the Connect
/// protocol (proto or JSON) and gRPC-Web, over HTTP/1.1 and HTTP/2, as an `HTTPService` of the gRPC port.
/// Here: the prechecks on the header block (CORS first, then methods, content types, versions, encodings); each
/// call then goes through the port's `CallPipeline` (`HTTPCalls`) with the codec of its protocol
/// (`ConnectUnaryCodec`, `ConnectStreamCodec`, `GRPCWebCodec`), so it passes the same interceptors, limits and
/// deadline rule as a gRPC call and answers with the same status and `ErrorInfo`.
public final class ConnectGateway: Sendable {
    private let registry: Registry
    private let configuration: ConnectConfiguration
    private let cors: CORS
    private let calls: HTTPCalls

    public init(router: Router, registry: Registry, configuration: ConnectConfiguration) {
        self.registry = registry
        self.configuration = configuration
        let pipeline =
            configuration.pipeline
            ?? CallPipeline(
                router: router, admission: configuration.admission ?? CallAdmission(limit: configuration.maxInFlight),
                maxDeadlineNanoseconds: configuration.maxDeadlineNanoseconds)
        cors = CORS(origins: configuration.corsOrigins)
        calls = HTTPCalls(pipeline: pipeline, registry: registry, maxMessageBytes: configuration.maxMessageBytes, cors: cors)
    }

    /// The service the gRPC port's `ServerConfiguration.http` takes.
    public var service: HTTPService {
        HTTPService(
            // A -text body is base64 (4/3) of the framed message.
            maxBodyBytes: (configuration.maxMessageBytes + MessageFraming.prefixSize) * 4 / 3 + 4, maxHeaderBytes: 16 << 10,
            requestTimeoutSeconds: 30,
            precheck: { [self] in precheck($0) }, handler: { [self] in handle($0, $1) })
    }

    // MARK: Before the body

    /// Answers what the header block alone decides: CORS preflights, methods, content types, unknown paths.
    func precheck(_ request: HTTPRequest) -> HTTPResponse? {
        let origin = request.header("origin")
        if request.method == "OPTIONS" { return cors.preflight(request) }
        guard request.method == "POST" else {
            return cors.decorate(
                HTTPResponse(status: 405, text: "billingd answers RPCs with POST\n", headers: [("Allow", "POST, OPTIONS")]), origin: origin)
        }
        guard let kind = RequestKind.of(contentType: request.header("content-type") ?? "") else {
            return cors.decorate(unsupportedMediaType(request.header("content-type")), origin: origin)
        }
        if kind == .grpcOverHTTP1 {
            guard configuration.protocols.contains(.grpc) else { return cors.decorate(unsupportedMediaType(request.header("content-type")), origin: origin) }
            return cors.decorate(HTTPResponse(status: 415, text: "gRPC needs HTTP/2; over HTTP/1.1 use Connect or gRPC-Web\n"), origin: origin)
        }
        guard configuration.protocols.contains(kind.wireProtocol) else {
            return cors.decorate(unsupportedMediaType(request.header("content-type")), origin: origin)
        }
        if case .connectStream = kind, let method = registry.method(path: request.path), !method.serverStreaming {
            return cors.decorate(HTTPResponse(status: 415, text: "\(request.path) is unary: use application/proto or application/json\n"), origin: origin)
        }
        // A streaming method asked for with a unary content type: the media type is wrong for it (415), as connect-go
        // answers, before any body is read.
        if case .connectUnary = kind, let method = registry.method(path: request.path), method.serverStreaming {
            return cors.decorate(
                HTTPResponse(status: 415, text: "\(request.path) streams: use application/connect+proto or application/connect+json\n"),
                origin: origin)
        }
        if case .connectUnary = kind, let version = request.header("connect-protocol-version"), version != "1" {
            return cors.decorate(
                ConnectUnaryCodec(message: .proto).error(RPCError(code: .invalidArgument, message: "connect-protocol-version must be 1")), origin: origin)
        }
        if case .connectUnary = kind, let encoding = request.header("content-encoding"), !["", "identity", "gzip"].contains(encoding) {
            let error = RPCError(code: .unimplemented, message: "content-encoding '\(encoding.prefix(32))' is not accepted (gzip, identity)")
            return cors.decorate(ConnectUnaryCodec(message: .proto).error(error), origin: origin)
        }
        return nil
    }

    private func unsupportedMediaType(_ contentType: String?) -> HTTPResponse {
        var accepted: [String] = configuration.protocols.contains(.grpc) ? ["application/grpc (HTTP/2)"] : []
        if configuration.protocols.contains(.connect) { accepted += ["application/proto", "application/json"] }
        if configuration.protocols.contains(.grpcWeb) {
            accepted += ["application/grpc-web+proto", "application/grpc-web+json", "application/grpc-web-text"]
        }
        let text = "content-type \(contentType.map { "'\($0)'" } ?? "missing"): billingd accepts \(accepted.joined(separator: ", "))\n"
        return HTTPResponse(status: 415, text: text, headers: [("Accept-Post", accepted.filter { !$0.hasPrefix("application/grpc ") }.joined(separator: ", "))])
    }

    // MARK: Calls

    func handle(_ request: HTTPRequest, _ respond: @escaping @Sendable (HTTPResponse) -> Void) {
        guard let kind = RequestKind.of(contentType: request.header("content-type") ?? ""),
            let codec = kind.codec(path: request.path, registry: registry)
        else {
            return respond(cors.decorate(unsupportedMediaType(request.header("content-type")), origin: request.header("origin")))
        }
        calls.handle(request, codec: codec, respond)
    }
}
