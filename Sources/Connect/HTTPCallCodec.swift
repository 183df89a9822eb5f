import HTTP2
import ProtoJSON
import ProtoWire
import RPC

/// One wire protocol over HTTP, as connect-go's protocolHandler: which timeout header it reads, how it decodes the
/// request and encodes the answer, an error, a stream's messages and its end. No state, no threads, no
/// limits: `HTTPCalls` runs every call through the port's one `CallPipeline` and asks the codec only for bytes.
protocol HTTPCallCodec: Sendable {
    var wireProtocol: WireProtocol { get }
    /// False for a streaming-only content type (a unary method called with it is refused).
    var servesUnary: Bool { get }
    /// The timeout the request asks for: nil when none; throws (with the protocol's status) when it is malformed.
    func timeout(_ request: HTTPRequest) throws(RPCError) -> Int64?
    /// The request's message as binary protobuf, at most `limit` bytes once decoded.
    func decode(_ request: HTTPRequest, limit: Int) throws(RPCError) -> [UInt8]
    /// A unary call's answer (the handler's binary message).
    func answer(_ message: [UInt8]) throws(RPCError) -> HTTPResponse
    /// A unary call's error, or a streaming call's when the stream never started.
    func error(_ error: RPCError) -> HTTPResponse
    /// The content type of a stream's answer; nil: this codec serves unary calls only.
    var streamContentType: String? { get }
    /// One streamed message (binary in), framed; nil when it cannot be encoded (dropped).
    func streamMessage(_ message: [UInt8]) -> [UInt8]?
    /// A stream's last bytes: its end and status.
    func streamEnd(_ error: RPCError?) -> [UInt8]
}

extension RequestKind {
    /// The codec that speaks this kind, for the method at `path`; nil for gRPC over HTTP/1.1 (refused earlier).
    func codec(path: String, registry: Registry) -> (any HTTPCallCodec)? {
        switch self {
        case .connectUnary(let c): ConnectUnaryCodec(message: .of(c, path: path, registry: registry))
        case .connectStream(let c): ConnectStreamCodec(message: .of(c, path: path, registry: registry))
        case .grpcWeb(let text, let c): GRPCWebCodec(text: text, message: .of(c, path: path, registry: registry))
        case .grpcOverHTTP1: nil
        }
    }
}

/// The 5-byte length prefix gRPC, gRPC-Web and Connect envelopes share (flags, big-endian length) and its payload.
enum Envelope {
    static func wrap(_ payload: [UInt8], flags: UInt8) -> [UInt8] {
        let n = payload.count
        return [flags, UInt8(truncatingIfNeeded: n >> 24), UInt8(truncatingIfNeeded: n >> 16), UInt8(truncatingIfNeeded: n >> 8), UInt8(truncatingIfNeeded: n)]
            + payload
    }

    /// The length field of the prefix that starts `bytes` (at least 5 of them).
    static func length(_ bytes: [UInt8]) -> Int { Int(bytes[1]) << 24 | Int(bytes[2]) << 16 | Int(bytes[3]) << 8 | Int(bytes[4]) }
}
