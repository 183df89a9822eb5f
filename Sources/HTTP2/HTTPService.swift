/// Plain HTTP on a server's port (HTTP/1.1 through libmicrohttpd, HTTP/2 streams through the session
/// core): every request that is not a gRPC call goes to `handler`. The side ports (metrics, health, App
/// Store notifications) are servers with no gRPC methods and an `HTTPService`.
public struct HTTPService: Sendable {
    /// Sees method, path and header fields before any body byte is read, on the loop: it must return at
    /// once, with an answer (404, 405, 415...) or nil to read the body.
    public typealias Precheck = @Sendable (HTTPRequest) -> HTTPResponse?
    /// Gets the whole request and calls its completion exactly once, from any thread, now or later. It must
    /// not block the calling thread (a loop).
    public typealias Handler = @Sendable (HTTPRequest, @escaping @Sendable (HTTPResponse) -> Void) -> Void

    /// A larger body (by `Content-Length`, or as it arrives) is answered 413 before any handler runs.
    public var maxBodyBytes: Int
    /// The request line and header fields together; more is answered 431.
    public var maxHeaderBytes: Int
    /// A request (headers and body) must arrive within this long of its connection's start or of the
    /// previous answer; a slower sender is disconnected (HTTP/1.1) or answered 408 (HTTP/2).
    public var requestTimeoutNanoseconds: UInt64
    public var precheck: Precheck
    public var handler: Handler

    public init(
        maxBodyBytes: Int = 64 * 1024, maxHeaderBytes: Int = 16 * 1024, requestTimeoutSeconds: Int = 10,
        precheck: @escaping Precheck, handler: @escaping Handler
    ) {
        self.maxBodyBytes = maxBodyBytes
        self.maxHeaderBytes = maxHeaderBytes
        self.requestTimeoutNanoseconds = UInt64(max(1, requestTimeoutSeconds)) * 1_000_000_000
        self.precheck = precheck
        self.handler = handler
    }

    /// The answer a request gets before its body is read: 413 for a declared body over the limit, 431 for
    /// header fields over theirs, else whatever `precheck` says. Nil: read the body.
    func early(_ request: HTTPRequest, headerBytes: Int) -> HTTPResponse? {
        if headerBytes > maxHeaderBytes { return .headersTooLarge }
        if let length = request.header("content-length"), let n = Int(length), n > maxBodyBytes { return .tooLarge }
        return precheck(request)
    }
}
