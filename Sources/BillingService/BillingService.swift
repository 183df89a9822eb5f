public import AfterSale
public import Billing
import BillingAPI
import Crypto
import ProtoWire
public import RPC
import Dispatch
import Foundation
import Synchronization

/// The billing.v1.Billing handlers: decode, call the domain, encode. Knows no sockets and no SQL; says
/// where each handler runs when it registers it (`Execution`), never hops threads itself.
public final class BillingService: Sendable {
    public let orders: OrderService
    public let purchases: PurchaseEngine?
    public let feed: EventFeed
    /// Where the handlers that may not run on a loop run.
    public let pools: WorkerPools
    /// What `--max-watchers-per-key` counts by.
    public let watcherKey: WatcherKey
    public enum WatcherKey: Sendable {
        /// The API key (`authorization`), checked by the router before any handler runs.
        case apiKey
        /// The verified client certificate's subject (mutual TLS, no API keys).
        case certificateSubject
        /// The peer's address without its port.
        case peerAddress
    }
    /// The App Store Server API, when its credentials are configured.
    public let appStore: AppStoreLink?
    /// SignOffer's In-App Purchase key and apps, when `--offer-signing-key` is configured.
    public let offers: OfferSigning?
    /// The Play Developer API, when `--google-play-service-account` and `--google-play-packages` are configured.
    public let googlePlay: GooglePlayLink?
    /// Called after a Google Play purchase was recorded as paid (its acknowledgement is queued): wakes the acknowledger.
    let onPlayPurchaseRecorded: @Sendable () -> Void
    /// Called when a handler meets an unexpected error, with the request id the caller sees.
    let onInternalError: @Sendable (String, String) -> Void

    public init(
        orders: OrderService, purchases: PurchaseEngine? = nil, appStore: AppStoreLink? = nil, offers: OfferSigning? = nil,
        googlePlay: GooglePlayLink? = nil, onPlayPurchaseRecorded: @escaping @Sendable () -> Void = {},
        feedLimits: EventFeed.Limits = EventFeed.Limits(), watchersKeyedBy: WatcherKey = .peerAddress,
        pools: WorkerPools = WorkerPools(),
        onInternalError: @escaping @Sendable (_ requestID: String, _ detail: String) -> Void = { _, _ in }
    ) {
        self.pools = pools
        self.orders = orders
        self.purchases = purchases
        self.appStore = appStore
        self.offers = offers
        self.googlePlay = googlePlay
        self.onPlayPurchaseRecorded = onPlayPurchaseRecorded
        self.feed = EventFeed(store: orders.store, limits: feedLimits)
        self.watcherKey = watchersKeyedBy
        self.onInternalError = onInternalError
    }

    /// At most this many Google Play purchases per RestorePurchases (each is one Play Developer API call or two).
    public static let maxGooglePlayPurchases = 20

    public static let createOrder = "billing.v1.Billing/CreateOrder"
    public static let submitReceipt = "billing.v1.Billing/SubmitReceipt"
    public static let restorePurchases = "billing.v1.Billing/RestorePurchases"
    public static let getOrder = "billing.v1.Billing/GetOrder"
    public static let getEntitlements = "billing.v1.Billing/GetEntitlements"
    public static let listEvents = "billing.v1.Billing/ListEvents"
    public static let watchEvents = "billing.v1.Billing/WatchEvents"
    public static let listTransactions = "billing.v1.Billing/ListTransactions"
    public static let getTransaction = "billing.v1.Billing/GetTransaction"
    public static let signOffer = "billing.v1.Billing/SignOffer"

