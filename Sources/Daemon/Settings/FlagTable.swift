public import Logging
import Foundation
import Billing

extension Configuration {
    /// Every flag, in `--help` order (also the order values are set: a check that reads another flag comes after it).
    static let flagTable: [Flag] =
        portFlags + limitFlags + operationFlags + appFlags + appStoreFlags + googlePlayFlags + outboundFlags + [
            Flag("help", kind: .toggle, "this text") { _, _ throws(Invalid) in throw Invalid(flag: "help", problem: "usage") },
            Flag("version", kind: .toggle, "the version") { _, _ in },
        ]

    static let portFlags: [Flag] = [
        Flag("listen", "HOST:PORT", "gRPC port, h2c or TLS (default 127.0.0.1:50051)") { d, s throws(Invalid) in
            d.configuration.server.listen = try Check.hostPort("listen", s)
        },
        Flag("database", "URL", "sqlite:PATH (default sqlite:billing.db) or postgres://user@host:port/db") { d, s throws(Invalid) in
            guard let database = Database(s) else {
                if s.hasPrefix("sqlite:") { throw Invalid(flag: "database", problem: "sqlite: needs a file path") }
                throw Invalid(flag: "database", problem: "'\(s)' is neither sqlite:PATH nor postgres://user@host:port/db")
            }
            d.configuration.store.database = database
        },
        Flag("threads", "N", "event-loop threads (default: cores)") { d, s throws(Invalid) in
            d.configuration.server.threads = try Check.int("threads", s, 1...256)
        },
        Flag("protocols", "LIST", "served on --listen: grpc, connect, grpc-web (default all three); Connect and gRPC-Web over HTTP/1.1 and HTTP/2") {
            d, s throws(Invalid) in
            let list = s.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard !list.isEmpty else { throw Invalid(flag: "protocols", problem: "needs at least one of grpc, connect, grpc-web") }
            for p in list where !["grpc", "connect", "grpc-web"].contains(p) {
                throw Invalid(flag: "protocols", problem: "'\(p.prefix(32))' is not grpc, connect or grpc-web")
            }
            d.configuration.server.protocols = list
        },
        Flag("cors-origins", "LIST", "browser origins allowed to call Connect and gRPC-Web (https://app.example.com, or *); default none") {
            d, s throws(Invalid) in
            let list = Check.list(s)
            for o in list where o != "*" && !(o.hasPrefix("https://") || o.hasPrefix("http://")) {
                throw Invalid(flag: "cors-origins", problem: "'\(o.prefix(64))' is not an origin (https://app.example.com) or *")
            }
            d.configuration.server.corsOrigins = list
        },
        Flag("tls-cert", "PATH", "serve TLS with ALPN h2: the certificate chain (with --tls-key)") { d, s throws(Invalid) in
            d.configuration.server.tlsCert = try Check.file("tls-cert", s)
        },
        Flag("tls-key", "PATH", "the key of --tls-cert") { d, s throws(Invalid) in d.configuration.server.tlsKey = try Check.file("tls-key", s) },
        Flag("tls-client-ca", "PATH", "require client certificates signed by this CA") { d, s throws(Invalid) in
            d.configuration.server.tlsClientCA = try Check.file("tls-client-ca", s)
        },
        Flag("api-keys", "PATH", "require API keys (file format: docs/CONFIGURATION.md)") { d, s throws(Invalid) in
            d.configuration.server.apiKeys = try Check.file("api-keys", s)
        },
        Flag("metrics-listen", "HOST:PORT", "Prometheus /metrics, /healthz, /readyz over HTTP/1.1 and h2c") { d, s throws(Invalid) in
            d.configuration.observability.metricsListen = try Check.hostPort("metrics-listen", s)
        },
        Flag("notifications-listen", "HOST:PORT", "App Store Server Notifications v2: POST /appstore/notifications (HTTP/1.1 and h2c)") {
            d, s throws(Invalid) in d.configuration.notifications.listen = try Check.hostPort("notifications-listen", s)
        },
        Flag("notifications-tls-cert", "PATH", "serve that endpoint over TLS (ALPN h2, http/1.1), with --notifications-tls-key") { d, s throws(Invalid) in
            d.configuration.notifications.tlsCert = try Check.file("notifications-tls-cert", s)
        },
        Flag("notifications-tls-key", "PATH", "the key of --notifications-tls-cert") { d, s throws(Invalid) in
            d.configuration.notifications.tlsKey = try Check.file("notifications-tls-key", s)
        },
    ]

