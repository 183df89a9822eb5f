import CMicroHTTPD
import CSystem
import Glibc
import IO
import Lifecycle

/// HTTP/1.x on an event loop, through libmicrohttpd: a daemon with no listening socket and no thread of its
/// own. The loop hands it the connections it accepted (or, behind TLS, one end of a socketpair), watches
/// its epoll set and calls `MHD_run` when it is readable or when libmicrohttpd's timeout comes. Handlers
/// answer from any thread; the answer hops back to the loop, which resumes the connection.
///
/// Confined to its loop (libmicrohttpd's callbacks run inside `MHD_run`, on the loop); other threads reach
/// it only through `LoopBound`.
final class HTTP1Engine: EventHandler {
    let loop: EventLoop
    let service: HTTPService
    let shared: ServerShared
    private var daemon: OpaquePointer?
    private var epollFD: Int32 = -1
    private var timer: Int?
    private var stopping = false

    /// A connection libmicrohttpd holds: who it is, whether this engine owns its slot (not behind TLS,
    /// where the TLS connection does), and the time its current request must have arrived by (0: none).
    private struct Entry {
        var fd: Int32
        var peer: String
        var addressKey: String
        var counted: Bool
        var deadline: UInt64
        var busy = false
    }
    /// Sockets handed over, until libmicrohttpd reports them started.
    private var incoming: [Int32: Entry] = [:]
    private var entries: [UInt64: Entry] = [:]
    private var nextID: UInt64 = 1
    /// Requests with their handler, by id.
    private var waiting: [UInt64: HTTP1Request] = [:]
    /// Streamed answers being sent (libmicrohttpd must meet no suspended connection when it stops).
    var streaming: [ObjectIdentifier: HTTP1BodyContext] = [:]

    init(loop: EventLoop, service: HTTPService, shared: ServerShared) throws(SocketError) {
        self.loop = loop
        self.service = service
        self.shared = shared
        let flags = MHD_USE_NO_LISTEN_SOCKET.rawValue | MHD_USE_EPOLL.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
        // Headers, the read buffer and the response head share this pool; bodies never enter it.
        let pool = max(service.maxHeaderBytes, 1024) + 8 * 1024
        let idleSeconds = UInt32(max(1, service.requestTimeoutNanoseconds / 1_000_000_000))
        let made = cmhd_start(
            UInt32(flags), http1Access, Unmanaged.passUnretained(self).toOpaque(), http1Completed, http1Notify,
            idleSeconds, pool, UInt32(Int32.max))
        guard let made else { throw .system(call: "MHD_start_daemon", errno: errno) }
        daemon = made
        epollFD = cmhd_epoll_fd(made)
        loop.register(epollFD, self, events: EPOLLIN.rawValue)
    }

