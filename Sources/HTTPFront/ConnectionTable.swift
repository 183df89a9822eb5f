import IO
import CSystem
import Dispatch
import Glibc
import HTTP2
import Synchronization

/// Every open connection of one front, counted against `maxConnections`, and the deadlines of those
/// libmicrohttpd serves. Shared by the acceptor, libmicrohttpd's thread and the connection threads.
final class ConnectionTable: Sendable {
    /// A socket handed to libmicrohttpd: whose peer, by when its current request must have arrived.
    struct MHDEntry {
        var fd: Int32
        var peer: String
        /// A socketpair end behind a TLS thread, which owns the count instead.
        var bridged: Bool
        /// Monotonic nanoseconds; 0 while no request is awaited (a handler is answering).
        var deadline: UInt64
    }

    private struct State {
        var open = 0
        var refused = 0
        var stopping = false
        /// Sockets owned by connection threads: shut down by `beginStop` so their threads end.
        var threadSockets: Set<Int32> = []
        var mhd: [UInt64: MHDEntry] = [:]
        /// Sockets given to libmicrohttpd whose connection has not started yet: fd -> entry id.
        var adding: [Int32: UInt64] = [:]
        var nextID: UInt64 = 1
    }

    private let state = Mutex(State())
    private let limit: Int
    /// Connection threads running; `stop` waits for it to empty.
    let threads = DispatchGroup()

    /// At most `limit` connections at once (0: unbounded).
    init(limit: Int) { self.limit = limit > 0 ? limit : .max }

    // MARK: Counting

    /// Takes one connection slot; false when full or stopping (the caller closes the socket).
    func admit() -> Bool {
        state.withLock { s in
            guard !s.stopping, s.open < limit else {
                s.refused += 1
                return false
            }
            s.open += 1
            return true
        }
    }

    /// Gives a slot back.
    func release() { state.withLock { $0.open -= 1 } }

    /// Connections open now.
    var openCount: Int { state.withLock { $0.open } }

    /// Connections closed at accept because the table was full.
    var refusedCount: Int { state.withLock { $0.refused } }

    // MARK: Connection threads

    /// Records a socket a connection thread serves; false once stopping (the thread ends at once).
    func adopt(_ fd: Int32) -> Bool {
        state.withLock { s in
            guard !s.stopping else { return false }
            s.threadSockets.insert(fd)
            return true
        }
    }

    /// Forgets a thread's socket; call before closing it, so `beginStop` never shuts a reused number.
    func disown(_ fd: Int32) { _ = state.withLock { $0.threadSockets.remove(fd) } }

    /// Refuses new connections and threads from now on.
    func beginStop() { state.withLock { $0.stopping = true } }

    /// Shuts down every thread-owned socket, which ends its thread.
    func shutdownThreadSockets() {
        state.withLock { s in
            for fd in s.threadSockets { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    // MARK: libmicrohttpd connections

    /// Registers a socket about to be handed to libmicrohttpd; its first request is due within `timeout`.
    func registerMHD(fd: Int32, peer: String, bridged: Bool, timeoutNanoseconds: UInt64) -> UInt64 {
        state.withLock { s in
            let id = s.nextID
            s.nextID += 1
            s.mhd[id] = MHDEntry(fd: fd, peer: peer, bridged: bridged, deadline: Monotonic.now() &+ timeoutNanoseconds)
            s.adding[fd] = id
            return id
        }
    }

    /// libmicrohttpd started serving `fd`: the entry id to keep as the connection's socket context.
    func mhdStarted(fd: Int32) -> UInt64? { state.withLock { $0.adding.removeValue(forKey: fd) } }

    /// libmicrohttpd closed (or never took) the connection: forget it and free its slot once.
    func mhdClosed(id: UInt64) {
        state.withLock { s in
            guard let entry = s.mhd.removeValue(forKey: id) else { return }
            if s.adding[entry.fd] == id { s.adding[entry.fd] = nil }
            if !entry.bridged { s.open -= 1 }
        }
    }

    /// The peer of a libmicrohttpd connection.
    func peer(id: UInt64) -> String { state.withLock { $0.mhd[id]?.peer ?? "" } }

    /// Sets (`now + timeout`) or clears (nil) the time by which the connection's next request must be in.
    func setDeadline(id: UInt64, timeoutNanoseconds: UInt64?) {
        let deadline = timeoutNanoseconds.map { Monotonic.now() &+ $0 } ?? 0
        state.withLock { $0.mhd[id]?.deadline = deadline }
    }

    /// Shuts down the libmicrohttpd sockets past their deadline; libmicrohttpd then sees the end and closes them.
    /// Entries leave the table (under this lock) before libmicrohttpd closes their socket, so no reused
    /// number is ever shut down.
    func expireMHD(now: UInt64) {
        state.withLock { s in
            for (id, entry) in s.mhd where entry.deadline != 0 && now >= entry.deadline {
                shutdown(entry.fd, Int32(SHUT_RDWR))
                s.mhd[id]?.deadline = 0
            }
        }
    }
}
