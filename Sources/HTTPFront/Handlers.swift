/// What every protocol path of a front shares: the bounds and the two callbacks.
struct Handlers: Sendable {
    typealias Precheck = @Sendable (HTTPRequest) -> HTTPResponse?
    typealias Handler = @Sendable (HTTPRequest, @escaping @Sendable (HTTPResponse) -> Void) -> Void

    let configuration: HTTPFrontConfiguration
    let precheck: Precheck
    let handler: Handler

    var timeoutNanoseconds: UInt64 { UInt64(max(1, configuration.requestTimeoutSeconds)) * 1_000_000_000 }

    /// The answer a request gets before its body is read: 413 for a declared body over the limit,
    /// 431 for headers over theirs, else whatever `precheck` says. Nil: read the body.
    func early(_ request: HTTPRequest, headerBytes: Int) -> HTTPResponse? {
        if headerBytes > configuration.maxHeaderBytes { return .plain(431, "request header fields too large") }
        if let length = request.header("content-length"), let n = Int(length), n > configuration.maxBodyBytes {
            return .tooLarge
        }
        return precheck(request)
    }
}

extension HTTPResponse {
    /// A body over `maxBodyBytes`.
    static let tooLarge = HTTPResponse.plain(413, "request body too large")
    /// Stopping: the request was not answered in time.
    static let shuttingDown = HTTPResponse.plain(503, "shutting down")
}
