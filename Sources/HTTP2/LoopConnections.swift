import IO
import CNGHTTP2
import CSystem
import Glibc
import RPC
import Synchronization
import Lifecycle

/// The connections one loop owns; touched on that loop only (other threads reach it through `LoopBound`).
final class LoopConnections {
    let loop: EventLoop
    var connections: [Int32: ServerConnection] = [:]
    var draining = false
    /// HTTP/1.x on this loop, when the server has an `HTTPService`.
    let http1: HTTP1Engine?

    init(loop: EventLoop, shared: ServerShared) throws(SocketError) {
        self.loop = loop
        if let service = shared.configuration.http {
            http1 = try HTTP1Engine(loop: loop, service: service, shared: shared)
        } else {
            http1 = nil
        }
    }

    /// Adopts an accepted socket (on this loop); its slot was taken at accept.
    func adopt(fd: Int32, peer: String, addressKey: String, shared: ServerShared) {
        loop.assertInEventLoop("LoopConnections")
        do {
            let connection = try ServerConnection(fd: fd, peer: peer, addressKey: addressKey, loop: loop, shared: shared)
            connections[fd] = connection
            connection.owner = self
            connection.start()
            if draining { connection.beginDrain() }
        } catch {
            Glibc.close(fd)
            shared.connectionClosed(addressKey: addressKey)
        }
    }

    func forget(_ fd: Int32) {
        loop.assertInEventLoop("LoopConnections")
        connections[fd] = nil
    }

    /// Once a second: idle connections get GOAWAY, stalled writers are dropped.
    func startSweeping() {
        loop.schedule(afterNanoseconds: 1_000_000_000) { [self] in
            let now = Monotonic.now()
            for connection in Array(connections.values) { connection.sweep(now: now) }
            http1?.sweep(now: now)
            if !loop.isStopping { startSweeping() }
        }
    }
}
