import HTTP2
import ProtoWire
import RPC

/// Connect's timeout header: at most 10 ASCII digits of milliseconds.
private func connectTimeout(_ request: HTTPRequest) throws(RPCError) -> Int64? {
    guard let text = request.header("connect-timeout-ms") else { return nil }
    guard !text.isEmpty, text.utf8.count <= 10, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let ms = Int64(text) else {
        throw RPCError(code: .invalidArgument, message: "malformed timeout header")
    }
    return ms * 1_000_000
}

/// Connect unary (`application/proto`, `application/json`): the bare message, `content-encoding` gzip; errors
/// as Connect's HTTP status and JSON body (ErrorInfo in `details`).
struct ConnectUnaryCodec: HTTPCallCodec {
    let message: MessageCodec
    var wireProtocol: WireProtocol { .connect }
    var servesUnary: Bool { true }
    var streamContentType: String? { nil }

    func timeout(_ request: HTTPRequest) throws(RPCError) -> Int64? { try connectTimeout(request) }

    func decode(_ request: HTTPRequest, limit: Int) throws(RPCError) -> [UInt8] {
        let payload = try MessageCodec.inflate(request.body, encoding: request.header("content-encoding"), limit: limit)
        guard payload.count <= limit else { throw .messageTooLarge(size: payload.count, limit: limit) }
        return try message.request(payload)
    }

    func answer(_ binary: [UInt8]) throws(RPCError) -> HTTPResponse {
        HTTPResponse(status: 200, contentType: message.isJSON ? "application/json" : "application/proto", body: try message.answer(binary))
    }

    func error(_ error: RPCError) -> HTTPResponse {
        HTTPResponse(status: ConnectError.httpStatus(error.code), contentType: "application/json", text: ConnectError.json(error))
    }

    func streamMessage(_ binary: [UInt8]) -> [UInt8]? { nil }
    func streamEnd(_ error: RPCError?) -> [UInt8] { [] }
}

/// Connect streaming (`application/connect+proto|json`): one request envelope, answer envelopes, then the
/// end-of-stream message (flag 0x02) carrying the error. Never an HTTP error status: Connect clients read one as a
/// broken transport, not as the call's status.
struct ConnectStreamCodec: HTTPCallCodec {
    let message: MessageCodec
    var wireProtocol: WireProtocol { .connect }
    var servesUnary: Bool { false }
    var streamContentType: String? { type }
    private var type: String { message.isJSON ? "application/connect+json" : "application/connect+proto" }

    func timeout(_ request: HTTPRequest) throws(RPCError) -> Int64? { try connectTimeout(request) }

    func decode(_ request: HTTPRequest, limit: Int) throws(RPCError) -> [UInt8] {
        // One envelope: flags (1: compressed with connect-content-encoding), a 4-byte length, the message.
        let body = request.body
        guard body.count >= 5, body[0] & ~UInt8(1) == 0 else {
            throw RPCError(code: .invalidArgument, message: "the body is not one Connect envelope")
        }
        let length = Envelope.length(body)
        guard length <= limit else { throw .messageTooLarge(size: length, limit: limit) }
        guard body.count == 5 + length else { throw RPCError(code: .invalidArgument, message: "the body is not exactly one Connect envelope") }
        let encoding = body[0] & 1 == 1 ? (request.header("connect-content-encoding") ?? "") : nil
        let payload = try MessageCodec.inflate(Array(body[5...]), encoding: encoding, limit: limit)
        guard payload.count <= limit else { throw .messageTooLarge(size: payload.count, limit: limit) }
        return try message.request(payload)
    }

    func answer(_ binary: [UInt8]) throws(RPCError) -> HTTPResponse {
        throw RPCError(code: .unimplemented, message: "this content type is not served for unary methods")
    }

    func error(_ error: RPCError) -> HTTPResponse {
        HTTPResponse(status: 200, contentType: type, body: streamEnd(error))
    }

    func streamMessage(_ binary: [UInt8]) -> [UInt8]? {
        guard let payload = try? message.answer(binary) else { return nil }
        return Envelope.wrap(payload, flags: 0)
    }

    func streamEnd(_ error: RPCError?) -> [UInt8] {
        Envelope.wrap(Array((error.map { "{\"error\":" + ConnectError.json($0) + "}" } ?? "{}").utf8), flags: 0x02)
    }
}

/// gRPC-Web (`application/grpc-web(+proto|+json)`, `-text`: base64 of it all): length-prefixed messages, the
/// status in a trailer frame in the body (and, for an error before any message, in the headers too).
struct GRPCWebCodec: HTTPCallCodec {
    let text: Bool
    let message: MessageCodec
    var wireProtocol: WireProtocol { .grpcWeb }
    var servesUnary: Bool { true }
    var streamContentType: String? { type }
    private var type: String { (text ? "application/grpc-web-text+" : "application/grpc-web+") + (message.isJSON ? "json" : "proto") }

    func timeout(_ request: HTTPRequest) throws(RPCError) -> Int64? {
        guard let header = request.header("grpc-timeout") else { return nil }
        guard let nanos = GRPCHeaders.parseTimeout(header) else { throw RPCError(code: .invalidArgument, message: "malformed timeout header") }
        return nanos
    }

    func decode(_ request: HTTPRequest, limit: Int) throws(RPCError) -> [UInt8] {
        var bytes = request.body
        if text {
            guard let decoded = GRPCWeb.decodeText(request.body) else {
                throw RPCError(code: .internal, message: "the grpc-web-text body is not base64")
            }
            bytes = decoded
        }
        let (framed, compressed) = try GRPCWeb.requestMessage(bytes, maxMessageBytes: limit)
        let payload = try MessageCodec.inflate(framed, encoding: compressed ? (request.header("grpc-encoding") ?? "") : nil, limit: limit)
        guard payload.count <= limit else { throw .messageTooLarge(size: payload.count, limit: limit) }
        return try message.request(payload)
    }

    private func textual(_ bytes: [UInt8]) -> [UInt8] { text ? Array(Base64.encode(bytes, padded: true).utf8) : bytes }

    func answer(_ binary: [UInt8]) throws(RPCError) -> HTTPResponse {
        let body = MessageFraming.frame(try message.answer(binary)) + GRPCWeb.trailerFrame(nil)
        return HTTPResponse(status: 200, contentType: type, body: textual(body))
    }

    func error(_ error: RPCError) -> HTTPResponse {
        HTTPResponse(status: 200, contentType: type, body: textual(GRPCWeb.trailerFrame(error)), headers: GRPCHeaders.statusFields(error))
    }

    func streamMessage(_ binary: [UInt8]) -> [UInt8]? {
        guard let payload = try? message.answer(binary) else { return nil }
        return textual(MessageFraming.frame(payload))
    }

    func streamEnd(_ error: RPCError?) -> [UInt8] { textual(GRPCWeb.trailerFrame(error)) }
}
