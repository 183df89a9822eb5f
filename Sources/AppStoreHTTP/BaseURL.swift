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
