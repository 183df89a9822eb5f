public import AppStoreAPI

/// Where and how billingd calls the App Store Server API.
public struct AppStoreAPIConfiguration: Sendable {
    public var credentials: APIToken.Credentials
    public var productionURL = "https://api.storekit.itunes.apple.com"
    public var sandboxURL = "https://api.storekit-sandbox.itunes.apple.com"
    /// CA bundle (PEM) to trust instead of the system's.
    public var caPath: String?
    /// One attempt's limit (connect, TLS, request and answer).
    public var attemptTimeoutSeconds = 10
    /// Attempts per call: 429, 5xx and transport failures are tried again, up to this many times in all.
    public var maxAttempts = 4
    /// The longest wait between attempts, whatever Retry-After says.
    public var maxBackoffSeconds = 8
    /// Calls in flight at once (one connection each); more wait up to one attempt's timeout, then fail.
    public var maxInFlight = 8

    public init(credentials: APIToken.Credentials) { self.credentials = credentials }

    /// The base URL of `environment`.
    public func url(_ environment: AppStoreAPIEnvironment) -> String {
        environment == .production ? productionURL : sandboxURL
    }
}

/// Observes every attempt (for metrics and logs): endpoint name, environment, HTTP status (0: no answer),
/// seconds taken.
public typealias AppStoreAPIObserver =
    @Sendable (
        _ endpoint: String, _ environment: AppStoreAPIEnvironment, _ status: Int,
        _ seconds: Double
    ) -> Void
