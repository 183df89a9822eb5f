import ProtoWire
public import RPC

/// An `RPCError` as the Connect protocol carries it: an HTTP status and the JSON error body
/// `{"code": "failed_precondition", "message": ..., "details": [{"type": "google.rpc.ErrorInfo", "value": ...}]}`
/// (the same `ErrorInfo` gRPC sends in `grpc-status-details-bin`, base64 without padding).
public enum ConnectError {
    /// Connect's name of a gRPC code (`invalid_argument`).
    public static func codeName(_ code: StatusCode) -> String {
        switch code {
        case .ok: "ok"
        case .cancelled: "canceled"
        case .unknown: "unknown"
        case .invalidArgument: "invalid_argument"
        case .deadlineExceeded: "deadline_exceeded"
        case .notFound: "not_found"
        case .alreadyExists: "already_exists"
        case .permissionDenied: "permission_denied"
        case .resourceExhausted: "resource_exhausted"
        case .failedPrecondition: "failed_precondition"
        case .aborted: "aborted"
        case .outOfRange: "out_of_range"
        case .unimplemented: "unimplemented"
        case .internal: "internal"
        case .unavailable: "unavailable"
        case .dataLoss: "data_loss"
        case .unauthenticated: "unauthenticated"
        }
    }

    /// The HTTP status of a Connect unary error (the protocol's table).
    public static func httpStatus(_ code: StatusCode) -> Int {
        switch code {
        case .ok: 200
        case .cancelled: 499
        case .unknown, .internal, .dataLoss: 500
        case .invalidArgument, .failedPrecondition, .outOfRange: 400
        case .deadlineExceeded: 504
        case .notFound: 404
        case .alreadyExists, .aborted: 409
        case .permissionDenied: 403
        case .resourceExhausted: 429
        case .unimplemented: 501
        case .unavailable: 503
        case .unauthenticated: 401
        }
    }

    /// The JSON error object (the body of a unary error, the `error` of an end-of-stream message).
    public static func json(_ error: RPCError) -> String {
        var out = "{\"code\":" + JSONString.quote(codeName(error.code))
        if !error.message.isEmpty { out += ",\"message\":" + JSONString.quote(error.message) }
        if let rich = error.richStatus, !rich.details.isEmpty {
            out += ",\"details\":["
            for (i, detail) in rich.details.enumerated() {
                if i > 0 { out += "," }
                let type = detail.typeURL.split(separator: "/").last.map(String.init) ?? detail.typeURL
                out += "{\"type\":" + JSONString.quote(type) + ",\"value\":" + JSONString.quote(Base64.encode(detail.value))
                if type == "google.rpc.ErrorInfo", let reason = error.reason {
                    // `debug` is informational (Connect clients ignore it): the ErrorInfo as JSON, for people and curl.
                    out += ",\"debug\":{\"reason\":" + JSONString.quote(reason) + ",\"domain\":" + JSONString.quote(RPCError.domain)
                    if !error.metadata.isEmpty {
                        out += ",\"metadata\":{"
                        out += error.metadata.sorted { $0.key < $1.key }.map { JSONString.quote($0.key) + ":" + JSONString.quote($0.value) }
                            .joined(separator: ",")
                        out += "}"
                    }
                    out += "}"
                }
                out += "}"
            }
            out += "]"
        }
        return out + "}"
    }
}
