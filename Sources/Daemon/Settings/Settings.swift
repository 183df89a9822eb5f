public import Logging
import Foundation
public import Billing

// The settings of each feature, as `Configuration` composes them; the flag table (FlagTable.swift) says which
// flag sets which field, Configuration+Components.swift how they become the components' own configurations.

/// `--listen`, `--threads`, `--protocols`, `--cors-origins`, `--tls-*`, `--api-keys`, `--shutdown-grace`.
public struct ServerSettings: Sendable, Equatable {
    public var listen = "127.0.0.1:50051"
    public var threads = ProcessInfo.processInfo.activeProcessorCount
    /// The wire protocols served on `--listen`: grpc, connect, grpc-web.
    public var protocols: [String] = ["grpc", "connect", "grpc-web"]
    /// Browser origins allowed to call Connect and gRPC-Web; empty: no CORS headers.
    public var corsOrigins: [String] = []
    public var tlsCert: String?
    public var tlsKey: String?
    public var tlsClientCA: String?
    public var apiKeys: String?
    /// Seconds a stop waits for calls in flight.
    public var shutdownGrace = 20.0
    public init() {}
}

/// `--max-*`, `--idle-timeout`: the bounds of the gRPC port.
public struct LimitSettings: Sendable, Equatable {
    public var maxMessageBytes = 4 << 20
    public var maxConcurrentStreams = 1024
    public var maxConnections = 50_000
    public var maxInFlight = 10_000
    /// Concurrent WatchEvents streams in this process, and per caller (API key, certificate or peer address).
    public var maxWatchers = 1000
    public var maxWatchersPerKey = 100
    public var maxHeaderListBytes = 16 << 10
    /// Unfinished request bytes one connection may hold over all its streams.
    public var maxConnectionBufferBytes = 64 << 20
    /// Seconds; the cap on every call's deadline.
    public var maxDeadline = 60.0
    /// Seconds; a connection with no open stream for this long is closed.
    public var idleTimeout = 300.0
    public init() {}
}

/// `--database`, `--db-pool-size`.
public struct StoreSettings: Sendable, Equatable {
    public var database = Database.sqlite(path: "billing.db")
    /// PostgreSQL connections per process.
    public var poolSize = 8
    public init() {}
}

/// `--metrics-listen`, `--log-level`.
public struct ObservabilitySettings: Sendable, Equatable {
    /// Prometheus `/metrics`, `/healthz`, `/readyz`.
    public var metricsListen: String?
    public var logLevel = LogLevel.info
    public init() {}
}

/// `--notifications-listen`, `--notifications-tls-*`: App Store Server Notifications v2 (and RTDN) over HTTP/1.1
/// and h2c, TLS when a certificate is given.
public struct NotificationSettings: Sendable, Equatable {
    public var listen: String?
    public var tlsCert: String?
    public var tlsKey: String?
    public init() {}
}

/// `--bundle-id`, `--apple-app-id`, `--environments`, `--trust-root`, `--catalog`, `--restore-policy`, the proof
/// rules and `--order-ttl`.
public struct PurchaseSettings: Sendable, Equatable {
    public var bundleIDs: [String] = []
    public var appleAppID: Int64?
    public var environments: [String] = ["production", "sandbox"]
    public var trustRoots: [String] = []
    public var catalogPath: String?
    public var restorePolicy = "transfer"
    /// A StoreKit 2 proof must carry `appAccountToken` equal to the order id.
    public var requireAccountToken = false
    /// A transaction bought before its order was created (beyond `clockSkew`), or a subscription expired by then, cannot pay it.
    public var rejectStalePurchases = false
    /// Seconds of allowance when comparing a purchase date with an order's creation time.
    public var clockSkew = 300.0
    /// Seconds after which a PENDING order becomes EXPIRED; 0 keeps orders pending for ever.
    public var orderTTL = 0.0
    public init() {}
}

/// `--appstore-api-*`, `--reconcile-*`, `--consumption-answers`.
public struct AppStoreAPISettings: Sendable, Equatable {
    /// The API key's credentials (all three, or none).
    public var keyID: String?
    public var issuerID: String?
    public var privateKey: String?
    /// Base URL for both environments instead of Apple's (tests, proxies).
    public var url: String?
    /// Base URL for the sandbox only (beats `url` for sandbox).
    public var sandboxURL: String?
    public var ca: String?
    /// Seconds one attempt may take.
    public var timeout = 10.0
    /// Seconds between notification-history reconciliations; 0 turns them off.
    public var reconcileInterval = 3600.0
    /// How far before the newest applied notification a reconciliation starts (seconds).
    public var reconcileMargin = 3600.0
    /// `off` or `auto`: answer CONSUMPTION_REQUEST notifications through Send Consumption Information.
    public var consumptionAnswers = "off"
    /// True when the API can be called.
    public var isConfigured: Bool { keyID != nil }
    public init() {}
}

/// `--google-play-*`, `--rtdn-*`.
public struct GooglePlaySettings: Sendable, Equatable {
    /// Android packages served, the service account's key file, the API's URL and CA.
    public var packages: [String] = []
    public var serviceAccount: String?
    public var apiURL = "https://androidpublisher.googleapis.com"
    public var ca: String?
    /// `auto` (acknowledge and consume once durable) or `off` (the app does it).
    public var acknowledge = "auto"
    /// The push token's audience and service account, and the keys that sign it (nil: Google's).
    public var rtdnAudience: String?
    public var rtdnServiceAccount: String?
    public var rtdnCerts: String?
    public init() {}
}

/// `--offer-signing-*`: the In-App Purchase key that signs offers (SignOffer).
public struct OfferSettings: Sendable, Equatable {
    /// Its id and its `.p8` file (both, or neither).
    public var keyID: String?
    public var key: String?
    /// The issuer id the JWS offer kinds carry; nil: the App Store API's.
    public var issuerID: String?
    public init() {}
}

/// `--reporting-currency`, `--exchange-rates`, `--commission`.
public struct ReportingSettings: Sendable, Equatable {
    /// The currency Revenue reports money in when a request names none.
    public var reportingCurrency = "USD"
    /// The ECB-format daily rates file (read at start and on SIGHUP); nil: none.
    public var exchangeRates: String?
    /// The stores' commission for PROCEEDS, checked.
    public var commission = try! Commission.parse(Commission.defaultList)
    public init() {}
}