    /// Hands over a connected socket, with its peer. libmicrohttpd closes it when done. `counted`: this
    /// engine gives back the connection's slot and its address's when it closes.
    func add(fd: Int32, peer: String, addressKey: String, counted: Bool) {
        loop.assertInEventLoop("HTTP1Engine")
        guard let daemon, !stopping else {
            Glibc.close(fd)
            if counted { shared.connectionClosed(addressKey: addressKey) }
            return
        }
        incoming[fd] = Entry(fd: fd, peer: peer, addressKey: addressKey, counted: counted, deadline: Monotonic.now() &+ service.requestTimeoutNanoseconds)
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        if named != 0 {
            // A socketpair end (behind TLS) has no peer address; libmicrohttpd needs one.
            storage = sockaddr_storage()
            storage.ss_family = sa_family_t(AF_INET)
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
        }
        let added = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { MHD_add_connection(daemon, fd, $0, length) }
        }
        if added != .YES, let entry = incoming.removeValue(forKey: fd) {
            // libmicrohttpd closed the socket already.
            if entry.counted { shared.connectionClosed(addressKey: entry.addressKey) }
        }
        run()
    }

    func handle(events: UInt32) {
        loop.assertInEventLoop("HTTP1Engine")
        run()
    }

    /// Lets libmicrohttpd do what is due, then sets the timer for its next timeout.
    func run() {
        guard let daemon else { return }
        _ = MHD_run(daemon)
        if let timer {
            loop.cancelTimer(timer)
            self.timer = nil
        }
        let ms = cmhd_timeout_ms(daemon)
        if ms >= 0 {
            timer = loop.schedule(afterNanoseconds: Int64(min(ms, 60_000)) * 1_000_000) { [self] in
                timer = nil
                run()
            }
        }
    }

    /// Once a second: a request that has not arrived by its deadline (a slow sender) loses its connection.
    func sweep(now: UInt64) {
        var expired = false
        for (id, entry) in entries where entry.deadline != 0 && now >= entry.deadline {
            shutdown(entry.fd, Int32(SHUT_RDWR))
            entries[id]?.deadline = 0
            expired = true
        }
        if expired { run() }
    }

    /// Draining: idle keep-alive connections are closed now; busy ones after their answer.
    func beginDrain() {
        stopping = true
        for entry in entries.values where !entry.busy { shutdown(entry.fd, Int32(SHUT_RDWR)) }
        run()
    }

    /// The end: requests still waiting for their handler are answered 503; once those answers are out (at
    /// most `drainNanoseconds`), every connection is closed and the daemon stopped; then `done` runs.
    func finish(drainNanoseconds: UInt64 = 3_000_000_000, then done: @escaping () -> Void) {
        stopping = true
        for (_, request) in waiting {
            request.response = .shuttingDown
            MHD_resume_connection(request.connection)
        }
        waiting.removeAll()
        // Streamed answers end here: their connections close (libmicrohttpd must meet none suspended).
        for context in streaming.values {
            context.closing = true
            if context.suspended {
                context.suspended = false
                MHD_resume_connection(context.connection)
            }
        }
        run()
        let end = Monotonic.now() &+ drainNanoseconds
        func poll() {
            if Monotonic.now() < end && entries.values.contains(where: { $0.busy }) {
                loop.schedule(afterNanoseconds: 5_000_000) { poll() }
                return
            }
            close()
            done()
        }
        poll()
    }

    private func close() {
        guard let daemon else { return }
        if let timer { loop.cancelTimer(timer) }
        timer = nil
        loop.deregister(epollFD)
        MHD_stop_daemon(daemon)  // closes every connection (their notifications give back the slots)
        self.daemon = nil
    }

    // MARK: Called inside MHD_run, on the loop

    fileprivate func access(
        _ connection: OpaquePointer, url: String, method: String, version: String,
        upload: UnsafePointer<CChar>?, uploadSize: UnsafeMutablePointer<Int>,
        context: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        let id = UInt64(UInt(bitPattern: cmhd_socket_context(connection)))
        guard let raw = context.pointee else {
            // The headers are in: answer now, or keep state for the body.
            entries[id]?.busy = true
            var headers: [(name: String, value: String)] = []
            _ = withUnsafeMutablePointer(to: &headers) { MHD_get_connection_values(connection, .HEADER_KIND, http1Header, $0) }
            let headerBytes = method.utf8.count + url.utf8.count + headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
            var request = HTTPRequest(method: method, path: url, headers: headers, peer: entries[id]?.peer ?? "", httpVersion: version)
            request.timers = RequestTimers(host: loop)
            if let response = stopping ? HTTPResponse.shuttingDown : service.early(request, headerBytes: headerBytes) {
                entries[id]?.deadline = 0
                return queue(response, on: connection)
            }
            context.pointee = Unmanaged.passRetained(HTTP1Request(connection: connection, request: request)).toOpaque()
            return .YES
        }
        let state = Unmanaged<HTTP1Request>.fromOpaque(raw).takeUnretainedValue()
        if uploadSize.pointee > 0 {
            let n = uploadSize.pointee
            uploadSize.pointee = 0
            if !state.tooLarge, let upload {
                if state.request.body.count + n > service.maxBodyBytes {
                    // Too much: drop what came and the rest as it arrives; 413 once the request ends.
                    state.tooLarge = true
                    state.request.body = []
                } else {
                    state.request.body.append(contentsOf: UnsafeRawBufferPointer(start: upload, count: n))
                }
            }
            return .YES
        }
        if let response = state.response { return queue(response, on: connection) }
        if state.tooLarge {
            entries[id]?.deadline = 0
            return queue(.tooLarge, on: connection)
        }
        guard !state.dispatched else { return .YES }
        state.dispatched = true
        entries[id]?.deadline = 0
        MHD_suspend_connection(connection)
        let key = nextID
        nextID &+= 1
        waiting[key] = state
        let bound = LoopBound(self, loop: loop)
        service.handler(state.request) { response in
            bound.execute { $0.answer(key, response) }
        }
        return .YES
    }

    private func answer(_ key: UInt64, _ response: HTTPResponse) {
        guard let state = waiting.removeValue(forKey: key) else { return }  // answered 503 at the end
        state.response = response
        MHD_resume_connection(state.connection)
        run()
    }

    /// A request ended (answered, or its connection closed): the next request is due in time.
    fileprivate func completed(_ connection: OpaquePointer, context: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) {
        if let raw = context?.pointee {
            Unmanaged<HTTP1Request>.fromOpaque(raw).release()
            context?.pointee = nil
        }
        let id = UInt64(UInt(bitPattern: cmhd_socket_context(connection)))
        guard entries[id] != nil else { return }
        entries[id]?.busy = false
        entries[id]?.deadline = Monotonic.now() &+ service.requestTimeoutNanoseconds
    }

    fileprivate func started(_ connection: OpaquePointer, socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>) {
        guard let entry = incoming.removeValue(forKey: cmhd_connection_fd(connection)) else { return }
        let id = nextID
        nextID &+= 1
        entries[id] = entry
        socketContext.pointee = UnsafeMutableRawPointer(bitPattern: UInt(id))
    }

    fileprivate func closed(socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>) {
        let id = UInt64(UInt(bitPattern: socketContext.pointee))
        guard id != 0, let entry = entries.removeValue(forKey: id) else { return }
        if entry.counted { shared.connectionClosed(addressKey: entry.addressKey) }
    }

    private func queue(_ response: HTTPResponse, on connection: OpaquePointer) -> MHD_Result {
        let made: OpaquePointer?
        if let body = response.stream {
            // Chunked: libmicrohttpd pulls what the stream has; with nothing yet, the connection is suspended
            // until the producer writes (or ends) and the loop resumes it.
            let context = HTTP1BodyContext(engine: self, connection: connection, body: body)
            streaming[ObjectIdentifier(context)] = context
            let bound = LoopBound(context, loop: loop)
            body.attach { bound.execute { $0.wake() } }
            made = MHD_create_response_from_callback(
                UInt64.max, 16 * 1024, http1BodyReader, Unmanaged.passRetained(context).toOpaque(), http1BodyFree)
        } else {
            made = response.body.withUnsafeBytes {
                MHD_create_response_from_buffer($0.count, UnsafeMutableRawPointer(mutating: $0.baseAddress), .RESPMEM_MUST_COPY)
            }
        }
        guard let made else { return .NO }
        defer { MHD_destroy_response(made) }
        _ = MHD_add_response_header(made, "Content-Type", response.contentType)
        for (name, value) in response.headers { _ = MHD_add_response_header(made, name, value) }
        if stopping { _ = MHD_add_response_header(made, "Connection", "close") }
        return MHD_queue_response(connection, UInt32(response.status), made)
    }
}

