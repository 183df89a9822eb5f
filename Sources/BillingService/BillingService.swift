public import Billing
import BillingAPI
public import RPC
import Dispatch
import Foundation
import Synchronization

/// Where slow verifications (app receipts, restores) run, off the event loops.
let verificationQueue = DispatchQueue(label: "billing.verification", attributes: .concurrent)

/// Where calls that wait on the App Store Server API run (restores by id, the admin service); the client
/// bounds how many are in flight.
let appStoreQueue = DispatchQueue(label: "billing.appstore", attributes: .concurrent)

/// The billing.v1.Billing and grpc.health.v1.Health handlers: decode, call the domain, encode.
/// Knows no sockets and no SQL.
public final class BillingService: Sendable {
    public let orders: OrderService
    public let purchases: PurchaseEngine?
    public let feed: EventFeed
    /// The App Store Server API, when its credentials are configured.
    public let appStore: AppStoreLink?
    private let health: HealthState
    /// Called when a handler meets an unexpected error, with the request id the caller sees.
    private let onInternalError: @Sendable (String, String) -> Void

    public init(orders: OrderService, purchases: PurchaseEngine? = nil, health: HealthState = HealthState(), appStore: AppStoreLink? = nil,
                onInternalError: @escaping @Sendable (_ requestID: String, _ detail: String) -> Void = { _, _ in }) {
        self.orders = orders
        self.purchases = purchases
        self.appStore = appStore
        self.feed = EventFeed(store: orders.store)
        self.health = health
        self.onInternalError = onInternalError
    }

    public static let createOrder = "billing.v1.Billing/CreateOrder"
    public static let submitReceipt = "billing.v1.Billing/SubmitReceipt"
    public static let restorePurchases = "billing.v1.Billing/RestorePurchases"
    public static let getOrder = "billing.v1.Billing/GetOrder"
    public static let getEntitlements = "billing.v1.Billing/GetEntitlements"
    public static let listEvents = "billing.v1.Billing/ListEvents"
    public static let watchEvents = "billing.v1.Billing/WatchEvents"
    public static let healthCheck = "grpc.health.v1.Health/Check"
    public static let healthWatch = "grpc.health.v1.Health/Watch"

    /// Adds every method to `router`.
    public func register(in router: inout Router) {
        router.register(Self.createOrder, CreateOrderRequest.self) { [self] context, request, responder in
            createOrder(context, request, responder)
        }
        router.register(Self.getOrder, GetOrderRequest.self) { [self] context, request, responder in
            getOrder(context, request, responder)
        }
        if let purchases {
            router.register(Self.submitReceipt, SubmitReceiptRequest.self) { [self] context, request, responder in
                submitReceipt(purchases, context, request, responder)
            }
            router.register(Self.restorePurchases, RestorePurchasesRequest.self) { [self] context, request, responder in
                restorePurchases(purchases, context, request, responder)
            }
        }
        router.register(Self.getEntitlements, GetEntitlementsRequest.self) { [self] context, request, responder in
            getEntitlements(context, request, responder)
        }
        router.register(Self.listEvents, ListEventsRequest.self) { [self] context, request, responder in
            listEvents(context, request, responder)
        }
        router.registerServerStreaming(Self.watchEvents, WatchEventsRequest.self) { [self] context, request, writer in
            watchEvents(context, request, writer)
        }
        router.register(Self.healthCheck, HealthCheckRequest.self) { [self] _, request, responder in
            healthCheck(request, responder)
        }
        router.registerServerStreaming(Self.healthWatch, HealthCheckRequest.self) { [self] _, request, writer in
            health.watch(request.service, writer)
        }
        Reflection.register(in: &router)
    }

    private func answer(_ error: BillingError, _ context: CallContext, _ responder: Responder) {
        if case .storageUnavailable(let detail) = error { onInternalError(context.requestID, detail) }
        responder.fail(error.rpcError)
    }

    func createOrder(_ context: CallContext, _ request: CreateOrderRequest, _ responder: Responder) {
        if !request.accountID.isEmpty && request.accountID.utf8.count <= OrderService.Limits.accountID {
            context.note("account_id", request.accountID)
        }
        let domain = OrderService.CreateRequest(accountID: request.accountID, productID: request.productID,
                                                idempotencyKey: request.idempotencyKey, quantity: Int(request.quantity))
        orders.createOrder(domain, abandoned: { context.isExpired }) { [self] result in
            switch result {
            case .success(let order):
                context.note("order_id", order.id)
                responder.succeed(CreateOrderResponse(order: BillingAPI.Order(order)))
            case .failure(let error): answer(error, context, responder)
            }
        }
    }

    func getOrder(_ context: CallContext, _ request: GetOrderRequest, _ responder: Responder) {
        if let id = OrderID.canonical(request.orderID) { context.note("order_id", id) }
        orders.getOrder(id: request.orderID) { [self] result in
            switch result {
            case .success(let order): responder.succeed(GetOrderResponse(order: BillingAPI.Order(order)))
            case .failure(let error): answer(error, context, responder)
            }
        }
    }

