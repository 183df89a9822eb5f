import ProtoWire
import RPC

/// The header fields that carry a gRPC status, as name-value pairs for `HeaderList`. Pure: `StreamStateTests`
/// read them; the session submits them. An OK stream's trailers are the prebuilt `HeaderList.okTrailers`.
enum GRPCStatusFields {
    /// A trailers-only answer (nothing was sent on the stream): `:status` 200, the gRPC content type,
    /// grpc-status, grpc-message and, for service errors, their `google.rpc.Status` with ErrorInfo.
    static func trailersOnly(_ error: RPCError) -> [(String, String)] {
        [(":status", "200"), ("content-type", "application/grpc")] + GRPCHeaders.statusFields(error)
    }

    /// The trailers that end a stream whose headers and messages went out before the error.
    static func trailers(_ error: RPCError) -> [(String, String)] { GRPCHeaders.statusFields(error) }

    /// A plain HTTP error for a request that is not gRPC at all (wrong method or content type), with an
    /// INTERNAL status for a gRPC client that reads it anyway.
    static func notGRPC(status: String, message: String) -> [(String, String)] {
        [
            (":status", status), ("content-type", "text/plain"),
            ("grpc-status", String(StatusCode.internal.rawValue)), ("grpc-message", GRPCHeaders.grpcMessage(message)),
        ]
    }
}
