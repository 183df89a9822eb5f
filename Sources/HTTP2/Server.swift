public import IO
import CNGHTTP2
import CSystem
import Glibc
public import RPC
import Synchronization
import Lifecycle

/// How a `Server` listens and what it accepts.
public struct ServerConfiguration: Sendable {
    /// `HOST:PORT`; port 0 picks a free port (see `Server.port`).
    public var listen = "127.0.0.1:50051"
    /// Event-loop threads; each owns a listener (SO_REUSEPORT) and its connections.
    public var threads = 1
    /// The loops' thread names: `loop-0`, `loop-1`, ... (what `ps -L` shows).
    public var threadName = "loop"
    public var maxMessageBytes = 4 << 20
    public var maxConcurrentStreams = 1024
    public var maxHeaderListBytes = 16 << 10
    /// Open connections accepted at once; more are closed at accept.
    public var maxConnections = 10_000
    /// Calls dispatched and not yet answered; more answer RESOURCE_EXHAUSTED OVERLOADED. Used when `admission` is nil.
    public var maxInFlight = 10_000
    /// The in-flight count and limit this server's gRPC calls share with the other protocols of its port (the
    /// Connect gateway behind `http` takes the same object); nil: one of its own, of `maxInFlight`.
    public var admission: CallAdmission?
    /// The port's call pipeline, shared with the other protocols of the port (`ConnectGateway`); nil: the server
    /// makes its own from its router, `admission` (or `maxInFlight`), `maxDeadlineNanoseconds` and `keepsCallNotes`.
    public var pipeline: CallPipeline?
    /// Whether handlers' `note`s are kept for the call record (only the per-call log line reads them).
    public var keepsCallNotes = true
    /// Request bytes one connection may hold in unfinished messages, over all its streams; the stream
    /// that crosses it is answered RESOURCE_EXHAUSTED OVERLOADED.
    public var maxConnectionBufferBytes = 64 << 20
    /// The longest a call may run: a larger or missing grpc-timeout is capped to this.
    public var maxDeadlineNanoseconds: Int64 = 60_000_000_000
    /// A connection with no open stream for this long gets GOAWAY and is closed.
    public var idleTimeoutNanoseconds: Int64 = 300_000_000_000
    /// A peer that takes no bytes for this long while we have output queued is dropped.
    public var writeStallNanoseconds: Int64 = 30_000_000_000
    /// TLS with ALPN h2 when set; h2c with prior knowledge otherwise.
    public var tls: TLSContext?
    /// Plain HTTP on the same port: requests that are not gRPC calls (HTTP/1.x connections, HTTP/2 streams
    /// of another method or content type) go to this service. Nil: they get a short plain-text refusal.
    public var http: HTTPService?
    /// Whether gRPC calls are served; when false, `application/grpc` requests go to `http` too (which refuses
    /// them: `--protocols` without grpc).
    public var servesGRPC = true
    /// Connections one peer address may hold open at once (0: no limit); more are closed at accept.
    public var maxConnectionsPerAddress = 0
    /// A connection that has not completed its TLS handshake and sent its first request bytes (the HTTP/2
    /// preface, or an HTTP/1.x request line) within this long is closed.
    public var handshakeTimeoutNanoseconds: Int64 = 5_000_000_000

    public init() {}
}

