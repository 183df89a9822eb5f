public import Logging
import Foundation
public import Billing
public import Webhooks

/// Where billingd keeps its records (`--database`), read once: SQLite's file or PostgreSQL's URL.
public enum Database: Sendable, Equatable, CustomStringConvertible {
    case sqlite(path: String)
    case postgres(url: String)

    /// `sqlite:PATH` (or `sqlite://PATH`), `postgres://...` or `postgresql://...`; nil for anything else.
    public init?(_ text: String) {
        if text.hasPrefix("sqlite:") {
            var path = String(text.dropFirst("sqlite:".count))
            if path.hasPrefix("//") { path = String(path.dropFirst(2)) }
            guard !path.isEmpty else { return nil }
            self = .sqlite(path: path)
        } else if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            self = .postgres(url: text)
        } else {
            return nil
        }
    }

    /// For logs: the SQLite path, or `postgres` (a URL may hold a password).
    public var description: String {
        switch self {
        case .sqlite(let path): "sqlite:" + path
        case .postgres: "postgres"
        }
    }

    public var isSQLite: Bool {
        if case .sqlite = self { return true }
        return false
    }
}

/// billingd's settings, from flags and their `BILLING_*` environment twins (docs/CONFIGURATION.md); `flagTable`
/// (FlagTable.swift) says how each flag sets them.
public struct Configuration: Sendable, Equatable {
    public var listen = "127.0.0.1:50051"
    public var database = Database.sqlite(path: "billing.db")
    public var threads = ProcessInfo.processInfo.activeProcessorCount
    public var maxMessageBytes = 4 << 20
    public var bundleIDs: [String] = []
    public var appleAppID: Int64?
    public var environments: [String] = ["production", "sandbox"]
    /// The wire protocols served on `--listen` (`--protocols`): grpc, connect, grpc-web.
    public var protocols: [String] = ["grpc", "connect", "grpc-web"]
    /// Browser origins allowed to call Connect and gRPC-Web (`--cors-origins`); empty: no CORS headers.
    public var corsOrigins: [String] = []
    public var trustRoots: [String] = []
    public var catalogPath: String?
    public var restorePolicy = "transfer"
    /// A StoreKit 2 proof must carry `appAccountToken` equal to the order id.
    public var requireAccountToken = false
    /// A transaction bought before its order was created (beyond `clockSkew`), or a subscription expired by then, cannot pay it.
    public var rejectStalePurchases = false
    /// Seconds of allowance when comparing a purchase date with an order's creation time.
    public var clockSkew = 300.0
    public var dev = false
    /// Where `--dev` keeps its local test-store CA.
    public var devStore = "teststore"
    public var tlsCert: String?
    public var tlsKey: String?
    public var tlsClientCA: String?
    public var apiKeys: String?
    public var metricsListen: String?
    /// App Store Server Notifications v2 endpoint (HTTP/1.1 and h2c, TLS when a certificate is given).
    public var notificationsListen: String?
    public var notificationsTLSCert: String?
    public var notificationsTLSKey: String?
    public var dbPoolSize = 8
    public var shutdownGrace = 20.0
    public var logLevel = LogLevel.info
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
    /// Seconds after which a PENDING order becomes EXPIRED; 0 keeps orders pending for ever.
    public var orderTTL = 0.0
    /// App Store Server API credentials (all three, or none).
    public var appStoreAPIKeyID: String?
    public var appStoreAPIIssuerID: String?
    public var appStoreAPIPrivateKey: String?
    /// Base URL for both environments instead of Apple's (tests, proxies).
    public var appStoreAPIURL: String?
    /// Base URL for the sandbox only (beats `appStoreAPIURL` for sandbox).
    public var appStoreAPISandboxURL: String?
    public var appStoreAPICA: String?
    /// Seconds one App Store Server API attempt may take.
    public var appStoreAPITimeout = 10.0
    /// Seconds between notification-history reconciliations; 0 turns them off.
    public var reconcileInterval = 3600.0
    /// How far before the newest applied notification a reconciliation starts (seconds).
    public var reconcileMargin = 3600.0
    /// `off` or `auto`: answer CONSUMPTION_REQUEST notifications through Send Consumption Information.
    public var consumptionAnswers = "off"
    /// `--google-play-*`: Android packages served, the service account's key file, the API's URL and CA.
    public var googlePlayPackages: [String] = []
    public var googlePlayServiceAccount: String?
    public var googlePlayAPIURL = "https://androidpublisher.googleapis.com"
    public var googlePlayCA: String?
    /// `auto` (acknowledge and consume once durable) or `off` (the app does it).
    public var googlePlayAcknowledge = "auto"
    /// `--rtdn-*`: the push token's audience and service account, and the keys that sign it (nil: Google's).
    public var rtdnAudience: String?
    public var rtdnServiceAccount: String?
    public var rtdnCerts: String?
    /// `--webhook-*`: the checked webhook settings (nil: no webhooks).
    public var webhook: WebhookConfiguration?
    /// The In-App Purchase key that signs offers (SignOffer): its id and its `.p8` file (both, or neither).
    public var offerSigningKeyID: String?
    public var offerSigningKey: String?
    /// The issuer id the JWS offer kinds carry; nil: `appStoreAPIIssuerID`.
    public var offerSigningIssuerID: String?

