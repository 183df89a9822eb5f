import Foundation
public import Billing
public import Webhooks

/// billingd's settings, from flags and their `BILLING_*` environment twins (docs/CONFIGURATION.md).
public struct Configuration: Sendable, Equatable {
    public var listen = "127.0.0.1:50051"
    public var database = "sqlite:billing.db"
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
    }

    /// Every flag billingd knows, and whether it takes a value.
    static let flags: [String: Bool] = [
        "listen": true, "database": true, "threads": true, "max-message-bytes": true, "bundle-id": true,
        "apple-app-id": true, "environments": true, "trust-root": true, "catalog": true, "restore-policy": true,
        "require-account-token": false, "reject-stale-purchases": false, "clock-skew": true,
        "dev": false, "dev-store": true, "tls-cert": true, "tls-key": true, "tls-client-ca": true, "api-keys": true,
        "metrics-listen": true, "notifications-listen": true, "notifications-tls-cert": true, "notifications-tls-key": true, "db-pool-size": true,
        "shutdown-grace": true, "log-level": true,
        "max-concurrent-streams": true, "max-connections": true, "max-in-flight": true, "max-header-list-bytes": true,
        "max-watchers": true, "max-watchers-per-key": true, "protocols": true, "cors-origins": true,
        "max-connection-buffer-bytes": true,
        "max-deadline": true, "idle-timeout": true, "order-ttl": true, "help": false, "version": false,
        "appstore-api-key-id": true, "appstore-api-issuer-id": true, "appstore-api-private-key": true, "appstore-api-url": true,
        "appstore-api-sandbox-url": true, "appstore-api-ca": true, "appstore-api-timeout": true, "reconcile-interval": true, "reconcile-margin": true,
        "consumption-answers": true,
        "webhook-url": true, "webhook-secret": true, "webhook-ca": true, "webhook-events": true,
        "google-play-packages": true, "google-play-service-account": true, "google-play-api-url": true, "google-play-ca": true,
        "google-play-acknowledge": true, "rtdn-audience": true, "rtdn-service-account": true, "rtdn-certs": true,
        "offer-signing-key-id": true, "offer-signing-key": true, "offer-signing-issuer-id": true,
        "reporting-currency": true, "exchange-rates": true, "commission": true,
    ]
    static let repeatable: Set<String> = ["bundle-id", "trust-root"]

    /// Parses `arguments` (without the program name) over `environment`; flags beat their twins.
    public static func parse(_ arguments: [String], environment: [String: String]) throws(Invalid) -> Configuration {
        var values: [String: [String]] = [:]
        // Environment twins first, so flags replace them.
        for (flag, takesValue) in flags where flag != "help" && flag != "version" {
            let twin = "BILLING_" + flag.uppercased().replacingOccurrences(of: "-", with: "_")
            guard let value = environment[twin] else { continue }
            if !takesValue {
                values[flag] = [value]
            } else if repeatable.contains(flag) {
                values[flag] = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            } else {
                values[flag] = [value]
            }
        }
        var fromFlags = Set<String>()
        var i = 0
        while i < arguments.count {
            let arg = arguments[i]
            guard arg.hasPrefix("--") else { throw Invalid(flag: arg, problem: "unexpected argument; flags start with --") }
            var name = String(arg.dropFirst(2))
            var inline: String?
            if let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            guard let takesValue = flags[name] else { throw Invalid(flag: name, problem: "unknown flag (see billingd --help)") }
            let value: String
            if takesValue {
                if let inline {
                    value = inline
                } else {
                    guard i + 1 < arguments.count else { throw Invalid(flag: name, problem: "needs a value") }
                    i += 1
                    value = arguments[i]
                }
            } else {
                value = inline ?? "true"
            }
            if !fromFlags.contains(name) {
                values[name] = []
                fromFlags.insert(name)
            }
            if !repeatable.contains(name) && values[name]!.count == 1 && takesValue {
                throw Invalid(flag: name, problem: "given twice")
            }
            values[name]!.append(value)
            i += 1
        }
        return try build(values)
    }

    private static func build(_ v: [String: [String]]) throws(Invalid) -> Configuration {
        var c = Configuration()
        func one(_ flag: String) -> String? { v[flag]?.last }
        func int(_ flag: String, _ range: ClosedRange<Int>) throws(Invalid) -> Int? {
            guard let s = one(flag) else { return nil }
            guard let n = Int(s), range.contains(n) else {
                throw Invalid(flag: flag, problem: "'\(s)' is not a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            return n
        }
        func bool(_ flag: String) throws(Invalid) -> Bool? {
            guard let s = one(flag) else { return nil }
            switch s.lowercased() {
            case "true", "1", "yes", "on": return true
            case "false", "0", "no", "off", "": return false
            default: throw Invalid(flag: flag, problem: "'\(s)' is not true or false")
            }
        }
        func file(_ flag: String, _ path: String) throws(Invalid) -> String {
            guard FileManager.default.isReadableFile(atPath: path) else {
                throw Invalid(flag: flag, problem: "cannot read '\(path)'")
            }
            return path
        }
        func hostPort(_ flag: String, _ s: String) throws(Invalid) -> String {
            guard let colon = s.lastIndex(of: ":"), let port = Int(s[s.index(after: colon)...]), (0...65535).contains(port),
                colon != s.startIndex || s.hasPrefix(":")
            else {
                throw Invalid(flag: flag, problem: "'\(s)' is not HOST:PORT")
            }
            return s
        }
        if let s = one("listen") { c.listen = try hostPort("listen", s) }
        if let s = one("database") {
            guard s.hasPrefix("sqlite:") || s.hasPrefix("postgres://") || s.hasPrefix("postgresql://") else {
                throw Invalid(flag: "database", problem: "'\(s)' is neither sqlite:PATH nor postgres://user@host:port/db")
            }
            if s.hasPrefix("sqlite:") && s.dropFirst("sqlite:".count).isEmpty {
                throw Invalid(flag: "database", problem: "sqlite: needs a file path")
            }
            c.database = s
        }
        if let n = try int("threads", 1...256) { c.threads = n }
        if let n = try int("max-message-bytes", 1...(256 << 20)) { c.maxMessageBytes = n }
        if let n = try int("max-concurrent-streams", 1...1_000_000) { c.maxConcurrentStreams = n }
        if let n = try int("max-connections", 1...1_000_000) { c.maxConnections = n }
        if let n = try int("max-in-flight", 1...10_000_000) { c.maxInFlight = n }
        if let n = try int("max-watchers", 1...1_000_000) { c.maxWatchers = n }
        if let n = try int("max-watchers-per-key", 1...1_000_000) { c.maxWatchersPerKey = n }
        if let n = try int("max-header-list-bytes", 1024...(1 << 20)) { c.maxHeaderListBytes = n }
        if let n = try int("max-connection-buffer-bytes", (64 << 10)...(1 << 40)) { c.maxConnectionBufferBytes = n }
        func seconds(_ flag: String, _ range: ClosedRange<Double>) throws(Invalid) -> Double? {
            guard let s = one(flag) else { return nil }
            guard let d = Double(s), range.contains(d) else {
                throw Invalid(flag: flag, problem: "'\(s)' is not a number of seconds from \(range.lowerBound) to \(range.upperBound)")
            }
            return d
        }
        if let d = try seconds("max-deadline", 0.001...86_400) { c.maxDeadline = d }
        if let d = try seconds("idle-timeout", 1...86_400) { c.idleTimeout = d }
        if let s = one("order-ttl") {
            guard let d = Double(s), d >= 0, d <= 365 * 86_400 else {
                throw Invalid(flag: "order-ttl", problem: "'\(s)' is not a number of seconds from 0 (never) to one year")
            }
            c.orderTTL = d
        }
        if let ids = v["bundle-id"] {
            for id in ids where id.isEmpty || id.contains(" ") { throw Invalid(flag: "bundle-id", problem: "'\(id)' is not a bundle id") }
            c.bundleIDs = ids
        }
        if let s = one("apple-app-id") {
            guard let n = Int64(s), n > 0 else { throw Invalid(flag: "apple-app-id", problem: "'\(s)' is not a positive number") }
            c.appleAppID = n
        }
        if let s = one("protocols") {
            let list = s.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard !list.isEmpty else { throw Invalid(flag: "protocols", problem: "needs at least one of grpc, connect, grpc-web") }
            for p in list where !["grpc", "connect", "grpc-web"].contains(p) {
                throw Invalid(flag: "protocols", problem: "'\(p.prefix(32))' is not grpc, connect or grpc-web")
            }
            c.protocols = list
        }
        if let s = one("cors-origins") {
            let list = s.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            for o in list where o != "*" && !(o.hasPrefix("https://") || o.hasPrefix("http://")) {
                throw Invalid(flag: "cors-origins", problem: "'\(o.prefix(64))' is not an origin (https://app.example.com) or *")
            }
            c.corsOrigins = list
        }
        if let s = one("environments") {
            let list = s.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard !list.isEmpty else { throw Invalid(flag: "environments", problem: "needs at least one environment") }
            for e in list where !["production", "sandbox", "xcode"].contains(e) {
                throw Invalid(flag: "environments", problem: "'\(e)' is not production, sandbox or xcode")
            }
            c.environments = list
        }
        if let roots = v["trust-root"] {
            var checked: [String] = []
            for r in roots { checked.append(try file("trust-root", r)) }
            c.trustRoots = checked
        }
        if let s = one("catalog") { c.catalogPath = try file("catalog", s) }
        if let s = one("restore-policy") {
            guard s == "transfer" || s == "keep" else { throw Invalid(flag: "restore-policy", problem: "'\(s)' is not transfer or keep") }
            c.restorePolicy = s
        }
        if let b = try bool("require-account-token") { c.requireAccountToken = b }
        if let b = try bool("reject-stale-purchases") { c.rejectStalePurchases = b }
        if let d = try seconds("clock-skew", 0...86_400) { c.clockSkew = d }
        if let b = try bool("dev") { c.dev = b }
        if let s = one("dev-store") {
            guard !s.isEmpty else { throw Invalid(flag: "dev-store", problem: "needs a directory") }
            c.devStore = s
        }
        if let s = one("tls-cert") { c.tlsCert = try file("tls-cert", s) }
        if let s = one("tls-key") { c.tlsKey = try file("tls-key", s) }
        if (c.tlsCert == nil) != (c.tlsKey == nil) {
            throw Invalid(flag: c.tlsCert == nil ? "tls-cert" : "tls-key", problem: "--tls-cert and --tls-key go together")
        }
        if let s = one("tls-client-ca") {
            c.tlsClientCA = try file("tls-client-ca", s)
            if c.tlsCert == nil { throw Invalid(flag: "tls-client-ca", problem: "needs --tls-cert and --tls-key") }
        }
        if let s = one("api-keys") { c.apiKeys = try file("api-keys", s) }
        if let s = one("metrics-listen") { c.metricsListen = try hostPort("metrics-listen", s) }
        if let s = one("notifications-listen") { c.notificationsListen = try hostPort("notifications-listen", s) }
        if let s = one("notifications-tls-cert") { c.notificationsTLSCert = try file("notifications-tls-cert", s) }
        if let s = one("notifications-tls-key") { c.notificationsTLSKey = try file("notifications-tls-key", s) }
        if (c.notificationsTLSCert == nil) != (c.notificationsTLSKey == nil) {
            throw Invalid(
                flag: c.notificationsTLSCert == nil ? "notifications-tls-cert" : "notifications-tls-key",
                problem: "--notifications-tls-cert and --notifications-tls-key go together")
        }
        if c.notificationsTLSCert != nil && c.notificationsListen == nil {
            throw Invalid(flag: "notifications-tls-cert", problem: "needs --notifications-listen")
        }
        if let n = try int("db-pool-size", 1...1024) { c.dbPoolSize = n }
        if let s = one("shutdown-grace") {
            guard let d = Double(s), d >= 0, d <= 3600 else {
                throw Invalid(flag: "shutdown-grace", problem: "'\(s)' is not a number of seconds from 0 to 3600")
            }
            c.shutdownGrace = d
        }
        if let s = one("log-level") {
            guard let l = LogLevel(rawValue: s.lowercased()) else { throw Invalid(flag: "log-level", problem: "'\(s)' is not debug, info, warning or error") }
            c.logLevel = l
        }
        if let s = one("appstore-api-key-id") {
            guard !s.isEmpty, s.utf8.count <= 64, s.allSatisfy({ $0.isLetter || $0.isNumber }) else {
                throw Invalid(flag: "appstore-api-key-id", problem: "'\(s.prefix(64))' is not a key id (letters and digits, as App Store Connect shows it)")
            }
            c.appStoreAPIKeyID = s
        }
        if let s = one("appstore-api-issuer-id") {
            guard UUID(uuidString: s) != nil else { throw Invalid(flag: "appstore-api-issuer-id", problem: "'\(s.prefix(64))' is not a UUID") }
            c.appStoreAPIIssuerID = s
        }
        if let s = one("appstore-api-private-key") { c.appStoreAPIPrivateKey = try file("appstore-api-private-key", s) }
        let credentials = [
            ("appstore-api-key-id", c.appStoreAPIKeyID), ("appstore-api-issuer-id", c.appStoreAPIIssuerID),
            ("appstore-api-private-key", c.appStoreAPIPrivateKey),
        ]
        if credentials.contains(where: { $0.1 != nil }), let missing = credentials.first(where: { $0.1 == nil }) {
            throw Invalid(flag: missing.0, problem: "--appstore-api-key-id, --appstore-api-issuer-id and --appstore-api-private-key go together")
        }
        for flag in ["appstore-api-url", "appstore-api-sandbox-url"] {
            guard let s = one(flag) else { continue }
            guard (s.hasPrefix("https://") || s.hasPrefix("http://")) && s.count > 8 && !s.contains(" ") else {
                throw Invalid(flag: flag, problem: "'\(s.prefix(200))' is not an https:// URL")
            }
            if flag == "appstore-api-url" { c.appStoreAPIURL = s } else { c.appStoreAPISandboxURL = s }
        }
        if let s = one("appstore-api-ca") { c.appStoreAPICA = try file("appstore-api-ca", s) }
        if let d = try seconds("appstore-api-timeout", 1...120) { c.appStoreAPITimeout = d }
        if c.appStoreAPIConfigured && c.bundleIDs.isEmpty {
            throw Invalid(flag: "appstore-api-key-id", problem: "needs --bundle-id (the token names the app)")
        }
        if let d = try seconds("reconcile-interval", 0...(7 * 86_400)) {
            guard d == 0 || d >= 10 else { throw Invalid(flag: "reconcile-interval", problem: "'\(d)' is under 10 seconds (0 turns it off)") }
            c.reconcileInterval = d
        }
        if let d = try seconds("reconcile-margin", 0...(30 * 86_400)) { c.reconcileMargin = d }
        if let s = one("reporting-currency") {
            guard CurrencyCode.isValid(s) else { throw Invalid(flag: "reporting-currency", problem: "'\(s.prefix(40))' is not an ISO 4217 code such as USD") }
            c.reportingCurrency = s
        }
        if let s = one("exchange-rates") {
            c.exchangeRates = try file("exchange-rates", s)
            // Read now too: a bad file stops billingd at start with the line at fault.
            _ = try Self.exchangeRates(c.exchangeRates!)
        }
        if let s = one("commission") {
            do {
                c.commission = try Commission.parse(s)
            } catch {
                throw Invalid(flag: "commission", problem: error.description)
            }
        }
        if let s = one("consumption-answers") {
            guard s == "off" || s == "auto" else { throw Invalid(flag: "consumption-answers", problem: "'\(s.prefix(40))' is not off or auto") }
            c.consumptionAnswers = s
        }
        if let s = one("google-play-packages") {
            let list = s.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            for p in list where !Self.isPackageName(p) {
                throw Invalid(flag: "google-play-packages", problem: "'\(p.prefix(100))' is not an Android package name (com.example.app)")
            }
            c.googlePlayPackages = list
        }
        if let s = one("google-play-service-account") { c.googlePlayServiceAccount = try file("google-play-service-account", s) }
        if let s = one("google-play-api-url") {
            guard s.hasPrefix("https://") || (c.dev && s.hasPrefix("http://")) else {
                throw Invalid(flag: "google-play-api-url", problem: "'\(s.prefix(100))' is not an https:// URL")
            }
            c.googlePlayAPIURL = s
        }
        if let s = one("google-play-ca") { c.googlePlayCA = try file("google-play-ca", s) }
        if let s = one("google-play-acknowledge") {
            guard s == "auto" || s == "off" else { throw Invalid(flag: "google-play-acknowledge", problem: "'\(s.prefix(40))' is not auto or off") }
            c.googlePlayAcknowledge = s
        }
        if (c.googlePlayServiceAccount == nil) != c.googlePlayPackages.isEmpty {
            throw Invalid(
                flag: c.googlePlayServiceAccount == nil ? "google-play-service-account" : "google-play-packages",
                problem: "--google-play-service-account and --google-play-packages go together")
        }
        if let s = one("rtdn-audience") {
            guard !s.isEmpty, s.utf8.count <= 512 else { throw Invalid(flag: "rtdn-audience", problem: "needs a value of at most 512 bytes") }
            c.rtdnAudience = s
        }
        if let s = one("rtdn-service-account") {
            guard s.contains("@"), s.utf8.count <= 320 else { throw Invalid(flag: "rtdn-service-account", problem: "'\(s.prefix(100))' is not an email") }
            c.rtdnServiceAccount = s
        }
        if let s = one("rtdn-certs") { c.rtdnCerts = try file("rtdn-certs", s) }
        if c.rtdnAudience != nil {
            if c.rtdnServiceAccount == nil { throw Invalid(flag: "rtdn-service-account", problem: "is required with --rtdn-audience") }
            if c.googlePlayServiceAccount == nil {
                throw Invalid(flag: "rtdn-audience", problem: "needs --google-play-service-account (RTDN is read back from the API)")
            }
            if c.notificationsListen == nil { throw Invalid(flag: "rtdn-audience", problem: "needs --notifications-listen (the RTDN path is served there)") }
        } else if c.rtdnServiceAccount != nil || c.rtdnCerts != nil {
            throw Invalid(flag: c.rtdnServiceAccount != nil ? "rtdn-service-account" : "rtdn-certs", problem: "needs --rtdn-audience")
        }
        var webhookCA: String?
        if let s = one("webhook-ca") { webhookCA = try file("webhook-ca", s) }
        c.webhook = try webhook(url: one("webhook-url"), secret: one("webhook-secret"), events: one("webhook-events"), ca: webhookCA, dev: c.dev)
        if let s = one("offer-signing-key-id") {
            guard !s.isEmpty, s.utf8.count <= 64, s.allSatisfy({ $0.isLetter || $0.isNumber }) else {
                throw Invalid(flag: "offer-signing-key-id", problem: "'\(s.prefix(64))' is not a key id (letters and digits, as App Store Connect shows it)")
            }
            c.offerSigningKeyID = s
        }
        if let s = one("offer-signing-key") { c.offerSigningKey = try file("offer-signing-key", s) }
        if (c.offerSigningKeyID == nil) != (c.offerSigningKey == nil) {
            throw Invalid(
                flag: c.offerSigningKeyID == nil ? "offer-signing-key-id" : "offer-signing-key",
                problem: "--offer-signing-key-id and --offer-signing-key go together")
        }
        if let s = one("offer-signing-issuer-id") {
            guard UUID(uuidString: s) != nil else { throw Invalid(flag: "offer-signing-issuer-id", problem: "'\(s.prefix(64))' is not a UUID") }
            guard c.offerSigningKey != nil else {
                throw Invalid(flag: "offer-signing-issuer-id", problem: "needs --offer-signing-key-id and --offer-signing-key")
            }
            c.offerSigningIssuerID = s
        }
        if one("help") != nil { throw Invalid(flag: "help", problem: "usage") }
        return c
    }

    public static let usage = """
        usage: billingd [flags]   (each flag also reads BILLING_<FLAG> from the environment; every flag: docs/CONFIGURATION.md)
          --listen HOST:PORT           gRPC port, h2c or TLS (default 127.0.0.1:50051)
          --database URL               sqlite:PATH (default sqlite:billing.db) or postgres://user@host:port/db
          --threads N                  event-loop threads (default: cores)
          --max-message-bytes N        largest request message (default 4194304)
          --max-concurrent-streams N   HTTP/2 streams per connection (default 1024)
          --max-connections N          open connections (default 50000, at most the file limit less 128); more are closed at accept
          --max-in-flight N            calls being handled (default 10000); more get RESOURCE_EXHAUSTED OVERLOADED
          --protocols LIST             served on --listen: grpc, connect, grpc-web (default all three); Connect and gRPC-Web over HTTP/1.1 and HTTP/2
          --cors-origins LIST          browser origins allowed to call Connect and gRPC-Web (https://app.example.com, or *); default none
          --max-watchers N             concurrent WatchEvents streams (default 1000); more get RESOURCE_EXHAUSTED OVERLOADED
          --max-watchers-per-key N     the same per API key (per client certificate, or per peer address without keys; default 100)
          --max-header-list-bytes N    request header block (default 16384)
          --max-connection-buffer-bytes N   unfinished request bytes per connection (default 67108864); the stream over it gets RESOURCE_EXHAUSTED OVERLOADED
          --max-deadline SECONDS       cap on every call's deadline (default 60)
          --idle-timeout SECONDS       close connections idle this long (default 300)
          --order-ttl SECONDS          PENDING orders older than this become EXPIRED (default 0: never)
          --api-keys PATH              require API keys (file format: docs/CONFIGURATION.md)
          --metrics-listen HOST:PORT   Prometheus /metrics, /healthz, /readyz over HTTP/1.1 and h2c
          --notifications-listen HOST:PORT   App Store Server Notifications v2: POST /appstore/notifications (HTTP/1.1 and h2c)
          --notifications-tls-cert PATH --notifications-tls-key PATH   serve that endpoint over TLS (ALPN h2, http/1.1)
          --catalog PATH               product catalog JSON
          --tls-cert PATH --tls-key PATH   serve TLS with ALPN h2
          --tls-client-ca PATH         require client certificates signed by this CA
          --shutdown-grace SECONDS     drain deadline after SIGTERM/SIGINT (default 20)
          --log-level L                debug, info, warning, error (default info)
          --bundle-id ID               an app served (repeatable); required for SubmitReceipt unless --dev
          --apple-app-id N             the app's Apple ID; required to start when production is accepted and --bundle-id and --trust-root are given
          --environments LIST          accepted signed environments (default production,sandbox)
          --trust-root PATH            trusted root certificate, DER or PEM (repeatable)
          --restore-policy P           transfer (default) or keep
          --require-account-token      a StoreKit 2 proof must carry appAccountToken equal to the order id
          --reject-stale-purchases     refuse a transaction bought before its order (beyond --clock-skew) or a subscription expired by then
          --clock-skew SECONDS         allowance when comparing a purchase date with the order's creation (default 300)
          --dev                        local use: a test-store CA in --dev-store (default ./teststore), trusted; accepts xcode
          --dev-store DIR              where --dev keeps its test-store CA (default ./teststore)
          --db-pool-size N             PostgreSQL connections (default 8)
          --appstore-api-key-id ID --appstore-api-issuer-id UUID --appstore-api-private-key PATH
                                       App Store Server API credentials (the .p8 key); needs --bundle-id
          --appstore-api-url URL       base URL for both environments instead of Apple's (tests, proxies)
          --appstore-api-sandbox-url URL   base URL for the sandbox only
          --appstore-api-ca PATH       CA bundle to trust for those URLs (default: the system's)
          --appstore-api-timeout SECONDS   one attempt's limit (default 10; 4 attempts at most)
          --reconcile-interval SECONDS fetch missed notifications from the API this often (default 3600; 0 off)
          --reconcile-margin SECONDS   start each reconciliation this long before the newest applied notification (default 3600)
          --consumption-answers M      off (default) or auto: answer CONSUMPTION_REQUEST with Send Consumption Information
          --google-play-packages LIST  Android package names served (Google Play proofs of others: WRONG_APP)
          --google-play-service-account PATH   the service account's JSON key file for the Play Developer API; needs --google-play-packages
          --google-play-api-url URL    the Play Developer API's base URL instead of Google's (tests, proxies)
          --google-play-ca PATH        also trust this CA bundle for that URL and the key file's token_uri
          --google-play-acknowledge M  auto (default): acknowledge, and consume consumables, once durable; off: the app does it
          --rtdn-audience STR          accept Real-time developer notifications (POST /googleplay/rtdn on --notifications-listen)
                                       only with a push token for this audience; none: that path answers 404
          --rtdn-service-account EMAIL the push subscription's service account (the token's email)
          --rtdn-certs PATH            the keys that sign push tokens (JWKS or PEM-map JSON) instead of fetching Google's
          --webhook-url URL            POST every event, in cursor order, to this https:// URL (Standard Webhooks; http:// only with --dev)
          --webhook-secret SECRET      its signing secret: whsec_ + base64 of 24 to 64 random bytes (or @PATH of a file holding it)
          --webhook-ca PATH            also trust this CA bundle for --webhook-url
          --webhook-events LIST        only these event types (ORDER_COMPLETED,ENTITLEMENT_REVOKED,...); the others are skipped
          --offer-signing-key-id ID --offer-signing-key PATH   the In-App Purchase key (.p8) that signs offers (SignOffer)
          --offer-signing-issuer-id UUID   the issuer id of the JWS offer kinds (default: --appstore-api-issuer-id)
          --reporting-currency CODE    the currency Revenue reports money in when a request names none (default USD)
          --exchange-rates PATH        the ECB's daily rates (eurofxref-hist.csv) for Revenue; re-read on SIGHUP; without it
                                       only money paid in the reporting currency converts (the rest is unconverted)
          --commission LIST            the stores' commission for PROCEEDS, STORE=FIRST/LATER
                                       (default app_store=30/15,google_play=15/15,stripe=0/0)
        """

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
