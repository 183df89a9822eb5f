import IO
import CMicroHTTPD
import Glibc
import HTTP2
import Synchronization

/// A libmicrohttpd daemon with no listening socket of its own: the front hands it sockets (accepted
/// HTTP/1.x connections, or socketpair ends behind TLS). One internal epoll thread runs every connection;
/// handlers answer later by resuming the suspended connection.
final class MHDDaemon: @unchecked Sendable {
    // Sendable: `daemon` is set in init and cleared in stop() under `suspended`'s lock; other threads use it
    // only through MHD_add_connection and MHD_resume_connection, which libmicrohttpd documents as callable from
    // any thread with MHD_USE_ITC (implied by MHD_ALLOW_SUSPEND_RESUME). The rest is immutable.
    private var daemon: OpaquePointer?
    let handlers: Handlers
    let table: ConnectionTable
    /// Requests waiting for their handler, those answered 503 by `stop`, and whether the daemon is stopping.
    /// Its lock orders every resume before `MHD_stop_daemon`, which must not meet a suspended connection.
    private let suspended = Mutex(Waiting())

    private struct Waiting {
        var requests: [ObjectIdentifier: MHDRequest] = [:]
        var draining: Set<ObjectIdentifier> = []
        var stopped = false
    }

    /// How long `stop` lets the 503s it queued go out before closing every connection. 3 s, not 1: with both
    /// cores busy (a parallel test run), libmicrohttpd's thread once took longer than 1 s to send them and a
    /// client saw the connection close instead of its 503. `stop` returns as soon as they are out.
    private static let drainNanoseconds: UInt64 = 3_000_000_000

    init(handlers: Handlers, table: ConnectionTable) throws(HTTPFrontError) {
        self.handlers = handlers
        self.table = table
        let config = handlers.configuration
        let flags =
            MHD_USE_NO_LISTEN_SOCKET.rawValue | MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_EPOLL.rawValue
            | MHD_ALLOW_SUSPEND_RESUME.rawValue
        // Headers, the read buffer and the response head share this pool; bodies never enter it.
        let pool = max(config.maxHeaderBytes, 1024) + 8 * 1024
        let limit = config.maxConnections > 0 ? config.maxConnections : Int(Int32.max)
        daemon = cmhd_start(
            UInt32(flags), mhdAccess, Unmanaged.passUnretained(self).toOpaque(), mhdCompleted, mhdNotify,
            UInt32(max(1, config.requestTimeoutSeconds)), pool, UInt32(limit))
        if daemon == nil { throw .start("libmicrohttpd could not start") }
    }

    /// Hands a connected socket (blocking or not) to libmicrohttpd, which closes it when done.
    func add(fd: Int32, address: SocketAddress, bridged: Bool) {
        let id = table.registerMHD(fd: fd, peer: address.text, bridged: bridged, timeoutNanoseconds: handlers.timeoutNanoseconds)
        let added = suspended.withLock { s -> Bool in
            guard let daemon, !s.stopped else { return false }
            return address.withSockaddr { MHD_add_connection(daemon, fd, $0, $1) } == .YES
        }
        if !added {
            // libmicrohttpd closed it already when it refused; when stopped, we close it.
            if suspended.withLock({ $0.stopped }) { close(fd) }
            table.mhdClosed(id: id)
        }
    }

    /// Answers every request still waiting with 503, then stops the daemon and closes its connections.
    func stop() {
        let daemon = suspended.withLock { s -> OpaquePointer? in
            guard !s.stopped else { return nil }
            s.stopped = true
            for (key, request) in s.requests {
                request.response = .shuttingDown
                MHD_resume_connection(request.connection)
                s.draining.insert(key)
            }
            s.requests.removeAll()
            let d = self.daemon
            self.daemon = nil
            return d
        }
        guard let daemon else { return }
        let end = Monotonic.now() &+ MHDDaemon.drainNanoseconds
        while Monotonic.now() < end && !suspended.withLock({ $0.draining.isEmpty }) { usleep(5_000) }
        MHD_stop_daemon(daemon)
    }

    // MARK: Called on libmicrohttpd's thread

