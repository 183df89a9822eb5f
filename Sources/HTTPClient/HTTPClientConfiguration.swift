/// How an `HTTPClient` connects: which CAs it trusts, what it allows, how much it holds.
public struct HTTPClientConfiguration: Sendable {
    /// A PEM CA bundle trusted besides the system's CAs (private receivers, local fakes).
    public var extraCAPath: String?
    /// Allow `http://` URLs (development and tests only; production refuses them).
    public var allowCleartext = false
    /// Answers larger than this fail with `responseTooLarge` (nothing more is read).
    public var maxResponseBytes = 4 << 20
    /// Connections open at once, over every host (HTTP/2 multiplexes requests on one).
    public var maxConnections = 16
    /// Requests accepted but not yet answered; more fail at once with `overloaded`.
    public var maxQueued = 1_024
    /// TCP connect plus TLS handshake, at most.
    public var connectTimeoutMilliseconds = 5_000
    /// Sent as `user-agent` unless the request names one.
    public var userAgent = "billingd"
    /// The system's CA directory (OpenSSL hashed names), trusted unless `extraCAPath` alone is wanted.
    public var systemCADirectory: String? = "/etc/ssl/certs"
    /// The system's CA bundle file, used when no `extraCAPath` is given.
    public var systemCABundle: String? = "/etc/ssl/certs/ca-certificates.crt"

    public init() {}
}
