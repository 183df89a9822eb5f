import CNGHTTP2
import Glibc
import ProtoWire
import RPC
import Synchronization

/// One nghttp2 server session and its streams: bytes in (`receive`), bytes out (`nextOutput`), calls
/// routed and answered in between. It owns no socket: `ServerConnection` moves its bytes over TCP or TLS,
/// the in-memory transport tests move them to an nghttp2 client session in memory. Each stream's life is a
/// `StreamState`; this type turns nghttp2's callbacks into its events and carries out its actions.
///
/// Confined to its host's thread; handlers on other threads answer through `deliver` / stream writers,
/// which hop back with `host.execute`.
final class H2ServerSession: ResponseSink, @unchecked Sendable {
    // Sendable: every field is touched on the host's thread only (checked in debug and test builds where
    // the session is entered); other threads only pass it to `host.execute`.
    let host: any SessionHost
    let shared: ServerShared
    let peer: String
    let peerSubject: String?
    /// The owner that writes the output; it outlives the session (it holds the only reference).
    unowned(unsafe) let output: any SessionOutput
    private(set) var session: OpaquePointer?
    private var streams = StreamTable()
    /// The stream the last lookup found: nghttp2 calls back for one stream many times in a row
    /// (begin, each header, end of headers, the answer), so most lookups skip the dictionary's hashing.
    private var lastStream: ServerStream?
    /// Closed unary streams kept for the next ones (no allocation per call once warm).
    private var spareStreams: [ServerStream] = []
    static let maxSpareStreams = 64
    /// The route of the last `:path` routed on this session (one method called again and again).
    private var routedPath: String?
    private var routed: Router.Route?
    /// Request bytes held in unfinished messages over all streams (`maxConnectionBufferBytes`).
    private var bufferedRequestBytes = 0
    /// The last `:path` seen and its String: a connection usually calls one method again and again.
    private var lastPath: [UInt8] = []
    private var lastPathString = ""
    /// The metadata fields seen last on this session, as bytes and as the Strings handed to calls.
    private var recentMetadata: [(nameBytes: [UInt8], valueBytes: [UInt8], name: String, value: String, varies: Bool)] = []
    private(set) var draining = false
    private(set) var closed = false
    /// The block cache nghttp2 allocates from; freed after the session.
    private var pool: UnsafeMutablePointer<billing_h2_pool>?
    /// Blocks nghttp2 took from the session's cache and from malloc, and the bytes cached now (tests).
    var allocatorCounts: (reused: UInt64, fresh: UInt64, cached: Int) {
        pool.map { ($0.pointee.reused, $0.pointee.fresh, billing_h2_pool_cached($0)) } ?? (0, 0, 0)
    }

