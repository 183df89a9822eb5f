/// A part of billingd that runs until it is stopped: a worker, a listener, a store with its threads.
///
/// `start` returns once it runs (or throws: it did not start, and owns nothing running); `beginStop` asks it to end
/// and returns at once; `waitStopped` waits for it, bounded by a deadline. `ServiceGroup` calls them in order.
public protocol Service: AnyObject, Sendable {
    /// The name in logs ("webhook-sender", "store").
    var name: String { get }
    func start() throws
    func beginStop()
    /// True once stopped; false when `deadline` (a `Monotonic.now()` value) passed first.
    func waitStopped(until deadline: UInt64) -> Bool
}

/// A service made of two calls: `start`, and a `stop` that blocks until it is done (a store's close, a listener's
/// drain). `stop` runs on a worker of its own, so the group's deadline bounds it like any other.
public final class StoppedBy: Service {
    public let name: String
    private let starting: @Sendable () throws -> Void
    private let stopper: Worker

    public init(_ name: String, start: @escaping @Sendable () throws -> Void = {}, stop: @escaping @Sendable () -> Void) {
        self.name = name
        self.starting = start
        self.stopper = Worker(name: "stop-" + name) { _ in stop() }
    }

    public func start() throws { try starting() }
    public func beginStop() { stopper.start() }
    public func waitStopped(until deadline: UInt64) -> Bool { stopper.waitStopped(until: deadline) }
}

/// Services started in order and stopped in reverse (swift-service-lifecycle's ServiceGroup, on threads): what
/// starts later may use what started before it, and is stopped before it.
///
/// `stop` gives each service the time left before one deadline for the whole group: one that has not stopped by
/// then is reported (`.stuck`) and the rest are still stopped, so a hung part cannot keep the others running.
public final class ServiceGroup: Sendable {
    /// What the group did, for the log.
    public enum Event: Sendable, Equatable {
        case started(String)
        case stopped(String, milliseconds: Int)
        /// Not stopped within the group's deadline; it is left behind.
        case stuck(String)
        /// `start` threw: the services started before it are stopped again, and `start` rethrows.
        case failed(String, String)
    }

    public let services: [any Service]
    private let report: @Sendable (Event) -> Void
    private let state = Condition()
    nonisolated(unsafe) private var started = 0
    nonisolated(unsafe) private var stopped = false

    public init(_ services: [any Service], report: @escaping @Sendable (Event) -> Void = { _ in }) {
        self.services = services
        self.report = report
    }

    /// Starts every service in order. When one throws, those already started are stopped (within `deadline`)
    /// and the error is rethrown.
    public func start(stopDeadline: Duration = .seconds(10)) throws {
        for (index, service) in services.enumerated() {
            do {
                try service.start()
            } catch {
                report(.failed(service.name, String(describing: error)))
                state.withLock { started = index }
                _ = stop(deadline: stopDeadline)
                throw error
            }
            state.withLock { started = index + 1 }
            report(.started(service.name))
        }
    }

    /// Stops the started services in reverse order, all within `deadline`; returns the names of those that did
    /// not stop in time. Once the deadline has passed (a service hung), each remaining one still gets `floor` to
    /// stop, so that one hung part does not mark the healthy ones stuck. A second call does nothing.
    @discardableResult
    public func stop(deadline: Duration, floor: Duration = .milliseconds(200)) -> [String] {
        let count = state.withLock { () -> Int in
            guard !stopped else { return 0 }
            stopped = true
            return started
        }
        let end = Monotonic.after(deadline)
        var stuck: [String] = []
        for service in services.prefix(count).reversed() {
            let begun = Monotonic.now()
            service.beginStop()
            if service.waitStopped(until: max(end, Monotonic.after(floor))) {
                report(.stopped(service.name, milliseconds: Int(Monotonic.nanoseconds(since: begun) / 1_000_000)))
            } else {
                stuck.append(service.name)
                report(.stuck(service.name))
            }
        }
        return stuck
    }
}
