import RPC

/// The life of one request stream as a value: one mutating function per event, each returning the one
/// action the session takes. It knows no nghttp2, socket, clock or thread, so `StreamStateTests` drive it
/// directly; `H2ServerSession` feeds it events and carries out its actions.
///
///     idle ──headers: route──▶ receiving ──request end──▶ (dispatch) ──▶ dispatched ──answer──▶ answered
///      │  (bidi: dispatched at once)                                       │ first streamed message
///      │ malformed ──▶ refused                                             ▼
///      │ refused / not gRPC ──▶ answered            responding ──finish──▶ responding(finished) ──trailers
///     any phase ──stream closed──▶ closed (a call still running is cancelled)
struct StreamState: Sendable {
    enum Kind: Equatable, Sendable {
        case unary, serverStreaming, bidi
        /// A plain HTTP request (not gRPC) for the server's `HTTPService`: one body in, one answer out.
        case exchange
    }

    enum Phase: Equatable, Sendable {
        /// The request's header block is arriving.
        case idle
        /// Routed; the request message is arriving (unary and server-streaming calls).
        case receiving(Kind)
        /// A handler has the call and nothing was answered yet.
        case dispatched(Kind)
        /// Answer headers are out and messages follow (streaming calls); `finished` once the status is known.
        case responding(Kind, finished: Bool)
        /// The final answer is submitted: a unary message with its trailers, or a trailers-only status.
        case answered
        /// Reset as malformed (RST_STREAM PROTOCOL_ERROR) before any handler saw it.
        case refused
        /// nghttp2 closed the stream.
        case closed
    }

    /// What the request's headers mean: `CallRules.screen` and `CallRules.routed` decide it from the facts the
    /// session gathered (field checks, method, content type, drain, authentication, routing).
    enum Verdict: Equatable, Sendable {
        case malformed
        /// Answered with this status at once (drain, authentication, unknown method, oversized headers).
        case refuse(RPCError)
        /// Not a gRPC request (method, content type): a plain HTTP status.
        case notGRPC(status: String, message: String)
        case route(Kind)
    }

    enum Action: Equatable, Sendable {
        case none
        /// RST_STREAM PROTOCOL_ERROR: the request is malformed.
        case reset
        /// A trailers-only status (nothing was sent on the stream yet).
        case fail(RPCError)
        /// A plain HTTP answer.
        case respondHTTP(status: String, message: String)
        /// The plain HTTP response the session holds for this stream: its headers, then its body, then
        /// END_STREAM (no trailers).
        case submitResponse
        /// The request message is complete: hand it to the handler (the session then reports `handedOver`
        /// or, when it cannot, `fail`).
        case dispatch
        /// A bidirectional call starts at its headers; `ended`: its request is already over too.
        case startBidi(ended: Bool)
        /// A bidirectional call's request ended on a message boundary: tell its receiver.
        case endOfInput
        /// Answer headers with a DATA source (the unary answer, or a stream's first message).
        case submitHeaders
        /// nghttp2 waits for DATA that has now come (it was deferred): resume the stream.
        case resumeData
        /// A streaming answer's status is known after its headers went out: count the call; the trailers
        /// follow the queued messages. `resume`: nghttp2 was waiting for data.
        case record(RPCError?, resume: Bool)
        /// The stream went away while a handler had the call: cancel it and count it CANCELLED.
        case cancel
        /// A streaming answer ends now with this status, its unsent messages dropped: count the call and submit
        /// the trailers at once (HEADERS are not flow-controlled, so a peer whose window is 0 still gets them).
        case abort(RPCError)
    }

    /// What the DATA source does once every queued byte was taken.
    enum BodyEnd: Equatable, Sendable {
        /// More may come (a stream still answering); bytes were taken this time.
        case more
        /// Nothing to send now: defer until `message` or `finish` resumes it.
        case wait
        /// The end: trailers with this status (nil: OK).
        case trailers(RPCError?)
        /// The end of a plain HTTP body: END_STREAM on the last DATA frame.
        case end
    }

