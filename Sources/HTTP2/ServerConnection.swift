import IO
import CNGHTTP2
import CSystem
import Glibc
import Lifecycle

/// One accepted connection: the I/O shell around an `H2ServerSession`. It owns the socket, optional TLS,
/// the h2c preface sniffing (an HTTP/1.x request gets an HTTP/1.1 answer), writing what the session queues,
/// the idle and stalled-reader sweep, and the linger before close. Streams and calls live in the session.
///
/// Confined to its event loop and never handed to another thread (answers reach its session, which hops
/// back with `loop.execute`); checked in every build where it is entered (events, flush, close).
final class ServerConnection: EventHandler, DeferredFlush, SessionOutput {
    let fd: Int32
    let loop: EventLoop
    let shared: ServerShared
    let peer: String
    /// The peer's address without its port: the key of its connection slot.
    let addressKey: String
    var session: H2ServerSession?
    /// HTTP/1.1 behind TLS, bridged to the loop's libmicrohttpd.
    var bridge: TLSBridge?
    var isBridged: Bool { bridge != nil }
    /// When the connection was accepted: the handshake and the first request bytes are due within
    /// `handshakeTimeoutNanoseconds` of it.
    let acceptedAt = Monotonic.now()
    var tls: TLSSession?
    var pending: [UInt8] = []
    var pendingOffset = 0
    var watchingWrites = false
    var flushScheduled = false
    /// Monotonic time of the last byte read or written, and of the last write progress.
    var lastActivity = Monotonic.now()
    var lastWriteProgress = Monotonic.now()
    /// The client certificate's subject, once a mutual-TLS handshake verified it.
    var peerSubject: String?
    /// Where the connection is in its life (handshake, preface, serving, bridged, shut out, over): the pure
    /// state machine decides every transition; this shell carries them out on the socket.
    var state: ConnectionState
    /// Nothing more happens on the socket.
    var closed: Bool { state.isOver }
    /// Our side is shut: what the peer still sends is read and dropped until it closes.
    var discarding: Bool { state.isShutOut }
    /// h2c: the first bytes, held until they show the HTTP/2 preface (or an HTTP/1 request).
    var prefaceBytes: [UInt8] = []
    /// The loop's registry that keeps this connection alive.
    weak var owner: LoopConnections?

    init(fd: Int32, peer: String, addressKey: String, loop: EventLoop, shared: ServerShared) throws(SocketError) {
        self.fd = fd
        self.peer = peer
        self.addressKey = addressKey
        self.loop = loop
        self.shared = shared
        state = ConnectionState(tls: shared.configuration.tls != nil)
        if let context = shared.configuration.tls {
            tls = try TLSSession(context: context, fd: fd, server: true)
        }
    }

    /// Registers with the loop and, for h2c, starts HTTP/2 at once.
    func start() {
        if tls == nil {
            // Nothing is sent before the client's first bytes: an HTTP/1.1 client must get an HTTP/1.1 answer.
            // They are peeked at, not read (an HTTP/1.x connection goes to libmicrohttpd with its bytes
            // unread), so the socket is edge-triggered until they decide: each arrival wakes us once.
            loop.register(fd, self, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLET.rawValue)
        } else {
            loop.register(fd, self, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
            continueHandshake()
        }
    }

    func startSession() {
        let session = H2ServerSession(host: loop, shared: shared, peer: peer, peerSubject: peerSubject, output: self)
        self.session = session
        if state.draining { session.beginDrain() }
    }

    // MARK: Events

    func handle(events: UInt32) {
        loop.assertInEventLoop("ServerConnection")
        if closed { return }
        if let bridge {
            bridge.peerEvent(events)
            return
        }
        if discarding {
            discardInput()
            return
        }
        if session == nil {
            if state.phase == .awaitingPreface { sniffPreface() } else { continueHandshake() }
            return
        }
        if events & EPOLLOUT.rawValue != 0 { flush() }
        if closed { return }
        if events & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue | EPOLLRDHUP.rawValue) != 0 {
            readAvailable()
        }
    }

