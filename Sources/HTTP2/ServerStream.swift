import CNGHTTP2
import RPC

/// One request stream of a server connection; touched on its loop only.
final class ServerStream {
    private(set) var id: Int32
    var method = ""
    var path = ""
    var contentType = ""
    var timeout = ""
    var metadata: [(name: String, value: String)] = []
    var headerBytes = 0
    /// The header block went over `--max-header-list-bytes`: answered RESOURCE_EXHAUSTED, never dispatched.
    var headerListTooLarge = false
    /// Request pseudo-header fields seen (PseudoField bits), whether a regular field came, and whether the
    /// request broke RFC 9113 8.2-8.3 (answered with RST_STREAM PROTOCOL_ERROR, never dispatched).
    var pseudoFields: UInt8 = 0
    var sawRegularField = false
    var malformed = false
    var handler: UnaryHandler?
    /// Server streaming: the handler, whether headers went out, whether nghttp2 waits for data,
    /// and the status once the writer finished.
    var streamingHandler: ServerStreamingHandler?
    /// Bidirectional streaming: the handler, the receiver it returned, and the message splitter.
    var bidiHandler: BidiStreamingHandler?
    var receiver: StreamReceiver?
    /// The writer of a streaming answer, told how many queued bytes nghttp2 takes.
    var writer: StreamWriter?
    var streamDeframer: MessageStreamDeframer?
    /// Answers go out as a stream (server-streaming or bidirectional).
    var streamsResponse: Bool { streamingHandler != nil || bidiHandler != nil }
    var headersSent = false
    var deferred = false
    var streamFinished = false
    var finishError: RPCError?
    var deframer: MessageDeframer
    /// Request bytes this stream holds, as counted in its connection's budget.
    var bufferedBytes = 0
    /// The request side has ended (END_STREAM seen).
    var remoteClosed = false
    /// A handler is running or an answer is being written.
    var dispatched = false
    /// The answer was submitted to nghttp2.
    var responded = false
    var timerID: Int?
    /// Monotonic deadline from the server's cap (checked by the sweep), or 0.
    var capDeadline: UInt64 = 0
    var cancellation: Cancellation?
    var startedAt: UInt64 = 0
    var methodName = ""
    /// The router knows `path`; calls to other paths share one metric label.
    var knownMethod = false
    var requestNumber: UInt64 = 0
    /// The framed OK message being sent, and how much nghttp2 has taken.
    var body: [UInt8] = []
    var bodyOffset = 0

    init(id: Int32, maxMessageBytes: Int) {
        self.id = id
        self.deframer = MessageDeframer(maxMessageBytes: maxMessageBytes)
    }

    /// Whether a closed stream may be kept for the connection's next one: unary calls only (a streaming
    /// call's writer or receiver may still be held elsewhere).
    var reusable: Bool {
        streamingHandler == nil && bidiHandler == nil && writer == nil && receiver == nil && streamDeframer == nil
    }

    /// A spare stream (cleared by `clear` when it closed) takes stream `id`: nothing else to reset.
    func reassign(id: Int32) {
        self.id = id
    }

    /// Makes a closed stream new again (what `init` would give, with no stream id yet) and drops what the call held.
    func clear(maxMessageBytes: Int) {
        id = 0
        method = ""
        path = ""
        contentType = ""
        timeout = ""
        if !metadata.isEmpty { metadata = [] }
        headerBytes = 0
        headerListTooLarge = false
        pseudoFields = 0
        sawRegularField = false
        malformed = false
        handler = nil
        headersSent = false
        deferred = false
        streamFinished = false
        finishError = nil
        deframer = MessageDeframer(maxMessageBytes: maxMessageBytes)
        bufferedBytes = 0
        remoteClosed = false
        dispatched = false
        responded = false
        timerID = nil
        capDeadline = 0
        cancellation = nil
        startedAt = 0
        methodName = ""
        knownMethod = false
        requestNumber = 0
        body = []
        bodyOffset = 0
    }
}