    private(set) var phase: Phase = .idle
    /// A handler was given the call: it is counted in flight until the call is recorded.
    private(set) var wasDispatched = false
    /// The request side is over (END_STREAM seen).
    private(set) var requestEnded = false
    /// nghttp2 asked for DATA we did not have yet (NGHTTP2_ERR_DEFERRED).
    private(set) var deferred = false
    /// A streamed answer's status once finished (nil: OK).
    private(set) var finishError: RPCError?
    /// The trailers went out ahead of the DATA source (`abort`): it sends nothing more.
    private(set) var trailersSubmitted = false
    /// A plain HTTP exchange (no gRPC framing, status or trailers).
    private(set) var isExchange = false

    /// Whether header fields are still read (trailers of a refused stream are not).
    var readsFields: Bool {
        switch phase {
        case .refused, .closed: false
        default: true
        }
    }

    /// Whether the request's header block is still arriving. (Phases are compared by pattern, not `==`:
    /// the synthesized `==` of an enum with payloads is a call per comparison on the hot path.)
    var isIdle: Bool {
        if case .idle = phase { return true }
        return false
    }

    /// Whether request DATA is read: the message of a routed call before dispatch, a bidirectional
    /// call's messages until it finishes.
    var takesData: Bool {
        switch phase {
        case .receiving, .dispatched(.bidi), .responding(.bidi, finished: false): true
        default: false
        }
    }

    /// Whether a streaming call's writer may still queue messages.
    var sendsMessages: Bool {
        switch phase {
        case .dispatched(.serverStreaming), .dispatched(.bidi), .responding(_, finished: false): true
        default: false
        }
    }

    /// Whether the answer goes out as a stream of messages.
    var isStreaming: Bool {
        switch phase {
        case .receiving(let k), .dispatched(let k), .responding(let k, _): k == .serverStreaming || k == .bidi
        default: false
        }
    }

    /// Whether the call has an answer that decides its end (nothing else may be submitted).
    var isAnswered: Bool {
        switch phase {
        case .idle, .receiving, .dispatched: false
        default: true
        }
    }

    /// Whether the server's cap, once passed, ends the call (the sweep's rule): any call before its answer,
    /// except a streaming call a handler has, which ends through its writer and its own grpc-timeout.
    var endsAtCap: Bool {
        !isAnswered && !(wasDispatched && isStreaming)
    }

    // MARK: Events

    /// The request's header block ended; the session judged it.
    mutating func headersEnded(_ verdict: Verdict, endStream: Bool) -> Action {
        guard isIdle else { return .none }
        if endStream { requestEnded = true }
        switch verdict {
        case .malformed:
            phase = .refused
            return .reset
        case .refuse(let error):
            phase = .answered
            return .fail(error)
        case .notGRPC(let status, let message):
            phase = .answered
            return .respondHTTP(status: status, message: message)
        case .route(.bidi):
            phase = .dispatched(.bidi)
            wasDispatched = true
            return .startBidi(ended: endStream)
        case .route(let kind):
            phase = .receiving(kind)
            if kind == .exchange { isExchange = true }
            return endStream ? .dispatch : .none
        }
    }

    /// A field or frame broke RFC 9113 (a bad field, trailers that do not end the request).
    mutating func malformed() -> Action {
        switch phase {
        case .idle, .receiving:
            phase = .refused
            return .reset
        case .refused, .closed:
            return .none
        default:
            return .reset  // a handler has the call: it is cancelled when the reset closes the stream
        }
    }

    /// The request ended (END_STREAM); `atMessageBoundary` says whether a bidirectional call's last
    /// message was whole.
    mutating func requestEnd(atMessageBoundary: Bool = true) -> Action {
        requestEnded = true
        switch phase {
        case .receiving:
            return .dispatch
        case .dispatched(.bidi), .responding(.bidi, finished: false):
            return atMessageBoundary ? .endOfInput : fail(.badFraming("the stream ended inside a message"))
        default:
            return .none
        }
    }