    /// Adds every method to `router`.
    public func register(in router: inout Router) {
        router.register(Self.createOrder, CreateOrderRequest.self) { [self] context, request, responder in
            createOrder(context, request, responder)
        }
        router.register(Self.getOrder, GetOrderRequest.self) { [self] context, request, responder in
            getOrder(context, request, responder)
        }
        if let purchases {
            // A signed transaction whose certificate chain is already verified costs one ES256 check: on the
            // loop. A chain to verify, or an app receipt, goes to the verification pool.
            let verifier = purchases.verifier, pools = self.pools
            let playConfigured = googlePlay != nil
            router.register(
                Self.submitReceipt, SubmitReceiptRequest.self,
                on: { request in
                    switch request.proof {
                    case .signedTransaction(let jws): verifier.hasVerifiedChain(signedTransaction: jws) ? .loop : .pool(pools.verification)
                    // Read from Google on its pool; refused at once when Google Play is not configured.
                    case .googlePlay: playConfigured ? .pool(pools.googlePlay) : .loop
                    case .appReceipt, nil: .pool(pools.verification)
                    }
                }
            ) { [self] context, request, responder in
                submitReceipt(purchases, context, request, responder)
            }
            // Restores verify every proof they carry; by transaction id they wait on Apple.
            router.register(
                Self.restorePurchases, RestorePurchasesRequest.self,
                on: { request in
                    if !request.googlePlayPurchases.isEmpty && playConfigured { return .pool(pools.googlePlay) }
                    return .pool(request.transactionIDs.isEmpty ? pools.verification : pools.appStore)
                }
            ) { [self] context, request, responder in
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
        router.register(Self.listTransactions, ListTransactionsRequest.self) { [self] context, request, responder in
            listTransactions(context, request, responder)
        }
        router.register(Self.getTransaction, GetTransactionRequest.self) { [self] context, request, responder in
            getTransaction(context, request, responder)
        }
        // One ES256 signature and at most an order read from the cache (28-32 µs a call in all, bench/README.md):
        // on the loop, like a signed transaction whose chain is already verified (one ES256 check, ~110 µs).
        router.register(Self.signOffer, SignOfferRequest.self) { [self] context, request, responder in
            signOffer(context, request, responder)
        }
    }

    /// Answers a domain error; a storage failure is reported with the request id first.
    func answer(_ error: BillingError, _ context: CallContext, _ responder: Responder) {
        switch error {
        case .infrastructure(.storage(let cause)): onInternalError(context.requestID, cause.description)
        // Why Apple could not be used (refused, HTTP 5xx, 401, timeout), for the rpc log line only.
        case .infrastructure(.appStoreAPI(let detail)): context.note("cause", String(detail.prefix(300)))
        default: break
        }
        responder.fail(error.rpcError)
    }

    func createOrder(_ context: CallContext, _ request: CreateOrderRequest, _ responder: Responder) {
        if !request.accountID.isEmpty && request.accountID.utf8.count <= OrderService.Limits.accountID {
            context.note("account_id", request.accountID)
        }
        let domain = OrderService.CreateRequest(
            accountID: request.accountID, productID: request.productID,
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
        let completion: @Sendable (Result<Billing.Order, BillingError>) -> Void = { [self] result in
            switch result {
            case .success(let order): responder.succeed(GetOrderResponse(order: BillingAPI.Order(order)))
            case .failure(let error): answer(error, context, responder)
            }
        }
        // The id is made canonical once, for the log line and the read.
        if let id = OrderID.canonical(request.orderID) {
            context.note("order_id", id)
            orders.getOrder(canonicalID: id, completion: completion)
        } else {
            orders.getOrder(id: request.orderID, completion: completion)
        }
    }

    func submitReceipt(_ engine: PurchaseEngine, _ context: CallContext, _ request: SubmitReceiptRequest, _ responder: Responder) {
        if let id = OrderID.canonical(request.orderID) { context.note("order_id", id) }
        if AppStoreLink.isTransactionID(request.transactionID) { context.note("transaction_id", request.transactionID) }
        let proof: PurchaseEngine.Proof?
        switch request.proof {
        case .signedTransaction(let s): proof = .signedTransaction(s)
        case .appReceipt(let s): proof = .appReceipt(s)
        case .googlePlay(let p):
            guard let googlePlay else { return answer(.googlePlayNotConfigured, context, responder) }
            switch googlePlay.transaction(packageName: p.packageName, productID: p.productID, token: p.purchaseToken) {
            case .success(let t):
                context.note("transaction_id", t.transactionID)
                proof = .storeVerified(t)
            case .failure(let e): return answer(e, context, responder)
            }
        case nil: proof = nil
        }
        let catalog = orders.catalog
        engine.submitReceipt(
            orderID: request.orderID, proof: proof, transactionID: request.transactionID,
            abandoned: { context.isExpired }
        ) { [self] result in
            switch result {
            case .success(let done):
                if done.transaction.store == .googlePlay { onPlayPurchaseRecorded() }
                if request.transactionID.isEmpty && AppStoreLink.isTransactionID(done.transaction.transactionID) {
                    context.note("transaction_id", done.transaction.transactionID)
                }
                var response = SubmitReceiptResponse()
                response.order = BillingAPI.Order(done.order)
                response.transaction = BillingAPI.Transaction(done.transaction, catalog: catalog)
                response.alreadyProcessed = done.alreadyProcessed
                responder.succeed(response)
            case .failure(let error): answer(error, context, responder)
            }
        }
    }

    func restorePurchases(_ engine: PurchaseEngine, _ context: CallContext, _ request: RestorePurchasesRequest, _ responder: Responder) {
        if !request.accountID.isEmpty && request.accountID.utf8.count <= OrderService.Limits.accountID {
            context.note("account_id", request.accountID)
        }
        var playTransactions: [StoreTransaction] = []
        if !request.googlePlayPurchases.isEmpty {
            guard let googlePlay else { return answer(.googlePlayNotConfigured, context, responder) }
            if request.googlePlayPurchases.count > Self.maxGooglePlayPurchases {
                return answer(.invalidField(field: "google_play_purchases", problem: "holds more than \(Self.maxGooglePlayPurchases)"), context, responder)
            }
            do throws(BillingError) {
                try OrderService.checkAccountID(request.accountID, required: true)
            } catch {
                return answer(error, context, responder)
            }
            for p in request.googlePlayPurchases {
                switch googlePlay.transaction(packageName: p.packageName, productID: p.productID, token: p.purchaseToken) {
                case .success(let t): playTransactions.append(t)
                // Not paid (yet): nothing to restore.
                case .failure(.purchasePending), .failure(.purchaseCanceled): continue
                case .failure(let e): return answer(e, context, responder)
                }
                if context.isExpired { return answer(.googlePlayUnavailable(detail: "the call's deadline passed while reading purchases"), context, responder) }
            }
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
            context.note("transaction_id", ids.joined(separator: ","))
        }
        // Runs on the pool the registration chose (calls to Apple block a thread for seconds).
        var fetched: [String] = []
        var customers: [(transactionID: String, environment: StoreEnvironment)] = []
        if !ids.isEmpty, let appStore {
            // The account id is checked before anyone calls Apple.
            do throws(BillingError) {
                try OrderService.checkAccountID(request.accountID, required: true)
            } catch {
                return answer(error, context, responder)
            }
            switch appStore.signedHistories(transactionIDs: ids, expired: { context.isExpired }) {
            case .success(let found): (fetched, customers) = found
            case .failure(let e): return answer(e, context, responder)
            }
        }
        // The customers fetched by id are noted with the restore: reconciliation reads their refund history.
        engine.restorePurchases(
            accountID: request.accountID, appReceipt: request.appReceipt,
            signedTransactions: request.signedTransactions, fetched: fetched, watch: customers, storeVerified: playTransactions
        ) { [self, restoredPlay = !playTransactions.isEmpty] result in
            switch result {
            case .success(let entitlements):
                if restoredPlay { onPlayPurchaseRecorded() }
                var response = RestorePurchasesResponse()
                response.entitlements = entitlements.map(BillingAPI.Entitlement.init)
                responder.succeed(response)
            case .failure(let error): answer(error, context, responder)
            }
        }
    }

    /// An optional account filter: empty means every account; otherwise checked like any account id.
    static func accountFilter(_ raw: String) -> Result<String?, BillingError> {
        if raw.isEmpty { return .success(nil) }
        do throws(BillingError) {
            try OrderService.checkAccountID(raw, required: false)
        } catch {
            return .failure(error)
        }
        return .success(raw)
    }

    /// A required account id: noted for the call's log line when it is sane, then checked (INVALID_FIELD).
    static func checkAccount(_ raw: String, _ context: CallContext) -> BillingError? {
        if !raw.isEmpty && raw.utf8.count <= OrderService.Limits.accountID { context.note("account_id", raw) }
        do throws(BillingError) {
            try OrderService.checkAccountID(raw, required: true)
        } catch {
            return error
        }
        return nil
    }

    func getEntitlements(_ context: CallContext, _ request: GetEntitlementsRequest, _ responder: Responder) {
        if let refusal = Self.checkAccount(request.accountID, context) { return answer(refusal, context, responder) }
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
        let store = orders.store
        orders.store.events(after: after, limit: limit, accountID: account) { [self] result in
            switch result {
            case .success(let events) where events.isEmpty && after > 0:
                // An empty page: is the cursor beyond the newest event? (The store numbered what had committed
                // before the page was read, so the caller's own events count.)
                store.read({ ledger throws(BillingError) in try ledger.lastCursor() }) { [self] newest in
                    switch newest {
                    case .success(let n) where after > n: answer(.cursorOutOfRange(cursor: after, newest: n), context, responder)
                    case .success:
                        var response = ListEventsResponse()
                        response.nextCursor = after
                        responder.succeed(response)
                    case .failure(let error): answer(error, context, responder)
                    }
                }
            case .success(let events):
                var response = ListEventsResponse()
                response.events = events.map(BillingAPI.Event.init)
                response.nextCursor = events.last?.cursor ?? after
                responder.succeed(response)
            case .failure(let error): answer(error, context, responder)
            }
        }
    }

    /// The caller a watcher counts against (`--max-watchers-per-key`).
    func watcherKey(_ context: CallContext) -> String {
        switch watcherKey {
        case .apiKey:
            if let header = context.metadata("authorization") {
                return "key:" + Base64.encode(Digest.sha256(Array(header.utf8)))
            }
        case .certificateSubject:
            if let subject = context.peerSubject { return "subject:" + subject }
        case .peerAddress: break
        }
        let peer = context.peer
        guard let colon = peer.lastIndex(of: ":") else { return "peer:" + peer }
        return "peer:" + peer[..<colon]
    }

    func watchEvents(_ context: CallContext, _ request: WatchEventsRequest, _ writer: StreamWriter) {
        switch Self.accountFilter(request.accountID) {
        case .success(let account): feed.watch(after: request.afterCursor, accountID: account, key: watcherKey(context), writer: writer)
        case .failure(let e): writer.finish(e.rpcError)
        }
    }
}
