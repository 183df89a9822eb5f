import IO
import CNGHTTP2
import CSystem
import Glibc
import HTTP2
import Synchronization

/// One HTTP/2 connection (h2c or TLS with ALPN h2) served by a blocking nghttp2 server session on its own
/// thread. Handlers answer from any thread through `answers` and an eventfd that wakes the thread.
final class H2Connection: @unchecked Sendable {
    // Sendable: every field but `answers` and `wakeFD` is touched only on the connection's thread, inside
    // `run` (checked in debug and test builds at every nghttp2 callback). Completions from other threads
    // append to `answers` (a Mutex) and write the eventfd, which stays open until deinit, so a late answer
    // after the connection ended is harmless.
    private let conduit: Conduit
    private let handlers: Handlers
    private let peer: String
    private let wakeFD: Int32
    private let answers = Mutex<[(Int32, HTTPResponse)]>([])
    private var session: OpaquePointer?
    private var streams: [Int32: H2Stream] = [:]
    /// When the connection last had no stream: a new request must come within the timeout.
    private var idleSince = Monotonic.now()
    #if DEBUG
    /// The thread inside `run`; nghttp2's callbacks check it in debug and test builds.
    private var runner: pthread_t?
    #endif

    /// Stops the process when the connection is used off its own thread (debug and test builds only).
    @inline(__always)
    fileprivate func assertOnItsThread() {
        #if DEBUG
        precondition(runner.map { pthread_equal($0, pthread_self()) != 0 } ?? false, "H2Connection used off its thread")
        #endif
    }

    init(conduit: Conduit, handlers: Handlers, peer: String) throws(HTTPFrontError) {
        self.conduit = conduit
        self.handlers = handlers
        self.peer = peer
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        if wakeFD < 0 { throw .start("eventfd: \(String(cString: strerror(errno)))") }
    }

    deinit {
        if let session { nghttp2_session_del(session) }
        close(wakeFD)
    }

