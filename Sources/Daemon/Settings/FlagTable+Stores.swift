import Foundation

extension Configuration {
    /// A toggle: true given bare, else its value read as a boolean.
    private static func toggle(
        _ name: String, _ help: String, _ set: @escaping @Sendable (inout Configuration, Bool) -> Void
    ) -> Flag {
        Flag(name, kind: .toggle, help) { d, values throws(Invalid) in set(&d.configuration, try Check.bool(name, values[values.count - 1])) }
    }

    static let appFlags: [Flag] = [
        Flag("bundle-id", kind: .repeatable("ID"), "an app served (repeatable); required for SubmitReceipt unless --dev") { d, ids throws(Invalid) in
            for id in ids where id.isEmpty || id.contains(" ") { throw Invalid(flag: "bundle-id", problem: "'\(id)' is not a bundle id") }
            d.configuration.purchases.bundleIDs = ids
        },
        Flag(
            "apple-app-id", "N", "the app's Apple ID; required to start when production is accepted and --bundle-id and --trust-root are given"
        ) { d, s throws(Invalid) in
            guard let n = Int64(s), n > 0 else { throw Invalid(flag: "apple-app-id", problem: "'\(s)' is not a positive number") }
            d.configuration.purchases.appleAppID = n
        },
        Flag("environments", "LIST", "accepted signed environments (default production,sandbox)") { d, s throws(Invalid) in
            let list = s.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard !list.isEmpty else { throw Invalid(flag: "environments", problem: "needs at least one environment") }
            for e in list where !["production", "sandbox", "xcode"].contains(e) {
                throw Invalid(flag: "environments", problem: "'\(e)' is not production, sandbox or xcode")
            }
            d.configuration.purchases.environments = list
        },
        Flag("trust-root", kind: .repeatable("PATH"), "trusted root certificate, DER or PEM (repeatable)") { d, roots throws(Invalid) in
            var checked: [String] = []
            for r in roots { checked.append(try Check.file("trust-root", r)) }
            d.configuration.purchases.trustRoots = checked
        },
        Flag("restore-policy", "P", "transfer (default) or keep") { d, s throws(Invalid) in
            guard s == "transfer" || s == "keep" else { throw Invalid(flag: "restore-policy", problem: "'\(s)' is not transfer or keep") }
            d.configuration.purchases.restorePolicy = s
        },
        toggle("require-account-token", "a StoreKit 2 proof must carry appAccountToken equal to the order id") { $0.purchases.requireAccountToken = $1 },
        toggle("reject-stale-purchases", "refuse a transaction bought before its order (beyond --clock-skew) or a subscription expired by then") {
            $0.purchases.rejectStalePurchases = $1
        },
        Flag("clock-skew", "SECONDS", "allowance when comparing a purchase date with the order's creation (default 300)") { d, s throws(Invalid) in
            d.configuration.purchases.clockSkew = try Check.seconds("clock-skew", s, 0...86_400)
        },
        toggle("dev", "local use: a test-store CA in --dev-store (default ./teststore), trusted; accepts xcode") { $0.dev = $1 },
        Flag("dev-store", "DIR", "where --dev keeps its test-store CA (default ./teststore)") { d, s throws(Invalid) in
            guard !s.isEmpty else { throw Invalid(flag: "dev-store", problem: "needs a directory") }
            d.configuration.devStore = s
        },
    ]

    static let appStoreFlags: [Flag] = [
        Flag("appstore-api-key-id", "ID", "App Store Server API key id (with the issuer id and the .p8 key); needs --bundle-id") { d, s throws(Invalid) in
            d.configuration.appStoreAPI.keyID = try Check.keyID("appstore-api-key-id", s)
        },
        Flag("appstore-api-issuer-id", "UUID", "the App Store Server API key's issuer id") { d, s throws(Invalid) in
            d.configuration.appStoreAPI.issuerID = try Check.uuid("appstore-api-issuer-id", s)
        },
        Flag("appstore-api-private-key", "PATH", "the App Store Server API's .p8 key file") { d, s throws(Invalid) in
            d.configuration.appStoreAPI.privateKey = try Check.file("appstore-api-private-key", s)
        },
        Flag("appstore-api-url", "URL", "base URL for both environments instead of Apple's (tests, proxies)") { d, s throws(Invalid) in
            d.configuration.appStoreAPI.url = try url("appstore-api-url", s)
        },
        Flag("appstore-api-sandbox-url", "URL", "base URL for the sandbox only") { d, s throws(Invalid) in
            d.configuration.appStoreAPI.sandboxURL = try url("appstore-api-sandbox-url", s)
        },
        Flag("appstore-api-ca", "PATH", "CA bundle to trust for those URLs (default: the system's)") { d, s throws(Invalid) in
            d.configuration.appStoreAPI.ca = try Check.file("appstore-api-ca", s)
        },
        Flag("appstore-api-timeout", "SECONDS", "one attempt's limit (default 10; 4 attempts at most)") { d, s throws(Invalid) in
            d.configuration.appStoreAPI.timeout = try Check.seconds("appstore-api-timeout", s, 1...120)
        },
        Flag("reconcile-interval", "SECONDS", "fetch missed notifications from the API this often (default 3600; 0 off)") { d, s throws(Invalid) in
            let v = try Check.seconds("reconcile-interval", s, 0...(7 * 86_400))
            guard v == 0 || v >= 10 else { throw Invalid(flag: "reconcile-interval", problem: "'\(v)' is under 10 seconds (0 turns it off)") }
            d.configuration.appStoreAPI.reconcileInterval = v
        },
        Flag("reconcile-margin", "SECONDS", "start each reconciliation this long before the newest applied notification (default 3600)") {
            d, s throws(Invalid) in d.configuration.appStoreAPI.reconcileMargin = try Check.seconds("reconcile-margin", s, 0...(30 * 86_400))
        },
        Flag("consumption-answers", "M", "off (default) or auto: answer CONSUMPTION_REQUEST with Send Consumption Information") { d, s throws(Invalid) in
            guard s == "off" || s == "auto" else { throw Invalid(flag: "consumption-answers", problem: "'\(s.prefix(40))' is not off or auto") }
            d.configuration.appStoreAPI.consumptionAnswers = s
        },
        Flag("offer-signing-key-id", "ID", "the In-App Purchase key that signs offers (SignOffer), with --offer-signing-key") { d, s throws(Invalid) in
            d.configuration.offers.keyID = try Check.keyID("offer-signing-key-id", s)
        },
        Flag("offer-signing-key", "PATH", "that key's .p8 file") { d, s throws(Invalid) in
            d.configuration.offers.key = try Check.file("offer-signing-key", s)
        },
        Flag("offer-signing-issuer-id", "UUID", "the issuer id of the JWS offer kinds (default: --appstore-api-issuer-id)") { d, s throws(Invalid) in
            d.configuration.offers.issuerID = try Check.uuid("offer-signing-issuer-id", s)
        },
    ]

