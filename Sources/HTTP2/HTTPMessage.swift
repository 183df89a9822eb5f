import Synchronization

/// One request as the handlers see it, the same for HTTP/1.1 and HTTP/2.
public struct HTTPRequest: Sendable {
    /// The method as sent (`GET`, `HEAD`, `POST`, ...). `HEAD` is answered like `GET`: the server drops the body.
    public var method: String
    /// The path without the query string.
    public var path: String
    /// Header fields in arrival order, names lower-cased; HTTP/2 pseudo-headers are left out.
    public var headers: [(name: String, value: String)]
    /// The whole body (at most `maxBodyBytes`); empty in `precheck`.
    public var body: [UInt8]
    /// The client's `HOST:PORT`.
    public var peer: String
    /// `HTTP/1.1` (`HTTP/1.0` from old clients) or `HTTP/2`.
    public var httpVersion: String
    /// The timers and clock of the event loop the request arrived on (nil for a request a test built): a handler,
    /// called on that loop, sets a call's deadline there, as the session does for a gRPC call.
    public var timers: RequestTimers?

    /// A request; the server builds these, tests may too.
    public init(
        method: String, path: String, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
        peer: String = "", httpVersion: String = "HTTP/1.1"
    ) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.peer = peer
        self.httpVersion = httpVersion
    }

    /// The first value of header `name`, or nil. `name` is lower case, as the fields are stored (every caller asks
    /// with a literal; a lower-casing check per call cost more than the lookup). Lengths are compared first (O(1) for
    /// native strings): most fields differ in length, and a String comparison costs ~100 instructions.
    public func header(_ name: String) -> String? {
        assert(!name.utf8.contains { $0 >= 0x41 && $0 <= 0x5A }, "header names are asked in lower case")
        let n = name.utf8.count
        for field in headers where field.name.utf8.count == n && field.name == name { return field.value }
        return nil
    }
}

/// One answer: status, content type, body and any extra header fields.
public struct HTTPResponse: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// The `Content-Type` of `body`.
    public var contentType: String
    /// The body; the server adds `Content-Length` and drops it for `HEAD`.
    public var body: [UInt8]
    /// Extra header fields, e.g. `("Retry-After", "5")`; HTTP/2 sends the names lower-cased.
    public var headers: [(String, String)]
    /// A body written while it is sent (no `Content-Length`; HTTP/1.1 chunked): `body` is ignored then.
    public var stream: HTTPBodyStream?

    /// An answer with a body of bytes.
    public init(status: Int, contentType: String = "text/plain; charset=utf-8", body: [UInt8] = [], headers: [(String, String)] = []) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.headers = headers
    }

    /// An answer whose body `stream` produces while it is sent.
    public init(status: Int, contentType: String, stream: HTTPBodyStream, headers: [(String, String)] = []) {
        self.init(status: status, contentType: contentType, body: [], headers: headers)
        self.stream = stream
    }

    /// An answer with a text body (UTF-8).
    public init(status: Int, contentType: String = "text/plain; charset=utf-8", text: String, headers: [(String, String)] = []) {
        self.init(status: status, contentType: contentType, body: Array(text.utf8), headers: headers)
    }

    /// The server's own answers (limits, shutdown): a one-line text body.
    package static func plain(_ status: Int, _ text: String) -> HTTPResponse {
        HTTPResponse(status: status, text: text + "\n")
    }

    /// A body over `maxBodyBytes`.
    package static let tooLarge = HTTPResponse.plain(413, "request body too large")
    /// Header fields over `maxHeaderBytes`.
    package static let headersTooLarge = HTTPResponse.plain(431, "request header fields too large")
    /// Stopping: the request was not answered in time.
    package static let shuttingDown = HTTPResponse.plain(503, "shutting down")
    /// The request did not arrive in time.
    package static let requestTimeout = HTTPResponse.plain(408, "request timeout")
}

/// The timers of the loop a request arrived on (`HTTPRequest.timers`): the same timers and CLOCK_MONOTONIC that gRPC
/// calls' deadlines use, so that a call's deadline is one timer on its loop whatever the protocol.
public struct RequestTimers: Sendable {
    let host: any SessionHost

    init(host: any SessionHost) {
        self.host = host
    }

    /// The loop's monotonic clock, in nanoseconds.
    public func now() -> UInt64 { host.now() }

    /// Runs `action` on the loop after `nanoseconds`. Called on the loop (the handler's thread); the timer's
    /// `cancel` may be called from any thread.
    public func schedule(afterNanoseconds nanoseconds: Int64, _ action: @escaping @Sendable () -> Void) -> RequestTimer {
        host.assertInHost("RequestTimers.schedule", file: #fileID, line: #line)
        let timer = RequestTimer(host: host)
        timer.id.withLock { $0 = host.schedule(afterNanoseconds: max(0, nanoseconds)) { action() } }
        return timer
    }
}

/// One timer of `RequestTimers.schedule`.
public final class RequestTimer: Sendable {
    let host: any SessionHost
    let id = Mutex<Int?>(nil)

    init(host: any SessionHost) {
        self.host = host
    }

    /// Cancels the timer if it has not run (from any thread: the cancellation runs on the loop).
    public func cancel() {
        guard
            let taken = id.withLock({ id -> Int? in
                defer { id = nil }
                return id
            })
        else { return }
        let host = self.host
        if host.inHost { host.cancelTimer(taken) } else { host.execute { host.cancelTimer(taken) } }
    }
}