    /// Serves the connection until the peer leaves, breaks the protocol, or is too slow. The caller closes the socket.
    func run() {
        #if DEBUG
        runner = pthread_self()
        #endif
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, h2BeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, h2Header)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, h2FrameRecv)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, h2DataChunk)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, h2StreamClose)
        nghttp2_session_server_new(&session, callbacks, Unmanaged.passUnretained(self).toOpaque())
        nghttp2_session_callbacks_del(callbacks)
        guard let session else { return }
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: 32),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue),
                value: UInt32(handlers.configuration.maxHeaderBytes)),
        ]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            takeAnswers()
            guard flush(), nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0 else { return }
            let deadline = nextDeadline()
            if Monotonic.now() >= deadline { return }  // a request too slow, or no request in time
            if !conduit.hasBuffered {
                let ready = Poll.readable([conduit.fd, wakeFD], until: deadline)
                if ready[1] {
                    var count: UInt64 = 0
                    _ = read(wakeFD, &count, 8)
                }
                if !ready[0] { continue }
            }
            while true {
                switch conduit.receive(buffer) {
                case .bytes(let n):
                    if nghttp2_session_mem_recv(session, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), n) < 0 {
                        _ = flush()  // a GOAWAY nghttp2 may have queued
                        return
                    }
                    continue
                case .wouldBlock: break
                case .closed: return
                }
                break
            }
        }
    }

    /// The earliest time a request still arriving must be complete, or a new one must start.
    private func nextDeadline() -> UInt64 {
        let timeout = handlers.timeoutNanoseconds
        if streams.isEmpty { return idleSince &+ timeout }
        let arriving = streams.values.filter { !$0.requestDone }.map { $0.startedAt &+ timeout }
        return arriving.min() ?? UInt64.max
    }

    /// Writes what nghttp2 has queued; false when the peer is gone or does not read.
    /// nghttp2 hands out one frame at a time: frames are gathered (up to 64 KiB) and written together, one
    /// system call for the answers of many streams instead of one per frame.
    private func flush() -> Bool {
        guard let session else { return false }
        var pending: [UInt8] = []
        func write() -> Bool {
            guard !pending.isEmpty else { return true }
            let deadline = Monotonic.now() &+ handlers.timeoutNanoseconds
            defer { pending.removeAll(keepingCapacity: true) }
            return pending.withUnsafeBytes { conduit.sendAll($0, deadline: deadline) }
        }
        while true {
            var data: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &data)
            if n < 0 { return false }
            if n == 0 { return write() }
            pending.append(contentsOf: UnsafeBufferPointer(start: data, count: n))
            if pending.count >= 64 << 10 && !write() { return false }
        }
    }

    /// Submits the answers handlers made since the last look.
    private func takeAnswers() {
        let ready = answers.withLock { a in
            defer { a.removeAll() }
            return a
        }
        for (id, response) in ready { respond(id, response) }
    }

    private func respond(_ id: Int32, _ response: HTTPResponse) {
        guard let session, let stream = streams[id], !stream.responded else { return }
        stream.responded = true
        var fields = [
            (":status", String(response.status)), ("content-type", response.contentType),
            ("content-length", String(response.body.count)),
        ]
        for (name, value) in response.headers {
            let lower = name.lowercased()
            if !["connection", "keep-alive", "transfer-encoding", "upgrade", "content-length"].contains(lower) { fields.append((lower, value)) }
        }
        let headers = HeaderList(fields)
        if stream.method == "HEAD" || response.body.isEmpty {
            nghttp2_submit_response(session, id, headers.nva, headers.count, nil)
        } else {
            stream.responseBody = response.body
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: h2ReadBody)
            nghttp2_submit_response(session, id, headers.nva, headers.count, &provider)
        }
    }

    // MARK: nghttp2 events (called from the file-private callbacks, on this connection's thread)

    fileprivate func beginHeaders(_ id: Int32) {
        streams[id] = H2Stream(peer: peer)
    }

    fileprivate func header(_ id: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let stream = streams[id], !stream.requestDone else { return }
        stream.headerBytes += name.count + value.count + 4
        if stream.headerBytes > handlers.configuration.maxHeaderBytes { return }  // counted; answered 431 at the end
        let n = String(decoding: name, as: UTF8.self), v = String(decoding: value, as: UTF8.self)
        switch n {
        case ":method": stream.method = v
        case ":path": stream.path = String(v.prefix { $0 != "?" })
        case ":authority": stream.headers.append(("host", v))
        case _ where n.hasPrefix(":"): break
        default: stream.headers.append((n.lowercased(), v))
        }
    }

    fileprivate func headersComplete(_ id: Int32, endStream: Bool) {
        guard let stream = streams[id] else { return }
        if endStream { stream.requestDone = true }
        if let early = handlers.early(stream.request, headerBytes: stream.headerBytes) {
            respond(id, early)
            return
        }
        if endStream { requestEnded(id) }
    }

    /// How much of a request body answered early is read and dropped before the client is told to stop.
    static let discardLimit = 1 << 20

    fileprivate func data(_ id: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let session, let stream = streams[id] else { return }
        if stream.responded {
            // Answered early (413, 415...): what still comes is read and dropped, so a client still sending
            // gets its request to the end and reads the answer (curl 7.88 reports a reset, even NO_ERROR, as
            // a failed transfer). Past `discardLimit` it is told to stop with RST_STREAM NO_ERROR instead.
            guard !stream.requestDone else { return }
            stream.discarded += bytes.count
            if stream.discarded > Self.discardLimit {
                stream.requestDone = true
                nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, UInt32(NGHTTP2_NO_ERROR.rawValue))
            }
            return
        }
        if stream.body.count + bytes.count > handlers.configuration.maxBodyBytes {
            stream.body = []
            respond(id, .tooLarge)
            return
        }
        stream.body.append(contentsOf: bytes)
    }

    fileprivate func requestEnded(_ id: Int32) {
        guard let stream = streams[id] else { return }
        stream.requestDone = true
        guard !stream.responded, !stream.dispatched else { return }
        stream.dispatched = true
        var request = stream.request
        request.body = stream.body
        stream.body = []
        let wake = wakeFD
        handlers.handler(request) { [self] response in
            // Only the first answer since the loop last took them wakes it: a group commit answering many
            // streams at once costs one eventfd write, not one each.
            let first = self.answers.withLock { a -> Bool in
                a.append((id, response))
                return a.count == 1
            }
            if first {
                var one: UInt64 = 1
                _ = write(wake, &one, 8)
            }
        }
    }

    fileprivate func streamClosed(_ id: Int32) {
        streams[id] = nil
        if streams.isEmpty { idleSince = Monotonic.now() }
    }

    fileprivate func readBody(_ id: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let stream = streams[id] else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let n = min(length, stream.responseBody.count - stream.responseOffset)
        stream.responseBody.withUnsafeBytes { UnsafeMutableRawPointer(buffer).copyMemory(from: $0.baseAddress! + stream.responseOffset, byteCount: n) }
        stream.responseOffset += n
        if stream.responseOffset == stream.responseBody.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return n
    }
}