/// State every loop of a server reads: configuration, router, counters.
package final class ServerShared: Sendable {
    let configuration: ServerConfiguration
    let router: Router
    /// The interceptors that want each call's record, as one closure (the record is built only then), or
    /// one that does nothing (`observes` false). Not optional: called straight from this `let`, the closure
    /// is not copied (an optional one bound with `if let` was retained and released per call).
    private let observe: @Sendable (CallRecord) -> Void
    private let observes: Bool
    /// Whether the router's interceptors check calls before routing (read per call: asking the Router, a
    /// struct from another module, copied it with its three dictionaries).
    let authenticates: Bool
    let connections = Atomic<Int>(0)
    let refusedConnections = Atomic<Int>(0)
    /// Open connections by peer address (only when `maxConnectionsPerAddress` is set).
    private let byAddress = Mutex<[String: Int]>([:])
    /// The one in-flight count (every protocol of the port).
    let admission: CallAdmission
    /// The port's call pipeline (request ids, interceptors, the deadline rule, the in-flight count).
    let pipeline: CallPipeline
    /// Calls answered, by gRPC code (index = raw value).
    let byCode: CodeCounters
    let requestIDPrefix: String

    package init(configuration: ServerConfiguration, router: Router) {
        let pipeline =
            configuration.pipeline
            ?? CallPipeline(
                router: router, admission: configuration.admission ?? CallAdmission(limit: configuration.maxInFlight),
                maxDeadlineNanoseconds: configuration.maxDeadlineNanoseconds, keepsNotes: configuration.keepsCallNotes)
        self.pipeline = pipeline
        self.configuration = configuration
        self.router = pipeline.router
        // The pipeline's parts, held here too: read per call without a hop through the pipeline object.
        self.observe = pipeline.observer
        self.observes = pipeline.observes
        self.authenticates = pipeline.authenticates
        self.admission = pipeline.admission
        self.byCode = CodeCounters()
        self.requestIDPrefix = pipeline.requestIDPrefix
    }

    @inline(__always)
    func nextRequestNumber() -> UInt64 { pipeline.nextRequestNumber() }

    /// Takes a slot for a new connection from `addressKey`; false (and counted as refused) when the server or
    /// that address holds its limit.
    func admit(addressKey: String) -> Bool {
        if connections.load(ordering: .relaxed) >= configuration.maxConnections {
            refusedConnections.add(1, ordering: .relaxed)
            return false
        }
        let cap = configuration.maxConnectionsPerAddress
        if cap > 0 {
            let admitted = byAddress.withLock { counts -> Bool in
                let n = counts[addressKey, default: 0]
                guard n < cap else { return false }
                counts[addressKey] = n + 1
                return true
            }
            guard admitted else {
                refusedConnections.add(1, ordering: .relaxed)
                return false
            }
        }
        connections.add(1, ordering: .relaxed)
        return true
    }

    /// Gives back a connection's slot (exactly once per `admit`).
    func connectionClosed(addressKey: String) {
        connections.subtract(1, ordering: .relaxed)
        guard configuration.maxConnectionsPerAddress > 0 else { return }
        byAddress.withLock { counts in
            let n = counts[addressKey, default: 1] - 1
            counts[addressKey] = n > 0 ? n : nil
        }
    }
    func finished(stream: ServerStream, code: StatusCode, reason: String?, peer: String, peerSubject: String? = nil) {
        if stream.state.wasDispatched { admission.leave() }
        byCode.add(code)
        guard observes else { return }
        let elapsed = stream.startedAt == 0 ? 0 : Monotonic.now() &- stream.startedAt
        // The notes are read only when something keeps them (the per-call log line).
        let notes = pipeline.keepsNotes ? (stream.cancellation?.noted ?? []) : []
        // The stream's record from its last call when no observer kept it (a stream stays on its session:
        // peer, subject and prefix are the same): no allocation per call. The record and the route are lent
        // (Unmanaged), not retained: the stream keeps both through this call, and no observer reaches the stream.
        if isKnownUniquelyReferenced(&stream.record) {
            let record = Unmanaged.passUnretained(stream.record!)
            if let route = stream.route {
                Unmanaged.passUnretained(route)._withUnsafeGuaranteedRef { route in
                    record._withUnsafeGuaranteedRef {
                        $0.update(
                            method: route.method, knownMethod: stream.knownMethod, code: code, reason: reason,
                            durationNanoseconds: elapsed, requestNumber: stream.requestNumber, notes: notes)
                    }
                }
            } else {
                record._withUnsafeGuaranteedRef {
                    $0.update(
                        method: Self.unroutedMethod(stream), knownMethod: stream.knownMethod, code: code, reason: reason,
                        durationNanoseconds: elapsed, requestNumber: stream.requestNumber, notes: notes)
                }
            }
        } else {
            stream.record = CallRecord(
                method: stream.route?.method ?? Self.unroutedMethod(stream), knownMethod: stream.knownMethod,
                code: code, reason: reason, durationNanoseconds: elapsed, peer: peer,
                requestIDPrefix: requestIDPrefix, requestNumber: stream.requestNumber,
                notes: notes, peerSubject: peerSubject)
        }
        Unmanaged.passUnretained(stream.record!)._withUnsafeGuaranteedRef { observe($0) }
    }

    /// The method label of a call that was not routed: its `:path` without the leading slash.
    private static func unroutedMethod(_ stream: ServerStream) -> String {
        stream.head.path.hasPrefix("/") ? String(stream.head.path.dropFirst()) : stream.head.path
    }
}

/// Accepts on the one listening socket and deals connections to the loops in turn.
///
/// One socket rather than one SO_REUSEPORT socket per loop: with SO_REUSEPORT a
/// second billingd started on the same port by mistake would silently take half
/// the connections instead of failing at start.
final class Listener: EventHandler {
    // Used on its loop only; shutdown reaches it through `LoopBound`.
    let fd: Int32
    let loop: EventLoop
    let shared: ServerShared
    let targets: [LoopBound<LoopConnections>]
    private var next = 0
    private var closed = false

    init(fd: Int32, loop: EventLoop, shared: ServerShared, targets: [LoopBound<LoopConnections>]) {
        self.fd = fd
        self.loop = loop
        self.shared = shared
        self.targets = targets
    }

