import CNGHTTP2
import CSystem
import Glibc
import ProtoWire
import RPC
import Synchronization

/// One accepted connection: socket, optional TLS, one nghttp2 server session, its streams.
///
/// Confined to its event loop; other threads only hand answers back through `loop.execute`.
final class ServerConnection: EventHandler, DeferredFlush, ResponseSink, @unchecked Sendable {
    // Sendable: every field is touched on `loop` only; closures that cross threads
    // capture the connection solely to call `loop.execute { ... }` with it. Checked in debug and test
    // builds where the connection is entered (events, flush, answers, nghttp2 callbacks, close).
    let fd: Int32
    let loop: EventLoop
    let shared: ServerShared
    let peer: String
    private var session: OpaquePointer?
    private var tls: TLSSession?
    private var streams: [Int32: ServerStream] = [:]
    /// The stream the last lookup found: nghttp2 calls back for one stream many times in a row
    /// (begin, each header, end of headers, the answer), so most lookups skip the dictionary's hashing.
    private var lastStream: ServerStream?
    /// Closed unary streams kept for the next ones (no allocation per call once warm).
    private var spareStreams: [ServerStream] = []
    static let maxSpareStreams = 64
    /// The route of the last `:path` routed on this connection (one method called again and again).
    private var routedPath: String?
    private var routed: Router.Route?
    private var pending: [UInt8] = []
    private var pendingOffset = 0
    /// Request bytes held in unfinished messages over all streams (`maxConnectionBufferBytes`).
    private var bufferedRequestBytes = 0
    private var watchingWrites = false
    private var flushScheduled = false
    /// Monotonic time of the last byte read or written, and of the last write progress.
    private var lastActivity = Monotonic.now()
    private var lastWriteProgress = Monotonic.now()
    /// The last `:path` seen and its String: a connection usually calls one method again and again.
    private var lastPath: [UInt8] = []
    private var lastPathString = ""
    /// The metadata fields seen last on this connection, as bytes and as the Strings handed to calls.
    private var recentMetadata: [(nameBytes: [UInt8], valueBytes: [UInt8], name: String, value: String, varies: Bool)] = []
    /// The client certificate's subject, once a mutual-TLS handshake verified it.
    private(set) var peerSubject: String?
    private(set) var closed = false
    private var draining = false
    /// h2c: the first bytes, held until they show the HTTP/2 preface (or an HTTP/1 request).
    private var awaitingPreface = false
    private var prefaceBytes: [UInt8] = []
    /// Our side is shut (after an HTTP/1.1 answer or a GOAWAY); what the peer still sends is read and
    /// dropped until it closes, so unread input does not turn our FIN into a reset.
    private var discarding = false
    /// Set once the connection is ending: the monotonic time it closes at the latest, written or not.
    private var lingerUntil: UInt64 = 0
    /// How long an ending connection waits for its last bytes to go out and for the peer to close.
    static let lingerNanoseconds: UInt64 = 2_000_000_000
    /// The loop's registry that keeps this connection alive.
    weak var owner: LoopConnections?

    init(fd: Int32, peer: String, loop: EventLoop, shared: ServerShared) throws(SocketError) {
        self.fd = fd
        self.peer = peer
        self.loop = loop
        self.shared = shared
        if let context = shared.configuration.tls {
            tls = try TLSSession(context: context, fd: fd, server: true)
        }
    }