    init(host: any SessionHost, shared: ServerShared, peer: String, peerSubject: String?, output: any SessionOutput) {
        self.host = host
        self.shared = shared
        self.peer = peer
        self.peerSubject = peerSubject
        self.output = output
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, onBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onFrameRecv)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onDataChunk)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose)
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, onFrameSend)
        var option: OpaquePointer?
        nghttp2_option_new(&option)
        defer { nghttp2_option_del(option) }
        // Like grpc-go: a value with leading or trailing whitespace (grpcio sends `authorization: Bearer `
        // for an empty token) is read, trimmed, and answered, not a stream error.
        nghttp2_option_set_no_rfc9113_leading_and_trailing_ws_validation(option, 1)
        // nghttp2 1.52 resets any stream that carries a connection-specific field (`connection: keep-alive`,
        // which some HTTP stacks add); grpc-go skips the field and answers. Its HTTP checks are all or nothing,
        // so they are off and `RequestFieldCheck` applies RFC 9113 8.2-8.3 itself, skipping only those fields.
        nghttp2_option_set_no_http_messaging(option, 1)
        // Closed streams are kept only for RFC 7540 priorities, which RFC 9113 deprecated and gRPC never sends:
        // without this, nghttp2 holds up to max-concurrent-streams closed streams per connection. The one
        // visible difference: DATA, trailers or HEADERS for a stream the client itself already ended are
        // ignored (RFC 9113 5.1 allows it) where nghttp2 would otherwise end the connection with STREAM_CLOSED.
        nghttp2_option_set_no_closed_streams(option, 1)
        var s: OpaquePointer?
        // nghttp2's allocations go through this session's block cache (shim.h: billing_h2_pool).
        pool = billing_h2_pool_new()
        if let pool {
            nghttp2_session_server_new3(&s, callbacks, Unmanaged.passUnretained(self).toOpaque(), option, &pool.pointee.mem)
        } else {
            nghttp2_session_server_new2(&s, callbacks, Unmanaged.passUnretained(self).toOpaque(), option)
        }
        session = s
        let config = shared.configuration
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: UInt32(config.maxConcurrentStreams)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: 1 << 20),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: UInt32(config.maxHeaderListBytes)),
        ]
        nghttp2_submit_settings(s, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        nghttp2_session_set_local_window_size(s, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, 16 << 20)
    }

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

    enum Output {
        /// Bytes to write, valid until the next call into the session.
        case bytes(UnsafeRawBufferPointer)
        /// Nothing queued now.
        case idle
        /// nghttp2 failed: close the connection.
        case failed
    }

    /// The next chunk of frames nghttp2 has queued.
    func nextOutput() -> Output {
        checkHost()
        guard let session else { return .idle }
        var data: UnsafePointer<UInt8>?
        let n = nghttp2_session_mem_send(session, &data)
        if n < 0 { return .failed }
        if n == 0 { return .idle }
        return .bytes(UnsafeRawBufferPointer(start: data, count: n))
    }

    /// True once the session wants neither to read nor to write (after a GOAWAY went out): the owner
    /// shuts its side of the connection.
    var isFinished: Bool {
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
    func close() {
        checkHost()
        guard !closed else { return }
        closed = true
        for stream in streams.streams { abandon(stream) }
        streams.removeAll()
        lastStream = nil
        if let session { nghttp2_session_del(session) }
        session = nil
        billing_h2_pool_free(pool)
        pool = nil
    }

    /// Once a second: calls past the server's cap before dispatch (or unary calls running under the cap alone) end DEADLINE_EXCEEDED.
    /// A session with no open stream also gives nghttp2's cached blocks back (an idle connection keeps none).
    func expireCalls(now: UInt64) {
        if streams.isEmpty {
            billing_h2_pool_trim(pool)
            return
        }
        for stream in streams.streams where stream.capDeadline != 0 && now >= stream.capDeadline && !stream.state.isAnswered {
            // Streaming calls end through their writer; the cap applies to them only before dispatch.
            if stream.state.wasDispatched && stream.state.isStreaming { continue }
            stream.cancellation?.cancel()
            act(stream, stream.state.deadline())
        }
    }

    // MARK: Carrying out a stream's actions

    @inline(__always)
    func act(_ stream: ServerStream, _ action: StreamState.Action) {
        switch action {
        case .none: return
        case .reset:
            stream.metadata = []
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
        output.outputPending()
    }

    /// `act` from inside `act` (kept out of line so that `act` itself can be inlined at its call sites).
    @inline(never)
    private func actNested(_ stream: ServerStream, _ action: StreamState.Action) { act(stream, action) }

    /// A trailers-only answer with grpc-status, grpc-message and, for service errors, ErrorInfo.
    private func submitStatus(_ stream: ServerStream, _ error: RPCError) {
        guard let session else { return }
        var fields: [(String, String)] = [
            (":status", "200"), ("content-type", "application/grpc"),
            ("grpc-status", String(error.code.rawValue)),
            ("grpc-message", GRPCHeaders.grpcMessage(error.message)),
        ]
        if let rich = error.richStatus {
            fields.append(("grpc-status-details-bin", Base64.encode(rich.encoded())))
        }
        let headers = HeaderList(fields)
        nghttp2_submit_response(session, stream.id, headers.nva, headers.count, nil)
        if stream.startedAt == 0 { stream.startedAt = host.now() }
        shared.finished(stream: stream, code: error.code, reason: error.reason, peer: peer, peerSubject: peerSubject)
    }

    /// A plain HTTP error for requests that are not gRPC at all (wrong method or content type).
    private func submitHTTP(_ stream: ServerStream, status: String, message: String) {
        guard let session else { return }
        let headers = HeaderList([
            (":status", status), ("content-type", "text/plain"),
            ("grpc-status", String(StatusCode.internal.rawValue)), ("grpc-message", GRPCHeaders.grpcMessage(message)),
        ])
        nghttp2_submit_response(session, stream.id, headers.nva, headers.count, nil)
    }

    /// Trailers for the end of a stream that already sent headers.
    private func submitTrailers(_ stream: ServerStream, _ error: RPCError?, session: OpaquePointer) {
        guard let error else {
            nghttp2_submit_trailer(session, stream.id, HeaderList.okTrailers.nva, HeaderList.okTrailers.count)
            return
        }
        var fields: [(String, String)] = [
            ("grpc-status", String(error.code.rawValue)),
            ("grpc-message", GRPCHeaders.grpcMessage(error.message)),
        ]
        if let rich = error.richStatus { fields.append(("grpc-status-details-bin", Base64.encode(rich.encoded()))) }
        let trailers = HeaderList(fields)
        nghttp2_submit_trailer(session, stream.id, trailers.nva, trailers.count)
    }

    private func abandon(_ stream: ServerStream) {
        releaseBuffer(stream)
        if let timer = stream.timerID {
            host.cancelTimer(timer)
            stream.timerID = nil
        }
        act(stream, stream.state.closed())
    }

    // MARK: nghttp2 events (called from the file-private callbacks)

    fileprivate func beginHeaders(streamID: Int32) {
        pool?.pointee.caching = 1
        let stream: ServerStream
        if let spare = spareStreams.popLast() {
            spare.reassign(id: streamID)  // cleared when it closed
            stream = spare
        } else {
            stream = ServerStream(id: streamID, maxMessageBytes: shared.configuration.maxMessageBytes)
        }
        streams.insert(stream, id: streamID)
        lastStream = stream
    }

    /// The open stream `id`, or nil.
    @inline(__always)
    func stream(_ id: Int32) -> ServerStream? {
        if let last = lastStream, last.id == id { return last }
        let found = streams[id: id]
        if found != nil { lastStream = found }
        return found
    }

    fileprivate func header(
        streamID: Int32, name: UnsafeBufferPointer<UInt8>, value rawValue: UnsafeBufferPointer<UInt8>,
        trailer: Bool
    ) {
        guard let stream = stream(streamID), stream.state.readsFields else { return }
        let kind = FieldName.of(name)
        switch RequestFieldCheck.check(name: name, kind: kind, value: rawValue, trailer: trailer, stream: stream) {
        case .use: break
        case .skip: return
        case .malformed:
            act(stream, stream.state.malformed())
            return
        }
        if trailer { return }  // gRPC requests carry no trailers worth reading
        stream.headerBytes += name.count + rawValue.count + 32
        if stream.headerBytes > shared.configuration.maxHeaderListBytes {
            // Answered with RESOURCE_EXHAUSTED once the block ends; what was kept is dropped now.
            if !stream.headerListTooLarge {
                stream.headerListTooLarge = true
                stream.metadata = []
            }
            return
        }
        if stream.headerListTooLarge { return }
        // Most fields are transport details no handler reads: their values are never copied.
        switch kind {
        case .path:
            let value = trimmed(rawValue)
            if !same(value, lastPath) {
                lastPath = Array(value)
                lastPathString = String(decoding: value, as: UTF8.self)
            }
            stream.path = lastPathString
        case .method:
            let value = trimmed(rawValue)
            stream.method = ByteLiteral.equal(value, "POST") ? "POST" : String(decoding: value, as: UTF8.self)
        case .contentType:
            let value = trimmed(rawValue)
            stream.contentType = ByteLiteral.equal(value, "application/grpc") ? "application/grpc" : String(decoding: value, as: UTF8.self)
        case .grpcTimeout:
            stream.timeout = String(decoding: trimmed(rawValue), as: UTF8.self)
        case .otherPseudo, .unread, .connectionSpecific:
            return
        case .other:
            stream.metadata.append(metadataStrings(name, trimmed(rawValue)))
        }
    }

    /// The Strings of a metadata field. A connection's calls repeat the same few fields (content-length,
    /// authorization, custom metadata): the first 8 names are kept with their value and reused byte for
    /// byte; a name whose value changes keeps only its name String (no copy of values that differ per call).
    private func metadataStrings(_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) -> (name: String, value: String) {
        for i in recentMetadata.indices where same(name, recentMetadata[i].nameBytes) {
            if !recentMetadata[i].varies {
                if same(value, recentMetadata[i].valueBytes) { return (recentMetadata[i].name, recentMetadata[i].value) }
                recentMetadata[i].varies = true
                recentMetadata[i].valueBytes = []
                recentMetadata[i].value = ""
            }
            return (recentMetadata[i].name, String(decoding: value, as: UTF8.self))
        }
        let field = (name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self))
        if recentMetadata.count < 8 && name.count + value.count <= 256 {
            recentMetadata.append((Array(name), Array(value), field.name, field.value, false))
        }
        return field
    }

    fileprivate func trailersWithoutEnd(streamID: Int32) {
        if let stream = stream(streamID) { act(stream, stream.state.malformed()) }
    }

    /// The request's headers are complete: judge them, route them, and dispatch if the body is empty.
    fileprivate func headersComplete(streamID: Int32, endStream: Bool) {
        guard let stream = stream(streamID), stream.state.isIdle else { return }
        stream.startedAt = host.now()
        // A request body that never ends must not hold the stream forever: the sweep ends it at the cap.
        let cap = shared.configuration.maxDeadlineNanoseconds
        if cap > 0 { stream.capDeadline = stream.startedAt &+ UInt64(cap) }
        act(stream, stream.state.headersEnded(verdict(stream), endStream: endStream))
    }

    /// What a complete header block means: RFC 9113 first, then HTTP, drain, authentication and routing.
    private func verdict(_ stream: ServerStream) -> StreamState.Verdict {
        guard stream.pseudoFields & PseudoField.required == PseudoField.required else { return .malformed }
        if let http = shared.configuration.http, stream.method != "POST" || !GRPCHeaders.isGRPCContentType(stream.contentType) {
            return exchangeVerdict(stream, http)
        }
        if stream.headerListTooLarge {
            let limit = shared.configuration.maxHeaderListBytes
            return .refuse(RPCError(code: .resourceExhausted, message: "request headers exceed the limit of \(limit) bytes"))
        }
        if stream.method != "POST" { return .notGRPC(status: "405", message: "gRPC calls use POST") }
        guard GRPCHeaders.isGRPCContentType(stream.contentType) else {
            return .notGRPC(status: "415", message: "content-type must be application/grpc")
        }
        if draining { return .refuse(.shuttingDown) }
        let router = shared.router
        let path = stream.path
        let route: Router.Route?
        if let routedPath, routedPath == path {
            route = routed
        } else {
            route = router.resolve(path: path)
            routedPath = path
            routed = route
        }
        stream.knownMethod = route != nil
        if router.authenticates {
            // Before anything per method, unknown methods included: their names are the peer's to choose.
            let cancellation = stream.cancellation ?? Cancellation(keepsNotes: shared.configuration.keepsCallNotes)
            stream.cancellation = cancellation
            let method = path.hasPrefix("/") ? String(path.dropFirst()) : path
            let context = CallContext(
                method: method, metadata: stream.metadata, peer: peer,
                cancellation: cancellation, peerSubject: peerSubject)
            if let refusal = router.refusal(for: context) { return .refuse(refusal) }
        }
        guard let route else {
            let method = path.hasPrefix("/") ? String(path.dropFirst()) : path
            return .refuse(.unimplemented(method))
        }
        stream.route = route
        switch route {
        case .unary(let method, _):
            stream.methodName = method
            return .route(.unary)
        case .serverStreaming(let method, _):
            stream.methodName = method
            return .route(.serverStreaming)
        case .bidi(let method, _):
            stream.methodName = method
            stream.streamDeframer = MessageStreamDeframer(maxMessageBytes: shared.configuration.maxMessageBytes)
            return .route(.bidi)
        }
    }

    fileprivate func data(streamID: Int32, bytes: UnsafeRawBufferPointer) {
        guard let stream = stream(streamID), stream.state.takesData else { return }
        if stream.state.isExchange {
            exchangeData(stream, bytes)
            return
        }
        if case .bidi = stream.route {
            guard let receiver = stream.receiver else { return }
            if let error = stream.streamDeframer?.append(bytes, { receiver.onMessage($0) }) {
                act(stream, stream.state.fail(error))
                return
            }
            account(stream, stream.streamDeframer?.bufferedBytes ?? 0)
            return
        }
        if let error = stream.deframer.append(bytes) {
            act(stream, stream.state.fail(error))
            return
        }
        account(stream, stream.deframer.bufferedBytes)
    }

    /// Counts what `stream` holds now in the connection's budget; the stream that crosses it is refused.
    func account(_ stream: ServerStream, _ now: Int) {
        bufferedRequestBytes += now - stream.bufferedBytes
        stream.bufferedBytes = now
        let limit = shared.configuration.maxConnectionBufferBytes
        guard now > 0, bufferedRequestBytes > limit else { return }
        act(stream, stream.state.fail(.connectionBufferFull(limit: limit)))
        releaseBuffer(stream)
    }

    /// Drops the request bytes `stream` holds and takes them out of the budget.
    func releaseBuffer(_ stream: ServerStream) {
        if stream.bufferedBytes == 0 { return }
        if stream.state.isExchange {
            stream.requestBody = []
        } else if case .bidi = stream.route {
            stream.streamDeframer = nil
        } else {
            stream.deframer = MessageDeframer(maxMessageBytes: shared.configuration.maxMessageBytes)
        }
        bufferedRequestBytes -= stream.bufferedBytes
        stream.bufferedBytes = 0
    }

    fileprivate func requestEnded(streamID: Int32) {
        guard let stream = stream(streamID) else { return }
        act(stream, stream.state.requestEnd(atMessageBoundary: stream.streamDeframer?.isAtBoundary ?? true))
    }

    fileprivate func streamClosed(streamID: Int32) {
        if lastStream?.id == streamID { lastStream = nil }
        guard let stream = streams.remove(streamID) else { return }
        abandon(stream)
        if stream.reusable && spareStreams.count < Self.maxSpareStreams {
            // Drop what the call held now (answer, handler, cancellation), not when the stream is reused.
            stream.clear(maxMessageBytes: shared.configuration.maxMessageBytes)
            spareStreams.append(stream)
        }
        if draining && streams.isEmpty { output.outputPending() }
    }

    /// After our END_STREAM, a client still sending learns it may stop.
    fileprivate func sentEndStream(streamID: Int32) {
        guard let stream = stream(streamID), !stream.state.requestEnded, let session else { return }
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, UInt32(NGHTTP2_NO_ERROR.rawValue))
    }

    fileprivate func readBody(
        streamID: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int,
        flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        guard let stream = stream(streamID), let session else {
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        let n = min(length, stream.body.count - stream.bodyOffset)
        if n > 0 {
            stream.body.withUnsafeBytes { raw in
                UnsafeMutableRawPointer(buffer).copyMemory(from: raw.baseAddress! + stream.bodyOffset, byteCount: n)
            }
            stream.bodyOffset += n
            stream.writer?.consumed(n)
        }
        guard stream.bodyOffset == stream.body.count else { return n }
        switch stream.state.bodyDrained(tookBytes: n > 0) {
        case .more:
            return n
        case .wait:
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        case .trailers(let error):
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue | NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
            submitTrailers(stream, error, session: session)
            stream.body = []
            return n
        case .end:
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            stream.body = []
            return n
        }
    }

    // MARK: Calls

    /// A new call's context and cancellation (the authentication check may have made the cancellation).
    private func begin(_ stream: ServerStream, deadline: ContinuousClock.Instant?) -> CallContext {
        let cancellation = stream.cancellation ?? Cancellation(keepsNotes: shared.configuration.keepsCallNotes)
        stream.cancellation = cancellation
        stream.requestNumber = shared.nextRequestNumber()
        shared.callStarted()
        return CallContext(
            method: stream.methodName, metadata: stream.metadata, deadline: deadline, peer: peer,
            requestID: RequestID(prefix: shared.requestIDPrefix, number: stream.requestNumber),
            cancellation: cancellation, peerSubject: peerSubject)
    }

    /// A bidirectional call starts at its headers: the handler gets a writer and returns its receiver.
    private func startBidi(_ stream: ServerStream) {
        guard case .bidi(_, let handler) = stream.route else { return }
        stream.capDeadline = 0
        var deadline: ContinuousClock.Instant?
        let id = stream.id
        if !stream.timeout.isEmpty, let nanos = GRPCHeaders.parseTimeout(stream.timeout) {
            deadline = ContinuousClock.now.advanced(by: .nanoseconds(nanos))
            stream.timerID = host.schedule(afterNanoseconds: nanos) { [self] in
                guard let s = self.stream(id) else { return }
                s.timerID = nil
                self.act(s, s.state.deadline())
            }
        }
        let context = begin(stream, deadline: deadline)
        let writer = StreamWriter(cancellation: context.cancellation) { [self] event in
            if self.host.inHost {
                self.streamEvent(streamID: id, event)
            } else {
                self.host.execute { self.streamEvent(streamID: id, event) }
            }
        }
        stream.receiver = handler(context, writer)
    }

    private func dispatch(_ stream: ServerStream) {
        let message: [UInt8]
        switch stream.deframer.finish() {
        case .success(let m): message = m
        case .failure(let error):
            act(stream, stream.state.fail(error))
            return
        }
        // The handler owns the message now; the budget counts only what waits for more bytes.
        releaseBuffer(stream)
        let config = shared.configuration
        if shared.inFlight.load(ordering: .relaxed) >= config.maxInFlight {
            act(stream, stream.state.fail(.overloaded))
            return
        }
        var deadline: ContinuousClock.Instant?
        let cap: Int64? = config.maxDeadlineNanoseconds > 0 ? config.maxDeadlineNanoseconds : nil
        var asked: Int64?
        if !stream.timeout.isEmpty {
            guard let t = GRPCHeaders.parseTimeout(stream.timeout) else {
                act(stream, stream.state.fail(RPCError(code: .internal, message: "malformed grpc-timeout '\(stream.timeout)'")))
                return
            }
            asked = t
        }
        let streaming = stream.state.isStreaming
        stream.state.handedOver()
        stream.capDeadline = 0
        if streaming && asked == nil {
            // Long-lived streams (health Watch) have no server cap; the client's grpc-timeout still applies.
        } else if !streaming, let cap, asked.map({ $0 >= cap }) ?? true {
            // The cap alone: the once-a-second sweep enforces it, no timer per call.
            deadline = ContinuousClock.now.advanced(by: .nanoseconds(cap))
            stream.capDeadline = host.now() &+ UInt64(cap)
        } else if let nanos = asked {
            deadline = ContinuousClock.now.advanced(by: .nanoseconds(nanos))
            let id = stream.id
            stream.timerID = host.schedule(afterNanoseconds: nanos) { [self] in
                guard let s = self.stream(id) else { return }
                s.timerID = nil
                s.cancellation?.cancel()
                self.act(s, s.state.deadline())
            }
        }
        let context = begin(stream, deadline: deadline)
        let id = stream.id
        switch stream.route {
        case .serverStreaming(_, let handler):
            let writer = StreamWriter(cancellation: context.cancellation) { [self] event in
                self.host.execute { self.streamEvent(streamID: id, event) }
            }
            stream.writer = writer
            handler(context, message, writer)
        case .unary(_, let handler):
            handler(context, message, Responder(sink: self, id: id))
        case .bidi, nil:
            break
        }
    }

    /// A unary call's answer (`ResponseSink`), from any thread.
    func deliver(id: Int32, _ result: Result<[UInt8], RPCError>) {
        // Answered on this thread (Health, cached reads): submit now; nghttp2 allows it inside callbacks.
        if host.inHost {
            complete(streamID: id, result)
        } else {
            host.execute { self.complete(streamID: id, result) }
        }
    }

    private func complete(streamID: Int32, _ result: Result<[UInt8], RPCError>) {
        checkHost()
        guard !closed, let stream = stream(streamID) else { return }
        switch result {
        case .success(let framed):
            let action = stream.state.succeed()
            guard case .submitHeaders = action else { return }
            if let timer = stream.timerID {
                host.cancelTimer(timer)
                stream.timerID = nil
            }
            stream.body = framed
            stream.bodyOffset = 0
            act(stream, action)
            shared.finished(stream: stream, code: .ok, reason: nil, peer: peer, peerSubject: peerSubject)
        case .failure(let error):
            act(stream, stream.state.fail(error))
        }
    }

    /// A streaming call's message or end, on the host's thread.
    private func streamEvent(streamID: Int32, _ event: StreamWriter.Event) {
        guard !closed, let stream = stream(streamID) else { return }
        switch event {
        case .message(let framed):
            guard stream.state.sendsMessages else { return }
            if stream.bodyOffset == stream.body.count {
                stream.body = framed
                stream.bodyOffset = 0
            } else {
                stream.body.append(contentsOf: framed)
            }
            act(stream, stream.state.message())
        case .finish(let error):
            act(stream, stream.state.finish(error))
        case .abort(let error):
            let unsent = stream.body.count - stream.bodyOffset
            if unsent > 0 { stream.writer?.consumed(unsent) }
            stream.body = []
            stream.bodyOffset = 0
            act(stream, stream.state.abort(error))
        }
    }
}

