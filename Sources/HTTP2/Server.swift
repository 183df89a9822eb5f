import CSystem
import Glibc
public import RPC
import Synchronization

/// How a `Server` listens and what it accepts.
public struct ServerConfiguration: Sendable {
    /// `HOST:PORT`; port 0 picks a free port (see `Server.port`).
    public var listen = "127.0.0.1:50051"
    /// Event-loop threads; each owns a listener (SO_REUSEPORT) and its connections.
    public var threads = 1
    public var maxMessageBytes = 4 << 20
    public var maxConcurrentStreams = 1024
    public var maxHeaderListBytes = 16 << 10
    /// TLS with ALPN h2 when set; h2c with prior knowledge otherwise.
    public var tls: TLSContext?

    public init() {}
}

/// The end of one call, for logs and metrics.
public struct CallRecord: Sendable {
    public var method: String
    public var code: StatusCode
    public var reason: String?
    public var durationNanoseconds: UInt64
    public var peer: String
    public var requestID: String
}

/// State every loop of a server reads: configuration, router, counters.
final class ServerShared: Sendable {
    let configuration: ServerConfiguration
    let router: Router
    let observer: (@Sendable (CallRecord) -> Void)?
    let connections = Atomic<Int>(0)
    let inFlight = Atomic<Int>(0)
    let requestCounter = Atomic<UInt64>(0)
    /// Calls answered, by gRPC code (index = raw value).
    let byCode: CodeCounters
    let requestIDPrefix: String

    init(configuration: ServerConfiguration, router: Router, observer: (@Sendable (CallRecord) -> Void)?) {
        self.configuration = configuration
        self.router = router
        self.observer = observer
        self.byCode = CodeCounters()
        let random = UInt32.random(in: 0...UInt32.max)
        self.requestIDPrefix = String(random, radix: 16)
    }

    func nextRequestID() -> String {
        let n = requestCounter.add(1, ordering: .relaxed).newValue
        return requestIDPrefix + "-" + String(n, radix: 16)
    }

    func connectionOpened() { connections.add(1, ordering: .relaxed) }
    func connectionClosed() { connections.subtract(1, ordering: .relaxed) }
    func callStarted() { inFlight.add(1, ordering: .relaxed) }

    func finished(stream: ServerStream, code: StatusCode, reason: String?, peer: String) {
        if stream.dispatched { inFlight.subtract(1, ordering: .relaxed) }
        byCode.add(code)
        guard let observer else { return }
        let elapsed = stream.startedAt == 0 ? 0 : Monotonic.now() &- stream.startedAt
        observer(CallRecord(method: stream.path.hasPrefix("/") ? String(stream.path.dropFirst()) : stream.path,
                            code: code, reason: reason, durationNanoseconds: elapsed, peer: peer,
                            requestID: stream.requestID))
    }
}

/// Accepts connections on one loop's listening socket.
final class Listener: EventHandler, @unchecked Sendable {
    // Sendable: used on its loop only; shutdown passes it to `loop.execute`.
    let fd: Int32
    let loop: EventLoop
    let shared: ServerShared
    private(set) var connections: [Int32: ServerConnection] = [:]

    init(fd: Int32, loop: EventLoop, shared: ServerShared) {
        self.fd = fd
        self.loop = loop
        self.shared = shared
    }

    func handle(events: UInt32) {
        for _ in 0..<64 {
            var address = SocketAddress()
            address.length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let client = withUnsafeMutablePointer(to: &address.storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    csystem_accept4(fd, $0, &address.length, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
                }
            }
            if client < 0 { return }  // EAGAIN, or EMFILE: try again on the next event
            Sockets.setInt(client, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
            do {
                let connection = try ServerConnection(fd: client, peer: address.text, loop: loop, shared: shared)
                connections[client] = connection
                connection.owner = self
                connection.start()
            } catch {
                Glibc.close(client)
            }
        }
    }

    /// Stops accepting (shutdown).
    func close() {
        loop.deregister(fd)
        Glibc.close(fd)
    }

    func forget(_ fd: Int32) { connections[fd] = nil }
}

/// An HTTP/2 gRPC server: N event loops, each with its own listener and connections.
public final class Server: Sendable {
    private let shared: ServerShared
    private let loops: [EventLoop]
    private let state = Mutex<State>(State())

