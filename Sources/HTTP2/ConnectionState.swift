/// The life of one accepted connection as a value, as `StreamState` is for a stream: one mutating function per
/// event, each returning what `ServerConnection` does next. It knows no socket, TLS, nghttp2, clock or thread, so
/// `ConnectionStateTests` drive it directly; the connection feeds it events and facts and carries out its actions.
///
///     handshaking (TLS) ──done: h2──▶ serving ──terminate──▶ serving(ending) ──output written──▶ shutOut
///          │  done: http/1.1 ──▶ bridged                                                           │
///     awaitingPreface (h2c) ──preface / garbage──▶ serving                                         │
///          │  request line ──▶ handedOff (libmicrohttpd)  or  shutOut (one HTTP/1.1 refusal)       ▼
///     any phase ──close (peer closed, failure, linger over, sweep)──────────────────────────────▶ closed
struct ConnectionState: Equatable, Sendable {
    enum Phase: Equatable, Sendable {
        /// TLS: the handshake is under way.
        case handshaking
        /// h2c: the first bytes are peeked at until they show the HTTP/2 preface or an HTTP/1 request.
        case awaitingPreface
        /// An HTTP/2 session serves the connection.
        case serving
        /// HTTP/1.1 behind TLS, bridged to the loop's libmicrohttpd.
        case bridged
        /// Our side is shut (after an HTTP/1.1 answer or the session's GOAWAY): what the peer still sends is read
        /// and dropped until it closes, so unread input does not turn our FIN into a reset.
        case shutOut
        /// The socket went to libmicrohttpd, which closes it and gives back its slot.
        case handedOff
        case closed
    }

    private(set) var phase: Phase
    /// The server drains: no new streams; set in any phase, applied once a session exists.
    private(set) var draining = false
    /// Set once the connection is ending: the monotonic time it closes at the latest, written or not (0: not ending).
    private(set) var lingerUntil: UInt64 = 0
    /// How long an ending connection waits for its last bytes to go out and for the peer to close.
    static let lingerNanoseconds: UInt64 = 2_000_000_000

    init(tls: Bool) { phase = tls ? .handshaking : .awaitingPreface }

    /// Nothing more happens on the socket: closed here, or handed to libmicrohttpd.
    var isOver: Bool { phase == .closed || phase == .handedOff }
    /// Our side is shut: input is dropped.
    var isShutOut: Bool { phase == .shutOut }
    /// The session may take input and write output.
    var isServing: Bool { phase == .serving }

    // MARK: Starting

    /// What a finished TLS handshake leads to.
    enum AfterHandshake: Equatable, Sendable {
        case startSession
        case startBridge
        /// ALPN named a protocol this port does not speak.
        case close
    }

    /// The handshake is done with `alpn`; `servesHTTP1`: the port has an HTTP service for HTTP/1.1 clients.
    mutating func handshakeDone(alpn: String?, servesHTTP1: Bool) -> AfterHandshake {
        guard phase == .handshaking else { return .close }
        if alpn != "h2", servesHTTP1 {
            phase = .bridged
            return .startBridge
        }
        // The caller closes (`close`), which ends the phase.
        if let alpn, alpn != "h2" { return .close }
        phase = .serving
        return .startSession
    }

    /// What the first bytes of an h2c connection are.
    enum Preface: Equatable, Sendable {
        /// A prefix of the preface: wait for the rest.
        case incomplete
        /// The preface, or bytes that are neither it nor a request line (nghttp2 answers those with GOAWAY).
        case http2
        /// Starts like an HTTP/1.x request line (an upper-case method token).
        case http1
    }

    /// Classifies the `head` bytes peeked at (at most the preface's length).
    static func classify(_ head: ArraySlice<UInt8>) -> Preface {
        if head.elementsEqual(preface.prefix(head.count)) { return head.count < preface.count ? .incomplete : .http2 }
        if let first = head.first, first >= UInt8(ascii: "A"), first <= UInt8(ascii: "Z") { return .http1 }
        return .http2
    }

