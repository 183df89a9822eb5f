import CSystem
import Glibc
import IO
import Lifecycle

/// HTTP/1.1 behind TLS: libmicrohttpd speaks cleartext, so a TLS connection that chose `http/1.1` (or no
/// ALPN) on a port with an `HTTPService` is bridged to it through a socketpair, on the connection's loop.
/// Each direction holds at most `limit` bytes: past that, the side it comes from is not watched until the
/// other side takes them (no busy loop, no unbounded buffer).
final class TLSBridge: EventHandler {
    private unowned let connection: ServerConnection
    private let tls: TLSSession
    private let tcpFD: Int32
    /// Our end of the socketpair (the other is libmicrohttpd's).
    let localFD: Int32
    private let loop: EventLoop
    private var toLocal: [UInt8] = []
    private var toPeer: [UInt8] = []
    private var localEnded = false
    private var closed = false
    private var tcpMask: UInt32 = 0
    private var localMask: UInt32 = 0
    static let limit = 64 * 1024

    init(connection: ServerConnection, tls: TLSSession, tcpFD: Int32, localFD: Int32, loop: EventLoop) {
        self.connection = connection
        self.tls = tls
        self.tcpFD = tcpFD
        self.localFD = localFD
        self.loop = loop
    }

    func start() {
        localMask = EPOLLIN.rawValue | EPOLLRDHUP.rawValue
        loop.register(localFD, self, events: localMask)
        tcpMask = EPOLLIN.rawValue | EPOLLRDHUP.rawValue
        loop.modify(tcpFD, events: tcpMask)
        pump()  // TLS may already hold decrypted application data
    }

    /// The TLS socket is readable or writable.
    func peerEvent(_ events: UInt32) { pump() }

    /// Our socketpair end is readable or writable.
    func handle(events: UInt32) {
        loop.assertInEventLoop("TLSBridge")
        pump()
    }

    /// Moves what each side has, then watches only what can make progress.
    private func pump() {
        fromPeer()
        if !closed { toLocalFlush() }
        if !closed { fromLocal() }
        if !closed { toPeerFlush() }
        if !closed && localEnded && toPeer.isEmpty {
            connection.close()  // libmicrohttpd closed its end and everything it said is out
            return
        }
        if !closed { watch() }
    }

    private func fromPeer() {
        let buffer = loop.readBuffer
        read: while toLocal.count < Self.limit {
            switch tls.read(buffer) {
            case .done(let n):
                toLocal.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[..<n]))
                connection.lastActivity = Monotonic.now()  // the idle sweep counts from the last byte either way
            case .wantRead, .wantWrite: break read
            case .closed, .failed:
                connection.close()
                return
            }
        }
    }

    private func toLocalFlush() {
        while !toLocal.isEmpty {
            let n = toLocal.withUnsafeBytes { send(localFD, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
            if n > 0 {
                toLocal.removeFirst(n)
            } else if n < 0 && (errno == EAGAIN || errno == EINTR) {
                return
            } else {
                connection.close()
                return
            }
        }
    }

    private func fromLocal() {
        let buffer = loop.readBuffer
        while toPeer.count < Self.limit && !localEnded {
            let n = recv(localFD, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
            if n > 0 {
                toPeer.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[..<n]))
            } else if n < 0 && (errno == EAGAIN || errno == EINTR) {
                return
            } else {
                localEnded = true
            }
        }
    }

    private func toPeerFlush() {
        while !toPeer.isEmpty {
            switch toPeer.withUnsafeBytes({ tls.write($0) }) {
            case .done(let n):
                toPeer.removeFirst(n)
                connection.lastActivity = Monotonic.now()
            case .wantWrite, .wantRead: return
            case .closed, .failed:
                connection.close()
                return
            }
        }
    }

    private func watch() {
        // Input is watched only while there is room for it (a hang-up is seen when reading resumes).
        let reading = EPOLLIN.rawValue | EPOLLRDHUP.rawValue
        let tcp = (toLocal.count < Self.limit ? reading : 0) | (toPeer.isEmpty ? 0 : EPOLLOUT.rawValue)
        if tcp != tcpMask {
            tcpMask = tcp
            loop.modify(tcpFD, events: tcp)
        }
        let local = (toPeer.count < Self.limit && !localEnded ? reading : 0) | (toLocal.isEmpty ? 0 : EPOLLOUT.rawValue)
        if local != localMask {
            localMask = local
            loop.modify(localFD, events: local)
        }
    }

    /// Closes our end (libmicrohttpd sees EOF and closes its own); the connection closes the TLS socket.
    func close() {
        guard !closed else { return }
        closed = true
        loop.deregister(localFD)
        Glibc.close(localFD)
    }
}
