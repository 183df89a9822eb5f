public import AfterSale
import AppStoreAPI
public import Billing
import BillingAPI
import ProtoWire
public import RPC
import Lifecycle

/// billing.admin.v1.Admin: reconciliation on demand, order-id lookups for support staff, test
/// notifications, and the support calls of AdminService+Support.swift (renewal-date extensions, Set App Account
/// Token, app transactions). Every method calls the App Store Server API (blocking), so each runs on the
/// verification queue, never on an event loop. Without credentials every method answers
/// FAILED_PRECONDITION APPSTORE_API_NOT_CONFIGURED.
public final class AdminService: Sendable {
    public static let reconcile = "billing.admin.v1.Admin/Reconcile"
    public static let lookUpOrder = "billing.admin.v1.Admin/LookUpOrder"
    public static let requestTestNotification = "billing.admin.v1.Admin/RequestTestNotification"
    public static let getTestNotificationStatus = "billing.admin.v1.Admin/GetTestNotificationStatus"

    let link: AppStoreLink?
    let store: any OrderStore
    /// Where the calls that wait on Apple run.
    let pools: WorkerPools
    let verifier: (any ProofVerifier)?
    let processor: NotificationProcessor?
    let catalog: Catalog?
    /// Runs a reconciliation (waiting for one already running); nil when reconciliation is not possible.
    private let runReconcile: @Sendable (Int64?) -> Result<Reconciler.Report, BillingError>?

    public init(
        link: AppStoreLink?, store: any OrderStore, verifier: (any ProofVerifier)?, processor: NotificationProcessor?,
        catalog: Catalog?, pools: WorkerPools = WorkerPools(),
        reconcile: @escaping @Sendable (Int64?) -> Result<Reconciler.Report, BillingError>?
    ) {
        self.pools = pools
        self.link = link
        self.store = store
        self.verifier = verifier
        self.processor = processor
        self.catalog = catalog
        runReconcile = reconcile
    }

    public func register(in router: inout Router) {
        router.register(Self.reconcile, ReconcileRequest.self, on: .pool(pools.appStore)) { [self] _, request, responder in
            answer(responder) { () throws(BillingError) in try self.reconcile(request) }
        }
        router.register(Self.lookUpOrder, LookUpOrderRequest.self, on: .pool(pools.appStore)) { [self] context, request, responder in
            context.note("customer_order_id", String(request.customerOrderID.prefix(64)))
            answer(responder) { () throws(BillingError) in try self.lookUp(request) }
        }
        router.register(Self.requestTestNotification, RequestTestNotificationRequest.self, on: .pool(pools.appStore)) { [self] _, request, responder in
            answer(responder) { () throws(BillingError) in try self.requestTest(request) }
        }
        router.register(Self.getTestNotificationStatus, GetTestNotificationStatusRequest.self, on: .pool(pools.appStore)) { [self] _, request, responder in
            answer(responder) { () throws(BillingError) in try self.testStatus(request) }
        }
        registerSupport(in: &router)
    }

    /// Every admin call waits on Apple: they are registered on the App Store pool, never on a loop.
    func answer<M: ProtoMessage>(_ responder: Responder, _ work: () throws(BillingError) -> M) {
        do throws(BillingError) {
            responder.succeed(try work())
        } catch {
            responder.fail(error.rpcError)
        }
    }

    /// Support's lookup of an App Store customer's Order ID (Look Up Order ID, verified): the ids of its
    /// transactions, none when Apple knows no such order; nil without the App Store Server API and a trust root.
    public var appleOrderLookup: (@Sendable (String) throws(BillingError) -> [String])? {
        guard link != nil, verifier != nil else { return nil }
        return { [self] id throws(BillingError) in
            var request = LookUpOrderRequest()
            request.customerOrderID = id
            return try lookUp(request).transactions.map(\.transactionID)
        }
    }

    func needLink(_ feature: String) throws(BillingError) -> AppStoreLink {
        guard let link else { throw .appStoreAPINotConfigured(feature: feature) }
        return link
    }

    func reconcile(_ request: ReconcileRequest) throws(BillingError) -> ReconcileResponse {
        _ = try needLink("Reconcile")
        if request.sinceTimeMs < 0 { throw .invalidField(field: "since_time_ms", problem: "is negative") }
        if request.sinceTimeMs > SystemClock().nowMilliseconds() + 60_000 {
            throw .invalidField(field: "since_time_ms", problem: "is in the future")
        }
        guard let result = runReconcile(request.sinceTimeMs == 0 ? nil : request.sinceTimeMs) else {
            throw .appStoreAPINotConfigured(feature: "Reconcile (no --bundle-id or --trust-root to verify notifications with)")
        }
        let report = try result.get()
        if let error = report.error { throw .appStoreAPIUnavailable(detail: error) }
        var r = ReconcileResponse()
        r.startTimeMs = report.startMs
        r.endTimeMs = report.endMs
        r.pages = Int32(clamping: report.pages)
        r.applied = Int32(clamping: report.applied)
        r.duplicate = Int32(clamping: report.duplicate)
        r.ignored = Int32(clamping: report.ignored)
        r.rejected = Int32(clamping: report.rejected)
        r.refundHistories = Int32(clamping: report.refundHistories)
        r.refundsApplied = Int32(clamping: report.refundsApplied)
        return r
    }