    /// `--reporting-currency`: the currency Revenue reports money in when a request names none.
    public var reportingCurrency = "USD"
    /// `--exchange-rates`: the ECB-format daily rates file (read at start and on SIGHUP); nil: none.
    public var exchangeRates: String?
    /// `--commission`: the stores' commission for PROCEEDS, checked.
    public var commission = try! Commission.parse(Commission.defaultList)

    /// True when the App Store Server API can be called.
    public var appStoreAPIConfigured: Bool { appStoreAPIKeyID != nil }

    public init() {}

    /// A bad flag or value: one line naming the flag; billingd exits with status 2.
    public struct Invalid: Error, Equatable, CustomStringConvertible {
        public var flag: String
        public var problem: String
        public var description: String { "billingd: --\(flag): \(problem)" }

        public init(flag: String, problem: String) {
            self.flag = flag
            self.problem = problem
        }
    }

    /// A configuration being built from flags, with the values only checked together (`checkTogether`).
    struct Draft {
        var configuration = Configuration()
        var webhookURL: String?
        var webhookSecret: String?
        var webhookCA: String?
        var webhookEvents: String?

        /// The checks between flags, once every flag is set.
        mutating func checkTogether() throws(Invalid) {
            let c = configuration
            if (c.tlsCert == nil) != (c.tlsKey == nil) {
                throw Invalid(flag: c.tlsCert == nil ? "tls-cert" : "tls-key", problem: "--tls-cert and --tls-key go together")
            }
            if c.tlsClientCA != nil && c.tlsCert == nil { throw Invalid(flag: "tls-client-ca", problem: "needs --tls-cert and --tls-key") }
            if (c.notificationsTLSCert == nil) != (c.notificationsTLSKey == nil) {
                throw Invalid(
                    flag: c.notificationsTLSCert == nil ? "notifications-tls-cert" : "notifications-tls-key",
                    problem: "--notifications-tls-cert and --notifications-tls-key go together")
            }
            if c.notificationsTLSCert != nil && c.notificationsListen == nil {
                throw Invalid(flag: "notifications-tls-cert", problem: "needs --notifications-listen")
            }
            let credentials = [
                ("appstore-api-key-id", c.appStoreAPIKeyID), ("appstore-api-issuer-id", c.appStoreAPIIssuerID),
                ("appstore-api-private-key", c.appStoreAPIPrivateKey),
            ]
            if credentials.contains(where: { $0.1 != nil }), let missing = credentials.first(where: { $0.1 == nil }) {
                throw Invalid(flag: missing.0, problem: "--appstore-api-key-id, --appstore-api-issuer-id and --appstore-api-private-key go together")
            }
            if c.appStoreAPIConfigured && c.bundleIDs.isEmpty {
                throw Invalid(flag: "appstore-api-key-id", problem: "needs --bundle-id (the token names the app)")
            }
            if (c.googlePlayServiceAccount == nil) != c.googlePlayPackages.isEmpty {
                throw Invalid(
                    flag: c.googlePlayServiceAccount == nil ? "google-play-service-account" : "google-play-packages",
                    problem: "--google-play-service-account and --google-play-packages go together")
            }
            if c.rtdnAudience != nil {
                if c.rtdnServiceAccount == nil { throw Invalid(flag: "rtdn-service-account", problem: "is required with --rtdn-audience") }
                if c.googlePlayServiceAccount == nil {
                    throw Invalid(flag: "rtdn-audience", problem: "needs --google-play-service-account (RTDN is read back from the API)")
                }
                if c.notificationsListen == nil {
                    throw Invalid(flag: "rtdn-audience", problem: "needs --notifications-listen (the RTDN path is served there)")
                }
            } else if c.rtdnServiceAccount != nil || c.rtdnCerts != nil {
                throw Invalid(flag: c.rtdnServiceAccount != nil ? "rtdn-service-account" : "rtdn-certs", problem: "needs --rtdn-audience")
            }
            configuration.webhook = try Configuration.webhook(url: webhookURL, secret: webhookSecret, events: webhookEvents, ca: webhookCA, dev: c.dev)
            if (c.offerSigningKeyID == nil) != (c.offerSigningKey == nil) {
                throw Invalid(
                    flag: c.offerSigningKeyID == nil ? "offer-signing-key-id" : "offer-signing-key",
                    problem: "--offer-signing-key-id and --offer-signing-key go together")
            }
            if c.offerSigningIssuerID != nil && c.offerSigningKey == nil {
                throw Invalid(flag: "offer-signing-issuer-id", problem: "needs --offer-signing-key-id and --offer-signing-key")
            }
        }
    }

