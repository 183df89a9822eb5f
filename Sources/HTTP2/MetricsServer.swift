import CNGHTTP2
import CSystem
import Foundation
import Glibc

/// A minimal HTTP/1.1 server for `GET /metrics`, `/healthz`, `/readyz`: one thread, blocking
/// sockets, one request per connection, bounded reads. Never on an event loop.
public final class MetricsServer: @unchecked Sendable {
    // Sendable: `fd` is set in init and closed once in stop(); the thread only reads it.
    public typealias Handler = @Sendable (String) -> (status: Int, contentType: String, body: String)
    private let fd: Int32
    private let handler: Handler
    public let address: String

    public init(listen: String, handler: @escaping Handler) throws(SocketError) {
        let resolved = try SocketAddress.resolve(listen)
        let fd = try check("socket", socket(resolved.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0))
        Sockets.setInt(fd, SOL_SOCKET, SO_REUSEADDR, 1)
        guard resolved.withSockaddr({ bind(fd, $0, $1) }) == 0, Glibc.listen(fd, 64) == 0 else {
            let err = errno
            Glibc.close(fd)
            throw .system(call: "bind \(listen)", errno: err)
        }
        self.fd = fd
        self.handler = handler
        address = Sockets.localAddress(fd).text
        let thread = Thread { [self] in self.serve() }
        thread.name = "metrics-http"
        thread.start()
    }

    public func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        Glibc.close(fd)
    }

    private func serve() {
        while true {
            let client = accept(fd, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            var tv = timeval()
            tv.tv_sec = 2
            _ = setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            _ = setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            respond(client)
            Glibc.close(client)
        }
    }

    private func respond(_ client: Int32) {
        var request = [UInt8]()
        var buf = [UInt8](repeating: 0, count: 4096)
        while request.count < 8192 {
            let n = read(client, &buf, buf.count)
            if n <= 0 { break }
            request.append(contentsOf: buf[0..<n])
            if request.count >= 4, request.suffix(4).elementsEqual([13, 10, 13, 10]) { break }
        }
        let line = String(decoding: request.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self).split(separator: " ")
        let (status, type, body): (Int, String, String)
        if line.count >= 2, line[0] == "GET" || line[0] == "HEAD" {
            let path = String(line[1].split(separator: "?").first ?? "")
            (status, type, body) = handler(path)
        } else {
            (status, type, body) = (405, "text/plain", "only GET\n")
        }
        let reason = [200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"][status] ?? "Status"
        let head = "HTTP/1.1 \(status) \(reason)\r\nContent-Type: \(type)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
        let bytes = Array((line.first == "HEAD" ? head : head + body).utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(client, $0.baseAddress! + offset, bytes.count - offset) }
            if n <= 0 { break }
            offset += n
        }
    }
}