    /// An App Store Server API base URL.
    private static func url(_ flag: String, _ s: String) throws(Invalid) -> String {
        guard (s.hasPrefix("https://") || s.hasPrefix("http://")) && s.count > 8 && !s.contains(" ") else {
            throw Invalid(flag: flag, problem: "'\(s.prefix(200))' is not an https:// URL")
        }
        return s
    }

    static let googlePlayFlags: [Flag] = [
        Flag("google-play-packages", "LIST", "Android package names served (Google Play proofs of others: WRONG_APP)") { d, s throws(Invalid) in
            let list = Check.list(s)
            for p in list where !Self.isPackageName(p) {
                throw Invalid(flag: "google-play-packages", problem: "'\(p.prefix(100))' is not an Android package name (com.example.app)")
            }
            d.configuration.googlePlay.packages = list
        },
        Flag("google-play-service-account", "PATH", "the service account's JSON key file for the Play Developer API; needs --google-play-packages") {
            d, s throws(Invalid) in d.configuration.googlePlay.serviceAccount = try Check.file("google-play-service-account", s)
        },
        Flag("google-play-api-url", "URL", "the Play Developer API's base URL instead of Google's (tests, proxies)") { d, s throws(Invalid) in
            guard s.hasPrefix("https://") || (d.configuration.dev && s.hasPrefix("http://")) else {
                throw Invalid(flag: "google-play-api-url", problem: "'\(s.prefix(100))' is not an https:// URL")
            }
            d.configuration.googlePlay.apiURL = s
        },
        Flag("google-play-ca", "PATH", "also trust this CA bundle for that URL and the key file's token_uri") { d, s throws(Invalid) in
            d.configuration.googlePlay.ca = try Check.file("google-play-ca", s)
        },
        Flag("google-play-acknowledge", "M", "auto (default): acknowledge, and consume consumables, once durable; off: the app does it") {
            d, s throws(Invalid) in
            guard s == "auto" || s == "off" else { throw Invalid(flag: "google-play-acknowledge", problem: "'\(s.prefix(40))' is not auto or off") }
            d.configuration.googlePlay.acknowledge = s
        },
        Flag(
            "rtdn-audience", "STR",
            "accept Real-time developer notifications (POST /googleplay/rtdn on --notifications-listen) only with a push token for this audience"
        ) { d, s throws(Invalid) in
            guard !s.isEmpty, s.utf8.count <= 512 else { throw Invalid(flag: "rtdn-audience", problem: "needs a value of at most 512 bytes") }
            d.configuration.googlePlay.rtdnAudience = s
        },
        Flag("rtdn-service-account", "EMAIL", "the push subscription's service account (the token's email)") { d, s throws(Invalid) in
            guard s.contains("@"), s.utf8.count <= 320 else { throw Invalid(flag: "rtdn-service-account", problem: "'\(s.prefix(100))' is not an email") }
            d.configuration.googlePlay.rtdnServiceAccount = s
        },
        Flag("rtdn-certs", "PATH", "the keys that sign push tokens (JWKS or PEM-map JSON) instead of fetching Google's") { d, s throws(Invalid) in
            d.configuration.googlePlay.rtdnCerts = try Check.file("rtdn-certs", s)
        },
    ]

    static let outboundFlags: [Flag] = [
        Flag("webhook-url", "URL", "POST every event, in cursor order, to this https:// URL (Standard Webhooks; http:// only with --dev)") { d, s in
            d.webhookURL = s
        },
        Flag("webhook-secret", "SECRET", "its signing secret: whsec_ + base64 of 24 to 64 random bytes (or @PATH of a file holding it)") { d, s in
            d.webhookSecret = s
        },
        Flag("webhook-ca", "PATH", "also trust this CA bundle for --webhook-url") { d, s throws(Invalid) in
            d.webhookCA = try Check.file("webhook-ca", s)
        },
        Flag("webhook-events", "LIST", "only these event types (ORDER_COMPLETED,ENTITLEMENT_REVOKED,...); the others are skipped") { d, s in
            d.webhookEvents = s
        },
    ]
}
