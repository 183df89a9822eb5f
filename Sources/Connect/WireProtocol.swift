/// The wire protocols served on the gRPC port (`--protocols`): one set of handlers, chosen per request by
/// content type.
public enum WireProtocol: String, Sendable, CaseIterable {
    /// `application/grpc(+proto)` over HTTP/2: the session core serves it directly.
    case grpc
    /// The Connect protocol (connectrpc.com/docs/protocol): unary `application/proto` / `application/json`.
    case connect
    /// gRPC-Web: `application/grpc-web(+proto)`, `application/grpc-web-text(+proto)`, trailers in the body.
    case grpcWeb = "grpc-web"

    /// Parses `--protocols grpc,connect,grpc-web`.
    public static func parseList(_ text: String) -> Set<WireProtocol>? {
        var result: Set<WireProtocol> = []
        for part in text.split(separator: ",") {
            guard let p = WireProtocol(rawValue: part.trimmingSpaces) else { return nil }
            result.insert(p)
        }
        return result.isEmpty ? nil : result
    }
}

/// How one request is encoded, decided from its content type.
enum RequestKind: Equatable, Sendable {
    /// Connect unary: the bare message.
    case connectUnary(Codec)
    /// Connect streaming envelopes (`application/connect+proto|json`).
    case connectStream(Codec)
    /// gRPC-Web: length-prefixed messages, trailers in the body; `text`: base64 of it all.
    case grpcWeb(text: Bool, codec: Codec)
    /// `application/grpc` that did not reach the gRPC path (HTTP/1.1).
    case grpcOverHTTP1

    enum Codec: Equatable, Sendable {
        case proto, json
    }

    var wireProtocol: WireProtocol {
        switch self {
        case .connectUnary, .connectStream: .connect
        case .grpcWeb: .grpcWeb
        case .grpcOverHTTP1: .grpc
        }
    }

    /// The kind of `contentType` (parameters such as `charset=utf-8` ignored), or nil for one no protocol knows.
    static func of(contentType: String) -> RequestKind? {
        // The exact forms clients send skip the lower-casing and splitting.
        switch contentType {
        case "application/proto": return .connectUnary(.proto)
        case "application/json": return .connectUnary(.json)
        case "application/grpc-web+proto": return .grpcWeb(text: false, codec: .proto)
        default: break
        }
        let base = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmingSpaces.lowercased() } ?? ""
        switch base {
        case "application/proto": return .connectUnary(.proto)
        case "application/json": return .connectUnary(.json)
        case "application/connect+proto": return .connectStream(.proto)
        case "application/connect+json": return .connectStream(.json)
        case "application/grpc-web", "application/grpc-web+proto": return .grpcWeb(text: false, codec: .proto)
        case "application/grpc-web+json": return .grpcWeb(text: false, codec: .json)
        case "application/grpc-web-text", "application/grpc-web-text+proto": return .grpcWeb(text: true, codec: .proto)
        case "application/grpc-web-text+json": return .grpcWeb(text: true, codec: .json)
        case "application/grpc", "application/grpc+proto": return .grpcOverHTTP1
        default: return nil
        }
    }
}

extension Substring {
    var trimmingSpaces: String {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}
