public import AppStoreAPI
public import Billing
import Dispatch
import Lifecycle

/// `--consumption-answers auto`: a CONSUMPTION_REQUEST notification (a customer asked Apple to refund a
/// consumable) is answered through Send Consumption Information (v2) from what billingd knows:
///
/// - `customerConsented: true`: Apple uses the answer only with the customer's consent to share this data.
///   Turning `auto` on is the operator's statement that the app obtains that consent (its terms or a
///   prompt); without it, leave the default `off`, and Apple decides without billingd's answer.
/// - `deliveryStatus`: `DELIVERED` when the transaction paid an order that is COMPLETED (billingd credited
///   it). Any other case gets no answer: a transaction billingd never saw, or whose order was refunded since,
///   is neither delivered nor undelivered as far as billingd can say.
/// - `sampleContentProvided: false`; no consumption percentage and no refund preference: billingd does not
///   know them.
///
/// Answers run after the notification is durable, on a worker queue; failures are logged and counted, never
/// retried forever (Apple accepts answers within 12 hours of the request).
public final class ConsumptionResponder: Sendable {
    private let client: any AppStoreServerAPI
    private let store: any OrderStore
    private let queue = DispatchQueue(label: "billing.consumption")
    /// Called once per request with its result (`sent`, `no_record`, `failed`) and a detail for the log.
    private let report: @Sendable (_ transactionID: String, _ result: String, _ detail: String) -> Void

    public init(
        client: any AppStoreServerAPI, store: any OrderStore,
        report: @escaping @Sendable (String, String, String) -> Void = { _, _, _ in }
    ) {
        self.client = client
        self.store = store
        self.report = report
    }

    /// Queues the answer to one CONSUMPTION_REQUEST.
    public func answer(transactionID: String, environment: String) {
        guard !transactionID.isEmpty, let env = AppStoreAPIEnvironment(rawValue: environment) else {
            return report(transactionID, "no_record", "no transaction or an environment without an API (\(environment))")
        }
        queue.async { [self] in
            let status: Result<DeliveryKnowledge, BillingError> = Blocking.wait { done in
                store.read(
                    { ledger throws(BillingError) -> DeliveryKnowledge in
                        guard let owned = try ledger.owned(transactionID: transactionID), let orderID = owned.orderID,
                            let order = try ledger.order(id: orderID)
                        else { return .unknown }
                        return order.state == .completed ? .delivered(orderID) : .other(order.state)
                    }, completion: done)
            }
            let delivery: String
            var token = ""
            switch status {
            case .failure(let e): return report(transactionID, "failed", "cannot read the order: \(e)")
            case .success(.unknown): return report(transactionID, "no_record", "billingd has no order paid by this transaction")
            case .success(.other(let state)):
                // Paid, then refunded (or otherwise moved on): neither "delivered" nor "never delivered" is true.
                return report(transactionID, "no_record", "the order it paid is \(state)")
            case .success(.delivered(let orderID)):
                delivery = "DELIVERED"
                token = orderID
            }
            let info = AppStoreAPIModel.ConsumptionInformation(customerConsented: true, sampleContentProvided: false, deliveryStatus: delivery)
            do throws(AppStoreAPIError) {
                do throws(AppStoreAPIError) {
                    try client.sendConsumption(transactionID, info, in: env)
                } catch .notFound {
                    // A server without the v2 endpoint (v2 came in 2025): the same answer through v1.
                    try client.sendConsumptionV1(transactionID, info, appAccountToken: token, in: env)
                }
                report(transactionID, "sent", delivery)
            } catch {
                report(transactionID, "failed", error.description)
            }
        }
    }

    enum DeliveryKnowledge: Sendable { case unknown, delivered(String), other(OrderState) }
}
