import IO
import RPC

/// One request stream of a server session: what its headers said, its `StreamState`, and what the call
/// holds (route, deframer, answer bytes, timer). Touched on its session's host thread only.
final class ServerStream {
    private(set) var id: Int32
    var state = StreamState()
    /// What the request's header block said: the session gathers it and hands it over whole when the block
    /// ends (`H2ServerSession.headersComplete`); empty until then.
    var head = RequestHead()
    /// Where the call goes, once its headers are routed.
    var route: RoutedMethod?
    /// A bidirectional call's receiver, and the splitter of its request messages.
    var receiver: StreamReceiver?
    var streamDeframer: MessageStreamDeframer?
    /// The writer of a streaming answer, told how many queued bytes nghttp2 takes.
    var writer: StreamWriter?
    /// The request message of a unary or server-streaming call.
    var deframer: MessageDeframer
    /// Request bytes this stream holds, as counted in its connection's budget.
    var bufferedBytes = 0
    var timerID: Int?
    /// Monotonic deadline from the server's cap (checked by the sweep), or 0.
    var capDeadline: UInt64 = 0
    /// The call's context object (its fields and cancellation), kept for the stream's next call when nothing
    /// else holds it (`H2ServerSession.readyCall`).
    var call: CallInfo?
    var cancellation: Cancellation? { call?.cancellation }
    /// The record of the stream's last call, reused for its next one (`ServerShared.finished`).
    var record: CallRecord?
    /// The responder of the stream's last unary call, reused for its next one when nothing else holds it
    /// (it holds the session: `H2ServerSession.close` drops the spare streams, and so the cycle).
    var responder: Responder?
    var startedAt: UInt64 = 0
    /// The full method name of the routed call, or "" (not routed).
    var methodName: String { route?.method ?? "" }
    /// The router knows `path`; calls to other paths share one metric label.
    var knownMethod = false
    var requestNumber: UInt64 = 0
    /// The framed answer bytes being sent, and how much nghttp2 has taken.
    var body: [UInt8] = []
    var bodyOffset = 0
    /// When the sweep first saw this stream's header block unfinished (0: not yet): a block that keeps
    /// arriving past the handshake deadline ends the connection.
    var headersSeenAt: UInt64 = 0
    /// A plain HTTP exchange's state (nil for gRPC calls: clearing a stream resets one field for all of it).
    var exchange: ExchangeState?
    /// The exchange's state, made on first use.
    var exchangeState: ExchangeState {
        if let exchange { return exchange }
        let made = ExchangeState()
        exchange = made
        return made
    }
    /// An exchange's answer until it is submitted.
    var response: HTTPResponse? {
        get { exchange?.response }
        set { exchangeState.response = newValue }
    }
    /// An exchange's answer body written while it is sent (a server stream over Connect or gRPC-Web).
    var bodyStream: HTTPBodyStream? { exchange?.bodyStream }

    init(id: Int32, maxMessageBytes: Int) {
        self.id = id
        self.deframer = MessageDeframer(maxMessageBytes: maxMessageBytes)
    }

    /// Whether a closed stream may be kept for the session's next one: unary calls only (a streaming
    /// call's writer or receiver may still be held elsewhere).
    var reusable: Bool {
        writer == nil && receiver == nil && streamDeframer == nil && (route == nil || route!.kind == .unary)
    }

    /// A spare stream (cleared by `clear` when it closed) takes stream `id`: nothing else to reset.
    func reassign(id: Int32) {
        self.id = id
    }

    /// Answers up to this size leave their storage to the stream's next answer (`Responder.rearm`).
    static let keptBodyCapacity = 1024

    /// Empties `body`, keeping its storage when it is small (lent to the next answer: no allocation per call).
    func dropBody() {
        if body.capacity > Self.keptBodyCapacity {
            body = []
        } else if !body.isEmpty {
            body.removeAll(keepingCapacity: true)
        }
    }

    /// Makes a closed stream new again (what `init` would give, with no stream id yet) and drops what the call held.
    func clear() {
        id = 0
        state = StreamState()
        // Kept for the next call when nothing else holds it or its cancellation (the handler and its
        // closures are done): two allocations less per call. Before `head`: the call shared its metadata.
        if !(isKnownUniquelyReferenced(&call) && call!.reset()) { call = nil }
        // The metadata's buffer is kept for a later call (the call's context, which shared it, is gone).
        head.reset()
        route = nil
        deframer.reset()
        bufferedBytes = 0
        timerID = nil
        capDeadline = 0
        startedAt = 0
        knownMethod = false
        requestNumber = 0
        dropBody()
        bodyOffset = 0
        exchange = nil
        headersSeenAt = 0
    }
}

/// What a plain HTTP exchange holds besides the stream's own fields: touched on the session's thread only.
final class ExchangeState {
    /// The request body as it arrives.
    var requestBody: [UInt8] = []
    /// The request as its header block gave it (the body is added at dispatch).
    var request: HTTPRequest?
    /// The answer until it is submitted.
    var response: HTTPResponse?
    /// The answer body written while it is sent (a server stream over Connect or gRPC-Web).
    var bodyStream: HTTPBodyStream?
}
