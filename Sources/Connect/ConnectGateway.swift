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
    public var admission: CallAdmission?

    public init() {}
}

/// One handler, three protocols (as connect-go serves them): the router's methods, called over the Connect
/// protocol (proto or JSON) and gRPC-Web, over HTTP/1.1 and HTTP/2, as an `HTTPService` of the gRPC port.
/// A call passes the same interceptors as a gRPC call (API keys at its headers, the call record for metrics
/// and the log line, with its protocol), the same limits, and answers with the same status and `ErrorInfo`.
public final class ConnectGateway: Sendable {
    private let router: Router
    private let registry: Registry
    private let configuration: ConnectConfiguration
    private let admission: CallAdmission
    private let requestCounter = Atomic<UInt64>(0)
    private let requestIDPrefix: String

    public init(router: Router, registry: Registry, configuration: ConnectConfiguration) {
        self.router = router
        self.registry = registry
        self.configuration = configuration
        admission = configuration.admission ?? CallAdmission(limit: configuration.maxInFlight)
        requestIDPrefix = "c" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
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
        if request.method == "OPTIONS" { return preflight(request, origin: origin) }
        guard request.method == "POST" else {
            return cors(
                HTTPResponse(status: 405, text: "billingd answers RPCs with POST\n", headers: [("Allow", "POST, OPTIONS")]), origin: origin)
        }
        guard let kind = RequestKind.of(contentType: request.header("content-type") ?? "") else {
            return cors(unsupportedMediaType(request.header("content-type")), origin: origin)
        }
        if kind == .grpcOverHTTP1 {
            guard configuration.protocols.contains(.grpc) else { return cors(unsupportedMediaType(request.header("content-type")), origin: origin) }
            return cors(HTTPResponse(status: 415, text: "gRPC needs HTTP/2; over HTTP/1.1 use Connect or gRPC-Web\n"), origin: origin)
        }
        guard configuration.protocols.contains(kind.wireProtocol) else {
            return cors(unsupportedMediaType(request.header("content-type")), origin: origin)
        }
        if case .connectStream = kind, let method = registry.method(path: request.path), !method.serverStreaming {
            return cors(HTTPResponse(status: 415, text: "\(request.path) is unary: use application/proto or application/json\n"), origin: origin)
        }
        // A streaming method asked for with a unary content type: the media type is wrong for it (415), as connect-go
        // answers, before any body is read.
        if case .connectUnary = kind, let method = registry.method(path: request.path), method.serverStreaming {
            return cors(
                HTTPResponse(status: 415, text: "\(request.path) streams: use application/connect+proto or application/connect+json\n"),
                origin: origin)
        }
        if case .connectUnary = kind, let version = request.header("connect-protocol-version"), version != "1" {
            return cors(errorResponse(RPCError(code: .invalidArgument, message: "connect-protocol-version must be 1"), kind: kind), origin: origin)
        }
        if case .connectUnary = kind, let encoding = request.header("content-encoding"), !["", "identity", "gzip"].contains(encoding) {
            let error = RPCError(code: .unimplemented, message: "content-encoding '\(encoding.prefix(32))' is not accepted (gzip, identity)")
            return cors(errorResponse(error, kind: kind), origin: origin)
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

    // MARK: CORS

    private func allowed(_ origin: String?) -> String? {
        guard let origin, !configuration.corsOrigins.isEmpty else { return nil }
        if configuration.corsOrigins.contains("*") { return origin }
        return configuration.corsOrigins.contains(origin) ? origin : nil
    }

    private func preflight(_ request: HTTPRequest, origin: String?) -> HTTPResponse {
        guard let origin = allowed(origin), request.header("access-control-request-method") != nil else {
            return HTTPResponse(status: 403, text: "CORS: origin not allowed (--cors-origins)\n")
        }
        var headers: [(String, String)] = [
            ("Access-Control-Allow-Origin", origin), ("Vary", "Origin"), ("Access-Control-Allow-Methods", "POST"),
            ("Access-Control-Max-Age", "7200"),
        ]
        if let asked = request.header("access-control-request-headers") { headers.append(("Access-Control-Allow-Headers", asked)) }
        return HTTPResponse(status: 204, headers: headers)
    }

    private func cors(_ response: HTTPResponse, origin: String?) -> HTTPResponse {
        guard let origin = allowed(origin) else { return response }
        var r = response
        r.headers += [
            ("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
            ("Access-Control-Expose-Headers", "grpc-status, grpc-message, grpc-status-details-bin, content-type"),
        ]
        return r
    }

    // MARK: Calls

    func handle(_ request: HTTPRequest, _ respond: @escaping @Sendable (HTTPResponse) -> Void) {
        let origin = request.header("origin")
        guard let kind = RequestKind.of(contentType: request.header("content-type") ?? "") else {
            return respond(cors(unsupportedMediaType(request.header("content-type")), origin: origin))
        }
        // One clock for the call: CLOCK_MONOTONIC, that of the loops' timers and of gRPC calls' deadlines.
        let started = CallClock.now()
        let number = requestCounter.add(1, ordering: .relaxed).newValue
        let path = request.path
        let methodName = path.hasPrefix("/") ? String(path.dropFirst()) : path
        let route = router.resolve(path: path)
        let cancellation = Cancellation(keepsNotes: true)
        let record: @Sendable (RPCError?) -> Void = { [self] error in
            router.callObserver?(
                CallRecord(
                    method: methodName, knownMethod: route != nil, code: error?.code ?? .ok, reason: error?.reason,
                    durationNanoseconds: CallClock.now() &- started, peer: request.peer,
                    requestIDPrefix: requestIDPrefix, requestNumber: number, notes: cancellation.noted, peerSubject: nil,
                    wireProtocol: kind.wireProtocol.rawValue))
        }
        let answer: @Sendable (Result<[UInt8], RPCError>) -> Void = { [self] result in
            switch result {
            case .success(let message):
                do throws(RPCError) {
                    respond(cors(try success(message, kind: kind, path: path), origin: origin))
                    record(nil)
                } catch {
                    respond(cors(errorResponse(error, kind: kind), origin: origin))
                    record(error)
                }
            case .failure(let error):
                respond(cors(errorResponse(error, kind: kind), origin: origin))
                record(error)
            }
        }
        // The call's context: its metadata are the request's header fields but the transport's own.
        let metadata = request.headers.filter { !Self.isTransportField($0.name) }
        var deadline: UInt64 = 0
        let cap = configuration.maxDeadlineNanoseconds
        let isStream: Bool
        if case .serverStreaming = route { isStream = true } else { isStream = false }
        // A timeout the client asks for is capped by the server's; without one, a unary call's context carries the
        // cap as its deadline (handlers stop there) and a stream has none, as over gRPC. A timer runs only for an
        // asked timeout (none per call otherwise).
        var timeout: Int64?
        if cap > 0 && !isStream { deadline = started &+ UInt64(cap) }
        switch Self.timeout(request, kind: kind) {
        case .none: break
        case .some(.some(let nanos)): timeout = cap > 0 ? min(nanos, cap) : nanos
        case .some(.none):
            return answer(.failure(RPCError(code: .invalidArgument, message: "malformed timeout header")))
        }
        if let timeout { deadline = started &+ UInt64(max(0, timeout)) }
        let context = CallContext(
            CallInfo(
                method: methodName, metadata: metadata, monotonicDeadline: deadline, peer: request.peer,
                requestID: RequestID(prefix: requestIDPrefix, number: number), cancellation: cancellation, peerSubject: nil))
        if let refusal = router.refusal(for: context) { return answer(.failure(refusal)) }
        if case .serverStreaming(_, let handler) = route {
            return stream(
                request, kind: kind, path: path, context: context, timeout: timeout, timers: request.timers, handler: handler,
                respond: { respond(self.cors($0, origin: origin)) }, record: record)
        }
        guard case .unary(_, let handler) = route else {
            if route == nil { return answer(.failure(.unimplemented(methodName))) }
            return answer(.failure(RPCError(code: .unimplemented, message: "\(methodName) is bidirectional: call it over gRPC")))
        }
        if case .connectStream = kind {
            return answer(.failure(RPCError(code: .unimplemented, message: "\(methodName) is unary: use application/proto or application/json")))
        }
        let message: [UInt8]
        do throws(RPCError) {
            message = try requestMessage(request, kind: kind, path: path)
        } catch {
            return answer(.failure(error))
        }
        // The port's one in-flight count: gRPC calls hold slots of the same object.
        guard admission.enter() else { return answer(.failure(.overloaded)) }
        // The first of the handler's answer and the deadline wins.
        let once = Atomic<Bool>(false)
        let timer = CallTimer()
        let finish: @Sendable (Result<[UInt8], RPCError>) -> Void = { [self] result in
            guard once.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
            timer.cancel()
            admission.leave()
            answer(result)
        }
        // The asked timeout is a timer on the request's loop, as a gRPC call's is.
        if let timeout, let timers = request.timers {
            timer.arm(
                timers.schedule(afterNanoseconds: timeout) {
                    cancellation.cancel()
                    finish(.failure(.deadlineExceeded))
                })
        }
        handler(context, message, Responder { result in finish(result.map { Array($0.dropFirst(MessageFraming.prefixSize)) }) })
    }

    /// A server-streaming call over Connect (`application/connect+proto|json`: envelopes, then the end-of-stream
    /// message) or gRPC-Web (frames, then the trailer frame; `-text`: each chunk base64): status 200 and a body
    /// written as the handler sends. Messages the peer has not taken count against the writer's budget until
    /// the transport takes them, so a stalled reader is ended as over gRPC.
    private func stream(
        _ request: HTTPRequest, kind: RequestKind, path: String, context: CallContext, timeout: Int64?, timers: RequestTimers?,
        handler: @escaping ServerStreamingHandler, respond: @escaping @Sendable (HTTPResponse) -> Void,
        record: @escaping @Sendable (RPCError?) -> Void
    ) {
        let codec: RequestKind.Codec
        let text: Bool
        switch kind {
        case .connectStream(let c): (codec, text) = (c, false)
        case .grpcWeb(let t, let c): (codec, text) = (c, t)
        default:
            let error = RPCError(code: .unimplemented, message: "\(context.method) streams: use application/connect+proto or +json")
            respond(errorResponse(error, kind: kind))
            return record(error)
        }
        let contentType: String
        if case .connectStream = kind {
            contentType = codec == .json ? "application/connect+json" : "application/connect+proto"
        } else {
            contentType = (text ? "application/grpc-web-text+" : "application/grpc-web+") + (codec == .json ? "json" : "proto")
        }
        let outputType = registry.method(path: path)?.outputType ?? ""
        let isConnect: Bool
        if case .connectStream = kind { isConnect = true } else { isConnect = false }
        /// One message or the end, as this protocol frames it.
        let encodeText: @Sendable ([UInt8]) -> [UInt8] = { text ? Array(Base64.encode($0, padded: true).utf8) : $0 }
        let end: @Sendable (RPCError?) -> [UInt8] = { error in
            if isConnect {
                let json = Array((error.map { "{\"error\":" + ConnectError.json($0) + "}" } ?? "{}").utf8)
                return encodeText(Self.envelope(json, flags: 0x02))
            }
            return encodeText(GRPCWeb.trailerFrame(error))
        }
        let body = HTTPBodyStream()
        let once = Atomic<Bool>(false)
        let timer = CallTimer()
        let done: @Sendable (RPCError?) -> Void = { [self] error in
            guard once.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
            timer.cancel()
            admission.leave()
            record(error)
        }
        let message: [UInt8]
        do throws(RPCError) {
            message = try requestMessage(request, kind: kind, path: path)
        } catch {
            respond(HTTPResponse(status: 200, contentType: contentType, body: end(error)))
            return record(error)
        }
        guard admission.enter() else {
            respond(HTTPResponse(status: 200, contentType: contentType, body: end(.overloaded)))
            return record(.overloaded)
        }
        let cancellation = context.cancellation
        let writer = StreamWriter(cancellation: cancellation) { [registry] event in
            switch event {
            case .message(let framed):
                var payload = Array(framed.dropFirst(MessageFraming.prefixSize))
                if codec == .json {
                    guard let json = try? registry.toJSON(outputType, binary: payload) else { return }
                    payload = json
                }
                body.write(encodeText(isConnect ? Self.envelope(payload, flags: 0) : MessageFraming.frame(payload)), credit: framed.count)
            case .finish(let error):
                body.finish(last: end(error))
                done(error)
            case .abort(let error):
                body.finish(last: end(error), dropPending: true)
                done(error)
            }
        }
        body.onTaken { writer.consumed($0) }
        body.onCancel {
            cancellation.cancel()
            done(.cancelled)
        }
        if let timeout, let timers {
            timer.arm(
                timers.schedule(afterNanoseconds: timeout) {
                    cancellation.cancel()
                    writer.abort(.deadlineExceeded)
                })
        }
        respond(HTTPResponse(status: 200, contentType: contentType, stream: body))
        handler(context, message, writer)
    }

    /// A Connect envelope: flags, the 4-byte big-endian length, the payload.
    private static func envelope(_ payload: [UInt8], flags: UInt8) -> [UInt8] {
        let n = payload.count
        return [flags, UInt8(truncatingIfNeeded: n >> 24), UInt8(truncatingIfNeeded: n >> 16), UInt8(truncatingIfNeeded: n >> 8), UInt8(truncatingIfNeeded: n)]
            + payload
    }

    /// Header fields that belong to the transport, not to the call's metadata (a switch: no hashing per field).
    private static func isTransportField(_ name: String) -> Bool {
        switch name {
        case "content-type", "content-length", "content-encoding", "accept-encoding", "connect-protocol-version",
            "connect-timeout-ms", "connect-accept-encoding", "connect-content-encoding", "grpc-timeout", "grpc-encoding",
            "grpc-accept-encoding", "host", "connection", "keep-alive", "te", "transfer-encoding", "upgrade", "origin",
            "x-grpc-web", "x-user-agent", "user-agent", "accept":
            true
        default:
            false
        }
    }

    /// The call's timeout: none asked (nil), asked and valid (.some(nanos)), or malformed (.some(nil)).
    private static func timeout(_ request: HTTPRequest, kind: RequestKind) -> Int64?? {
        if case .grpcWeb = kind {
            guard let text = request.header("grpc-timeout") else { return .none }
            return .some(GRPCHeaders.parseTimeout(text))
        }
        guard let text = request.header("connect-timeout-ms") else { return .none }
        // Connect: at most 10 ASCII digits of milliseconds.
        guard !text.isEmpty, text.utf8.count <= 10, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let ms = Int64(text) else {
            return .some(nil)
        }
        return .some(ms * 1_000_000)
    }

    /// The request's message bytes (binary protobuf), decoded from its protocol, encoding and codec.
    private func requestMessage(_ request: HTTPRequest, kind: RequestKind, path: String) throws(RPCError) -> [UInt8] {
        let limit = configuration.maxMessageBytes
        var payload: [UInt8]
        let codec: RequestKind.Codec
        let encoding: String?
        switch kind {
        case .connectUnary(let c):
            codec = c
            payload = request.body
            encoding = request.header("content-encoding")
        case .grpcWeb(let text, let c):
            codec = c
            var bytes = request.body
            if text {
                guard let decoded = GRPCWeb.decodeText(request.body) else {
                    throw RPCError(code: .internal, message: "the grpc-web-text body is not base64")
                }
                bytes = decoded
            }
            let (message, compressed) = try GRPCWeb.requestMessage(bytes, maxMessageBytes: limit)
            payload = message
            encoding = compressed ? (request.header("grpc-encoding") ?? "") : nil
        case .connectStream(let c):
            // One envelope: flags (1: compressed with connect-content-encoding), a 4-byte length, the message.
            codec = c
            let body = request.body
            guard body.count >= 5, body[0] & ~UInt8(1) == 0 else {
                throw RPCError(code: .invalidArgument, message: "the body is not one Connect envelope")
            }
            let length = Int(body[1]) << 24 | Int(body[2]) << 16 | Int(body[3]) << 8 | Int(body[4])
            guard length <= limit else { throw .messageTooLarge(size: length, limit: limit) }
            guard body.count == 5 + length else { throw RPCError(code: .invalidArgument, message: "the body is not exactly one Connect envelope") }
            payload = Array(body[5...])
            encoding = body[0] & 1 == 1 ? (request.header("connect-content-encoding") ?? "") : nil
        case .grpcOverHTTP1:
            throw RPCError(code: .unimplemented, message: "this content type is not served for \(path)")
        }
        if let encoding, !encoding.isEmpty, encoding != "identity" {
            guard encoding == "gzip" else {
                throw RPCError(code: .unimplemented, message: "the encoding '\(encoding.prefix(32))' is not accepted (gzip, identity)")
            }
            do {
                payload = try Gzip.inflate(payload, limit: limit)
            } catch .tooLarge {
                throw .messageTooLarge(size: limit + 1, limit: limit)
            } catch {
                throw RPCError(code: .invalidArgument, message: "the gzip body is malformed")
            }
        }
        guard payload.count <= limit else { throw .messageTooLarge(size: payload.count, limit: limit) }
        guard codec == .json else { return payload }
        guard let method = registry.method(path: path) else { throw .unimplemented(String(path.dropFirst())) }
        do {
            return try registry.toBinary(method.inputType, json: payload.isEmpty ? Array("{}".utf8) : payload)
        } catch {
            throw RPCError(code: .invalidArgument, message: "the request is not a \(method.inputType) in JSON: \(error)")
        }
    }

    /// The success answer: the bare message (Connect) or gRPC-Web frames with OK trailers, in the request's codec.
    private func success(_ message: [UInt8], kind: RequestKind, path: String) throws(RPCError) -> HTTPResponse {
        func encoded(_ codec: RequestKind.Codec) throws(RPCError) -> [UInt8] {
            guard codec == .json else { return message }
            guard let method = registry.method(path: path) else { throw .unimplemented(String(path.dropFirst())) }
            do {
                return try registry.toJSON(method.outputType, binary: message)
            } catch {
                throw RPCError(code: .internal, message: "the answer could not be written as JSON")
            }
        }
        switch kind {
        case .connectUnary(let codec):
            return HTTPResponse(status: 200, contentType: codec == .json ? "application/json" : "application/proto", body: try encoded(codec))
        case .grpcWeb(let text, let codec):
            let body = MessageFraming.frame(try encoded(codec)) + GRPCWeb.trailerFrame(nil)
            return grpcWebResponse(body, text: text, codec: codec, headers: [])
        case .connectStream, .grpcOverHTTP1:
            throw RPCError(code: .unimplemented, message: "this content type is not served for \(path)")
        }
    }

    private func grpcWebResponse(_ body: [UInt8], text: Bool, codec: RequestKind.Codec, headers: [(String, String)]) -> HTTPResponse {
        let type = (text ? "application/grpc-web-text+" : "application/grpc-web+") + (codec == .json ? "json" : "proto")
        if text { return HTTPResponse(status: 200, contentType: type, body: Array(Base64.encode(body, padded: true).utf8), headers: headers) }
        return HTTPResponse(status: 200, contentType: type, body: body, headers: headers)
    }

    /// The error answer: Connect's HTTP status and JSON body, or gRPC-Web's status in the headers and in the
    /// body's trailer frame.
    private func errorResponse(_ error: RPCError, kind: RequestKind) -> HTTPResponse {
        switch kind {
        case .grpcWeb(let text, let codec):
            var headers = [("grpc-status", String(error.code.rawValue)), ("grpc-message", GRPCHeaders.grpcMessage(error.message))]
            if let rich = error.richStatus { headers.append(("grpc-status-details-bin", Base64.encode(rich.encoded()))) }
            return grpcWebResponse(GRPCWeb.trailerFrame(error), text: text, codec: codec, headers: headers)
        case .connectStream(let codec):
            // A streaming call's error is never an HTTP status: 200 and the end-of-stream message carrying it, which
            // Connect clients read as the call's status (an HTTP error would be a broken transport to them).
            let json = Array(("{\"error\":" + ConnectError.json(error) + "}").utf8)
            return HTTPResponse(
                status: 200, contentType: codec == .json ? "application/connect+json" : "application/connect+proto",
                body: Self.envelope(json, flags: 0x02))
        default:
            return HTTPResponse(status: ConnectError.httpStatus(error.code), contentType: "application/json", text: ConnectError.json(error))
        }
    }
}

/// A call's deadline timer, armed once it is scheduled and cancelled when the call ends first (from any thread).
final class CallTimer: Sendable {
    private let timer = Mutex<RequestTimer?>(nil)
    private let ended = Atomic<Bool>(false)

    func arm(_ t: RequestTimer) {
        timer.withLock { $0 = t }
        if ended.load(ordering: .acquiring) { cancel() }
    }

    func cancel() {
        ended.store(true, ordering: .releasing)
        timer.withLock { t -> RequestTimer? in
            defer { t = nil }
            return t
        }?.cancel()
    }
}
