import IO
import CSystem
import Glibc
import HTTP2

/// One non-blocking socket, optionally under TLS, read and written by the one thread that owns it.
struct Conduit {
    let fd: Int32
    let tls: TLSSession?

    enum Received {
        case bytes(Int)
        case wouldBlock
        case closed
    }

    /// Reads what is there without waiting.
    func receive(_ buffer: UnsafeMutableRawBufferPointer) -> Received {
        if let tls {
            switch tls.read(buffer) {
            case .done(let n): return .bytes(n)
            case .wantRead, .wantWrite: return .wouldBlock
            case .closed, .failed: return .closed
            }
        }
        let n = recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
        if n > 0 { return .bytes(n) }
        if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return .wouldBlock }
        return .closed
    }

    /// Decrypted bytes already inside OpenSSL: readable although the socket may not poll so.
    var hasBuffered: Bool { (tls?.pendingBytes ?? 0) > 0 }

    /// Writes all of `bytes`, waiting for the socket up to `deadline` (monotonic ns); false if the peer is gone or slow.
    func sendAll(_ bytes: UnsafeRawBufferPointer, deadline: UInt64) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let rest = UnsafeRawBufferPointer(rebasing: bytes[offset...])
            var waitFor = Int16(POLLOUT)
            if let tls {
                switch tls.write(rest) {
                case .done(let n): offset += n; continue
                case .wantWrite: break
                case .wantRead: waitFor = Int16(POLLIN)
                case .closed, .failed: return false
                }
            } else {
                let n = send(fd, rest.baseAddress, rest.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
                if n > 0 {
                    offset += n
                    continue
                }
                if n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR { return false }
            }
            guard Poll.wait(fd, waitFor, until: deadline) else { return false }
        }
        return true
    }
}

/// `poll(2)` with monotonic deadlines.
enum Poll {
    /// Milliseconds from now to `deadline` (0 = none: `cap`), at most `cap`, at least 0.
    static func milliseconds(until deadline: UInt64, cap: Int32 = 1000) -> Int32 {
        guard deadline != 0 else { return cap }
        let now = Monotonic.now()
        guard deadline > now else { return 0 }
        return Int32(min(UInt64(cap), (deadline - now + 999_999) / 1_000_000))
    }

    /// Waits until `fd` has `events` (or an error or hang-up); false once `deadline` passes first.
    static func wait(_ fd: Int32, _ events: Int16, until deadline: UInt64) -> Bool {
        var p = pollfd(fd: fd, events: events, revents: 0)
        while true {
            let timeout = milliseconds(until: deadline)
            if timeout == 0 && Monotonic.now() >= deadline { return false }
            let rc = poll(&p, 1, timeout)
            if rc > 0 { return true }
            if rc < 0 && errno != EINTR { return false }
        }
    }

    /// Polls `fds` for input; returns which became readable (or hung up). Waits at most until `deadline`.
    static func readable(_ fds: [Int32], until deadline: UInt64) -> [Bool] {
        var set = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        let rc = poll(&set, nfds_t(set.count), milliseconds(until: deadline))
        guard rc > 0 else { return Array(repeating: false, count: fds.count) }
        return set.map { $0.revents != 0 }
    }
}

extension Conduit {
    /// Copies bytes both ways between two conduits until either side ends (the TLS-to-libmicrohttpd bridge).
    /// A write that cannot finish within `writeTimeoutNanoseconds` ends it too.
    static func pump(_ a: Conduit, _ b: Conduit, writeTimeoutNanoseconds: UInt64) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        /// Moves what `from` has now into `to`; false when the bridge must end.
        func move(_ from: Conduit, _ to: Conduit) -> Bool {
            while true {
                switch from.receive(buffer) {
                case .bytes(let n):
                    let deadline = Monotonic.now() &+ writeTimeoutNanoseconds
                    if !to.sendAll(UnsafeRawBufferPointer(rebasing: buffer[..<n]), deadline: deadline) { return false }
                case .wouldBlock: return true
                case .closed: return false
                }
            }
        }
        while true {
            guard move(a, b), move(b, a) else { return }
            if a.hasBuffered || b.hasBuffered { continue }
            _ = Poll.readable([a.fd, b.fd], until: 0)
        }
    }
}