    /// Registers with the loop and, for h2c, starts HTTP/2 at once.
    func start() {
        loop.register(fd, self, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
        shared.connectionOpened()
        if tls == nil {
            // Nothing is sent before the client's first bytes: an HTTP/1.1 client must get an HTTP/1.1 answer.
            awaitingPreface = true
        } else {
            continueHandshake()
        }
    }

    private func startSession() {
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
        var s: OpaquePointer?
        nghttp2_session_server_new2(&s, callbacks, Unmanaged.passUnretained(self).toOpaque(), option)
        session = s
        let config = shared.configuration
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: UInt32(config.maxConcurrentStreams)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: 1 << 20),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: UInt32(config.maxHeaderListBytes)),
        ]
        nghttp2_submit_settings(s, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        nghttp2_session_set_local_window_size(s, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, 16 << 20)
        if draining { beginDrain() }
    }

    // MARK: Events

    func handle(events: UInt32) {
        loop.assertInEventLoop("ServerConnection")
        if closed { return }
        if discarding {
            discardInput()
            return
        }
        if session == nil {
            if awaitingPreface { sniffPreface() } else { continueHandshake() }
            return
        }
        if events & EPOLLOUT.rawValue != 0 { flush() }
        if closed { return }
        if events & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue | EPOLLRDHUP.rawValue) != 0 {
            readAvailable()
        }
    }

    private func continueHandshake() {
        guard let tls else { return }
        switch tls.handshake() {
        case .done:
            loop.modify(fd, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
            if let alpn = tls.alpn, alpn != "h2" {
                close()
                return
            }
            peerSubject = tls.peerSubject
            startSession()
            flush()
            // TLS may already hold decrypted application data.
            if !closed { readAvailable() }
        case .wantRead:
            loop.modify(fd, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
        case .wantWrite:
            loop.modify(fd, events: EPOLLIN.rawValue | EPOLLOUT.rawValue | EPOLLRDHUP.rawValue)
        case .closed, .failed:
            close()
        }
    }

    /// h2c: reads the first bytes; HTTP/2 starts once they are the preface, an HTTP/1 request gets an HTTP/1.1 answer.
    private func sniffPreface() {
        let buffer = loop.readBuffer
        let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
        if n == 0 { return close() }
        if n < 0 {
            if errno == EAGAIN || errno == EINTR { return }
            return close()
        }
        lastActivity = Monotonic.now()
        prefaceBytes.append(contentsOf: UnsafeRawBufferPointer(start: buffer.baseAddress, count: n))
        let common = min(prefaceBytes.count, Literal.preface.count)
        if prefaceBytes[..<common].elementsEqual(Literal.preface[..<common]) {
            if prefaceBytes.count < Literal.preface.count { return }  // the rest of the preface is on its way
        } else if let first = prefaceBytes.first, first >= UInt8(ascii: "A"), first <= UInt8(ascii: "Z") {
            return answerHTTP1()
        }
        // The preface, or garbage nghttp2 answers with GOAWAY.
        awaitingPreface = false
        let bytes = prefaceBytes
        prefaceBytes = []
        startSession()
        let rv = bytes.withUnsafeBufferPointer { nghttp2_session_mem_recv(session, $0.baseAddress, $0.count) }
        if rv < 0 { return terminate(Self.goawayCode(recvError: rv)) }
        flush()
        if !closed && !discarding { readAvailable() }
    }

    /// An HTTP/1.x request on the gRPC port: one HTTP/1.1 answer, then the connection closes.
    private func answerHTTP1() {
        awaitingPreface = false
        let line = Array(prefaceBytes.prefix { $0 != UInt8(ascii: "\n") })
        let marker = Array(" HTTP/1.".utf8)
        let isHTTP1 = line.count >= marker.count && (0...(line.count - marker.count)).contains { line[$0..<($0 + marker.count)].elementsEqual(marker) }
        prefaceBytes = []
        let body = "billingd serves gRPC over HTTP/2 only\n"
        let status = isHTTP1 ? "505 HTTP Version Not Supported" : "400 Bad Request"
        let answer = "HTTP/1.1 \(status)\r\ncontent-type: text/plain\r\ncontent-length: \(body.utf8.count)\r\nconnection: close\r\n\r\n\(body)"
        _ = Array(answer.utf8).withUnsafeBytes { writeOut($0) }
        // Half-close and read until the peer closes, so unread request bytes do not turn our FIN into a reset.
        Glibc.shutdown(fd, Int32(SHUT_WR))
        discarding = true
        lingerUntil = Monotonic.now() &+ Self.lingerNanoseconds
    }

    /// Ends the connection with a GOAWAY carrying `code`, queued after what already waits; once it is
    /// written our side is shut (`shutOutput`). A peer that never reads is closed at `lingerUntil`.
    private func terminate(_ code: nghttp2_error_code) {
        guard !closed, !discarding else { return }
        if lingerUntil == 0 { lingerUntil = Monotonic.now() &+ Self.lingerNanoseconds }
        guard let session else { return close() }
        nghttp2_session_terminate_session(session, code.rawValue)
        flush()
    }

    /// The GOAWAY code for a fatal error of `nghttp2_session_mem_recv`.
    static func goawayCode(recvError rv: Int) -> nghttp2_error_code {
        switch Int32(rv) {
        case NGHTTP2_ERR_FLOODED.rawValue, NGHTTP2_ERR_TOO_MANY_CONTINUATIONS.rawValue: NGHTTP2_ENHANCE_YOUR_CALM
        case NGHTTP2_ERR_CALLBACK_FAILURE.rawValue, NGHTTP2_ERR_NOMEM.rawValue: NGHTTP2_INTERNAL_ERROR
        default: NGHTTP2_PROTOCOL_ERROR
        }
    }

    /// The session is over and everything it had is written (its GOAWAY last): shut our side so the peer
    /// reads the GOAWAY and then EOF, and drop what it still sends until it closes.
    private func shutOutput() {
        guard !closed, !discarding else { return }
        for stream in streams.values { abandon(stream) }
        streams.removeAll()
        lastStream = nil
        tls?.shutdown()
        tls = nil  // what still arrives is dropped unread, encrypted or not
        Glibc.shutdown(fd, Int32(SHUT_WR))
        discarding = true
        if lingerUntil == 0 { lingerUntil = Monotonic.now() &+ Self.lingerNanoseconds }
        loop.modify(fd, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
    }

    private func discardInput() {
        let buffer = loop.readBuffer
        let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
        if n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) { close() }
    }

    private func readAvailable() {
        let buffer = loop.readBuffer
        for _ in 0..<8 {
            let n: Int
            if let tls {
                switch tls.read(buffer) {
                case .done(let count): n = count
                case .wantRead: n = -1
                case .wantWrite:
                    watchWrites(true)
                    n = -1
                case .closed, .failed:
                    close()
                    return
                }
                if n < 0 { break }
            } else {
                n = Glibc.read(fd, buffer.baseAddress, buffer.count)
                if n == 0 {
                    close()
                    return
                }
                if n < 0 {
                    if errno == EAGAIN || errno == EINTR { break }
                    close()
                    return
                }
            }
            lastActivity = Monotonic.now()
            let rv = nghttp2_session_mem_recv(session, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), n)
            if rv < 0 {
                // A flood or a protocol error nghttp2 does not answer itself: GOAWAY, then close.
                terminate(Self.goawayCode(recvError: rv))
                return
            }
            if closed || discarding { return }
            if tls == nil && n < buffer.count { break }
        }
        scheduleFlush()
    }

    /// Writes at the end of this loop iteration, together with every answer made in it.
    func scheduleFlush() {
        guard !flushScheduled, !closed, !discarding else { return }
        flushScheduled = true
        loop.flushLater(self)
    }

    private func watchWrites(_ on: Bool) {
        guard on != watchingWrites, !closed else { return }
        watchingWrites = on
        loop.modify(fd, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (on ? EPOLLOUT.rawValue : 0))
    }

    /// Writes what nghttp2 has queued; parks the rest until the socket drains.
    func flush() {
        loop.assertInEventLoop("ServerConnection")
        flushScheduled = false
        guard !closed, !discarding, let session else { return }
        while true {
            if pendingOffset < pending.count {
                let result = pending.withUnsafeBytes { raw in
                    writeOut(UnsafeRawBufferPointer(rebasing: raw[pendingOffset...]))
                }
                guard let written = result else {
                    close()
                    return
                }
                pendingOffset += written
                if pendingOffset < pending.count {
                    watchWrites(true)
                    return
                }
                pending.removeAll(keepingCapacity: false)
                pendingOffset = 0
            }
            // Gather frames into the loop's buffer, then one write.
            let out = loop.readBuffer
            var used = 0
            var overflow = false
            while used < out.count {
                var data: UnsafePointer<UInt8>?
                let n = nghttp2_session_mem_send(session, &data)
                if n < 0 {
                    close()
                    return
                }
                if n == 0 { break }
                let chunk = UnsafeRawBufferPointer(start: data, count: n)
                if used + n <= out.count {
                    out.baseAddress!.advanced(by: used).copyMemory(from: chunk.baseAddress!, byteCount: n)
                    used += n
                } else {
                    pending.append(contentsOf: UnsafeRawBufferPointer(start: out.baseAddress, count: used))
                    pending.append(contentsOf: chunk)
                    used = 0
                    overflow = true
                    break
                }
            }
            if overflow { continue }
            if used == 0 { break }
            guard let written = writeOut(UnsafeRawBufferPointer(start: out.baseAddress, count: used)) else {
                close()
                return
            }
            if written < used {
                pending.append(contentsOf: UnsafeRawBufferPointer(start: out.baseAddress! + written, count: used - written))
                watchWrites(true)
                return
            }
        }
        watchWrites(false)
        if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 {
            shutOutput()
        }
    }

    /// Bytes written (possibly fewer than given), or nil when the connection is gone.
    private func writeOut(_ bytes: UnsafeRawBufferPointer) -> Int? {
        var total = 0
        defer {
            if total > 0 {
                lastWriteProgress = Monotonic.now()
                lastActivity = lastWriteProgress
            }
        }
        while total < bytes.count {
            let rest = UnsafeRawBufferPointer(rebasing: bytes[total...])
            if let tls {
                switch tls.write(rest) {
                case .done(let n): total += n
                case .wantWrite, .wantRead: return total
                case .closed, .failed: return nil
                }
            } else {
                let n = Glibc.write(fd, rest.baseAddress, rest.count)
                if n > 0 {
                    total += n
                } else if n < 0 && (errno == EAGAIN || errno == EINTR) {
                    return total
                } else {
                    return nil
                }
            }
        }
        return total
    }

    func close() {
        loop.assertInEventLoop("ServerConnection")
        guard !closed else { return }
        closed = true
        for stream in streams.values { abandon(stream) }
        streams.removeAll()
        lastStream = nil
        if let session { nghttp2_session_del(session) }
        session = nil
        tls?.shutdown()
        tls = nil
        loop.deregister(fd)
        Glibc.close(fd)
        shared.connectionClosed()
        owner?.forget(fd)
    }

    private func abandon(_ stream: ServerStream) {
        releaseBuffer(stream)
        if let timer = stream.timerID { loop.cancelTimer(timer) }
        if stream.dispatched && (!stream.responded || (stream.streamsResponse && !stream.streamFinished)) {
            stream.cancellation?.cancel()
            shared.finished(stream: stream, code: .cancelled, reason: nil, peer: peer)
        }
    }

    /// Called once a second by the loop: GOAWAY after the idle timeout, drop a peer that stopped reading.
    func sweep(now: UInt64) {
        guard !closed else { return }
        if lingerUntil != 0 {
            // Ending: closed once the peer closes, or now at the latest.
            if now >= lingerUntil { close() }
            return
        }
        for stream in streams.values where !stream.responded && stream.capDeadline != 0 && now >= stream.capDeadline {
            // Streaming calls end through their writer; the cap applies to them only before dispatch.
            if stream.dispatched && stream.streamsResponse { continue }
            stream.cancellation?.cancel()
            fail(stream, .deadlineExceeded)
            scheduleFlush()
        }
        let config = shared.configuration
        // Output waits (in our buffer, or answers nghttp2 holds behind a closed flow-control window)
        // and the peer has taken nothing for too long: it never reads. Drop it; its memory goes with it.
        let waiting = pendingOffset < pending.count || streams.values.contains { $0.responded && $0.bodyOffset < $0.body.count }
        if waiting, now &- lastWriteProgress > UInt64(config.writeStallNanoseconds) {
            // GOAWAY after what waits; a peer that still reads nothing is closed at the linger deadline.
            terminate(NGHTTP2_ENHANCE_YOUR_CALM)
            return
        }
        if streams.isEmpty, !draining, now &- lastActivity > UInt64(config.idleTimeoutNanoseconds) {
            terminate(NGHTTP2_NO_ERROR)
        }
    }

    // MARK: Draining

    /// Tells the client to stop opening streams; answers in flight still complete.
    func beginDrain() {
        draining = true
        guard let session, !closed else { return }
        nghttp2_submit_shutdown_notice(session)
        flush()
        // One round trip later, the final GOAWAY with the last stream really taken.
        loop.schedule(afterNanoseconds: 500_000_000) { [self] in
            guard let session = self.session, !self.closed else { return }
            nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue),
                                  nghttp2_session_get_last_proc_stream_id(session), UInt32(NGHTTP2_NO_ERROR.rawValue), nil, 0)
            self.flush()
        }
    }

    // MARK: nghttp2 events (called from the file-private callbacks)

    fileprivate func beginHeaders(streamID: Int32) {
        let stream: ServerStream
        if let spare = spareStreams.popLast() {
            spare.reassign(id: streamID)  // cleared when it closed
            stream = spare
        } else {
            stream = ServerStream(id: streamID, maxMessageBytes: shared.configuration.maxMessageBytes)
        }
        streams[streamID] = stream
        lastStream = stream
    }

    /// The open stream `id`, or nil.
    @inline(__always)
    private func stream(_ id: Int32) -> ServerStream? {
        if let last = lastStream, last.id == id { return last }
        let found = streams[id]
        if found != nil { lastStream = found }
        return found
    }

    fileprivate func header(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value rawValue: UnsafeBufferPointer<UInt8>,
                            trailer: Bool) -> Bool {
        guard let stream = stream(streamID), !stream.malformed else { return true }
        switch RequestFieldCheck.check(name: name, value: rawValue, trailer: trailer, stream: stream) {
        case .use: break
        case .skip: return true
        case .malformed:
            reject(stream)
            return true
        }
        if trailer { return true }  // gRPC requests carry no trailers worth reading
        stream.headerBytes += name.count + rawValue.count + 32
        if stream.headerBytes > shared.configuration.maxHeaderListBytes {
            // Answered with RESOURCE_EXHAUSTED once the block ends; what was kept is dropped now.
            if !stream.headerListTooLarge {
                stream.headerListTooLarge = true
                stream.metadata = []
            }
            return true
        }
        if stream.headerListTooLarge { return true }
        let value = trimmed(rawValue)
        // Compare bytes first: most headers are transport details no handler reads.
        if name.first == UInt8(ascii: ":") {
            if same(name, Literal.path) {
                if !same(value, lastPath) {
                    lastPath = Array(value)
                    lastPathString = String(decoding: value, as: UTF8.self)
                }
                stream.path = lastPathString
            } else if same(name, Literal.method) {
                stream.method = same(value, Literal.post) ? "POST" : String(decoding: value, as: UTF8.self)
            }
            return true
        }
        if same(name, Literal.contentType) {
            stream.contentType = same(value, Literal.grpc) ? "application/grpc" : String(decoding: value, as: UTF8.self)
        } else if same(name, Literal.timeout) {
            stream.timeout = String(decoding: value, as: UTF8.self)
        } else if same(name, Literal.te) || same(name, Literal.userAgent)
                    || same(name, Literal.grpcAcceptEncoding) || same(name, Literal.acceptEncoding) {
            return true
        } else {
            stream.metadata.append(metadataStrings(name, value))
        }
        return true
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

    /// A malformed request (RFC 9113 8.1.1): RST_STREAM PROTOCOL_ERROR; the connection serves on.
    private func reject(_ stream: ServerStream) {
        guard !stream.malformed, let session else { return }
        stream.malformed = true
        stream.metadata = []
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, UInt32(NGHTTP2_PROTOCOL_ERROR.rawValue))
        scheduleFlush()
    }

    fileprivate func trailersWithoutEnd(streamID: Int32) {
        if let stream = stream(streamID) { reject(stream) }
    }

    /// The request's headers are complete: check them, and dispatch if the body is empty.
    fileprivate func headersComplete(streamID: Int32, endStream: Bool) {
        guard let stream = stream(streamID), !stream.malformed else { return }
        guard stream.pseudoFields & PseudoField.required == PseudoField.required else {
            reject(stream)
            return
        }
        stream.startedAt = Monotonic.now()
        // A request body that never ends must not hold the stream forever: the sweep ends it at the cap.
        let cap = shared.configuration.maxDeadlineNanoseconds
        if cap > 0 { stream.capDeadline = stream.startedAt &+ UInt64(cap) }
        if endStream { stream.remoteClosed = true }
        if stream.headerListTooLarge {
            let limit = shared.configuration.maxHeaderListBytes
            fail(stream, RPCError(code: .resourceExhausted, message: "request headers exceed the limit of \(limit) bytes"))
            return
        }
        if stream.method != "POST" {
            respondHTTP(stream, status: "405", message: "gRPC calls use POST")
            return
        }
        guard GRPCHeaders.isGRPCContentType(stream.contentType) else {
            respondHTTP(stream, status: "415", message: "content-type must be application/grpc")
            return
        }
        if draining {
            fail(stream, .shuttingDown)
            return
        }
        let router = shared.router
        let route: Router.Route?
        if let path = routedPath, path == stream.path {
            route = routed
        } else {
            route = router.resolve(path: stream.path)
            routedPath = stream.path
            routed = route
        }
        stream.knownMethod = route != nil
        if router.authenticates {
            // Before anything per method, unknown methods included: their names are the peer's to choose.
            let cancellation = Cancellation(keepsNotes: shared.configuration.keepsCallNotes)
            stream.cancellation = cancellation
            let method = stream.path.hasPrefix("/") ? String(stream.path.dropFirst()) : stream.path
            let context = CallContext(method: method, metadata: stream.metadata, peer: peer,
                                      cancellation: cancellation, peerSubject: peerSubject)
            if let refusal = router.refusal(for: context) {
                fail(stream, refusal)
                return
            }
        }
        if case .bidi(let method, let bidi) = route {
            stream.bidiHandler = bidi
            stream.methodName = method
            stream.handler = { _, _, _ in }  // routed; answers go through the stream writer
            stream.streamDeframer = MessageStreamDeframer(maxMessageBytes: shared.configuration.maxMessageBytes)
            startBidi(stream)
            if endStream { requestEnded(streamID: stream.id) }
            return
        }
        if case .serverStreaming(let method, let streaming) = route {
            stream.streamingHandler = streaming
            stream.methodName = method
            stream.handler = { _, _, _ in }  // marks the stream routed; dispatch takes the streaming path
            if endStream { dispatch(stream) }
            return
        }
        guard case .unary(let method, let handler) = route else {
            let method = stream.path.hasPrefix("/") ? String(stream.path.dropFirst()) : stream.path
            fail(stream, .unimplemented(method))
            return
        }
        if let encoding = stream.metadata.first(where: { $0.name == "grpc-encoding" })?.value,
           encoding != "identity" {
            // Compressed flags then fail per message; the header alone is fine.
            _ = encoding
        }
        stream.handler = handler
        stream.methodName = method
        if endStream { dispatch(stream) }
    }

    fileprivate func data(streamID: Int32, bytes: UnsafeRawBufferPointer) {
        if let stream = stream(streamID), stream.bidiHandler != nil {
            guard !stream.streamFinished, let receiver = stream.receiver else { return }
            if let error = stream.streamDeframer?.append(bytes, { receiver.onMessage($0) }) {
                stream.cancellation?.cancel()
                streamEvent(streamID: streamID, .finish(error))
                releaseBuffer(stream)
                return
            }
            account(stream, stream.streamDeframer?.bufferedBytes ?? 0)
            return
        }
        guard let stream = stream(streamID), stream.handler != nil, !stream.responded, !stream.dispatched else { return }
        if let error = stream.deframer.append(bytes) {
            fail(stream, error)
            releaseBuffer(stream)
            return
        }
        account(stream, stream.deframer.bufferedBytes)
    }

    /// Counts what `stream` holds now in the connection's budget; the stream that crosses it is refused.
    private func account(_ stream: ServerStream, _ now: Int) {
        bufferedRequestBytes += now - stream.bufferedBytes
        stream.bufferedBytes = now
        let limit = shared.configuration.maxConnectionBufferBytes
        guard now > 0, bufferedRequestBytes > limit else { return }
        let error = RPCError.connectionBufferFull(limit: limit)
        if stream.bidiHandler != nil {
            stream.cancellation?.cancel()
            streamEvent(streamID: stream.id, .finish(error))
        } else {
            fail(stream, error)
        }
        releaseBuffer(stream)
        scheduleFlush()
    }

    /// Drops the request bytes `stream` holds and takes them out of the budget.
    private func releaseBuffer(_ stream: ServerStream) {
        if stream.bufferedBytes == 0 { return }
        if stream.bidiHandler != nil {
            stream.streamDeframer = nil
        } else {
            stream.deframer = MessageDeframer(maxMessageBytes: shared.configuration.maxMessageBytes)
        }
        bufferedRequestBytes -= stream.bufferedBytes
        stream.bufferedBytes = 0
    }

    fileprivate func requestEnded(streamID: Int32) {
        guard let stream = stream(streamID) else { return }
        stream.remoteClosed = true
        if stream.bidiHandler != nil {
            if stream.streamDeframer?.isAtBoundary == false {
                streamEvent(streamID: streamID, .finish(.badFraming("the stream ended inside a message")))
            } else if !stream.streamFinished {
                stream.receiver?.onEnd()
            }
            return
        }
        if stream.handler != nil && !stream.responded && !stream.dispatched { dispatch(stream) }
    }

    fileprivate func streamClosed(streamID: Int32) {
        if lastStream?.id == streamID { lastStream = nil }
        guard let stream = streams.removeValue(forKey: streamID) else { return }
        abandon(stream)
        if stream.reusable && spareStreams.count < Self.maxSpareStreams {
            // Drop what the call held now (answer, handler, cancellation), not when the stream is reused.
            stream.clear(maxMessageBytes: shared.configuration.maxMessageBytes)
            spareStreams.append(stream)
        }
        if draining && streams.isEmpty { scheduleFlush() }
    }

    /// After our END_STREAM, a client still sending learns it may stop.
    fileprivate func sentEndStream(streamID: Int32) {
        guard let stream = stream(streamID), !stream.remoteClosed, let session else { return }
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, UInt32(NGHTTP2_NO_ERROR.rawValue))
    }

    fileprivate func readBody(streamID: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int,
                              flags: UnsafeMutablePointer<UInt32>) -> Int {
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
        if stream.bodyOffset == stream.body.count {
            if stream.streamsResponse {
                if !stream.streamFinished {
                    if n > 0 { return n }
                    stream.deferred = true
                    return Int(NGHTTP2_ERR_DEFERRED.rawValue)
                }
                flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue | NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
                submitStreamTrailers(stream, session: session)
                stream.body = []
                return n
            }
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue | NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
            let trailers = HeaderList.okTrailers
            nghttp2_submit_trailer(session, streamID, trailers.nva, trailers.count)
            stream.body = []
        }
        return n
    }

    // MARK: Calls

    /// A bidirectional call starts at its headers: the handler gets a writer and returns its receiver.
    private func startBidi(_ stream: ServerStream) {
        guard let handler = stream.bidiHandler else { return }
        if draining {
            fail(stream, .shuttingDown)
            return
        }
        stream.dispatched = true
        stream.capDeadline = 0
        let cancellation = stream.cancellation ?? Cancellation(keepsNotes: shared.configuration.keepsCallNotes)
        stream.cancellation = cancellation
        var deadline: ContinuousClock.Instant?
        let id = stream.id
        if !stream.timeout.isEmpty, let nanos = GRPCHeaders.parseTimeout(stream.timeout) {
            deadline = ContinuousClock.now.advanced(by: .nanoseconds(nanos))
            stream.timerID = loop.schedule(afterNanoseconds: nanos) { [self] in
                guard self.stream(id) != nil else { return }
                cancellation.cancel()
                self.streamEvent(streamID: id, .finish(.deadlineExceeded))
            }
        }
        stream.requestNumber = shared.nextRequestNumber()
        shared.callStarted()
        let context = CallContext(method: stream.methodName, metadata: stream.metadata, deadline: deadline, peer: peer,
                                  requestID: RequestID(prefix: shared.requestIDPrefix, number: stream.requestNumber),
                                  cancellation: cancellation, peerSubject: peerSubject)
        let writer = StreamWriter(cancellation: cancellation) { [self] event in
            if self.loop.inEventLoop {
                self.streamEvent(streamID: id, event)
            } else {
                self.loop.execute { self.streamEvent(streamID: id, event) }
            }
        }
        stream.receiver = handler(context, writer)
    }

    private func dispatch(_ stream: ServerStream) {
        guard let handler = stream.handler else { return }
        let message: [UInt8]
        switch stream.deframer.finish() {
        case .success(let m): message = m
        case .failure(let error):
            fail(stream, error)
            releaseBuffer(stream)
            return
        }
        // The handler owns the message now; the budget counts only what waits for more bytes.
        releaseBuffer(stream)
        let config = shared.configuration
        if shared.inFlight.load(ordering: .relaxed) >= config.maxInFlight {
            fail(stream, .overloaded)
            return
        }
        stream.dispatched = true
        let cancellation = stream.cancellation ?? Cancellation(keepsNotes: shared.configuration.keepsCallNotes)
        stream.cancellation = cancellation
        var deadline: ContinuousClock.Instant?
        let cap: Int64? = config.maxDeadlineNanoseconds > 0 ? config.maxDeadlineNanoseconds : nil
        var asked: Int64?
        if !stream.timeout.isEmpty {
            guard let t = GRPCHeaders.parseTimeout(stream.timeout) else {
                stream.dispatched = false
                fail(stream, RPCError(code: .internal, message: "malformed grpc-timeout '\(stream.timeout)'"))
                return
            }
            asked = t
        }
        stream.capDeadline = 0
        if stream.streamingHandler != nil && asked == nil {
            // Long-lived streams (health Watch) have no server cap; the client's grpc-timeout still applies.
        } else if stream.streamingHandler == nil, let cap, asked.map({ $0 >= cap }) ?? true {
            // The cap alone: the once-a-second sweep enforces it, no timer per call.
            deadline = ContinuousClock.now.advanced(by: .nanoseconds(cap))
            stream.capDeadline = Monotonic.now() &+ UInt64(cap)
        } else if let nanos = asked {
            deadline = ContinuousClock.now.advanced(by: .nanoseconds(nanos))
            let id = stream.id
            stream.timerID = loop.schedule(afterNanoseconds: nanos) { [self] in
                guard let s = self.stream(id) else { return }
                s.timerID = nil
                if s.streamingHandler != nil {
                    cancellation.cancel()
                    self.streamEvent(streamID: id, .finish(.deadlineExceeded))
                    return
                }
                guard !s.responded else { return }
                cancellation.cancel()
                self.fail(s, .deadlineExceeded)
                self.scheduleFlush()
            }
        }
        stream.requestNumber = shared.nextRequestNumber()
        shared.callStarted()
        let context = CallContext(method: stream.methodName, metadata: stream.metadata, deadline: deadline,
                                  peer: peer, requestID: RequestID(prefix: shared.requestIDPrefix, number: stream.requestNumber),
                                  cancellation: cancellation, peerSubject: peerSubject)
        let id = stream.id
        if let streaming = stream.streamingHandler {
            let writer = StreamWriter(cancellation: cancellation) { [self] event in
                self.loop.execute { self.streamEvent(streamID: id, event) }
            }
            stream.writer = writer
            streaming(context, message, writer)
            return
        }
        handler(context, message, Responder(sink: self, id: id))
    }

    /// A unary call's answer (`ResponseSink`), from any thread.
    func deliver(id: Int32, _ result: Result<[UInt8], RPCError>) {
        // Answered on this loop (Health, cached reads): submit now; nghttp2 allows it inside callbacks.
        if loop.inEventLoop {
            complete(streamID: id, result)
        } else {
            loop.execute { self.complete(streamID: id, result) }
        }
    }

    private func complete(streamID: Int32, _ result: Result<[UInt8], RPCError>) {
        loop.assertInEventLoop("ServerConnection")
        guard !closed, let stream = stream(streamID), !stream.responded else { return }
        if let timer = stream.timerID {
            loop.cancelTimer(timer)
            stream.timerID = nil
        }
        switch result {
        case .success(let framed):
            stream.responded = true
            stream.body = framed
            stream.bodyOffset = 0
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readBodyCallback)
            nghttp2_submit_response(session, streamID, HeaderList.ok.nva, HeaderList.ok.count, &provider)
            shared.finished(stream: stream, code: .ok, reason: nil, peer: peer, peerSubject: peerSubject)
        case .failure(let error):
            fail(stream, error)
        }
        scheduleFlush()
    }

    /// A server-streaming call's message or end, on the loop.
    private func streamEvent(streamID: Int32, _ event: StreamWriter.Event) {
        guard !closed, let session, let stream = stream(streamID), !stream.streamFinished else { return }
        switch event {
        case .message(let framed):
            if stream.bodyOffset == stream.body.count {
                stream.body = framed
                stream.bodyOffset = 0
            } else {
                stream.body.append(contentsOf: framed)
            }
            if !stream.headersSent {
                stream.headersSent = true
                stream.responded = true
                var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readBodyCallback)
                nghttp2_submit_response(session, streamID, HeaderList.ok.nva, HeaderList.ok.count, &provider)
            } else if stream.deferred {
                stream.deferred = false
                nghttp2_session_resume_data(session, streamID)
            }
        case .finish(let error):
            stream.streamFinished = true
            stream.finishError = error
            if let timer = stream.timerID {
                loop.cancelTimer(timer)
                stream.timerID = nil
            }
            if !stream.headersSent {
                fail(stream, error ?? RPCError(code: .ok, message: ""))
            } else {
                shared.finished(stream: stream, code: error?.code ?? .ok, reason: error?.reason, peer: peer, peerSubject: peerSubject)
                if stream.deferred {
                    stream.deferred = false
                    nghttp2_session_resume_data(session, streamID)
                }
            }
        }
        scheduleFlush()
    }

    /// Trailers for the end of a stream that already sent headers.
    private func submitStreamTrailers(_ stream: ServerStream, session: OpaquePointer) {
        guard let error = stream.finishError else {
            nghttp2_submit_trailer(session, stream.id, HeaderList.okTrailers.nva, HeaderList.okTrailers.count)
            return
        }
        var fields: [(String, String)] = [("grpc-status", String(error.code.rawValue)),
                                          ("grpc-message", GRPCHeaders.grpcMessage(error.message))]
        if let rich = error.richStatus { fields.append(("grpc-status-details-bin", Base64.encode(rich.encoded()))) }
        let trailers = HeaderList(fields)
        nghttp2_submit_trailer(session, stream.id, trailers.nva, trailers.count)
    }

    /// A trailers-only answer with grpc-status, grpc-message and, for service errors, ErrorInfo.
    private func fail(_ stream: ServerStream, _ error: RPCError) {
        guard !stream.responded, let session else { return }
        stream.responded = true
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
        if stream.startedAt == 0 { stream.startedAt = Monotonic.now() }
        shared.finished(stream: stream, code: error.code, reason: error.reason, peer: peer, peerSubject: peerSubject)
    }

    /// A plain HTTP error for requests that are not gRPC at all (wrong method or content type).
    private func respondHTTP(_ stream: ServerStream, status: String, message: String) {
        guard !stream.responded, let session else { return }
        stream.responded = true
        let headers = HeaderList([
            (":status", status), ("content-type", "text/plain"),
            ("grpc-status", String(StatusCode.internal.rawValue)), ("grpc-message", GRPCHeaders.grpcMessage(message)),
        ])
        nghttp2_submit_response(session, stream.id, headers.nva, headers.count, nil)
    }
}