/// Header names and values compared byte for byte on the hot path.
/// A field value without the spaces and tabs around it (RFC 9110 5.5: they are not part of the value).
private func trimmed(_ value: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
    guard let base = value.baseAddress else { return value }
    var start = 0, end = value.count
    while start < end, value[start] == 0x20 || value[start] == 0x09 { start += 1 }
    while end > start, value[end - 1] == 0x20 || value[end - 1] == 0x09 { end -= 1 }
    return UnsafeBufferPointer(start: base + start, count: end - start)
}

@inline(__always)
private func same(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: [UInt8]) -> Bool {
    guard bytes.count == literal.count else { return false }
    guard let base = bytes.baseAddress else { return literal.isEmpty }
    return literal.withUnsafeBufferPointer { memcmp(base, $0.baseAddress!, bytes.count) == 0 }
}

// MARK: nghttp2 callbacks: find the session through user_data, never throw into C.

/// Runs `body` with the session behind `userData` without retaining it: nghttp2 calls back only from inside
/// `nghttp2_session_mem_recv`/`send` on the session's own thread, while the session is alive and in use.
@inline(__always)
private func withSession<T>(_ userData: UnsafeMutableRawPointer?, _ body: (H2ServerSession) -> T) -> T {
    Unmanaged<H2ServerSession>.fromOpaque(userData!)._withUnsafeGuaranteedRef { session in body(session) }
}

