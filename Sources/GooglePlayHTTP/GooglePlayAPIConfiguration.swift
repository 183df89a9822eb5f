public import GooglePlayAPI

/// Where and how billingd calls the Play Developer API and its token endpoint.
public struct GooglePlayAPIConfiguration: Sendable {
    /// The service account's key file (`--google-play-service-account`); its `token_uri` is where tokens come from.
    public var serviceAccount: ServiceAccountKey
    /// `--google-play-api-url`.
    public var baseURL = "https://androidpublisher.googleapis.com"
    /// A CA bundle (PEM) trusted besides the system's, for the API and the token endpoint (`--google-play-ca`).
    public var caPath: String?
    /// `http://` base and token URLs allowed (tests and `--dev` only).
    public var allowCleartext = false
    /// One attempt's limit (connect, TLS, request and answer).
    public var attemptTimeoutMilliseconds = 10_000
    /// Attempts per call: 429, 5xx and transport failures are tried again, up to this many times in all.
    public var maxAttempts = 4
    /// The first backoff; each retry doubles it (with jitter), up to `maxBackoffMilliseconds`.
    public var baseBackoffMilliseconds = 250
    /// The longest wait between attempts, whatever Retry-After says.
    public var maxBackoffMilliseconds = 8_000
    /// Calls in flight at once; more wait up to one attempt's time-out, then fail `unavailable`.
    public var maxInFlight = 8
    /// A cached access token is replaced this long before Google says it expires.
    public var tokenRenewBeforeSeconds: Int64 = 300

    public init(serviceAccount: ServiceAccountKey) { self.serviceAccount = serviceAccount }
}

/// Observes every attempt (for metrics and logs): the endpoint (Google's method name, `purchases.products.get`,
/// ..., or `oauth2.token`), the HTTP status (0: no answer), seconds taken. Never a token or a key.
public typealias GooglePlayAPIObserver = @Sendable (_ endpoint: String, _ status: Int, _ seconds: Double) -> Void