/// Header names and values compared byte for byte on the hot path.
private enum Literal {
    static let path = Array(":path".utf8), method = Array(":method".utf8), post = Array("POST".utf8)
    static let contentType = Array("content-type".utf8), grpc = Array("application/grpc".utf8)
    static let timeout = Array("grpc-timeout".utf8), te = Array("te".utf8), userAgent = Array("user-agent".utf8)
    static let grpcAcceptEncoding = Array("grpc-accept-encoding".utf8), acceptEncoding = Array("accept-encoding".utf8)
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
}

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

// MARK: nghttp2 callbacks: find the connection through user_data, never throw into C.

/// Runs `body` with the connection behind `userData` without retaining it: nghttp2 calls back only from inside
/// `nghttp2_session_mem_recv`/`send` on the connection's own loop, while the connection is alive and in use.
@inline(__always)
private func withConnection<T>(_ userData: UnsafeMutableRawPointer?, _ body: (ServerConnection) -> T) -> T {
    Unmanaged<ServerConnection>.fromOpaque(userData!)._withUnsafeGuaranteedRef { connection in
        connection.loop.assertInEventLoop("an nghttp2 callback")
        return body(connection)
    }
}

private let onBeginHeaders: nghttp2_on_begin_headers_callback = { _, frame, userData in
    guard let frame else { return 0 }
    if frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) && frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
        withConnection(userData) { $0.beginHeaders(streamID: frame.pointee.hd.stream_id) }
    }
    return 0
}

