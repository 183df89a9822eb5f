package import GooglePlayAPI
import HTTPClient
import Lifecycle
package import Logging

/// Google's push-token keys, fetched from `https://www.googleapis.com/oauth2/v3/certs` at start and every hour
/// (every minute while a fetch fails), handed to the verifier. Not used with `--rtdn-certs`.
package final class GoogleKeyFetcher: Sendable {
    static let url = "https://www.googleapis.com/oauth2/v3/certs"
    private let verifier: GoogleIDTokenVerifier
    private let client: HTTPClient
    private let logger: Logger
    private let worker = Worker(name: "google-certs")

    package init(verifier: GoogleIDTokenVerifier, logger: Logger) throws {
        self.verifier = verifier
        self.logger = logger
        client = try HTTPClient(name: "google-certs")
    }

    package func start() {
        // Hourly, every minute after a failure.
        worker.start { [self] worker in
            var ok = true
            repeat { ok = fetch() } while worker.pause(.seconds(ok ? 3600 : 60))
        }
    }

    /// Ends the loop; the client's shutdown answers a fetch in flight at once.
    package func stop() {
        worker.beginStop()
        client.shutdown()
        _ = worker.waitStopped(until: Monotonic.after(.seconds(5)))
    }

    private func fetch() -> Bool {
        switch client.sendAndWait(HTTPClientRequest(url: Self.url, timeoutMilliseconds: 10_000)) {
        case .success(let r) where r.status == 200:
            do {
                verifier.replaceKeys(try GoogleKeySet.parse(r.body))
                return true
            } catch {
                logger.log(.warning, "Google's push-token keys not understood", [("error", .string(error.description))])
            }
        case .success(let r):
            logger.log(.warning, "Google's push-token keys not fetched", [("status", .int(r.status))])
        case .failure(let e):
            logger.log(.warning, "Google's push-token keys not fetched", [("error", .string(e.description))])
        }
        return false
    }
}
