package import IO
import CNGHTTP2
import CSystem
import Glibc
import RPC
import ProtoWire
import Lifecycle

/// How a `Client` moves its bytes: a socket (TCP, optionally TLS) or, in tests, memory.
package protocol ClientTransport: AnyObject {
    var isTLS: Bool { get }
    /// Writes some of `bytes`: the count taken, 0 when none could be taken now.
    func write(_ bytes: UnsafeRawBufferPointer) throws(SocketError) -> Int
    /// Reads into `buffer`: the count, 0 at the end of the stream, nil when nothing came (a TLS record
    /// still incomplete, or the receive timeout with `tolerateTimeout`).
    func read(_ buffer: UnsafeMutableRawBufferPointer, tolerateTimeout: Bool) throws(SocketError) -> Int?
    func setReceiveTimeout(milliseconds: Int)
    /// True when the idle connection has something to say or was closed.
    var peerSpokeWhileIdle: Bool { get }
    func close()
}

/// A TCP connection, with TLS (ALPN h2) when a context is given.
final class SocketTransport: ClientTransport {
    private let fd: Int32
    private var tls: TLSSession?

    init(address: String, tls context: TLSContext?, serverName: String?, timeoutSeconds: Int) throws(SocketError) {
        let resolved = try SocketAddress.resolve(address)
        fd = try Sockets.connect(resolved, timeoutSeconds: timeoutSeconds)
        var tv = timeval()
        tv.tv_sec = timeoutSeconds
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        guard let context else { return }
        var host = serverName ?? String(address[..<(address.lastIndex(of: ":") ?? address.endIndex)])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let t: TLSSession
        do {
            t = try TLSSession(context: context, fd: fd, server: false, hostname: host)
        } catch {
            Glibc.close(fd)
            throw error
        }
        tls = t
        // A peer that accepts TCP but never speaks TLS must not hold the caller for ever.
        let deadline = Monotonic.now() &+ UInt64(max(1, timeoutSeconds)) * 1_000_000_000
        while true {
            let failure: SocketError
            switch t.handshake() {
            case .done: return
            case .wantRead, .wantWrite:
                if Monotonic.now() < deadline { continue }
                failure = .tls("handshake timed out")
            case .closed: failure = .tls("connection closed during handshake")
            case .failed(let m): failure = .tls("handshake failed: \(m)")
            }
            t.shutdown()
            tls = nil
            Glibc.close(fd)
            throw failure
        }
    }

    var isTLS: Bool { tls != nil }

    func write(_ bytes: UnsafeRawBufferPointer) throws(SocketError) -> Int {
        if let tls {
            switch tls.write(bytes) {
            case .done(let k): return k
            case .wantRead, .wantWrite: return 0
            case .closed: throw .protocolError("connection closed")
            case .failed(let m): throw .tls(m)
            }
        }
        let w = Glibc.write(fd, bytes.baseAddress, bytes.count)
        if w < 0 { throw .system(call: "write", errno: errno) }
        return w
    }

    func read(_ buffer: UnsafeMutableRawBufferPointer, tolerateTimeout: Bool) throws(SocketError) -> Int? {
        if let tls {
            switch tls.read(buffer) {
            case .done(let k): return k
            case .wantRead, .wantWrite: return nil
            case .closed: return 0
            case .failed(let m): throw .tls(m)
            }
        }
        let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
        if n < 0 {
            if errno == EINTR || (tolerateTimeout && (errno == EAGAIN || errno == EWOULDBLOCK)) { return nil }
            throw .system(call: "read", errno: errno == EAGAIN ? ETIMEDOUT : errno)
        }
        return n
    }

    func setReceiveTimeout(milliseconds: Int) {
        var tv = timeval()
        tv.tv_sec = milliseconds / 1000
        tv.tv_usec = (milliseconds % 1000) * 1000
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    var peerSpokeWhileIdle: Bool {
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        if n < 0 { return errno != EAGAIN && errno != EWOULDBLOCK }
        return true
    }

    func close() {
        tls?.shutdown()
        tls = nil
        Glibc.close(fd)
    }
}
