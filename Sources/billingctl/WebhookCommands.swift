import BillingAPI

/// `billingctl webhooks status | replay --from CURSOR`: billing.admin.v1.Admin's webhook methods on billingd.
enum WebhookCommands {
    static let usage = """
          webhooks status                where webhook delivery stands: position, newest event, lag, last error, sender
          webhooks replay --from CURSOR  send the events from CURSOR on again, in order (1: from the oldest kept)
        """

    static func run(_ options: Options) throws {
        switch options.positional.first {
        case "status":
            let r = try call(options, "billing.admin.v1.Admin/GetWebhookStatus", GetWebhookStatusRequest(), GetWebhookStatusResponse.self)
            print(json(r))
        case "replay":
            guard let text = options.named["from"], let from = UInt64(text), from >= 1 else {
                throw Usage(message: "webhooks replay needs --from CURSOR (a cursor of 1 or more)")
            }
            var req = ReplayWebhooksRequest()
            req.fromCursor = from
            let r = try call(options, "billing.admin.v1.Admin/ReplayWebhooks", req, ReplayWebhooksResponse.self)
            print(json(r.status))
        default:
            throw Usage(message: "webhooks needs status or replay --from CURSOR")
        }
    }

    static func json(_ r: GetWebhookStatusResponse) -> String {
        JSON.object([
            ("url", JSON.quote(r.url)), ("position", JSON.quote(String(r.position))), ("newestCursor", JSON.quote(String(r.newestCursor))),
            ("lagEvents", JSON.quote(String(r.lagEvents))), ("oldestUndeliveredAgeMs", JSON.quote(String(r.oldestUndeliveredAgeMs))),
            ("failures", String(r.failures)), ("lastError", JSON.quote(r.lastError)),
            ("lastAttemptTimeMs", JSON.quote(String(r.lastAttemptTimeMs))), ("lastDeliveryTimeMs", JSON.quote(String(r.lastDeliveryTimeMs))),
            ("holder", JSON.quote(r.holder)), ("leaseUntilTimeMs", JSON.quote(String(r.leaseUntilTimeMs))), ("sendingHere", String(r.sendingHere)),
        ])
    }
}