/// One request stream of an `H2Connection`.
private final class H2Stream {
    var method = ""
    var path = ""
    var headers: [(name: String, value: String)] = []
    var headerBytes = 0
    var body: [UInt8] = []
    let peer: String
    let startedAt = Monotonic.now()
    var requestDone = false
    var dispatched = false
    var responded = false
    var responseBody: [UInt8] = []
    var responseOffset = 0
    /// Body bytes read and dropped after an early answer.
    var discarded = 0

    init(peer: String) { self.peer = peer }

    /// The request so far, without its body.
    var request: HTTPRequest {
        HTTPRequest(method: method, path: path, headers: headers, peer: peer, httpVersion: "HTTP/2")
    }
}

// MARK: nghttp2 callbacks: find the connection through user_data, never throw into C.

private func connection(_ userData: UnsafeMutableRawPointer?) -> H2Connection {
    let c = Unmanaged<H2Connection>.fromOpaque(userData!).takeUnretainedValue()
    c.assertOnItsThread()
    return c
}

private let h2BeginHeaders: nghttp2_on_begin_headers_callback = { _, frame, userData in
    guard let frame else { return 0 }
    if frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) && frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
        connection(userData).beginHeaders(frame.pointee.hd.stream_id)
    }
    return 0
}

private let h2Header: nghttp2_on_header_callback = { _, frame, name, namelen, value, valuelen, _, userData in
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
    connection(userData).header(
        frame.pointee.hd.stream_id, name: UnsafeBufferPointer(start: name, count: namelen),
        value: UnsafeBufferPointer(start: value, count: valuelen))
    return 0
}

private let h2FrameRecv: nghttp2_on_frame_recv_callback = { _, frame, userData in
    switch frame.flatMap(RequestFrame.init) {
    case .headers(let id, let endStream): connection(userData).headersComplete(id, endStream: endStream)
    case .ended(let id): connection(userData).requestEnded(id)
    case .trailersWithoutEnd, nil: break  // this session keeps nghttp2's HTTP checks: it resets such streams itself
    }
    return 0
}

private let h2DataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, len, userData in
    connection(userData).data(streamID, UnsafeRawBufferPointer(start: data, count: len))
    return 0
}

private let h2StreamClose: nghttp2_on_stream_close_callback = { _, streamID, _, userData in
    connection(userData).streamClosed(streamID)
    return 0
}

private let h2ReadBody: nghttp2_data_source_read_callback = { _, streamID, buf, length, flags, _, userData in
    connection(userData).readBody(streamID, into: buf!, length: length, flags: flags!)
}