    func continueHandshake() {
        guard let tls else { return }
        switch tls.handshake() {
        case .done:
            loop.modify(fd, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
            peerSubject = tls.peerSubject
            let engine = owner?.http1
            switch state.handshakeDone(alpn: tls.alpn, servesHTTP1: engine != nil) {
            case .startBridge:
                // HTTP/1.1 (by ALPN, or no ALPN) on a port that serves plain HTTP.
                if let engine { startBridge(tls: tls, engine: engine) }
                return
            case .close: return close()
            case .startSession: break
            }
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

    /// h2c: peeks at the first bytes. HTTP/2 starts once they are the preface; an HTTP/1.x request goes to
    /// libmicrohttpd with its bytes unread (or, with no `HTTPService`, gets one HTTP/1.1 refusal); other
    /// bytes go to nghttp2, which answers them with GOAWAY.
    func sniffPreface() {
        var head = [UInt8](repeating: 0, count: preface.count)
        let n = recv(fd, &head, head.count, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
        if n == 0 { return close() }
        if n < 0 {
            if errno == EAGAIN || errno == EINTR { return }
            return close()
        }
        lastActivity = Monotonic.now()
        let engine = owner?.http1
        switch state.prefaceRead(ConnectionState.classify(head[..<n]), servesHTTP1: engine != nil, now: lastActivity) {
        case .wait: return  // the rest of the preface is on its way (the next arrival wakes us)
        case .handOff:
            if let engine { handOff(to: engine) }
            return
        case .answerHTTP1:
            prefaceBytes = consume(n)
            loop.modify(fd, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
            return answerHTTP1()
        case .startSession: break  // the preface, or garbage nghttp2 answers with GOAWAY
        }
        loop.modify(fd, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
        let bytes = consume(n)
        startSession()
        if let code = bytes.withUnsafeBytes({ session?.receive($0) }) { return terminate(code) }
        flush()
        if !closed && !discarding { readAvailable() }
    }

    /// Reads the `n` bytes already peeked at.
    func consume(_ n: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: n)
        let got = Glibc.read(fd, &bytes, n)
        return Array(bytes.prefix(max(0, got)))
    }

    /// A cleartext HTTP/1.x connection leaves this shell for the loop's libmicrohttpd, with its slot.
    func handOff(to engine: HTTP1Engine) {
        loop.deregister(fd)
        owner?.forget(fd)
        engine.add(fd: fd, peer: peer, addressKey: addressKey, counted: true)
    }

    /// HTTP/1.1 behind TLS: bridged to the loop's libmicrohttpd through a socketpair.
    func startBridge(tls: TLSSession, engine: HTTP1Engine) {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &pair) == 0 else {
            return close()
        }
        let bridge = TLSBridge(connection: self, tls: tls, tcpFD: fd, localFD: pair[0], loop: loop)
        self.bridge = bridge
        engine.add(fd: pair[1], peer: peer, addressKey: addressKey, counted: false)
        bridge.start()
    }

    /// An HTTP/1.x request on the gRPC port: one HTTP/1.1 answer, then the connection closes.
    func answerHTTP1() {
        // At most the preface's length was read: a request line starts with a method token (upper-case letters)
        // and a space.
        let method = prefaceBytes.prefix { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }
        let isHTTP1 = !method.isEmpty && method.count < prefaceBytes.count && prefaceBytes[method.count] == UInt8(ascii: " ")
        prefaceBytes = []
        // Only gRPC is served (`--protocols grpc`): an HTTP/1.x request has no protocol to be (ERRORS.md: 415).
        let body = "billingd serves only gRPC over HTTP/2 on this port (--protocols)\n"
        let status = isHTTP1 ? "415 Unsupported Media Type" : "400 Bad Request"
        let answer = "HTTP/1.1 \(status)\r\ncontent-type: text/plain\r\ncontent-length: \(body.utf8.count)\r\nconnection: close\r\n\r\n\(body)"
        _ = Array(answer.utf8).withUnsafeBytes { writeOut($0) }
        // Half-close and read until the peer closes, so unread request bytes do not turn our FIN into a reset.
        Glibc.shutdown(fd, Int32(SHUT_WR))
    }

    /// Ends the connection with a GOAWAY carrying `code`, queued after what already waits; once it is
    /// written our side is shut (`shutOutput`). A peer that never reads is closed at `lingerUntil`.
    func terminate(_ code: nghttp2_error_code) {
        switch state.terminate(now: Monotonic.now()) {
        case .none: return
        case .close: return close()
        case .goAway:
            guard let session else { return close() }
            session.terminate(code)
            flush()
        }
    }

    /// The session is over and everything it had is written (its GOAWAY last): shut our side so the peer
    /// reads the GOAWAY and then EOF, and drop what it still sends until it closes.
    func shutOutput() {
        guard state.outputShut(now: Monotonic.now()) else { return }
        session?.close()
        tls?.shutdown()
        tls = nil  // what still arrives is dropped unread, encrypted or not
        Glibc.shutdown(fd, Int32(SHUT_WR))
        loop.modify(fd, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
    }

    func discardInput() {
        let buffer = loop.readBuffer
        let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
        if n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) { close() }
    }

    func readAvailable() {
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
            if let code = session?.receive(UnsafeRawBufferPointer(rebasing: buffer[..<n])) {
                // A flood or a protocol error nghttp2 does not answer itself: GOAWAY, then close.
                terminate(code)
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

    func watchWrites(_ on: Bool) {
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
            gather: while used < out.count {
                let chunk: UnsafeRawBufferPointer
                // Checked once above (`assertInEventLoop`): this connection's loop is its session's host.
                switch session.nextOutputOnHost() {
                case .bytes(let bytes): chunk = bytes
                case .idle: break gather
                case .failed:
                    close()
                    return
                }
                let n = chunk.count
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
        if session.isFinished {
            shutOutput()
        }
    }

    /// Bytes written (possibly fewer than given), or nil when the connection is gone.
    func writeOut(_ bytes: UnsafeRawBufferPointer) -> Int? {
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
                let n = send(fd, rest.baseAddress, rest.count, Int32(MSG_NOSIGNAL))
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
}