    func handle(events: UInt32) {
        loop.assertInEventLoop("Listener")
        for _ in 0..<64 {
            let (client, address) = Sockets.accept(fd)
            if client < 0 {
                if errno == EMFILE || errno == ENFILE {
                    // Out of descriptors: a level-triggered listener would spin; look again in 100 ms.
                    loop.deregister(fd)
                    loop.schedule(afterNanoseconds: 100_000_000) { [self] in
                        if !closed { loop.register(fd, self, events: EPOLLIN.rawValue) }
                    }
                }
                return
            }
            let addressKey = address.hostText
            guard shared.admit(addressKey: addressKey) else {
                Glibc.close(client)
                continue
            }
            Sockets.setInt(client, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
            let target = targets[next % targets.count]
            next &+= 1
            let peer = address.text
            let shared = shared
            if target.loop === loop {
                target.value.adopt(fd: client, peer: peer, addressKey: addressKey, shared: shared)
            } else {
                target.execute { $0.adopt(fd: client, peer: peer, addressKey: addressKey, shared: shared) }
            }
        }
    }

    /// Stops accepting (shutdown).
    func close() {
        loop.assertInEventLoop("Listener")
        guard !closed else { return }
        closed = true
        loop.deregister(fd)
        Glibc.close(fd)
    }
}

/// An HTTP/2 gRPC server: N event loops, each with its own listener and connections.
public final class Server: Sendable {
    private let shared: ServerShared
    private let loops: [EventLoop]
    private let state = Mutex<State>(State())

    private let loopConnections: [LoopBound<LoopConnections>]

    private struct State {
        var listener: LoopBound<Listener>?
        var port = 0
        var started = false
        var draining = false
    }

    /// A server for `router`'s methods; its interceptors see every call (authentication, metrics, logs).
    public init(configuration: ServerConfiguration, router: Router) throws(SocketError) {
        csystem_tune_malloc()
        // OpenSSL writes with write(2), and a peer may leave first: that must be an error, not the end of the
        // process (plain sockets are written with MSG_NOSIGNAL too).
        signal(SIGPIPE, SIG_IGN)
        shared = ServerShared(configuration: configuration, router: router)
        var loops: [EventLoop] = []
        for i in 0..<max(1, configuration.threads) { loops.append(try EventLoop(name: "\(configuration.threadName)-\(i)")) }
        self.loops = loops
        var groups: [LoopBound<LoopConnections>] = []
        for loop in loops { groups.append(LoopBound(try LoopConnections(loop: loop, shared: shared), loop: loop)) }
        self.loopConnections = groups
    }

    /// Binds the listener and starts the loops; returns the bound address as `HOST:PORT`.
    @discardableResult
    public func start() throws(SocketError) -> String {
        let address = try SocketAddress.resolve(shared.configuration.listen)
        let fd = try Sockets.listen(address)
        let bound = Sockets.localAddress(fd)
        let listener = Listener(fd: fd, loop: loops[0], shared: shared, targets: loopConnections)
        loops[0].register(fd, listener, events: EPOLLIN.rawValue)
        for loop in loops { loop.start() }
        for group in loopConnections { group.execute { $0.startSweeping() } }
        state.withLock {
            $0.listener = LoopBound(listener, loop: self.loops[0])
            $0.port = bound.port
            $0.started = true
        }
        return bound.text
    }

    /// The bound TCP port (after `start`).
    public var port: Int { state.withLock { $0.port } }

    /// Open connections across all loops.
    public var connectionCount: Int { shared.connections.load(ordering: .relaxed) }
    /// Calls dispatched to handlers and not yet answered, over every protocol that shares `admission`.
    public var inFlightCount: Int { shared.admission.count }
    /// The in-flight count and limit of this server's calls.
    public var admission: CallAdmission { shared.admission }
    /// Connections closed at accept because `maxConnections` were open.
    public var refusedConnectionCount: Int { shared.refusedConnections.load(ordering: .relaxed) }
    /// Calls answered so far with `code`.
    public func count(of code: StatusCode) -> Int { shared.byCode.count(code) }

    /// Graceful shutdown: stop accepting, GOAWAY, let calls in flight finish for up to
    /// `graceSeconds`, then close what is left and stop the loops. Blocks until done.
    public func shutdown(graceSeconds: Double) {
        let (listener, first) = state.withLock { s -> (LoopBound<Listener>?, Bool) in
            let first = s.started && !s.draining
            s.draining = true
            return (s.listener, first)
        }
        guard first, let listener else { return }
        let deadline = Monotonic.now() + UInt64(max(0, graceSeconds) * 1e9)
        listener.execute { $0.close() }
        for group in loopConnections {
            group.execute { group in
                group.draining = true
                for connection in group.connections.values { connection.beginDrain() }
                group.http1?.beginDrain()
            }
        }
        // Poll from this (non-loop) thread until every connection has closed or time is up.
        while Monotonic.now() < deadline && shared.connections.load(ordering: .relaxed) > 0 {
            usleep(5_000)
        }
        for group in loopConnections {
            group.execute { group in
                // Connections bridged to libmicrohttpd stay until its last answers (503s) went through them.
                for connection in Array(group.connections.values) where !connection.isBridged { connection.close() }
                // Then the bridges pass on what libmicrohttpd wrote last (they close when its end closes), for
                // at most a second.
                let last = Monotonic.now() &+ 1_000_000_000
                func end() {
                    if Monotonic.now() < last && group.connections.values.contains(where: { $0.isBridged }) {
                        group.loop.schedule(afterNanoseconds: 5_000_000) { end() }
                        return
                    }
                    for connection in Array(group.connections.values) { connection.close() }
                    group.loop.stop()
                }
                if let http1 = group.http1 { http1.finish(then: end) } else { end() }
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
