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
    /// The gRPC port: where, how many loops, which protocols, TLS, API keys, the drain.
    public var server = ServerSettings()
    /// The bounds every call and connection is held to.
    public var limits = LimitSettings()
    /// Where the records are kept.
    public var store = StoreSettings()
    /// The metrics port and the log.
    public var observability = ObservabilitySettings()
    /// The notifications port (App Store notifications, Google Play RTDN).
    public var notifications = NotificationSettings()
    /// Which apps, proofs and orders billingd accepts.
    public var purchases = PurchaseSettings()
    /// `--dev`: the local test store is trusted, its CA kept in `devStore`; webhooks may be cleartext.
    public var dev = false
    public var devStore = "teststore"
    /// The App Store Server API, reconciliation and consumption answers.
    public var appStoreAPI = AppStoreAPISettings()
    /// Google Play: the Play Developer API and RTDN.
    public var googlePlay = GooglePlaySettings()
    /// `--webhook-*`: the checked webhook settings (nil: no webhooks).
    public var webhook: WebhookConfiguration?
    /// SignOffer's key.
    public var offers = OfferSettings()
    /// Revenue's currency, rates and commission.
    public var revenue = ReportingSettings()

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
            if (c.server.tlsCert == nil) != (c.server.tlsKey == nil) {
                throw Invalid(flag: c.server.tlsCert == nil ? "tls-cert" : "tls-key", problem: "--tls-cert and --tls-key go together")
            }
            if c.server.tlsClientCA != nil && c.server.tlsCert == nil { throw Invalid(flag: "tls-client-ca", problem: "needs --tls-cert and --tls-key") }
            if (c.notifications.tlsCert == nil) != (c.notifications.tlsKey == nil) {
                throw Invalid(
                    flag: c.notifications.tlsCert == nil ? "notifications-tls-cert" : "notifications-tls-key",
                    problem: "--notifications-tls-cert and --notifications-tls-key go together")
            }
            if c.notifications.tlsCert != nil && c.notifications.listen == nil {
                throw Invalid(flag: "notifications-tls-cert", problem: "needs --notifications-listen")
            }
            let credentials = [
                ("appstore-api-key-id", c.appStoreAPI.keyID), ("appstore-api-issuer-id", c.appStoreAPI.issuerID),
                ("appstore-api-private-key", c.appStoreAPI.privateKey),
            ]
            if credentials.contains(where: { $0.1 != nil }), let missing = credentials.first(where: { $0.1 == nil }) {
                throw Invalid(flag: missing.0, problem: "--appstore-api-key-id, --appstore-api-issuer-id and --appstore-api-private-key go together")
            }
            if c.appStoreAPI.isConfigured && c.purchases.bundleIDs.isEmpty {
                throw Invalid(flag: "appstore-api-key-id", problem: "needs --bundle-id (the token names the app)")
            }
            if (c.googlePlay.serviceAccount == nil) != c.googlePlay.packages.isEmpty {
                throw Invalid(
                    flag: c.googlePlay.serviceAccount == nil ? "google-play-service-account" : "google-play-packages",
                    problem: "--google-play-service-account and --google-play-packages go together")
            }
            if c.googlePlay.rtdnAudience != nil {
                if c.googlePlay.rtdnServiceAccount == nil { throw Invalid(flag: "rtdn-service-account", problem: "is required with --rtdn-audience") }
                if c.googlePlay.serviceAccount == nil {
                    throw Invalid(flag: "rtdn-audience", problem: "needs --google-play-service-account (RTDN is read back from the API)")
                }
                if c.notifications.listen == nil {
                    throw Invalid(flag: "rtdn-audience", problem: "needs --notifications-listen (the RTDN path is served there)")
                }
            } else if c.googlePlay.rtdnServiceAccount != nil || c.googlePlay.rtdnCerts != nil {
                throw Invalid(flag: c.googlePlay.rtdnServiceAccount != nil ? "rtdn-service-account" : "rtdn-certs", problem: "needs --rtdn-audience")
            }
            configuration.webhook = try Configuration.webhook(url: webhookURL, secret: webhookSecret, events: webhookEvents, ca: webhookCA, dev: c.dev)
            if (c.offers.keyID == nil) != (c.offers.key == nil) {
                throw Invalid(
                    flag: c.offers.keyID == nil ? "offer-signing-key-id" : "offer-signing-key",
                    problem: "--offer-signing-key-id and --offer-signing-key go together")
            }
            if c.offers.issuerID != nil && c.offers.key == nil {
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
