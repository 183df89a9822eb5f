import Glibc

/// One named background thread running one loop: the only way billingd starts a thread outside the event loops.
///
/// The loop asks `pause(_:)` between rounds: it sleeps up to the period, returns early on `wake()` (new work), and
/// returns false once `stop` was asked, so every loop ends the same way. `stop` joins: when it returns the body
/// has returned (or the deadline passed, which `waitStopped` reports).
///
///     let sweeper = Worker(name: "order-expiry") { worker in
///         repeat { expireDue() } while worker.pause(.seconds(5))
///     }
///     sweeper.start()
///     sweeper.stop()   // wakes the pause, waits for the body to return
public final class Worker: Service {
    public let name: String
    private let stackSize: Int
    private let condition = Condition()
    nonisolated(unsafe) private var body: (@Sendable (Worker) -> Void)?
    nonisolated(unsafe) private var started = false
    nonisolated(unsafe) private var stopping = false
    nonisolated(unsafe) private var finished = false
    nonisolated(unsafe) private var woken = false
    nonisolated(unsafe) private var thread: pthread_t?
    nonisolated(unsafe) private var joined = false

    /// `body` runs once on the thread, from `start`; it should return soon after `pause` answers false.
    public init(name: String, stackSize: Int = 1 << 20, _ body: @escaping @Sendable (Worker) -> Void) {
        self.name = name
        self.stackSize = stackSize
        self.body = body
    }

    /// A worker whose body is given to `start(_:)` (an owner whose body uses the owner itself).
    public init(name: String, stackSize: Int = 1 << 20) {
        self.name = name
        self.stackSize = stackSize
        self.body = nil
    }

    /// Starts the thread with `body` (once; later calls do nothing).
    public func start(_ body: @escaping @Sendable (Worker) -> Void) {
        condition.withLock {
            if !started && self.body == nil { self.body = body }
        }
        start()
    }

    /// Starts the thread (once; later calls do nothing). A worker stopped before it started never runs its body.
    public func start() {
        let run = condition.withLock { () -> (@Sendable (Worker) -> Void)? in
            guard !started, body != nil else { return nil }
            started = true
            if stopping {
                finished = true
                body = nil
                return nil
            }
            return body
        }
        guard let run else { return }
        let entry: @Sendable () -> Void = { [self] in
            Self.nameThisThread(name)
            run(self)
            condition.withLock {
                finished = true
                body = nil
                condition.broadcast()
            }
        }
        // pthreads rather than Foundation's Thread: a stop can join the thread itself (pthread_join), so that
        // after it nothing of the worker is left running, not even the thread's exit.
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setstacksize(&attributes, stackSize)
        var tid = pthread_t()
        let box = Unmanaged.passRetained(Entry(entry))
        let rc = pthread_create(
            &tid, &attributes,
            { argument in
                let entry = Unmanaged<Entry>.fromOpaque(argument!).takeRetainedValue()
                entry.run()
                return nil
            }, box.toOpaque())
        pthread_attr_destroy(&attributes)
        precondition(rc == 0, "pthread_create failed for \(name)")
        condition.withLock { thread = tid }
    }

    /// The body, boxed to cross pthread_create.
    private final class Entry {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    deinit {
        // Never joined (nobody stopped it): let the system reclaim the thread when it ends.
        if let thread, !joined { pthread_detach(thread) }
    }

    /// The kernel's name of the running thread (what `ps -L`, `top -H` and /proc show; 15 bytes at most):
    /// (pthread_setname_np and prctl are not visible to Swift's Glibc module; /proc/thread-self/comm is the same.)
    public static func nameThisThread(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    /// True once `stop` (or `beginStop`) was called.
    public var isStopping: Bool { condition.withLock { stopping } }

    /// Ends the current or next `pause` early (new work is there). Wakes that arrive while the body works are
    /// kept as one: the next `pause` returns at once.
    public func wake() {
        condition.withLock {
            woken = true
            condition.broadcast()
        }
    }

    /// Sleeps up to `period`, until `wake()`, or until stop is asked. Returns false once stop was asked (the loop
    /// then ends), true otherwise.
    @discardableResult
    public func pause(_ period: Duration) -> Bool {
        let deadline = Monotonic.after(period)
        return condition.withLock {
            while !stopping && !woken {
                if !condition.wait(until: deadline) { break }
            }
            woken = false
            return !stopping
        }
    }

    /// Asks the loop to end (its `pause` answers false) and returns at once.
    public func beginStop() {
        condition.withLock {
            stopping = true
            if !started {
                finished = true
                body = nil
            }
            condition.broadcast()
        }
    }

    /// Waits until the body returned, or `deadline` (a `Monotonic.now()` value) passed; true when it returned.
    public func waitStopped(until deadline: UInt64) -> Bool {
        let (done, join) = condition.withLock { () -> (Bool, pthread_t?) in
            while !finished {
                if !condition.wait(until: deadline) { break }
            }
            guard finished else { return (false, nil) }
            // The body has returned: join the thread (its exit takes microseconds), once, unless this is it.
            guard let thread, !joined, pthread_equal(thread, pthread_self()) == 0 else { return (true, nil) }
            joined = true
            return (true, thread)
        }
        if let join { pthread_join(join, nil) }
        return done
    }

    /// `beginStop`, then waits for the body to return.
    public func stop() {
        beginStop()
        _ = waitStopped(until: .max)
    }
}
