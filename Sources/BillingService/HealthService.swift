import BillingAPI
import Foundation
public import RPC
import Synchronization
import Lifecycle

/// grpc.health.v1.Health as its own service beside Billing: Check answers on the loop from `HealthState`
/// (no I/O), Watch streams changes. Kubernetes gRPC probes and grpc-health-probe call it.
public struct HealthService: Sendable {
    public static let check = "grpc.health.v1.Health/Check"
    public static let watch = "grpc.health.v1.Health/Watch"
    public let state: HealthState

    public init(state: HealthState) { self.state = state }

    public func register(in router: inout Router) {
        router.register(Self.check, HealthCheckRequest.self) { [state] _, request, responder in
            Self.check(state, request, responder)
        }
        router.registerServerStreaming(Self.watch, HealthCheckRequest.self) { [state] _, request, writer in
            state.watch(request.service, writer)
        }
    }

    static func check(_ health: HealthState, _ request: HealthCheckRequest, _ responder: Responder) {
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
        let worker = Worker(name: "health-watch")
        worker.start { [self] worker in
            while true {
                worker.pause(.milliseconds(Int(pollSeconds * 1000)))
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
