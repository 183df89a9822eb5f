import Glibc
import GooglePlayAPI
import HTTPClient
import IO
import Synchronization
import Lifecycle

/// One call's attempts over the HTTP client: at most `maxInFlight` calls at once, a time-out per attempt, 429,
/// 5xx and transport failures tried again (up to `maxAttempts` in all) after Retry-After or an exponential
/// backoff with jitter, capped. Every attempt is reported to the observer. Blocks the calling thread.
final class Exchange: Sendable {
    private let client: HTTPClient
    private let configuration: GooglePlayAPIConfiguration
    private let observe: GooglePlayAPIObserver
    private let slots: Signal
    private let sleep: @Sendable (Int) -> Void

    init(
        client: HTTPClient, configuration: GooglePlayAPIConfiguration, observe: @escaping GooglePlayAPIObserver,
        sleep: @escaping @Sendable (Int) -> Void
    ) {
        self.client = client
        self.configuration = configuration
        self.observe = observe
        slots = Signal(max(1, configuration.maxInFlight))
        self.sleep = sleep
    }

    /// The first answer that is not a 429 or 5xx (or the last one), or `unavailable` when no attempt got an answer.
    /// `authorized`: the call holds a slot of `maxInFlight` (the token endpoint's calls run inside an API call's).
    func run(
        _ endpoint: String, authorized: Bool = true, _ request: (_ attempt: Int) throws(GooglePlayAPIError) -> HTTPClientRequest
    )
        throws(GooglePlayAPIError) -> HTTPClientResponse
    {
        if authorized {
            guard slots.wait(timeout: .milliseconds(configuration.attemptTimeoutMilliseconds)) else {
                throw .unavailable("\(endpoint): \(configuration.maxInFlight) calls already in flight")
            }
        }
        defer { if authorized { slots.signal() } }
        let attempts = max(1, configuration.maxAttempts)
        var last = GooglePlayAPIError.unavailable("\(endpoint): no attempt made")
        for attempt in 1...attempts {
            var r = try request(attempt)
            r.timeoutMilliseconds = configuration.attemptTimeoutMilliseconds
            let started = Monotonic.now()
            let result = send(r)
            let seconds = Double(Monotonic.now() &- started) / 1e9
            var retryAfter: Int?
            switch result {
            case .failure(let error):
                observe(endpoint, 0, seconds)
                last = .unavailable("\(endpoint): \(error)")
                // Nothing was sent, and a retry would not change that.
                if case .invalidRequest = error { throw last }
                if case .shutdown = error { throw last }
                if case .responseTooLarge = error { throw last }
            case .success(let answer):
                observe(endpoint, answer.status, seconds)
                guard answer.status == 429 || (500..<600).contains(answer.status) else { return answer }
                last = .unavailable("\(endpoint): HTTP \(answer.status)\(Self.reasonSuffix(answer.body))")
                retryAfter = answer.header("retry-after").flatMap { Int($0.trimmingCharacters(in: " ")) }
            }
            if attempt < attempts { backoff(attempt: attempt, retryAfterSeconds: retryAfter) }
        }
        throw last
    }

    /// One exchange, waited for on this thread (a little past the request's own time-out, which libcurl keeps).
    private func send(_ request: HTTPClientRequest) -> Result<HTTPClientResponse, HTTPClientError> {
        Blocking.wait(timeout: .milliseconds(request.timeoutMilliseconds + 2_000)) { done in client.send(request, completion: done) }
            ?? .failure(.timeout)
    }

    private func backoff(attempt: Int, retryAfterSeconds: Int?) {
        let cap = max(0, configuration.maxBackoffMilliseconds)
        let exponential = Double(configuration.baseBackoffMilliseconds) * Double(1 << min(attempt - 1, 16)) * Double.random(in: 0.5...1.0)
        let ms = retryAfterSeconds.map { $0 * 1000 } ?? Int(exponential)
        sleep(min(max(0, ms), cap))
    }

    /// ` reason` from Google's error body, when it has one.
    static func reasonSuffix(_ body: [UInt8]) -> String {
        let (reason, _) = GoogleError.read(body)
        return reason.isEmpty ? "" : " " + reason
    }

    /// At most 200 characters of a peer's text, for an error's description.
    static func cap(_ s: String) -> String { s.count <= 200 ? s : String(s.prefix(200)) + "..." }
}

/// Google's error body: `{"error": {"code", "message", "errors": [{"message", "domain", "reason"}], "status"}}`.
enum GoogleError {
    /// (reason, message), each capped; ("", "") when the body is not Google's error shape.
    static func read(_ body: [UInt8]) -> (reason: String, message: String) {
        guard let top = try? GoogleJSON.object(body, "error"), let error = try? top.object("error") else { return ("", "") }
        let message = (try? error.string("message")).flatMap { $0 } ?? ""
        var reason = ""
        if let items = try? error.objects("errors"), let first = items.first { reason = (try? first.string("reason")).flatMap { $0 } ?? "" }
        if reason.isEmpty { reason = (try? error.string("status")).flatMap { $0 } ?? "" }
        return (Exchange.cap(reason), Exchange.cap(message))
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        String(drop { set.contains($0) }.reversed().drop { set.contains($0) }.reversed())
    }
}