    /// An order id from a receipt email: letters and digits, at most 64.
    static func isCustomerOrderID(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 64
            && s.utf8.allSatisfy {
                ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || ($0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z"))
                    || ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z"))
            }
    }

    func lookUp(_ request: LookUpOrderRequest) throws(BillingError) -> LookUpOrderResponse {
        let link = try needLink("LookUpOrder")
        guard Self.isCustomerOrderID(request.customerOrderID) else {
            throw .invalidField(field: "customer_order_id", problem: "is not an order id (letters and digits, as on the receipt email)")
        }
        guard let verifier else { throw .receiptUntrusted(detail: "billingd trusts no root to verify Apple's answer with") }
        var response = LookUpOrderResponse()
        for env in link.environments {
            let signed: [String]?
            do {
                signed = try link.client.lookUpOrder(request.customerOrderID, in: env)
            } catch {
                throw link.map(error, transactionID: nil)
            }
            guard let signed else { continue }
            response.found = true
            response.environment = env == .production ? .production : .sandbox
            var ids: [String] = []
            for jws in signed {
                let t = try verifier.verifySignedTransaction(jws).get()
                ids.append(t.transactionID)
                response.transactions.append(BillingAPI.Transaction(t, catalog: catalog))
            }
            let wanted = ids
            let owned = try read { ledger throws(BillingError) -> [(String, Billing.Order?)] in
                var out: [(String, Billing.Order?)] = []
                for id in wanted {
                    guard let o = try ledger.owned(transactionID: id) else { continue }
                    out.append((o.accountID, try o.orderID.flatMap { id throws(BillingError) in try ledger.order(id: id) }))
                }
                return out
            }
            for (account, order) in owned {
                if !account.isEmpty && !response.accountIDs.contains(account) { response.accountIDs.append(account) }
                if let order, !response.orders.contains(where: { $0.orderID == order.id }) { response.orders.append(BillingAPI.Order(order)) }
            }
            break
        }
        return response
    }

    static func environment(_ e: BillingAPI.Environment, field: String) throws(BillingError) -> AppStoreAPIEnvironment {
        switch e {
        case .production: return .production
        case .sandbox, .unspecified: return .sandbox
        default: throw .invalidField(field: field, problem: "is not PRODUCTION or SANDBOX")
        }
    }

    func requestTest(_ request: RequestTestNotificationRequest) throws(BillingError) -> RequestTestNotificationResponse {
        let link = try needLink("RequestTestNotification")
        let env = try Self.environment(request.environment, field: "environment")
        var r = RequestTestNotificationResponse()
        do {
            r.testNotificationToken = try link.client.requestTestNotification(in: env)
        } catch {
            throw link.map(error, transactionID: nil)
        }
        r.environment = env == .production ? .production : .sandbox
        return r
    }

    func testStatus(_ request: GetTestNotificationStatusRequest) throws(BillingError) -> GetTestNotificationStatusResponse {
        let link = try needLink("GetTestNotificationStatus")
        let env = try Self.environment(request.environment, field: "environment")
        let token = request.testNotificationToken
        guard !token.isEmpty, token.utf8.count <= 128 else {
            throw .invalidField(field: "test_notification_token", problem: "is empty or longer than 128 bytes")
        }
        let status: (signedPayload: String, attempts: [String])
        do {
            status = try link.client.testNotificationStatus(token, in: env)
        } catch .notFound {
            throw .invalidField(field: "test_notification_token", problem: "is unknown to the App Store or expired")
        } catch {
            throw link.map(error, transactionID: nil)
        }
        var r = GetTestNotificationStatusResponse()
        r.sendAttemptResults = status.attempts.map { String($0.prefix(64)) }
        if let processor {
            r.notificationUUID = try processor.verifyOnly(signedPayload: status.signedPayload).get().uuid
        }
        return r
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (any PurchaseLedger) throws(BillingError) -> T) throws(BillingError) -> T {
        try Blocking.wait { done in store.read(body, completion: done) }.get()
    }

    /// One database transaction (the store's write primitive), waited for on this worker thread.
    func write<T: Sendable>(
        _ body: @escaping @Sendable (any PurchaseLedger) throws(BillingError) -> Result<T, BillingError>
    ) throws(BillingError) -> T {
        try Blocking.wait { done in store.write(abandoned: { false }, body, completion: done) }.get()
    }
}