/// One HTTP/1.x request in progress; libmicrohttpd keeps it (retained) as the request's `con_cls`.
/// Touched on the engine's loop only.
final class HTTP1Request {
    let connection: OpaquePointer
    var request: HTTPRequest
    var tooLarge = false
    var dispatched = false
    var response: HTTPResponse?

    init(connection: OpaquePointer, request: HTTPRequest) {
        self.connection = connection
        self.request = request
    }
}

/// A streamed answer's state between libmicrohttpd's reader calls; touched on the engine's loop only.
final class HTTP1BodyContext {
    unowned let engine: HTTP1Engine
    let connection: OpaquePointer
    let body: HTTPBodyStream
    var suspended = false
    var ended = false
    /// libmicrohttpd dropped the answer (and may free the connection): nothing may touch it any more.
    var freed = false
    /// The server is stopping: the answer ends now, with an error (the connection closes).
    var closing = false

    init(engine: HTTP1Engine, connection: OpaquePointer, body: HTTPBodyStream) {
        self.engine = engine
        self.connection = connection
        self.body = body
    }

    /// libmicrohttpd wants up to `max` bytes: what the stream has, its end, or a suspension until it writes.
    func read(into buffer: UnsafeMutablePointer<CChar>, max: Int) -> Int {
        if closing { return -2 }  // MHD_CONTENT_READER_END_WITH_ERROR
        let (bytes, ended) = body.take(max: max)
        if !bytes.isEmpty {
            bytes.withUnsafeBytes { UnsafeMutableRawPointer(buffer).copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
            return bytes.count
        }
        if ended {
            self.ended = true
            return -1  // MHD_CONTENT_READER_END_OF_STREAM
        }
        MHD_suspend_connection(connection)
        suspended = true
        return 0
    }

    /// The producer wrote or ended: a suspended connection goes on.
    func wake() {
        guard suspended, !freed else { return }
        suspended = false
        MHD_resume_connection(connection)
        engine.run()
    }
}

private let http1BodyReader: MHD_ContentReaderCallback = { cls, _, buffer, max in
    guard let cls, let buffer else { return -2 }  // MHD_CONTENT_READER_END_WITH_ERROR
    return Unmanaged<HTTP1BodyContext>.fromOpaque(cls).takeUnretainedValue().read(into: buffer, max: max)
}

private let http1BodyFree: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    let context = Unmanaged<HTTP1BodyContext>.fromOpaque(cls).takeRetainedValue()
    context.freed = true
    context.engine.streaming[ObjectIdentifier(context)] = nil
    if !context.ended { context.body.cancel() }  // the connection went before the end: the producer stops
}

