/// One outbound HTTP request: absolute `http(s)://` URL, method, header fields and body.
public struct HTTPClientRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// The whole exchange (connect, TLS, request, answer) must end within this many milliseconds.
    public var timeoutMilliseconds: Int

    public init(
        method: String = "GET", url: String, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
        timeoutMilliseconds: Int = 10_000
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeoutMilliseconds = timeoutMilliseconds
    }
}

/// What the server answered: any status is an answer (a 500 is not an error of the client).
public struct HTTPClientResponse: Sendable {
    public var status: Int
    /// Field names lower-case, in the order received (the final answer's, not a 100 Continue's).
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// 1.1 or 2, as negotiated (ALPN over TLS).
    public var httpVersion: Int

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8], httpVersion: Int) {
        self.status = status
        self.headers = headers
        self.body = body
        self.httpVersion = httpVersion
    }

    /// The first field named `name` (lower-case).
    public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
}

/// Why no answer came. `description` is one line for logs; it never holds the request's headers or body.
public enum HTTPClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not an absolute http(s) URL, a scheme the client refuses (`http` without `allowCleartext`), or a field
    /// with a line break.
    case invalidRequest(String)
    /// The host name did not resolve.
    case resolve(String)
    /// No TCP connection (refused, unreachable).
    case connect(String)
    /// The TLS handshake failed, or the server's certificate or name was not trusted.
    case tls(String)
    /// The exchange did not end within its time-out.
    case timeout
    /// The answer's body passed `maxResponseBytes`.
    case responseTooLarge(limit: Int)
    /// The connection broke or the server did not speak HTTP.
    case transport(String)
    /// More requests are waiting than `maxQueued`; nothing was sent.
    case overloaded
    /// The client was shut down before the answer.
    case shutdown

    public var description: String {
        switch self {
        case .invalidRequest(let why): "invalid request: \(why)"
        case .resolve(let why): "host name did not resolve: \(why)"
        case .connect(let why): "could not connect: \(why)"
        case .tls(let why): "TLS failed: \(why)"
        case .timeout: "timed out"
        case .responseTooLarge(let limit): "answer larger than \(limit) bytes"
        case .transport(let why): "connection failed: \(why)"
        case .overloaded: "too many requests waiting"
        case .shutdown: "client shut down"
        }
    }
}
