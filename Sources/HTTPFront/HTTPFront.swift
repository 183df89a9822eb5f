import IO
import CSystem
import Dispatch
import Foundation
import Glibc
import HTTP2
import Synchronization

/// A small HTTP server for billingd's side ports: HTTP/1.1 through libmicrohttpd, HTTP/2 through nghttp2
/// (h2c by prior knowledge on the same port, or ALPN `h2` under TLS), every peer bounded.
///
/// One acceptor thread owns the listening socket: it refuses connections over the limit, tells h2c from
/// HTTP/1.x by peeking at the first bytes, and hands HTTP/1.x to libmicrohttpd's thread. TLS and HTTP/2
/// connections get a thread each (bounded by `maxConnections`).
public final class HTTPFront: Sendable {
    private let core: FrontCore

    /// The bound `HOST:PORT` (the real port when the configuration asked for 0).
    public let address: String

    /// Binds and starts serving.
    ///
    /// - Parameters:
    ///   - precheck: sees method, path and headers before any body byte is read, on a server thread; it must
    ///     return at once, with an answer (404, 405, 415...) or nil to read the body.
    ///   - handler: gets the whole request and calls its completion exactly once, from any thread, now or
    ///     later. It must not block the calling thread.
    public init(
        configuration: HTTPFrontConfiguration,
        precheck: @escaping @Sendable (HTTPRequest) -> HTTPResponse?,
        handler: @escaping @Sendable (HTTPRequest, @escaping @Sendable (HTTPResponse) -> Void) -> Void
    ) throws(HTTPFrontError) {
        core = try FrontCore(handlers: Handlers(configuration: configuration, precheck: precheck, handler: handler))
        address = core.address
    }

    deinit { core.stop() }

    /// Connections open now (all protocols).
    public var connectionCount: Int { core.table.openCount }

    /// Connections closed at accept because `maxConnections` were open.
    public var refusedConnectionCount: Int { core.table.refusedCount }

    /// Stops accepting, ends every connection (requests awaiting a handler get 503), and joins the threads.
    public func stop() { core.stop() }
}

/// What the acceptor thread runs on; shared with it and with the connection threads.
final class FrontCore: @unchecked Sendable {
    // Sendable: all fields are immutable after init except through their own locks (`table`, `mhd`, `stopped`);
    // the listening socket is read by the acceptor thread alone and closed by it when it ends.
    let handlers: Handlers
    let table: ConnectionTable
    let address: String
    private let listenFD: Int32
    private let wakeFD: Int32
    private let tls: TLSContext?
    private let mhd: MHDDaemon
    private let acceptor = DispatchGroup()
    private let stopped = Atomic<Bool>(false)

    /// How long the acceptor waits for a cleartext connection's first bytes before deciding it is HTTP/1.x.
    private static let peekNanoseconds: UInt64 = 500_000_000
    /// The HTTP/2 client connection preface.
    private static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    init(handlers: Handlers) throws(HTTPFrontError) {
        // OpenSSL writes with write(2): a peer that left must not kill the process.
        signal(SIGPIPE, SIG_IGN)
        self.handlers = handlers
        let config = handlers.configuration
        table = ConnectionTable(limit: config.maxConnections)
        if let files = config.tls {
            do {
                tls = try TLSContext(
                    certificatePath: files.certificatePath, keyPath: files.keyPath,
                    alpn: config.http2 ? ["h2", "http/1.1"] : ["http/1.1"])
            } catch {
                throw .tls(error.description)
            }
        } else {
            tls = nil
        }
        do {
            listenFD = try Sockets.listen(try SocketAddress.resolve(config.listen), backlog: 128)
        } catch {
            throw .listen(error.description)
        }
        address = Sockets.localAddress(listenFD).text
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        guard wakeFD >= 0 else {
            close(listenFD)
            throw .start("eventfd: \(String(cString: strerror(errno)))")
        }
        do {
            mhd = try MHDDaemon(handlers: handlers, table: table)
        } catch {
            close(listenFD)
            close(wakeFD)
            throw error
        }
        acceptor.enter()
        let thread = Thread { [self] in
            self.acceptLoop()
            self.acceptor.leave()
        }
        thread.name = "http-front-accept"
        thread.start()
    }

    deinit { close(wakeFD) }