// MARK: libmicrohttpd callbacks: find the engine through `cls`, never throw into C.

private func engine(_ cls: UnsafeMutableRawPointer?) -> HTTP1Engine {
    Unmanaged<HTTP1Engine>.fromOpaque(cls!).takeUnretainedValue()
}

private let http1Access: MHD_AccessHandlerCallback = { cls, connection, url, method, version, upload, uploadSize, context in
    guard let connection, let uploadSize, let context else { return .NO }
    return engine(cls).access(
        connection, url: url.map { String(cString: $0) } ?? "/", method: method.map { String(cString: $0) } ?? "",
        version: version.map { String(cString: $0) } ?? "HTTP/1.1", upload: upload, uploadSize: uploadSize,
        context: context)
}

private let http1Completed: MHD_RequestCompletedCallback = { cls, connection, context, _ in
    guard let connection else { return }
    engine(cls).completed(connection, context: context)
}

private let http1Notify: MHD_NotifyConnectionCallback = { cls, connection, socketContext, code in
    guard let connection, let socketContext else { return }
    if code == .CONNECTION_NOTIFY_STARTED {
        engine(cls).started(connection, socketContext: socketContext)
    } else {
        engine(cls).closed(socketContext: socketContext)
    }
}

/// Appends one header field (name lower-cased) to the `[(name, value)]` behind `cls`.
private let http1Header: MHD_KeyValueIterator = { cls, _, key, value in
    guard let cls, let key else { return .YES }
    let headers = cls.assumingMemoryBound(to: [(name: String, value: String)].self)
    headers.pointee.append((String(cString: key).lowercased(), value.map { String(cString: $0) } ?? ""))
    return .YES
}