private let onBeginHeaders: nghttp2_on_begin_headers_callback = { _, frame, userData in
    guard let frame else { return 0 }
    if frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) && frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
        withSession(userData) { $0.beginHeaders(streamID: frame.pointee.hd.stream_id) }
    }
    return 0
}

private let onHeader: nghttp2_on_header_callback = { _, frame, name, namelen, value, valuelen, _, userData in
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
    withSession(userData) {
        $0.header(
            streamID: frame.pointee.hd.stream_id,
            name: UnsafeBufferPointer(start: name, count: namelen),
            value: UnsafeBufferPointer(start: value, count: valuelen),
            trailer: frame.pointee.headers.cat != NGHTTP2_HCAT_REQUEST)
    }
    return 0
}

private let onFrameRecv: nghttp2_on_frame_recv_callback = { _, frame, userData in
    switch frame.flatMap(RequestFrame.init) {
    case .headers(let id, let endStream): withSession(userData) { $0.headersComplete(streamID: id, endStream: endStream) }
    case .ended(let id): withSession(userData) { $0.requestEnded(streamID: id) }
    case .trailersWithoutEnd(let id): withSession(userData) { $0.trailersWithoutEnd(streamID: id) }
    case nil: break
    }
    return 0
}

private let onDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, len, userData in
    withSession(userData) { $0.data(streamID: streamID, bytes: UnsafeRawBufferPointer(start: data, count: len)) }
    return 0
}

private let onStreamClose: nghttp2_on_stream_close_callback = { _, streamID, _, userData in
    withSession(userData) { $0.streamClosed(streamID: streamID) }
    return 0
}

private let onFrameSend: nghttp2_on_frame_send_callback = { _, frame, userData in
    guard let frame else { return 0 }
    let type = UInt32(frame.pointee.hd.type)
    if (type == NGHTTP2_HEADERS.rawValue || type == NGHTTP2_DATA.rawValue),
        frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
    {
        withSession(userData) { $0.sentEndStream(streamID: frame.pointee.hd.stream_id) }
    }
    return 0
}

let readBodyCallback: nghttp2_data_source_read_callback = { _, streamID, buf, length, flags, _, userData in
    withSession(userData) { $0.readBody(streamID: streamID, into: buf!, length: length, flags: flags!) }
}