private let onHeader: nghttp2_on_header_callback = { _, frame, name, namelen, value, valuelen, _, userData in
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
    let ok = withConnection(userData) { $0.header(
        streamID: frame.pointee.hd.stream_id,
        name: UnsafeBufferPointer(start: name, count: namelen),
        value: UnsafeBufferPointer(start: value, count: valuelen),
        trailer: frame.pointee.headers.cat != NGHTTP2_HCAT_REQUEST) }
    return ok ? 0 : Int32(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
}

private let onFrameRecv: nghttp2_on_frame_recv_callback = { _, frame, userData in
    switch frame.flatMap(RequestFrame.init) {
    case .headers(let id, let endStream): withConnection(userData) { $0.headersComplete(streamID: id, endStream: endStream) }
    case .ended(let id): withConnection(userData) { $0.requestEnded(streamID: id) }
    case .trailersWithoutEnd(let id): withConnection(userData) { $0.trailersWithoutEnd(streamID: id) }
    case nil: break
    }
    return 0
}

private let onDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, len, userData in
    withConnection(userData) { $0.data(streamID: streamID, bytes: UnsafeRawBufferPointer(start: data, count: len)) }
    return 0
}

private let onStreamClose: nghttp2_on_stream_close_callback = { _, streamID, _, userData in
    withConnection(userData) { $0.streamClosed(streamID: streamID) }
    return 0
}

private let onFrameSend: nghttp2_on_frame_send_callback = { _, frame, userData in
    guard let frame else { return 0 }
    let type = UInt32(frame.pointee.hd.type)
    if (type == NGHTTP2_HEADERS.rawValue || type == NGHTTP2_DATA.rawValue),
       frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 {
        withConnection(userData) { $0.sentEndStream(streamID: frame.pointee.hd.stream_id) }
    }
    return 0
}

private let readBodyCallback: nghttp2_data_source_read_callback = { _, streamID, buf, length, flags, _, userData in
    withConnection(userData) { $0.readBody(streamID: streamID, into: buf!, length: length, flags: flags!) }
}