    func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        table.beginStop()
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
        acceptor.wait()
        mhd.stop()  // before the TLS bridges go: their 503s pass through them
        table.shutdownThreadSockets()
        _ = table.threads.wait(timeout: .now() + .seconds(10))
    }

    // MARK: Acceptor thread

    /// A cleartext connection whose first bytes have not told its protocol yet.
    private struct Pending {
        var fd: Int32
        var address: SocketAddress
        var acceptedAt: UInt64
    }

    private func acceptLoop() {
        var pending: [Pending] = []
        defer {
            for p in pending {
                close(p.fd)
                table.release()
            }
            close(listenFD)
        }
        while true {
            var fds = [pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0), pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)]
            fds += pending.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            let rc = poll(&fds, nfds_t(fds.count), 100)
            if rc < 0 && errno != EINTR { return }
            if fds[0].revents != 0 { return }
            let now = Monotonic.now()
            // Decide the connections that spoke or waited long enough, newest accepts last.
            var undecided: [Pending] = []
            for (i, p) in pending.enumerated() where !classify(p, readable: fds[i + 2].revents != 0, now: now) {
                undecided.append(p)
            }
            pending = undecided
            if fds[1].revents != 0 { pending += acceptAll(now: now) }
            table.expireMHD(now: now)
        }
    }

    /// Accepts what is waiting; returns the cleartext connections to classify.
    private func acceptAll(now: UInt64) -> [Pending] {
        var accepted: [Pending] = []
        while true {
            let (fd, address) = Sockets.accept(listenFD)
            if fd < 0 {
                if errno == EINTR { continue }
                return accepted  // EAGAIN, or a transient error (EMFILE...): try again at the next poll
            }
            guard table.admit() else {
                close(fd)
                continue
            }
            Sockets.setInt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
            if tls != nil {
                spawn(fd: fd, address: address) { core, fd, address in core.serveTLS(fd: fd, address: address) }
            } else if handlers.configuration.http2 {
                accepted.append(Pending(fd: fd, address: address, acceptedAt: now))
            } else {
                mhd.add(fd: fd, address: address, bridged: false)
            }
        }
    }

    /// Peeks at a cleartext connection: the HTTP/2 preface goes to an nghttp2 thread, anything else to
    /// libmicrohttpd. True once decided (or closed).
    private func classify(_ p: Pending, readable: Bool, now: UInt64) -> Bool {
        let timedOut = now &- p.acceptedAt >= FrontCore.peekNanoseconds
        guard readable || timedOut else { return false }
        var head = [UInt8](repeating: 0, count: FrontCore.preface.count)
        let n = recv(p.fd, &head, head.count, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
        if n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            close(p.fd)
            table.release()
            return true
        }
        let got = max(n, 0)
        let matches = head[..<got].elementsEqual(FrontCore.preface[..<got])
        if matches && (got == FrontCore.preface.count || (timedOut && got >= 3)) {
            spawn(fd: p.fd, address: p.address) { core, fd, address in core.serveHTTP2(Conduit(fd: fd, tls: nil), peer: address.text) }
        } else if !matches || timedOut {
            mhd.add(fd: p.fd, address: p.address, bridged: false)
        } else {
            return false  // a prefix of the preface so far: wait for more
        }
        return true
    }

    // MARK: Connection threads

    /// Runs `body` on a new thread that owns `fd`: closed, and its slot freed, when `body` returns.
    private func spawn(fd: Int32, address: SocketAddress, _ body: @escaping @Sendable (FrontCore, Int32, SocketAddress) -> Void) {
        guard table.adopt(fd) else {
            close(fd)
            table.release()
            return
        }
        table.threads.enter()
        let thread = Thread { [self] in
            body(self, fd, address)
            self.table.disown(fd)
            close(fd)
            self.table.release()
            self.table.threads.leave()
        }
        thread.name = "http-front-conn"
        thread.stackSize = 256 * 1024
        thread.start()
    }

    private func serveHTTP2(_ conduit: Conduit, peer: String) {
        guard let connection = try? H2Connection(conduit: conduit, handlers: handlers, peer: peer) else { return }
        connection.run()
    }

    /// Handshakes within the request timeout, then serves HTTP/2 (ALPN h2) or bridges HTTP/1.1 to libmicrohttpd.
    private func serveTLS(fd: Int32, address: SocketAddress) {
        guard let context = tls, let session = try? TLSSession(context: context, fd: fd, server: true) else { return }
        let deadline = Monotonic.now() &+ handlers.timeoutNanoseconds
        handshake: while true {
            switch session.handshake() {
            case .done: break handshake
            case .wantRead: if !Poll.wait(fd, Int16(POLLIN), until: deadline) { return }
            case .wantWrite: if !Poll.wait(fd, Int16(POLLOUT), until: deadline) { return }
            case .closed, .failed: return
            }
            if Monotonic.now() >= deadline { return }
        }
        defer { session.shutdown() }
        let outside = Conduit(fd: fd, tls: session)
        if session.alpn == "h2" && handlers.configuration.http2 {
            serveHTTP2(outside, peer: address.text)
            return
        }
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else { return }
        _ = fcntl(pair[0], F_SETFL, fcntl(pair[0], F_GETFL) | O_NONBLOCK)
        mhd.add(fd: pair[1], address: address, bridged: true)
        Conduit.pump(outside, Conduit(fd: pair[0], tls: nil), writeTimeoutNanoseconds: handlers.timeoutNanoseconds)
        close(pair[0])
    }
}
