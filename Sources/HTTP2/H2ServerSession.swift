import CNGHTTP2
import RPC

/// One nghttp2 server session and its streams: bytes in (`receive`), bytes out (`nextOutput`), calls
/// routed and answered in between. It owns no socket: `ServerConnection` moves its bytes over TCP or TLS,
/// the in-memory transport tests move them to an nghttp2 client session in memory. Each stream's life is a
/// `StreamState`; this type turns nghttp2's callbacks into its events and carries out its actions. The gRPC
/// rules (verdict, deadline, status fields) are pure (`CallRules`, `GRPCStatusFields`); the session's
/// extensions hold the glue by concern: `+Headers`, `+Calls`, `+Answers`, `+Exchange`, `+Callbacks`.
///
/// Confined to its host's thread; handlers on other threads answer through `deliver` / stream writers,
/// which hop back with `host.execute`.
package final class H2ServerSession: ResponseSink, @unchecked Sendable {
    // Sendable: every field is touched on the host's thread only (checked in every build where
    // the session is entered); other threads only pass it to `host.execute`.
    let host: any SessionHost
    let shared: ServerShared
    let peer: String
    let peerSubject: String?
    /// The owner that writes the output; it outlives the session (it holds the only reference).
    unowned(unsafe) let output: any SessionOutput
    private(set) var session: OpaquePointer?
    // The state below is internal, not private, only for this type's extensions (H2ServerSession+*.swift).
    var streams = StreamTable()
    /// The stream the last lookup found, unretained (`streams` keeps it; nil once it leaves the table):
    /// nghttp2 calls back for one stream many times in a row (begin, end of headers, DATA, the answer), so
    /// most lookups skip the table.
    var lastStream: Unmanaged<ServerStream>?
    /// The request header block being read (nghttp2 delivers a block's fields in a row: HEADERS and its
    /// CONTINUATIONs are never interleaved with another stream's frames, RFC 9113 6.10) and its stream id
    /// (0: none). Kept here, not on the stream, so that a field costs no stream lookup.
    var reading = RequestHead()
    var readingStreamID: Int32 = 0
    /// Closed unary streams kept for the next ones (no allocation per call once warm).
    var spareStreams: [ServerStream] = []
    static let maxSpareStreams = 64
    /// The route of the last `:path` routed on this session (one method called again and again).
    var routedPath: String?
    var routed: RoutedMethod?
    /// Request bytes held in unfinished messages over all streams (`maxConnectionBufferBytes`).
    var bufferedRequestBytes = 0
    /// The last `:path` seen and its String: a connection usually calls one method again and again.
    var lastPath: [UInt8] = []
    var lastPathString = ""
    /// The metadata fields seen last on this session, as bytes and as the Strings handed to calls.
    var recentMetadata: [(nameBytes: [UInt8], valueBytes: [UInt8], name: String, value: String, varies: Bool)] = []
    /// The owner was told that output waits and has not asked for it since (`act` tells it once per flush).
    private var outputRequested = false
    private(set) var draining = false
    private(set) var closed = false
    /// The block cache nghttp2 allocates from; freed after the session.
    var pool: UnsafeMutablePointer<billing_h2_pool>?
    /// Blocks nghttp2 took from the session's cache and from malloc, and the bytes cached now (tests).
    var allocatorCounts: (reused: UInt64, fresh: UInt64, cached: Int) {
        pool.map { ($0.pointee.reused, $0.pointee.fresh, billing_h2_pool_cached($0)) } ?? (0, 0, 0)
    }

    package init(host: any SessionHost, shared: ServerShared, peer: String, peerSubject: String?, output: any SessionOutput) {
        self.host = host
        self.shared = shared
        self.peer = peer
        self.peerSubject = peerSubject
        self.output = output
        // nghttp2's allocations go through this session's block cache (shim.h: billing_h2_pool).
        pool = billing_h2_pool_new()
        let config = shared.configuration
        session = NGHTTP2Setup.makeSession(
            .server, callbacks: Self.nghttp2Callbacks, options: Self.nghttp2Options,
            settings: .init(maxConcurrentStreams: UInt32(config.maxConcurrentStreams), maxHeaderListBytes: UInt32(config.maxHeaderListBytes)),
            userData: Unmanaged.passUnretained(self).toOpaque(), pool: pool)
    }

    /// The server's nghttp2 options.
    static let nghttp2Options = NGHTTP2Setup.Options(
        // nghttp2 1.52 resets any stream that carries a connection-specific field (`connection: keep-alive`,
        // which some HTTP stacks add); grpc-go skips the field and answers. Its HTTP checks are all or nothing,
        // so they are off and `RequestFieldCheck` applies RFC 9113 8.2-8.3 itself, skipping only those fields.
        noHTTPMessaging: true,
        // Like grpc-go: a value with leading or trailing whitespace (grpcio sends `authorization: Bearer `
        // for an empty token) is read, trimmed, and answered, not a stream error.
        noLeadingAndTrailingWhitespaceValidation: true,
        // Closed streams are kept only for RFC 7540 priorities, which RFC 9113 deprecated and gRPC never sends:
        // without this, nghttp2 holds up to max-concurrent-streams closed streams per connection. The one
        // visible difference: DATA, trailers or HEADERS for a stream the client itself already ended are
        // ignored (RFC 9113 5.1 allows it) where nghttp2 would otherwise end the connection with STREAM_CLOSED.
        noClosedStreams: true)

    deinit {
        if let session { nghttp2_session_del(session) }
        billing_h2_pool_free(pool)
    }

    /// Stops the process off the host's thread, in every build. Checked where the session is entered
    /// (bytes in and out, answers, close); nghttp2's callbacks run only inside those entries.
    @inline(__always)
    func checkHost(file: StaticString = #fileID, line: UInt = #line) {
        host.assertInHost("H2ServerSession", file: file, line: line)
    }

    // MARK: Bytes in and out

    /// Feeds received bytes to nghttp2 (its callbacks run inside). Nil, or the GOAWAY code of a fatal error
    /// (a flood, a protocol error nghttp2 does not answer itself): the owner terminates the session with it.
    /// `receive`, then `terminate` with its error when it failed (for a transport that knows no nghttp2 types).
    package func receiveOrTerminate(_ bytes: UnsafeRawBufferPointer) {
        if let code = receive(bytes) { terminate(code) }
    }

    func receive(_ bytes: UnsafeRawBufferPointer) -> nghttp2_error_code? {
        checkHost()
        guard let session, let base = bytes.baseAddress else { return nil }
        let rv = nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), bytes.count)
        return rv < 0 ? Self.goawayCode(recvError: rv) : nil
    }

    /// The GOAWAY code for a fatal error of `nghttp2_session_mem_recv`.
    static func goawayCode(recvError rv: Int) -> nghttp2_error_code {
        switch Int32(rv) {
        case NGHTTP2_ERR_FLOODED.rawValue, NGHTTP2_ERR_TOO_MANY_CONTINUATIONS.rawValue: NGHTTP2_ENHANCE_YOUR_CALM
        case NGHTTP2_ERR_CALLBACK_FAILURE.rawValue, NGHTTP2_ERR_NOMEM.rawValue: NGHTTP2_INTERNAL_ERROR
        default: NGHTTP2_PROTOCOL_ERROR
        }
    }

    package enum Output {
        /// Bytes to write, valid until the next call into the session.
        case bytes(UnsafeRawBufferPointer)
        /// Nothing queued now.
        case idle
        /// nghttp2 failed: close the connection.
        case failed
    }

    /// The next chunk of frames nghttp2 has queued.
    package func nextOutput() -> Output {
        checkHost()
        return nextOutputOnHost()
    }

    /// `nextOutput` for a caller that has checked that it runs on the host (a flush asks for several chunks
    /// in a row: a check per chunk was about 3 of the 4.4 confinement checks a call made).
    @inline(__always)
    func nextOutputOnHost() -> Output {
        outputRequested = false
        guard let session else { return .idle }
        var data: UnsafePointer<UInt8>?
        let n = nghttp2_session_mem_send(session, &data)
        if n < 0 { return .failed }
        if n == 0 { return .idle }
        return .bytes(UnsafeRawBufferPointer(start: data, count: n))
    }

    /// True once the session wants neither to read nor to write (after a GOAWAY went out): the owner
    /// shuts its side of the connection.
    package var isFinished: Bool {
        guard let session else { return true }
        return nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0
    }

    /// Answers queued behind a closed flow-control window (a peer that does not read).
    var holdsAnswers: Bool { streams.streams.contains { $0.state.isAnswered && $0.bodyOffset < $0.body.count } }

    /// No stream is open.
    var isIdle: Bool { streams.isEmpty }

    /// Ends the session with a GOAWAY carrying `code`, queued after what already waits.
    func terminate(_ code: nghttp2_error_code) {
        guard let session else { return }
        nghttp2_session_terminate_session(session, code.rawValue)
    }

    /// Tells the client to stop opening streams; answers in flight still complete. One round trip later,
    /// the final GOAWAY with the last stream really taken.
    func beginDrain() {
        guard !draining else { return }
        draining = true
        guard let session, !closed else { return }
        nghttp2_submit_shutdown_notice(session)
        output.outputPending()
        _ = host.schedule(afterNanoseconds: 500_000_000) { [self] in
            guard let session = self.session, !self.closed else { return }
            nghttp2_submit_goaway(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue),
                nghttp2_session_get_last_proc_stream_id(session), UInt32(NGHTTP2_NO_ERROR.rawValue), nil, 0)
            self.output.outputPending()
        }
    }

    /// Ends every call still open (the connection is going) and frees nghttp2.
    package func close() {
        checkHost()
        guard !closed else { return }
        closed = true
        for stream in streams.streams { abandon(stream) }
        streams.removeAll()
        lastStream = nil
        // Spare streams keep their responders, which hold this session: dropped here, the cycle ends.
        spareStreams.removeAll()
        if let session { nghttp2_session_del(session) }
        session = nil
        billing_h2_pool_free(pool)
        pool = nil
    }

    /// Once a second: calls past the server's cap before dispatch (or unary calls running under the cap alone) end DEADLINE_EXCEEDED.
    /// A session with no open stream also gives nghttp2's cached blocks back (an idle connection keeps none).
    /// Returns true when a stream's header block has been arriving for longer than `headerTimeoutNanoseconds`
    /// (a client trickling HEADERS or CONTINUATION): the connection then ends with GOAWAY.
    @discardableResult
    func expireCalls(now: UInt64, headerTimeoutNanoseconds: UInt64 = .max) -> Bool {
        if streams.isEmpty {
            billing_h2_pool_trim(pool)
            return false
        }
        var slowHeaders = false
        for stream in streams.streams where stream.state.isIdle {
            // Stamped by the sweep that first sees the block unfinished (no clock read per call).
            if stream.headersSeenAt == 0 {
                stream.headersSeenAt = now
            } else if now &- stream.headersSeenAt > headerTimeoutNanoseconds {
                slowHeaders = true
            }
        }
        // Streaming calls end through their writer; the cap applies to them only before dispatch (`endsAtCap`).
        for stream in streams.streams where stream.capDeadline != 0 && now >= stream.capDeadline && stream.state.endsAtCap {
            stream.cancellation?.cancel()
            act(stream, stream.state.deadline())
        }
        return slowHeaders
    }

    // MARK: Carrying out a stream's actions

    @inline(__always)
    func act(_ stream: ServerStream, _ action: StreamState.Action) {
        switch action {
        case .none: return
        case .reset:
            stream.head.metadata = []
            if let session {
                nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, UInt32(NGHTTP2_PROTOCOL_ERROR.rawValue))
            }
        case .fail(let error):
            if stream.state.isExchange {
                releaseBuffer(stream)
                stream.response = HTTPResponse.answering(error, dispatched: stream.state.wasDispatched)
                submitResponse(stream)
                break
            }
            if let timer = stream.timerID {
                host.cancelTimer(timer)
                stream.timerID = nil
            }
            if stream.state.wasDispatched { stream.cancellation?.cancel() }
            releaseBuffer(stream)
            submitStatus(stream, error)
        case .respondHTTP(let status, let message):
            submitHTTP(stream, status: status, message: message)
        case .submitResponse:
            releaseBuffer(stream)
            submitResponse(stream)
        case .dispatch:
            if stream.state.isExchange {
                dispatchExchange(stream)
            } else {
                dispatch(stream)
            }
            return
        case .startBidi(let ended):
            startBidi(stream)
            if ended { actNested(stream, stream.state.requestEnd(atMessageBoundary: true)) }
            return
        case .endOfInput:
            stream.receiver?.onEnd()
            return
        case .submitHeaders:
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readBodyCallback)
            nghttp2_submit_response(session, stream.id, HeaderList.ok.nva, HeaderList.ok.count, &provider)
        case .resumeData:
            nghttp2_session_resume_data(session, stream.id)
        case .record(let error, let resume):
            if let timer = stream.timerID {
                host.cancelTimer(timer)
                stream.timerID = nil
            }
            if error != nil { stream.cancellation?.cancel() }
            releaseBuffer(stream)
            shared.finished(stream: stream, code: error?.code ?? .ok, reason: error?.reason, peer: peer, peerSubject: peerSubject)
            if resume { nghttp2_session_resume_data(session, stream.id) }
        case .cancel:
            if stream.state.isExchange { return }  // its completion finds no stream
            stream.cancellation?.cancel()
            shared.finished(stream: stream, code: .cancelled, reason: nil, peer: peer)
            return
        case .abort(let error):
            if let timer = stream.timerID {
                host.cancelTimer(timer)
                stream.timerID = nil
            }
            stream.cancellation?.cancel()
            releaseBuffer(stream)
            shared.finished(stream: stream, code: error.code, reason: error.reason, peer: peer, peerSubject: peerSubject)
            // The queued DATA was dropped (`streamEvent`); the trailers go ahead of whatever nghttp2 still holds,
            // and END_STREAM closes the stream (its DATA source with it).
            if let session { submitTrailers(stream, error, session: session) }
        }
        // Once until the owner's next flush asks for output (a batch of calls answered in one read told the
        // owner once per call, each a call through an existential and a reference count).
        if !outputRequested {
            outputRequested = true
            output.outputPending()
        }
    }

    /// `act` from inside `act` (kept out of line so that `act` itself can be inlined at its call sites).
    @inline(never)
    private func actNested(_ stream: ServerStream, _ action: StreamState.Action) { act(stream, action) }
}
