package import CSystem
import Glibc

/// Errors of the socket layer: the environment or the peer, never misuse.
public enum SocketError: Error, CustomStringConvertible, Sendable {
    case system(call: String, errno: Int32)
    case badAddress(String)
    /// `HOST:PORT` is well formed, but the host name does not resolve (`reason` is getaddrinfo's).
    case unresolvable(host: String, reason: String)
    case tls(String)
    case protocolError(String)

    public var description: String {
        switch self {
        case .system(let call, let err): "\(call): \(String(cString: strerror(err)))"
        case .badAddress(let a): "bad address '\(a)': expected HOST:PORT"
        case .unresolvable(let host, let reason): "cannot resolve host '\(host)': \(reason)"
        case .tls(let m): "TLS: \(m)"
        case .protocolError(let m): "HTTP/2: \(m)"
        }
    }
}

/// One place that turns a failed system call into a Swift error.
@inline(__always)
package func check(_ call: String, _ result: Int32) throws(SocketError) -> Int32 {
    if result < 0 { throw .system(call: call, errno: errno) }
    return result
}

/// A resolved socket address, IPv4 or IPv6.
package struct SocketAddress: Sendable {
    package var storage = sockaddr_storage()
    package var length: socklen_t = 0

    package init() {}

    package var family: Int32 { Int32(storage.ss_family) }

    /// Parses `HOST:PORT` or `[V6]:PORT`; the host is a literal or a name (`localhost`).
    package static func resolve(_ text: String) throws(SocketError) -> SocketAddress {
        var host: String
        var portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw .badAddress(text)
            }
            host = String(text[text.index(after: text.startIndex)..<close])
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw .badAddress(text) }
            host = String(text[..<colon])
            portText = text[text.index(after: colon)...]
        }
        guard let port = UInt16(portText) else { throw .badAddress(text) }
        if host.isEmpty || host == "*" { host = "0.0.0.0" }
        var hints = addrinfo()
        hints.ai_flags = AI_NUMERICSERV
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &result)
        guard rc == 0, let info = result else {
            throw .unresolvable(host: host, reason: rc == 0 ? "no address" : String(cString: gai_strerror(rc)))
        }
        defer { freeaddrinfo(result) }
        var address = SocketAddress()
        withUnsafeMutableBytes(of: &address.storage) { dst in
            dst.copyMemory(from: UnsafeRawBufferPointer(start: info.pointee.ai_addr, count: Int(info.pointee.ai_addrlen)))
        }
        address.length = info.pointee.ai_addrlen
        return address
    }

    /// `HOST:PORT` (IPv6 in brackets).
    package var text: String {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        var copy = storage
        let rc = withUnsafePointer(to: &copy) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, length, &host, socklen_t(host.count), &service, socklen_t(service.count), NI_NUMERICHOST | NI_NUMERICSERV)
            }
        }
        guard rc == 0 else { return "?" }
        let h = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let s = String(decoding: service.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return family == AF_INET6 ? "[\(h)]:\(s)" : "\(h):\(s)"
    }

    /// The address without its port (`127.0.0.1`, `::1`): the key of per-address connection limits.
    package var hostText: String {
        let full = text
        if full.hasPrefix("["), let close = full.firstIndex(of: "]") { return String(full[full.index(after: full.startIndex)..<close]) }
        return full.lastIndex(of: ":").map { String(full[..<$0]) } ?? full
    }

    package var port: Int {
        var copy = storage
        return withUnsafePointer(to: &copy) { p in
            if family == AF_INET6 {
                return p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
            return p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }

    package func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        var copy = storage
        return withUnsafePointer(to: &copy) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) } }
    }
}

package enum Sockets {
    package static func setInt(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32) {
        var v = value
        _ = setsockopt(fd, level, name, &v, socklen_t(MemoryLayout<Int32>.size))
    }

    /// A non-blocking listening socket (SO_REUSEADDR only: a port in use fails here).
    package static func listen(_ address: SocketAddress, backlog: Int32 = 4096) throws(SocketError) -> Int32 {
        let fd = try check("socket", socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0))
        setInt(fd, SOL_SOCKET, SO_REUSEADDR, 1)
        let rc = address.withSockaddr { bind(fd, $0, $1) }
        if rc < 0 {
            let err = errno
            close(fd)
            throw .system(call: "bind \(address.text)", errno: err)
        }
        if Glibc.listen(fd, backlog) < 0 {
            let err = errno
            close(fd)
            throw .system(call: "listen", errno: err)
        }
        return fd
    }

    /// Accepts one connection, non-blocking and close-on-exec: its socket (or -1 with errno) and the peer's address.
    package static func accept(_ listener: Int32) -> (fd: Int32, peer: SocketAddress) {
        var address = SocketAddress()
        address.length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let fd = withUnsafeMutablePointer(to: &address.storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                csystem_accept4(listener, $0, &address.length, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
            }
        }
        return (fd, address)
    }

    /// The address a socket is bound to (to learn the port after binding port 0).
    package static func localAddress(_ fd: Int32) -> SocketAddress {
        var address = SocketAddress()
        address.length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &address.storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &address.length) }
        }
        return address
    }

    /// A blocking client connection with TCP_NODELAY.
    package static func connect(_ address: SocketAddress, timeoutSeconds: Int) throws(SocketError) -> Int32 {
        let fd = try check("socket", socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0))
        var tv = timeval()
        tv.tv_sec = timeoutSeconds
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let rc = address.withSockaddr { Glibc.connect(fd, $0, $1) }
        if rc < 0 {
            let err = errno
            close(fd)
            throw .system(call: "connect \(address.text)", errno: err)
        }
        setInt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
        return fd
    }
}