    /// Reads and checks an exchange-rates file: the rates, or the flag's one line naming the file's line at fault.
    public static func exchangeRates(_ path: String) throws(Invalid) -> ExchangeRates {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw Invalid(flag: "exchange-rates", problem: "cannot read \(path) as UTF-8 text")
        }
        do {
            return try ExchangeRates.parse(text)
        } catch {
            throw Invalid(flag: "exchange-rates", problem: "\(path): \(error.description)")
        }
    }

    /// The `--webhook-*` flags together: a URL needs a secret of the Standard Webhooks form; the others need a URL.
    static func webhook(url: String?, secret: String?, events: String?, ca: String?, dev: Bool) throws(Invalid) -> WebhookConfiguration? {
        guard let url else {
            for (flag, value) in [("webhook-secret", secret), ("webhook-events", events), ("webhook-ca", ca)] where value != nil {
                throw Invalid(flag: flag, problem: "needs --webhook-url")
            }
            return nil
        }
        guard var secretText = secret else { throw Invalid(flag: "webhook-secret", problem: "is required with --webhook-url") }
        if secretText.hasPrefix("@") {
            guard let text = try? String(contentsOfFile: String(secretText.dropFirst()), encoding: .utf8) else {
                throw Invalid(flag: "webhook-secret", problem: "cannot read \(secretText.dropFirst())")
            }
            secretText = text
        }
        do {
            let key = try WebhookSecret(secretText)
            let kinds = try events.map { list throws(WebhookConfigurationError) in try WebhookConfiguration.events(list) }
            return try WebhookConfiguration(url: url, secret: key, events: kinds, caPath: ca, allowCleartext: dev)
        } catch {
            // The reason names the flag and never repeats the secret.
            throw Invalid(flag: error.flag, problem: error.problem)
        }
    }

    /// An Android application id: dot-separated segments of letters, digits and underscores, each starting with a letter.
    static func isPackageName(_ s: String) -> Bool {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 2, s.utf8.count <= 255 else { return false }
        return parts.allSatisfy { part in
            guard let first = part.unicodeScalars.first, ("a"..."z").contains(first) || ("A"..."Z").contains(first) else { return false }
            return part.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
        }
    }
}