    /// The session gave the complete request to the handler.
    mutating func handedOver() {
        guard case .receiving(let kind) = phase else { return }
        phase = .dispatched(kind)
        wasDispatched = true
    }

    /// A unary call's handler answered OK (or an exchange's handler answered).
    mutating func succeed() -> Action {
        switch phase {
        case .dispatched(.unary):
            phase = .answered
            return .submitHeaders
        case .dispatched(.exchange):
            phase = .answered
            return .submitResponse
        default:
            return .none
        }
    }

    /// An exchange is answered by the server itself (a limit, a timeout, shutting down) with the response
    /// the session now holds: nothing may have been submitted yet.
    mutating func respond() -> Action {
        switch phase {
        case .idle, .receiving(.exchange), .dispatched(.exchange):
            phase = .answered
            isExchange = true
            return .submitResponse
        default:
            return .none
        }
    }

    /// The call ends with `error` (a handler's failure, bad framing, the memory budget, a deadline): a
    /// trailers-only status when nothing was sent, the status after the messages when a stream is answering,
    /// nothing when it already has its answer.
    mutating func fail(_ error: RPCError) -> Action {
        switch phase {
        case .idle, .receiving, .dispatched:
            phase = .answered
            return .fail(error)
        case .responding(_, finished: false):
            return finish(error)
        default:
            return .none
        }
    }

    /// The call's deadline passed (its grpc-timeout, or the server's cap).
    mutating func deadline() -> Action { fail(.deadlineExceeded) }

    /// A streaming call's writer queued a message (the session appends it to the stream's output first).
    mutating func message() -> Action {
        switch phase {
        case .dispatched(let kind) where kind == .serverStreaming || kind == .bidi:
            phase = .responding(kind, finished: false)
            return .submitHeaders
        case .responding(_, finished: false):
            guard deferred else { return .none }
            deferred = false
            return .resumeData
        default:
            return .none
        }
    }

    /// A streaming call's writer finished (nil: OK).
    mutating func finish(_ error: RPCError?) -> Action {
        switch phase {
        case .dispatched(let kind) where kind == .serverStreaming || kind == .bidi:
            phase = .answered
            return .fail(error ?? RPCError(code: .ok, message: ""))
        case .responding(let kind, finished: false):
            phase = .responding(kind, finished: true)
            finishError = error
            let resume = deferred
            deferred = false
            return .record(error, resume: resume)
        default:
            return .none
        }
    }

    /// A streaming call's writer aborted: the end goes out now, not behind the queued messages.
    mutating func abort(_ error: RPCError) -> Action {
        switch phase {
        case .dispatched(let kind) where kind == .serverStreaming || kind == .bidi:
            phase = .answered
            return .fail(error)
        case .responding(let kind, finished: false):
            phase = .responding(kind, finished: true)
            finishError = error
            trailersSubmitted = true
            deferred = false
            return .abort(error)
        default:
            return .none
        }
    }

    /// The DATA source took every queued byte (`tookBytes`: some this time).
    mutating func bodyDrained(tookBytes: Bool) -> BodyEnd {
        if isExchange { return .end }
        if trailersSubmitted {
            deferred = true
            return .wait
        }
        switch phase {
        case .responding(_, finished: false):
            if tookBytes { return .more }
            deferred = true
            return .wait
        case .responding(_, finished: true):
            return .trailers(finishError)
        default:
            return .trailers(nil)
        }
    }

    /// nghttp2 closed the stream (answered, reset by the peer, or the connection ending).
    mutating func closed() -> Action {
        let running: Bool
        switch phase {
        case .dispatched, .responding(_, finished: false): running = true
        default: running = false
        }
        phase = .closed
        return running ? .cancel : .none
    }
}
