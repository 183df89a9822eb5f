public import Billing
import BillingAPI
public import RPC
import Synchronization

/// The billing.v1.Billing and grpc.health.v1.Health handlers: decode, call the domain, encode.
/// Knows no sockets and no SQL.
public final class BillingService: Sendable {
    public let orders: OrderService
    private let health: HealthState
    /// Called when a handler meets an unexpected error, with the request id the caller sees.
    private let onInternalError: @Sendable (String, String) -> Void

    public init(orders: OrderService, health: HealthState = HealthState(),
                onInternalError: @escaping @Sendable (_ requestID: String, _ detail: String) -> Void = { _, _ in }) {
        self.orders = orders
        self.health = health
        self.onInternalError = onInternalError
    }

    public static let createOrder = "billing.v1.Billing/CreateOrder"
    public static let submitReceipt = "billing.v1.Billing/SubmitReceipt"
    public static let restorePurchases = "billing.v1.Billing/RestorePurchases"
    public static let getOrder = "billing.v1.Billing/GetOrder"
    public static let healthCheck = "grpc.health.v1.Health/Check"

    /// Adds every method to `router`.
    public func register(in router: inout Router) {
        router.register(Self.createOrder, CreateOrderRequest.self) { [self] context, request, responder in
            createOrder(context, request, responder)
        }
        router.register(Self.getOrder, GetOrderRequest.self) { [self] context, request, responder in
            getOrder(context, request, responder)
        }
        router.register(Self.submitReceipt) { _, _, responder in
            responder.fail(RPCError(code: .unimplemented, message: "SubmitReceipt is not available yet in this build"))
        }
        router.register(Self.restorePurchases) { _, _, responder in
            responder.fail(RPCError(code: .unimplemented, message: "RestorePurchases is not available yet in this build"))
        }
        router.register(Self.healthCheck, HealthCheckRequest.self) { [self] _, request, responder in
            healthCheck(request, responder)
        }
    }

    private func answer(_ error: BillingError, _ context: CallContext, _ responder: Responder) {
        if case .storageUnavailable(let detail) = error { onInternalError(context.requestID, detail) }
        responder.fail(error.rpcError)
    }

    func createOrder(_ context: CallContext, _ request: CreateOrderRequest, _ responder: Responder) {
        let domain = OrderService.CreateRequest(accountID: request.accountID, productID: request.productID,
                                                idempotencyKey: request.idempotencyKey, quantity: Int(request.quantity))
        orders.createOrder(domain, abandoned: { context.isExpired }) { [self] result in
            switch result {
            case .success(let order): responder.succeed(CreateOrderResponse(order: BillingAPI.Order(order)))
            case .failure(let error): answer(error, context, responder)
            }
        }
    }

    func getOrder(_ context: CallContext, _ request: GetOrderRequest, _ responder: Responder) {
        orders.getOrder(id: request.orderID) { [self] result in
            switch result {
            case .success(let order): responder.succeed(GetOrderResponse(order: BillingAPI.Order(order)))
            case .failure(let error): answer(error, context, responder)
            }
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
public final class HealthState: Sendable {
    public enum Status: Sendable { case serving, notServing, unknownService }

    /// The services Check knows: "" is the whole server.
    public static let services: Set<String> = ["", "billing.v1.Billing", "grpc.health.v1.Health"]

    private let draining = Atomic<Bool>(false)
    private let storeReachable: @Sendable () -> Bool

    public init(storeReachable: @escaping @Sendable () -> Bool = { true }) {
        self.storeReachable = storeReachable
    }

    /// From now on every service reports NOT_SERVING.
    public func beginDraining() { draining.store(true, ordering: .releasing) }

    public func status(of service: String) -> Status {
        guard Self.services.contains(service) else { return .unknownService }
        if draining.load(ordering: .acquiring) { return .notServing }
        return storeReachable() ? .serving : .notServing
    }
}