    fileprivate func access(
        _ connection: OpaquePointer, url: String, method: String, version: String,
        upload: UnsafePointer<CChar>?, uploadSize: UnsafeMutablePointer<Int>,
        context: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        let id = UInt64(UInt(bitPattern: cmhd_socket_context(connection)))
        guard let raw = context.pointee else {
            // The headers are in: answer now, or keep state for the body.
            var headers: [(name: String, value: String)] = []
            _ = withUnsafeMutablePointer(to: &headers) { MHD_get_connection_values(connection, .HEADER_KIND, mhdHeader, $0) }
            let headerBytes = method.utf8.count + url.utf8.count + headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
            let request = HTTPRequest(method: method, path: url, headers: headers, peer: table.peer(id: id), httpVersion: version)
            if let response = handlers.early(request, headerBytes: headerBytes) {
                table.setDeadline(id: id, timeoutNanoseconds: nil)
                return queue(response, on: connection)
            }
            context.pointee = Unmanaged.passRetained(MHDRequest(connection: connection, request: request)).toOpaque()
            return .YES
        }
        let state = Unmanaged<MHDRequest>.fromOpaque(raw).takeUnretainedValue()
        if uploadSize.pointee > 0 {
            let n = uploadSize.pointee
            uploadSize.pointee = 0
            if !state.tooLarge, let upload {
                if state.request.body.count + n > handlers.configuration.maxBodyBytes {
                    // Too much: drop what came and the rest as it arrives; 413 once the request ends.
                    state.tooLarge = true
                    state.request.body = []
                } else {
                    state.request.body.append(contentsOf: UnsafeRawBufferPointer(start: upload, count: n))
                }
            }
            return .YES
        }
        if let response = suspended.withLock({ _ in state.response }) { return queue(response, on: connection) }
        if state.tooLarge {
            table.setDeadline(id: id, timeoutNanoseconds: nil)
            return queue(.tooLarge, on: connection)
        }
        guard !state.dispatched else { return .YES }
        state.dispatched = true
        table.setDeadline(id: id, timeoutNanoseconds: nil)
        MHD_suspend_connection(connection)
        suspended.withLock { $0.requests[ObjectIdentifier(state)] = state }
        handlers.handler(state.request) { [self] response in
            self.suspended.withLock { s in
                guard s.requests.removeValue(forKey: ObjectIdentifier(state)) != nil else { return }  // answered, or stopped
                state.response = response
                MHD_resume_connection(state.connection)
            }
        }
        return .YES
    }

    /// A request ended (answered, or its connection closed): free its state; the next request is due in time.
    fileprivate func completed(_ connection: OpaquePointer, context: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) {
        if let raw = context?.pointee {
            _ = suspended.withLock { $0.draining.remove(ObjectIdentifier(Unmanaged<MHDRequest>.fromOpaque(raw).takeUnretainedValue())) }
            Unmanaged<MHDRequest>.fromOpaque(raw).release()
            context?.pointee = nil
        }
        let id = UInt64(UInt(bitPattern: cmhd_socket_context(connection)))
        table.setDeadline(id: id, timeoutNanoseconds: handlers.timeoutNanoseconds)
    }

    fileprivate func started(_ connection: OpaquePointer, socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>) {
        guard let id = table.mhdStarted(fd: cmhd_connection_fd(connection)) else { return }
        socketContext.pointee = UnsafeMutableRawPointer(bitPattern: UInt(id))
    }

    fileprivate func closed(socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>) {
        let id = UInt64(UInt(bitPattern: socketContext.pointee))
        if id != 0 { table.mhdClosed(id: id) }
    }

    private func queue(_ response: HTTPResponse, on connection: OpaquePointer) -> MHD_Result {
        let made = response.body.withUnsafeBytes {
            MHD_create_response_from_buffer($0.count, UnsafeMutableRawPointer(mutating: $0.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let made else { return .NO }
        defer { MHD_destroy_response(made) }
        _ = MHD_add_response_header(made, "Content-Type", response.contentType)
        for (name, value) in response.headers { _ = MHD_add_response_header(made, name, value) }
        return MHD_queue_response(connection, UInt32(response.status), made)
    }
}

/// One HTTP/1.x request in progress; libmicrohttpd keeps it (retained) as the request's `con_cls`.
final class MHDRequest: @unchecked Sendable {
    // Sendable: `response` is written and read under MHDDaemon's `suspended` lock; everything else only on
    // libmicrohttpd's thread. The completion closure holds it only to set `response` and resume.
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

// MARK: libmicrohttpd callbacks: find the daemon through `cls`, never throw into C.

private func daemon(_ cls: UnsafeMutableRawPointer?) -> MHDDaemon {
    Unmanaged<MHDDaemon>.fromOpaque(cls!).takeUnretainedValue()
}

private let mhdAccess: MHD_AccessHandlerCallback = { cls, connection, url, method, version, upload, uploadSize, context in
    guard let connection, let uploadSize, let context else { return .NO }
    return daemon(cls).access(
        connection, url: url.map { String(cString: $0) } ?? "/", method: method.map { String(cString: $0) } ?? "",
        version: version.map { String(cString: $0) } ?? "HTTP/1.1", upload: upload, uploadSize: uploadSize,
        context: context)
}

private let mhdCompleted: MHD_RequestCompletedCallback = { cls, connection, context, _ in
    guard let connection else { return }
    daemon(cls).completed(connection, context: context)
}

private let mhdNotify: MHD_NotifyConnectionCallback = { cls, connection, socketContext, code in
    guard let connection, let socketContext else { return }
    if code == .CONNECTION_NOTIFY_STARTED {
        daemon(cls).started(connection, socketContext: socketContext)
    } else {
        daemon(cls).closed(socketContext: socketContext)
    }
}

/// Appends one header field (name lower-cased) to the `[(name, value)]` behind `cls`.
private let mhdHeader: MHD_KeyValueIterator = { cls, _, key, value in
    guard let cls, let key else { return .YES }
    let headers = cls.assumingMemoryBound(to: [(name: String, value: String)].self)
    headers.pointee.append((String(cString: key).lowercased(), value.map { String(cString: $0) } ?? ""))
    return .YES
}