    func submitReceipt(_ engine: PurchaseEngine, _ context: CallContext, _ request: SubmitReceiptRequest, _ responder: Responder) {
        let proof: PurchaseEngine.Proof? = switch request.proof {
        case .signedTransaction(let s): .signedTransaction(s)
        case .appReceipt(let s): .appReceipt(s)
        case nil: nil
        }
        if let id = OrderID.canonical(request.orderID) { context.note("order_id", id) }
        let catalog = orders.catalog
        let work: @Sendable () -> Void = { [self] in
            engine.submitReceipt(orderID: request.orderID, proof: proof, transactionID: request.transactionID,
                                 abandoned: { context.isExpired }) { [self] result in
                switch result {
                case .success(let done):
                    var response = SubmitReceiptResponse()
                    response.order = BillingAPI.Order(done.order)
                    response.transaction = BillingAPI.Transaction(done.transaction, catalog: catalog)
                    response.alreadyProcessed = done.alreadyProcessed
                    responder.succeed(response)
                case .failure(let error): answer(error, context, responder)
                }
            }
        }
        // App receipts (PKCS#7, RSA, ASN.1) take a millisecond or more: keep them off the event loop.
        if case .appReceipt = proof { verificationQueue.async(execute: work) } else { work() }
    }

    func restorePurchases(_ engine: PurchaseEngine, _ context: CallContext, _ request: RestorePurchasesRequest, _ responder: Responder) {
        if !request.accountID.isEmpty && request.accountID.utf8.count <= OrderService.Limits.accountID {
            context.note("account_id", request.accountID)
        }
        let ids = request.transactionIDs
        if !ids.isEmpty {
            guard appStore != nil else {
                return answer(.appStoreAPINotConfigured(feature: "RestorePurchases with transaction_ids"), context, responder)
            }
            if ids.count > AppStoreLink.maxTransactionIDs {
                return answer(.invalidField(field: "transaction_ids", problem: "holds more than \(AppStoreLink.maxTransactionIDs)"), context, responder)
            }
            if let bad = ids.firstIndex(where: { !AppStoreLink.isTransactionID($0) }) {
                return answer(.invalidField(field: "transaction_ids", problem: "entry \(bad) is not a transaction id (digits)"), context, responder)
            }
        }
        // Calls to Apple block a thread for seconds: their own queue, not the one app receipts are verified on.
        (ids.isEmpty ? verificationQueue : appStoreQueue).async { [self] in
            var fetched: [String] = []
            if !ids.isEmpty, let appStore {
                // The account id is checked before anyone calls Apple.
                do throws(BillingError) {
                    try OrderService.checkText(request.accountID, field: "account_id", max: OrderService.Limits.accountID, required: true)
                } catch {
                    return answer(error, context, responder)
                }
                switch appStore.signedHistory(transactionIDs: ids, expired: { context.isExpired }) {
                case .success(let list): fetched = list
                case .failure(let e): return answer(e, context, responder)
                }
            }
            engine.restorePurchases(accountID: request.accountID, appReceipt: request.appReceipt,
                                    signedTransactions: request.signedTransactions, fetched: fetched) { [self] result in
                switch result {
                case .success(let entitlements):
                    var response = RestorePurchasesResponse()
                    response.entitlements = entitlements.map(BillingAPI.Entitlement.init)
                    responder.succeed(response)
                case .failure(let error): answer(error, context, responder)
                }
            }
        }
    }

    /// An optional account filter: empty means every account; otherwise checked like any account id.
    static func accountFilter(_ raw: String) -> Result<String?, BillingError> {
        if raw.isEmpty { return .success(nil) }
        do throws(BillingError) {
            try OrderService.checkText(raw, field: "account_id", max: OrderService.Limits.accountID, required: false)
        } catch {
            return .failure(error)
        }
        return .success(raw)
    }

    func getEntitlements(_ context: CallContext, _ request: GetEntitlementsRequest, _ responder: Responder) {
        if !request.accountID.isEmpty && request.accountID.utf8.count <= OrderService.Limits.accountID {
            context.note("account_id", request.accountID)
        }
        do throws(BillingError) {
            try OrderService.checkText(request.accountID, field: "account_id", max: OrderService.Limits.accountID, required: true)
        } catch {
            return answer(error, context, responder)
        }
        let includeInactive = request.includeInactive
        orders.store.entitlements(accountID: request.accountID, nowMs: SystemClock().nowMilliseconds()) { [self] result in
            switch result {
            case .success(let list):
                var response = GetEntitlementsResponse()
                response.entitlements = list.filter { includeInactive || $0.active }.map(BillingAPI.Entitlement.init)
                responder.succeed(response)
            case .failure(let error): answer(error, context, responder)
            }
        }
    }

