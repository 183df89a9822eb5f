import RPC

/// The gRPC rules of a server call as pure decisions: what a request's header block means, and which
/// deadline the call runs under. No nghttp2, clock or thread: `StreamStateTests` drive them with plain
/// values; `H2ServerSession` gathers the facts and carries out the result.
enum CallRules {
    /// What a complete request header block means before its path is looked up.
    enum Screening: Equatable, Sendable {
        /// Decided here: malformed, refused (oversized headers, draining) or not gRPC.
        case decided(StreamState.Verdict)
        /// Not a gRPC request, on a server with an `HTTPService`: a plain HTTP exchange, judged by its own rules.
        case exchange
        /// A gRPC call: look its path up and let the interceptors see it, then `routed`.
        case route
    }

    /// Screens a complete header block in RFC 9113, HTTP and drain order. The interceptors are consulted
    /// only for `.route`, so a request that is not a gRPC call never reaches them. The session reads the
    /// method and content type into flags (the Strings are not held across the checks).
    /// - Parameters:
    ///   - requiredPseudoFields: `:method`, `:scheme` and `:path` each came (RFC 9113 8.3.1).
    ///   - servesHTTP: the server has an `HTTPService` for requests that are not gRPC.
    ///   - servesGRPC: gRPC is among the served protocols (else gRPC requests go to the `HTTPService`, which refuses them).
    ///   - post: `:method` is `POST`.
    ///   - grpcContentType: `content-type` is gRPC's (`GRPCHeaders.isGRPCContentType`).
    ///   - headerListTooLarge: the block went over `maxHeaderListBytes`.
    @inline(__always)
    static func screen(
        requiredPseudoFields: Bool, servesHTTP: Bool, post: Bool, grpcContentType: Bool,
        headerListTooLarge: Bool, maxHeaderListBytes: Int, draining: Bool, servesGRPC: Bool = true
    ) -> Screening {
        guard requiredPseudoFields else { return .decided(.malformed) }
        if servesHTTP && !(post && grpcContentType && servesGRPC) { return .exchange }
        if headerListTooLarge {
            return .decided(
                .refuse(RPCError(code: .resourceExhausted, message: "request headers exceed the limit of \(maxHeaderListBytes) bytes")))
        }
        if !post { return .decided(.notGRPC(status: "405", message: "gRPC calls use POST")) }
        guard grpcContentType else {
            return .decided(.notGRPC(status: "415", message: "content-type must be application/grpc"))
        }
        if draining { return .decided(.refuse(.shuttingDown)) }
        return .route
    }

    /// The verdict on a screened gRPC call: the interceptors' refusal first (unknown methods included: their
    /// names are the peer's to choose), then an unknown method, then its route.
    /// - Parameters:
    ///   - kind: the kind of the route found for `path`, or nil for an unknown method.
    ///   - refusal: what the interceptors answered (nil: accepted, or none looks at calls).
    @inline(__always)
    static func routed(_ kind: StreamState.Kind?, path: String, refusal: RPCError?) -> StreamState.Verdict {
        if let refusal { return .refuse(refusal) }
        guard let kind else { return .refuse(.unimplemented(methodName(path: path))) }
        return .route(kind)
    }

    /// The method name of a `:path` (`/pkg.Service/Method` without its leading slash).
    static func methodName(path: String) -> String {
        path.hasPrefix("/") ? String(path.dropFirst()) : path
    }

    /// Which deadline a call runs under.
    enum Deadline: Equatable, Sendable {
        /// None: a streaming call without grpc-timeout (long-lived streams, such as health Watch, have no
        /// server cap), or a unary call with neither a timeout nor a cap.
        case none
        /// The server's cap, which is no later than the client's grpc-timeout: the once-a-second sweep
        /// enforces it, no timer per call.
        case cap(nanoseconds: Int64)
        /// The client's grpc-timeout (under the cap, or on a streaming call): a timer per call.
        case timer(nanoseconds: Int64)
        /// grpc-timeout could not be read: the call fails with this status.
        case malformed(RPCError)
    }

    /// The deadline of a call from its `grpc-timeout` text (empty: none sent) and the server's cap
    /// (`capNanoseconds`, 0: none): RPC's `CallDeadline.decide`, the rule of every protocol.
    @inline(__always)
    static func deadline(timeout: String, streaming: Bool, capNanoseconds: Int64) -> Deadline {
        var asked: Int64?
        if !timeout.isEmpty {
            guard let nanos = GRPCHeaders.parseTimeout(timeout) else {
                return .malformed(RPCError(code: .internal, message: "malformed grpc-timeout '\(timeout)'"))
            }
            asked = nanos
        }
        switch CallDeadline.decide(asked: asked, streaming: streaming, capNanoseconds: capNanoseconds) {
        case .none: return .none
        case .cap(let n): return .cap(nanoseconds: n)
        case .timer(let n): return .timer(nanoseconds: n)
        }
    }

    /// The monotonic instant `nanoseconds` after `start` (a monotonic reading, never 0): a call's deadline.
    @inline(__always)
    static func deadline(from start: UInt64, after nanoseconds: Int64) -> UInt64 {
        start &+ UInt64(max(0, nanoseconds))
    }

    /// The monotonic instant at which the server's cap ends a call counted from `start`, or 0 (no cap).
    @inline(__always)
    static func capDeadline(from start: UInt64, capNanoseconds: Int64) -> UInt64 {
        capNanoseconds > 0 ? start &+ UInt64(capNanoseconds) : 0
    }
}

extension Router.Route {
    /// The stream kind that serves this route.
    var kind: StreamState.Kind {
        switch self {
        case .unary: .unary
        case .serverStreaming: .serverStreaming
        case .bidi: .bidi
        }
    }
}
