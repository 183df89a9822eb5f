/// Where and how an `HTTPFront` listens, and the bounds it keeps every peer within.
public struct HTTPFrontConfiguration: Sendable {
    /// Its loop thread's name (15 bytes at most are kept).
    public var threadName = "front"
    /// A certificate chain and its key, both PEM files.
    public struct TLS: Sendable {
        /// The certificate chain (leaf first).
        public var certificatePath: String
        /// The private key of the leaf.
        public var keyPath: String

        /// Both PEM paths.
        public init(certificatePath: String, keyPath: String) {
            self.certificatePath = certificatePath
            self.keyPath = keyPath
        }
    }

    /// `HOST:PORT` to bind; port 0 picks a free one (see `HTTPFront.address`).
    public var listen: String
    /// Serve TLS 1.2+ (ALPN `h2`, `http/1.1`) instead of cleartext.
    public var tls: TLS?
    /// A larger body (by `Content-Length`, or as it arrives) is answered 413 before any handler runs.
    public var maxBodyBytes = 64 * 1024
    /// The request line and header fields together; more is answered 431 (or by libmicrohttpd's own error).
    public var maxHeaderBytes = 16 * 1024
    /// A request (headers and body) must arrive within this many seconds of the connection's start or of
    /// the previous answer. Slower peers are disconnected (HTTP/1.1) or answered 408 (HTTP/2); a connection
    /// with no request open for this long is closed.
    public var requestTimeoutSeconds = 10
    /// The TLS handshake and the first request bytes must arrive within this many seconds of the accept.
    public var handshakeTimeoutSeconds = 5
    /// Connections open at once, TLS and HTTP/2 included; more are closed at accept.
    public var maxConnections = 1024
    /// Connections one peer address may hold at once (0: no limit); more are closed at accept, so that one
    /// address cannot take every slot.
    public var maxConnectionsPerAddress = 128

    /// The defaults above, on `listen`.
    public init(listen: String, tls: TLS? = nil) {
        self.listen = listen
        self.tls = tls
    }
}

/// Why an `HTTPFront` could not start.
public enum HTTPFrontError: Error, CustomStringConvertible, Sendable {
    /// The address is malformed or cannot be bound.
    case listen(String)
    /// The certificate or key cannot be used.
    case tls(String)
    /// A system resource (thread, eventfd, libmicrohttpd daemon) could not be had.
    case start(String)

    public var description: String {
        switch self {
        case .listen(let m): "listen: \(m)"
        case .tls(let m): "TLS: \(m)"
        case .start(let m): "start: \(m)"
        }
    }
}
