import Billing
import BillingAPI
package import BillingService
import ProtoWire
package import RPC
import Webhooks

/// billing.admin.v1.Admin's webhook methods (`billingctl webhooks status|replay`), served beside AdminService:
/// they need the sender, which lives above the billing handlers.
package enum WebhookAdmin {
    package static let getStatus = "billing.admin.v1.Admin/GetWebhookStatus"
    package static let replay = "billing.admin.v1.Admin/ReplayWebhooks"
    /// The store calls block: they run on `pool` (App's store pool), never a loop.
    package static func register(in router: inout Router, sender: WebhookSender?, pool: WorkerPool) {
        router.register(getStatus, GetWebhookStatusRequest.self, on: .pool(pool)) { _, _, responder in
            answer(responder, sender, wrap: { $0 }) { sender throws(BillingError) in try sender.status().get() }
        }
        router.register(replay, ReplayWebhooksRequest.self, on: .pool(pool)) { _, request, responder in
            answer(
                responder, sender,
                wrap: { status in
                    var r = ReplayWebhooksResponse()
                    r.status = status
                    return r
                }
            ) { sender throws(BillingError) -> WebhookStatus in
                _ = try sender.replay(after: request.fromCursor > 0 ? request.fromCursor - 1 : 0).get()
                return try sender.status().get()
            }
        }
    }

    private static func answer<M: ProtoMessage>(
        _ responder: Responder, _ sender: WebhookSender?, wrap: (GetWebhookStatusResponse) -> M,
        _ work: (WebhookSender) throws(BillingError) -> WebhookStatus
    ) {
        guard let sender else {
            responder.fail(
                RPCError(
                    code: .failedPrecondition, message: "webhooks are not configured: start billingd with --webhook-url and --webhook-secret",
                    reason: .webhooksNotConfigured))
            return
        }
        do throws(BillingError) {
            let s = try work(sender)
            var m = GetWebhookStatusResponse()
            m.url = s.url
            m.position = s.position
            m.newestCursor = s.newest
            m.lagEvents = s.lagEvents
            m.oldestUndeliveredAgeMs = s.oldestUndeliveredAgeMs
            m.holder = s.holder
            m.leaseUntilTimeMs = s.leaseUntilMs
            m.failures = Int32(clamping: s.failures)
            m.lastError = s.lastError
            m.lastAttemptTimeMs = s.lastAttemptMs
            m.lastDeliveryTimeMs = s.lastDeliveryMs
            m.sendingHere = s.sendingHere
            responder.succeed(wrap(m))
        } catch {
            responder.fail(error.rpcError)
        }
    }
}