    /// What the connection does with the first bytes.
    enum AfterPreface: Equatable, Sendable {
        case wait
        case startSession
        /// To the loop's libmicrohttpd, bytes unread.
        case handOff
        /// One HTTP/1.1 refusal (no HTTP service on this port), then our side is shut.
        case answerHTTP1
    }

    /// The first bytes were peeked at: `preface` as `classify` found it.
    mutating func prefaceRead(_ preface: Preface, servesHTTP1: Bool, now: UInt64) -> AfterPreface {
        guard phase == .awaitingPreface else { return .wait }
        switch preface {
        case .incomplete: return .wait
        case .http2:
            phase = .serving
            return .startSession
        case .http1 where servesHTTP1:
            phase = .handedOff
            return .handOff
        case .http1:
            phase = .shutOut
            beginLinger(now: now)
            return .answerHTTP1
        }
    }

    // MARK: Ending

    /// Starts the linger clock (once): the connection closes at `now` + linger at the latest.
    mutating func beginLinger(now: UInt64) {
        if lingerUntil == 0 { lingerUntil = now &+ Self.lingerNanoseconds }
    }

    /// What `terminate` (a GOAWAY with a code) does.
    enum AfterTerminate: Equatable, Sendable {
        /// Already ending or over.
        case none
        /// Queue the GOAWAY after what waits, then flush.
        case goAway
        /// No session to say it: close now.
        case close
    }

    mutating func terminate(now: UInt64) -> AfterTerminate {
        guard !isOver, phase != .shutOut else { return .none }
        beginLinger(now: now)
        // No session to say it (bridged, or not started): the caller closes (`close`).
        return phase == .serving ? .goAway : .close
    }

    /// The session is finished and everything it had is written: shut our side. False when there is nothing to do.
    mutating func outputShut(now: UInt64) -> Bool {
        guard phase == .serving else { return false }
        phase = .shutOut
        beginLinger(now: now)
        return true
    }

    /// The connection closes (peer closed, a failure, the linger is over). False when it already was over.
    mutating func close() -> Bool {
        guard !isOver else { return false }
        phase = .closed
        return true
    }

    /// The server drains. True when a session exists to be told now (later sessions are told at their start).
    mutating func beginDrain() -> Bool {
        draining = true
        return phase == .serving
    }

    // MARK: The sweep

    /// What the once-a-second sweep needs to know of the connection (all times monotonic nanoseconds).
    struct Facts: Equatable, Sendable {
        var now: UInt64
        var acceptedAt: UInt64
        var lastActivity: UInt64
        var lastWriteProgress: UInt64
        /// Output waits: in our buffer, or answers nghttp2 holds behind a closed flow-control window.
        var outputWaiting = false
        /// A call's header block trickled in past the header timeout (slowloris over HTTP/2).
        var callsExpired = false
        /// No stream is open.
        var sessionIdle = true
    }

    /// The sweep's limits (the server's configuration).
    struct Limits: Equatable, Sendable {
        var handshakeTimeout: UInt64
        var writeStall: UInt64
        var idleTimeout: UInt64
    }

    enum SweepAction: Equatable, Sendable {
        case none
        case close
        /// GOAWAY ENHANCE_YOUR_CALM: a trickling header block, or a peer that stopped reading.
        case calm
        /// GOAWAY NO_ERROR: idle too long.
        case idle
    }

    func sweep(_ f: Facts, _ limits: Limits) -> SweepAction {
        if isOver { return .none }
        if phase == .handshaking || phase == .awaitingPreface, lingerUntil == 0, f.now &- f.acceptedAt > limits.handshakeTimeout {
            // A TLS handshake or a preface that does not come (a slow or silent client) holds no slot for long.
            return .close
        }
        if lingerUntil != 0 { return f.now >= lingerUntil ? .close : .none }
        guard phase == .serving || phase == .bridged else { return .none }
        if f.callsExpired { return .calm }
        // Output waits and the peer has taken nothing for too long: it never reads. Drop it; its memory goes with it.
        if f.outputWaiting, f.now &- f.lastWriteProgress > limits.writeStall { return .calm }
        if f.sessionIdle, !draining, f.now &- f.lastActivity > limits.idleTimeout { return .idle }
        return .none
    }
}

/// The HTTP/2 connection preface a client sends first.
let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
