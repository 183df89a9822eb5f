import CCurl
import IO
import Synchronization
import Lifecycle

/// The outbound HTTP client every store API and the webhook sender share: libcurl's multi interface driven by
/// an IO `EventLoop` of its own (its sockets in the loop's epoll set, its timer on the loop's timers), so one
/// thread serves every outbound connection. It speaks HTTP/1.1, and HTTP/2 when the server offers it by ALPN
/// (libcurl's HTTP/2 is libnghttp2), over OpenSSL with the system CAs plus an optional bundle, verifying the
/// server's certificate and host name; it follows no redirect and honours the usual `https_proxy` variables.
///
/// `send` may be called from any thread. Completions run on the client's loop thread: they must not block
/// (hand the answer to a queue or `Blocking.wait`, which waits on the caller's own thread).
public final class HTTPClient: Sendable {
    public let configuration: HTTPClientConfiguration
    private let loop: EventLoop
    private let engine: LoopBound<CurlEngine>
    /// Requests accepted and not yet answered. In a box of its own: completions on the loop must not hold the
    /// client (its last release there would run `deinit`, and so `shutdown`, on the loop it joins).
    private let pending = PendingCount()
    private let closed = Atomic<Bool>(false)

    public init(configuration: HTTPClientConfiguration = .init(), name: String = "http-client") throws(HTTPClientError) {
        CurlGlobal.ready()
        self.configuration = configuration
        do {
            loop = try EventLoop(name: name)
        } catch {
            throw .transport("event loop: \(error)")
        }
        engine = LoopBound(try CurlEngine(loop: loop, configuration: configuration), loop: loop)
        loop.start()
    }

    /// Requests accepted and not yet answered (a gauge for metrics).
    public var inFlight: Int { pending.value.load(ordering: .relaxed) }

    /// Sends `request`; `completion` gets the answer (any HTTP status) or why there is none, exactly once.
    public func send(
        _ request: HTTPClientRequest, completion: @escaping @Sendable (Result<HTTPClientResponse, HTTPClientError>) -> Void
    ) {
        if let problem = HTTPClientRequestCheck.problem(request, allowCleartext: configuration.allowCleartext) {
            completion(.failure(.invalidRequest(problem)))
            return
        }
        if closed.load(ordering: .acquiring) {
            completion(.failure(.shutdown))
            return
        }
        if pending.value.add(1, ordering: .relaxed).newValue > configuration.maxQueued {
            pending.value.subtract(1, ordering: .relaxed)
            completion(.failure(.overloaded))
            return
        }
        engine.execute { [pending] engine in
            engine.start(request) { result in
                pending.value.subtract(1, ordering: .relaxed)
                completion(result)
            }
        }
    }

    /// Sends `request` and blocks this thread until the answer: only on threads that may block (worker pools,
    /// background threads), never on an event loop.
    public func sendAndWait(_ request: HTTPClientRequest) -> Result<HTTPClientResponse, HTTPClientError> {
        Blocking.wait { done in send(request, completion: done) }
    }

    /// Sends `request` and suspends until the answer.
    public func send(_ request: HTTPClientRequest) async throws(HTTPClientError) -> HTTPClientResponse {
        let result = await withCheckedContinuation { continuation in
            send(request) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    deinit { shutdown() }

    /// Fails every request not yet answered with `shutdown`, closes the connections and ends the loop thread.
    /// Later `send`s fail with `shutdown`. Call it from any thread but the client's own loop.
    public func shutdown() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let loop = self.loop
        engine.execute { engine in
            engine.close()
            loop.stop()
        }
        loop.join()
    }
}

final class PendingCount: Sendable {
    let value = Atomic<Int>(0)
}

/// `curl_global_init`, once per process, before the first handle.
enum CurlGlobal {
    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    static func ready() { precondition(initialized, "curl_global_init failed") }
}
