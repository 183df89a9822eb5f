import ProtoWire

/// A failed call: a gRPC status, a message for people and, when the service
/// decided the failure, an `ErrorInfo` reason with metadata (ERRORS.md).
public struct RPCError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: StatusCode
    public var message: String
    /// The `ErrorInfo.reason`, such as `INVALID_FIELD`; nil for transport-level failures.
    public var reason: String?
    /// `ErrorInfo.metadata`: facts, never secrets.
    public var metadata: [String: String]

    /// The `ErrorInfo.domain` every service error carries.
    public static let domain = "billing.v1"

    public init(code: StatusCode, message: String, reason: String? = nil, metadata: [String: String] = [:]) {
        self.code = code
        self.message = message
        self.reason = reason
        self.metadata = metadata
    }

    public var description: String {
        if let reason { return "\(code) \(reason): \(message)" }
        return "\(code): \(message)"
    }

    /// The `google.rpc.Status` that `grpc-status-details-bin` carries, or nil without a reason.
    public var richStatus: RichStatus? {
        guard let reason else { return nil }
        let info = ErrorInfo(reason: reason, domain: RPCError.domain, metadata: metadata)
        return RichStatus(
            code: code.rawValue, message: GRPCHeaders.capped(message),
            details: [AnyMessage(typeURL: ErrorInfo.typeURL, value: info.encoded())])
    }

    // Transport-level failures (gRPC's own rules, no ErrorInfo).
    public static func unimplemented(_ method: String) -> RPCError {
        RPCError(code: .unimplemented, message: "method \(method) is not implemented")
    }
    public static let deadlineExceeded = RPCError(code: .deadlineExceeded, message: "deadline exceeded")
    public static let cancelled = RPCError(code: .cancelled, message: "call cancelled by the client")

    /// The request body is not a valid sequence of length-prefixed messages.
    public static func badFraming(_ detail: String) -> RPCError {
        RPCError(code: .internal, message: "invalid gRPC framing: \(detail)")
    }
    /// The request message did not decode as protobuf.
    public static func undecodable(_ detail: String) -> RPCError {
        RPCError(code: .invalidArgument, message: "request message does not decode: \(detail)")
    }
    public static func messageTooLarge(size: Int, limit: Int) -> RPCError {
        RPCError(
            code: .resourceExhausted, message: "request message of \(size) bytes exceeds the limit of \(limit)",
            reason: .messageTooLarge, metadata: ["limit": String(limit), "size": String(size)])
    }
    public static let shuttingDown = RPCError(
        code: .unavailable, message: "server is shutting down; retry on another replica", reason: .shuttingDown)
    /// One connection holds more unfinished request bytes than its budget allows.
    public static func connectionBufferFull(limit: Int) -> RPCError {
        RPCError(
            code: .resourceExhausted,
            message: "this connection holds more than \(limit) bytes of unfinished requests; retry later or on another connection",
            reason: .overloaded, metadata: ["limit": String(limit)])
    }
    public static let overloaded = RPCError(
        code: .resourceExhausted, message: "server is overloaded; retry later", reason: .overloaded)
    /// Something unexpected: a fixed message and the request id that the server log holds.
    public static func `internal`(requestID: String) -> RPCError {
        RPCError(
            code: .internal, message: "internal error (request id \(requestID))",
            metadata: ["request_id": requestID])
    }
}
