import HTTP2
import IO
import Synchronization

/// `https://HOST[:PORT][/PREFIX]` (or `http://` for h2c in tests).
struct BaseURL: Sendable {
    var host: String
    var port: Int
    var tls: Bool
    var prefix: String

    init?(_ url: String) {
        let rest: Substring
        if url.hasPrefix("https://") {
            tls = true; rest = url.dropFirst(8)
        } else if url.hasPrefix("http://") {
            tls = false; rest = url.dropFirst(7)
        } else {
            return nil
        }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let hostPort = rest[..<slash]
        prefix = String(rest[slash...])
        if prefix.hasSuffix("/") { prefix.removeLast() }
        if let colon = hostPort.lastIndex(of: ":"), !hostPort.hasSuffix("]") {
            guard let p = Int(hostPort[hostPort.index(after: colon)...]), (1...65535).contains(p) else { return nil }
            host = String(hostPort[..<colon])
            port = p
        } else {
            host = String(hostPort)
            port = tls ? 443 : 80
        }
        guard !host.isEmpty else { return nil }
    }

    var address: String { host.contains(":") && !host.hasPrefix("[") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    var authority: String { (tls && port == 443) || (!tls && port == 80) ? host : address }
}

/// One connection, used by one call at a time: taken from the pool, given back after an answer.
final class PooledConnection: @unchecked Sendable {
    // Sendable: only the thread that took it from the pool touches it until it is given back.
    let client: Client
    var idleSince = Monotonic.now()
    init(client: Client) { self.client = client }
}

/// The idle connections of one base URL (at most `limit`); a connection that failed is never given back.
final class ConnectionPool: Sendable {
    let base: BaseURL
    private let limit: Int
    private let idle = Mutex<[PooledConnection]>([])

    init(base: BaseURL, limit: Int) {
        self.base = base
        self.limit = limit
    }

    func take(tls: TLSContext, timeoutSeconds: Int) throws(SocketError) -> PooledConnection {
        // An idle connection is reused only while young and quiet: one the server closed or sent a GOAWAY on
        // would cost an attempt.
        while let c = idle.withLock({ $0.popLast() }) {
            if c.client.isUsable, Monotonic.now() &- c.idleSince < Self.maxIdleNanoseconds, !c.client.peerSpokeWhileIdle { return c }
        }
        let client = try Client(
            address: base.address, tls: base.tls ? tls : nil, serverName: base.host,
            timeoutSeconds: timeoutSeconds, authority: base.authority)
        return PooledConnection(client: client)
    }

    static let maxIdleNanoseconds: UInt64 = 60 * 1_000_000_000

    func give(_ connection: PooledConnection) {
        guard connection.client.isUsable else { return }
        connection.idleSince = Monotonic.now()
        idle.withLock { if $0.count < limit { $0.append(connection) } }
    }
}