    func listEvents(_ context: CallContext, _ request: ListEventsRequest, _ responder: Responder) {
        let account: String?
        switch Self.accountFilter(request.accountID) {
        case .success(let a): account = a
        case .failure(let e): return answer(e, context, responder)
        }
        if let account { context.note("account_id", account) }
        guard request.limit >= 0 else {
            return answer(.invalidField(field: "limit", problem: "must not be negative (0 means 100)"), context, responder)
        }
        let limit = request.limit == 0 ? 100 : min(Int(request.limit), 1000)
        let after = request.afterCursor
        orders.store.events(after: after, limit: limit, accountID: account) { [self] result in
            switch result {
            case .success(let events):
                var response = ListEventsResponse()
                response.events = events.map(BillingAPI.Event.init)
                response.nextCursor = events.last?.cursor ?? after
                responder.succeed(response)
            case .failure(let error): answer(error, context, responder)
            }
        }
    }

    func watchEvents(_ context: CallContext, _ request: WatchEventsRequest, _ writer: StreamWriter) {
        switch Self.accountFilter(request.accountID) {
        case .success(let account): feed.watch(after: request.afterCursor, accountID: account, writer: writer)
        case .failure(let e): writer.finish(e.rpcError)
        }
    }

    func healthCheck(_ request: HealthCheckRequest, _ responder: Responder) {
        switch health.status(of: request.service) {
        case .serving: responder.succeed(HealthCheckResponse(status: .serving))
        case .notServing: responder.succeed(HealthCheckResponse(status: .notServing))
        case .unknownService:
            responder.fail(RPCError(code: .notFound, message: "unknown service '\(request.service)'"))
        }
    }
}

/// What grpc.health.v1 answers: serving until draining starts or the database is unreachable.
/// Watchers get the status at once and again whenever it changes; draining ends their streams.
public final class HealthState: Sendable {
    public enum Status: Sendable { case serving, notServing, unknownService }

    private struct Watcher {
        let service: String
        let writer: StreamWriter
        var last: Status
    }
    private let watchers = Mutex<[Watcher]>([])
    private let polling = Atomic<Bool>(false)

    private static func message(_ status: Status) -> HealthCheckResponse {
        switch status {
        case .serving: HealthCheckResponse(status: .serving)
        case .notServing: HealthCheckResponse(status: .notServing)
        case .unknownService: HealthCheckResponse(status: .serviceUnknown)
        }
    }

    /// grpc.health.v1 Watch: the current status now, then every change, until the client leaves or we drain.
    func watch(_ service: String, _ writer: StreamWriter) {
        let status = status(of: service)
        writer.send(Self.message(status))
        if draining.load(ordering: .acquiring) {
            writer.finish()
            return
        }
        // The list and the poller's flag change together under the lock: a watcher added while the
        // poller winds down either is seen by it or finds the flag cleared and starts a new one.
        let start = watchers.withLock { list -> Bool in
            list.append(Watcher(service: service, writer: writer, last: status))
            return !polling.exchange(true, ordering: .acquiringAndReleasing)
        }
        if start { startPolling() }
    }

    /// Every `pollSeconds` while anyone watches: tell watchers whose status changed (database up or down).
    private func startPolling() {
        let thread = Thread { [self] in
            while true {
                Thread.sleep(forTimeInterval: pollSeconds)
                let stopped = watchers.withLock { list -> Bool in
                    list.removeAll { $0.writer.isDone }
                    for i in list.indices {
                        let now = status(of: list[i].service)
                        if now != list[i].last {
                            list[i].last = now
                            list[i].writer.send(Self.message(now))
                        }
                    }
                    if list.isEmpty { polling.store(false, ordering: .releasing) }
                    return list.isEmpty
                }
                if stopped {
                    pollerStopped()
                    return
                }
            }
        }
        thread.name = "health-watch"
        thread.start()
    }

    /// The services Check knows: "" is the whole server.
    public static let services: Set<String> = ["", "billing.v1.Billing", "grpc.health.v1.Health"]

    private let draining = Atomic<Bool>(false)
    private let storeReachable: @Sendable () -> Bool
    private let pollSeconds: Double
    /// Called on the poller thread when it found no watcher left and stopped (tests).
    private let pollerStopped: @Sendable () -> Void

    public convenience init(storeReachable: @escaping @Sendable () -> Bool = { true }) {
        self.init(storeReachable: storeReachable, pollSeconds: 1, pollerStopped: {})
    }

    init(storeReachable: @escaping @Sendable () -> Bool, pollSeconds: Double, pollerStopped: @escaping @Sendable () -> Void) {
        self.storeReachable = storeReachable
        self.pollSeconds = pollSeconds
        self.pollerStopped = pollerStopped
    }

    /// From now on every service reports NOT_SERVING; watchers hear it and their streams end.
    public func beginDraining() {
        draining.store(true, ordering: .releasing)
        let list = watchers.withLock { list -> [Watcher] in
            let l = list
            list.removeAll()
            return l
        }
        for w in list where !w.writer.isDone {
            if w.last != .unknownService { w.writer.send(Self.message(.notServing)) }
            w.writer.finish()
        }
    }

    /// Whether draining has begun.
    public var isDraining: Bool { draining.load(ordering: .acquiring) }

    public func status(of service: String) -> Status {
        // "" (the whole server) is what probes ask: no hashing for it.
        guard service.isEmpty || Self.services.contains(service) else { return .unknownService }
        if draining.load(ordering: .acquiring) { return .notServing }
        return storeReachable() ? .serving : .notServing
    }
}