    static let limitFlags: [Flag] = [
        Flag("max-message-bytes", "N", "largest request message (default 4194304)") { d, s throws(Invalid) in
            d.configuration.limits.maxMessageBytes = try Check.int("max-message-bytes", s, 1...(256 << 20))
        },
        Flag("max-concurrent-streams", "N", "HTTP/2 streams per connection (default 1024)") { d, s throws(Invalid) in
            d.configuration.limits.maxConcurrentStreams = try Check.int("max-concurrent-streams", s, 1...1_000_000)
        },
        Flag("max-connections", "N", "open connections (default 50000, at most the file limit less 128); more are closed at accept") {
            d, s throws(Invalid) in d.configuration.limits.maxConnections = try Check.int("max-connections", s, 1...1_000_000)
        },
        Flag("max-in-flight", "N", "calls being handled (default 10000); more get RESOURCE_EXHAUSTED OVERLOADED") { d, s throws(Invalid) in
            d.configuration.limits.maxInFlight = try Check.int("max-in-flight", s, 1...10_000_000)
        },
        Flag("max-watchers", "N", "concurrent WatchEvents streams (default 1000); more get RESOURCE_EXHAUSTED OVERLOADED") { d, s throws(Invalid) in
            d.configuration.limits.maxWatchers = try Check.int("max-watchers", s, 1...1_000_000)
        },
        Flag("max-watchers-per-key", "N", "the same per API key (per client certificate, or per peer address without keys; default 100)") {
            d, s throws(Invalid) in d.configuration.limits.maxWatchersPerKey = try Check.int("max-watchers-per-key", s, 1...1_000_000)
        },
        Flag("max-header-list-bytes", "N", "request header block (default 16384)") { d, s throws(Invalid) in
            d.configuration.limits.maxHeaderListBytes = try Check.int("max-header-list-bytes", s, 1024...(1 << 20))
        },
        Flag(
            "max-connection-buffer-bytes", "N",
            "unfinished request bytes per connection (default 67108864); the stream over it gets RESOURCE_EXHAUSTED OVERLOADED"
        ) { d, s throws(Invalid) in d.configuration.limits.maxConnectionBufferBytes = try Check.int("max-connection-buffer-bytes", s, (64 << 10)...(1 << 40)) },
        Flag("max-deadline", "SECONDS", "cap on every call's deadline (default 60)") { d, s throws(Invalid) in
            d.configuration.limits.maxDeadline = try Check.seconds("max-deadline", s, 0.001...86_400)
        },
        Flag("idle-timeout", "SECONDS", "close connections idle this long (default 300)") { d, s throws(Invalid) in
            d.configuration.limits.idleTimeout = try Check.seconds("idle-timeout", s, 1...86_400)
        },
        Flag("order-ttl", "SECONDS", "PENDING orders older than this become EXPIRED (default 0: never)") { d, s throws(Invalid) in
            guard let v = Double(s), v >= 0, v <= 365 * 86_400 else {
                throw Invalid(flag: "order-ttl", problem: "'\(s)' is not a number of seconds from 0 (never) to one year")
            }
            d.configuration.purchases.orderTTL = v
        },
        Flag("db-pool-size", "N", "PostgreSQL connections (default 8)") { d, s throws(Invalid) in
            d.configuration.store.poolSize = try Check.int("db-pool-size", s, 1...1024)
        },
    ]

    static let operationFlags: [Flag] = [
        Flag("catalog", "PATH", "product catalog JSON") { d, s throws(Invalid) in d.configuration.purchases.catalogPath = try Check.file("catalog", s) },
        Flag("shutdown-grace", "SECONDS", "drain deadline after SIGTERM/SIGINT (default 20)") { d, s throws(Invalid) in
            guard let v = Double(s), v >= 0, v <= 3600 else {
                throw Invalid(flag: "shutdown-grace", problem: "'\(s)' is not a number of seconds from 0 to 3600")
            }
            d.configuration.server.shutdownGrace = v
        },
        Flag("log-level", "L", "debug, info, warning, error (default info)") { d, s throws(Invalid) in
            guard let l = LogLevel(rawValue: s.lowercased()) else { throw Invalid(flag: "log-level", problem: "'\(s)' is not debug, info, warning or error") }
            d.configuration.observability.logLevel = l
        },
        Flag("reporting-currency", "CODE", "the currency Revenue reports money in when a request names none (default USD)") { d, s throws(Invalid) in
            guard CurrencyCode.isValid(s) else { throw Invalid(flag: "reporting-currency", problem: "'\(s.prefix(40))' is not an ISO 4217 code such as USD") }
            d.configuration.revenue.reportingCurrency = s
        },
        Flag(
            "exchange-rates", "PATH",
            "the ECB's daily rates (eurofxref-hist.csv) for Revenue; re-read on SIGHUP; without it only money paid in the reporting currency converts"
        ) { d, s throws(Invalid) in
            d.configuration.revenue.exchangeRates = try Check.file("exchange-rates", s)
            // Read now too: a bad file stops billingd at start with the line at fault.
            _ = try Configuration.exchangeRates(s)
        },
        Flag("commission", "LIST", "the stores' commission for PROCEEDS, STORE=FIRST/LATER (default app_store=30/15,google_play=15/15,stripe=0/0)") {
            d, s throws(Invalid) in
            do {
                d.configuration.revenue.commission = try Commission.parse(s)
            } catch {
                throw Invalid(flag: "commission", problem: String(describing: error))
            }
        },
    ]
}