    private struct State {
        var listeners: [Listener] = []
        var port = 0
        var started = false
        var draining = false
    }

    public init(configuration: ServerConfiguration, router: Router,
                observer: (@Sendable (CallRecord) -> Void)? = nil) throws(SocketError) {
        shared = ServerShared(configuration: configuration, router: router, observer: observer)
        var loops: [EventLoop] = []
        for i in 0..<max(1, configuration.threads) { loops.append(try EventLoop(name: "loop-\(i)")) }
        self.loops = loops
    }

    /// Binds every loop's listener and starts the loops; returns the bound address as `HOST:PORT`.
    @discardableResult
    public func start() throws(SocketError) -> String {
        var address = try SocketAddress.resolve(shared.configuration.listen)
        var fds: [Int32] = []
        do {
            for _ in loops {
                let fd = try Sockets.listen(address)
                if address.port == 0 {
                    // Later listeners share the port the kernel picked.
                    address = Sockets.localAddress(fd)
                }
                fds.append(fd)
            }
        } catch {
            for fd in fds { Glibc.close(fd) }
            throw error
        }
        let bound = Sockets.localAddress(fds[0])
        var listeners: [Listener] = []
        for (loop, fd) in zip(loops, fds) {
            let listener = Listener(fd: fd, loop: loop, shared: shared)
            listeners.append(listener)
            loop.register(fd, listener, events: EPOLLIN.rawValue)
            loop.start()
        }
        state.withLock {
            $0.listeners = listeners
            $0.port = bound.port
            $0.started = true
        }
        return bound.text
    }

    /// The bound TCP port (after `start`).
    public var port: Int { state.withLock { $0.port } }

    /// Open connections across all loops.
    public var connectionCount: Int { shared.connections.load(ordering: .relaxed) }
    /// Calls dispatched to handlers and not yet answered.
    public var inFlightCount: Int { shared.inFlight.load(ordering: .relaxed) }
    /// Calls answered so far with `code`.
    public func count(of code: StatusCode) -> Int { shared.byCode.count(code) }

    /// Graceful shutdown: stop accepting, GOAWAY, let calls in flight finish for up to
    /// `graceSeconds`, then close what is left and stop the loops. Blocks until done.
    public func shutdown(graceSeconds: Double) {
        let listeners = state.withLock { s -> [Listener] in
            s.draining = true
            return s.listeners
        }
        let deadline = Monotonic.now() + UInt64(max(0, graceSeconds) * 1e9)
        for listener in listeners {
            listener.loop.execute {
                listener.close()
                for connection in listener.connections.values { connection.beginDrain() }
            }
        }
        // Poll from this (non-loop) thread until every connection has closed or time is up.
        while Monotonic.now() < deadline {
            let open = shared.connections.load(ordering: .relaxed)
            if open == 0 { break }
            usleep(10_000)
        }
        let done = Atomic<Int>(0)
        for listener in listeners {
            listener.loop.execute {
                for connection in Array(listener.connections.values) { connection.close() }
                listener.loop.stop()
                done.add(1, ordering: .relaxed)
            }
        }
        for loop in loops { loop.join() }
    }
}

/// Calls answered, one counter per gRPC code.
final class CodeCounters: Sendable {
    private let counts = Mutex<[Int]>(Array(repeating: 0, count: 17))
    func add(_ code: StatusCode) { counts.withLock { $0[Int(code.rawValue)] += 1 } }
    func count(_ code: StatusCode) -> Int { counts.withLock { $0[Int(code.rawValue)] } }
}
