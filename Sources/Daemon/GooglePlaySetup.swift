import AfterSale
import Endpoints
import Logging
import Billing
import BillingService
import Foundation
import GooglePlayAPI
import GooglePlayHTTP
import Metrics

/// The Google Play pieces from the `--google-play-*` flags: the Play Developer API client, the link the handlers
/// use, and the acknowledger (under `--google-play-acknowledge auto`), with their metrics and log lines.
struct GooglePlaySetup {
    let link: GooglePlayLink
    let client: GooglePlayAPIClient
    let acknowledger: PlayAcknowledger?
    /// RTDN (`--rtdn-audience`): the push-token verifier, Google's keys fetched (without `--rtdn-certs`), the processor.
    let rtdn: (verifier: GoogleIDTokenVerifier, fetcher: GoogleKeyFetcher?, processor: PlayNotificationProcessor)?
    /// Applies Google's notifications and voided purchases (reconciliation needs it without RTDN too).
    let processor: PlayNotificationProcessor

    static func make(
        _ c: Configuration, store: any OrderStore, catalog: Catalog?, policy: PurchaseEngine.Policy, metrics: BillingMetrics, logger: Logger
    ) throws(App.StartError)
        -> GooglePlaySetup?
    {
        guard let keyPath = c.googlePlay.serviceAccount else { return nil }
        let key: ServiceAccountKey
        do {
            key = try ServiceAccountKey.load(path: keyPath)
        } catch {
            // The reason, never the key's bytes.
            throw App.StartError(description: "billingd: --google-play-service-account: \(error)")
        }
        var api = GooglePlayAPIConfiguration(serviceAccount: key)
        api.baseURL = c.googlePlay.apiURL
        api.caPath = c.googlePlay.ca
        api.allowCleartext = c.dev
        let client: GooglePlayAPIClient
        do {
            client = try GooglePlayAPIClient(api) { endpoint, status, seconds in
                let label = [0, 200, 204, 400, 401, 403, 404, 410, 429, 500, 503].contains(status) ? String(status) : (status >= 500 ? "5xx" : "other")
                metrics.googlePlayAPICalls.inc([endpoint, label])
                metrics.googlePlayAPIDuration.observe(seconds, [endpoint])
            }
        } catch {
            throw App.StartError(description: "billingd: --google-play-api-url: \(error)")
        }
        let environments = Set(
            c.purchases.environments.compactMap { name -> StoreEnvironment? in
                switch name {
                case "production": .production
                case "sandbox": .sandbox
                default: nil
                }
            })
        let link = GooglePlayLink(
            api: client, packages: Set(c.googlePlay.packages), environments: environments, catalog: catalog,
            warn: { line in
                logger.log(.error, "Google Play Developer API", [("error", .string(String(line.prefix(300))))])
            })
        var acknowledger: PlayAcknowledger?
        if c.googlePlay.acknowledge == "auto" {
            let results = metrics.googlePlayAcknowledgements
            acknowledger = PlayAcknowledger(
                api: client, store: store, now: { Int64(Date().timeIntervalSince1970 * 1000) },
                onAttempt: { item, result, error in
                    results.inc([result])
                    guard result == "failed" else { return }
                    logger.log(
                        .warning, "google play acknowledgement failed",
                        [
                            ("transaction_id", .string(item.transactionID)), ("product_id", .string(item.productID)),
                            ("package", .string(item.packageName)), ("attempts", .int(item.attempts)), ("error", .string(String(error.prefix(300)))),
                            ("retry_in_ms", .int(Int(item.nextAttemptMs - Int64(Date().timeIntervalSince1970 * 1000)))),
                        ])
                },
                onOverdue: { count in
                    logger.log(
                        .warning, "google play purchases unacknowledged for over 48 hours: Google refunds them at 72",
                        [("count", .int(count))])
                })
            let ack = acknowledger!
            metrics.registry.gauge(
                "billingd_google_play_unacknowledged_48h", help: "Google Play purchases recorded as paid over 48 hours ago and not yet acknowledged."
            ) { Double(ack.oldUnacknowledged) }
        }
        let ack = acknowledger
        let processor = PlayNotificationProcessor(
            link: link, store: store, policy: policy, now: { Int64(Date().timeIntervalSince1970 * 1000) }, onApplied: { ack?.poke() })
        var rtdn: (verifier: GoogleIDTokenVerifier, fetcher: GoogleKeyFetcher?, processor: PlayNotificationProcessor)?
        if let audience = c.googlePlay.rtdnAudience, let email = c.googlePlay.rtdnServiceAccount {
            var keys = GoogleKeySet(keys: [:])
            if let path = c.googlePlay.rtdnCerts {
                do {
                    keys = try GoogleKeySet.parse(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
                } catch {
                    throw App.StartError(description: "billingd: --rtdn-certs: \(path): \(error)")
                }
            }
            let verifier = GoogleIDTokenVerifier(.init(audience: audience, serviceAccountEmail: email), keys: keys)
            var fetcher: GoogleKeyFetcher?
            if c.googlePlay.rtdnCerts == nil {
                do {
                    fetcher = try GoogleKeyFetcher(verifier: verifier, logger: logger)
                } catch {
                    throw App.StartError(description: "billingd: --rtdn-audience: \(error)")
                }
            }
            rtdn = (verifier, fetcher, processor)
        }
        logger.log(
            .info, "Google Play configured",
            [
                ("service_account", .string(key.clientEmail)), ("packages", .string(c.googlePlay.packages.joined(separator: ","))),
                ("api_url", .string(c.googlePlay.apiURL)), ("acknowledge", .string(c.googlePlay.acknowledge)),
            ])
        return GooglePlaySetup(link: link, client: client, acknowledger: acknowledger, rtdn: rtdn, processor: processor)
    }

    /// Voided purchases read and applied: the log line and the metric.
    static func reconcileVoided(_ processor: PlayNotificationProcessor, metrics: BillingMetrics, logger: Logger) {
        let r = processor.reconcileVoided()
        metrics.reconcileRuns.inc([r.error == nil ? "ok" : "incomplete"])
        logger.log(
            r.error == nil ? .info : .warning, "google play voided purchases reconciled",
            [
                ("read", .int(r.read)), ("applied", .int(r.applied)), ("duplicate", .int(r.duplicate)), ("unknown", .int(r.unknown)),
                ("error", .string(r.error ?? "")),
            ])
    }
}
