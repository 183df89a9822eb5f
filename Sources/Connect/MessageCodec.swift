import Gzip
import ProtoJSON
import RPC

/// How a call's messages are written on the wire: binary protobuf, or proto3 JSON through `ProtoJSON` (the
/// method's input and output types from the embedded descriptors). Handlers always see binary protobuf.
enum MessageCodec: Sendable {
    case proto
    case json(registry: Registry, method: String, input: String, output: String)

    /// For the request's codec (`RequestKind.Codec`) and method path; JSON of an unknown method fails when used.
    static func of(_ codec: RequestKind.Codec, path: String, registry: Registry) -> MessageCodec {
        guard codec == .json else { return .proto }
        let method = registry.method(path: path)
        return .json(registry: registry, method: String(path.dropFirst()), input: method?.inputType ?? "", output: method?.outputType ?? "")
    }

    var isJSON: Bool {
        if case .json = self { return true }
        return false
    }

    /// The request payload as binary protobuf.
    func request(_ payload: [UInt8]) throws(RPCError) -> [UInt8] {
        guard case .json(let registry, let method, let input, _) = self else { return payload }
        guard !input.isEmpty else { throw .unimplemented(method) }
        do {
            return try registry.toBinary(input, json: payload.isEmpty ? Array("{}".utf8) : payload)
        } catch {
            throw RPCError(code: .invalidArgument, message: "the request is not a \(input) in JSON: \(error)")
        }
    }

    /// An answer message (binary protobuf) in this codec.
    func answer(_ message: [UInt8]) throws(RPCError) -> [UInt8] {
        guard case .json(let registry, let method, _, let output) = self else { return message }
        guard !output.isEmpty else { throw .unimplemented(method) }
        do {
            return try registry.toJSON(output, binary: message)
        } catch {
            throw RPCError(code: .internal, message: "the answer could not be written as JSON")
        }
    }

    /// `payload` inflated when `encoding` (the request's, when its message is compressed) is gzip; bounded by `limit`.
    static func inflate(_ payload: [UInt8], encoding: String?, limit: Int) throws(RPCError) -> [UInt8] {
        guard let encoding, !encoding.isEmpty, encoding != "identity" else { return payload }
        guard encoding == "gzip" else {
            throw RPCError(code: .unimplemented, message: "the encoding '\(encoding.prefix(32))' is not accepted (gzip, identity)")
        }
        do {
            return try Gzip.inflate(payload, limit: limit)
        } catch .tooLarge {
            throw .messageTooLarge(size: limit + 1, limit: limit)
        } catch {
            throw RPCError(code: .invalidArgument, message: "the gzip body is malformed")
        }
    }
}
