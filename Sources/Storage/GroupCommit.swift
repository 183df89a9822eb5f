import Billing
import Lifecycle
import Synchronization

/// What became of a job handed to a `JobQueue`.
enum Submission: Sendable {
    case queued
    /// `maxQueued` jobs already wait: the caller answers OVERLOADED.
    case full
    /// After `stop`.
    case stopped

    /// The error to answer when the job was not queued.
    var refusal: BillingError? {
        switch self {
        case .queued: nil
        case .full: .infrastructure(.overloaded)
        case .stopped: .storage(.closed)
        }
    }
}

/// Dedicated threads that each own one resource (a database connection) and take jobs from one
/// queue in batches. Jobs never run on an event loop or the cooperative pool.
///
/// The queue is bounded: a caller that gave up (deadline) leaves its job queued, so without a bound
/// a slow database would let waiting work grow without end.
///
/// Jobs of one kind (`gathered`: PostgreSQL's CreateOrders) can be taken by at most `gatheredThreads` threads
/// at once, in batches of that kind only: while those threads are busy, such jobs wait together for the next
/// batch instead of spreading over every thread in small ones; the other threads take the other jobs.
///
/// The threads are Lifecycle `Worker`s; `stop` runs what is queued, then joins them.
final class JobQueue<Job: Sendable>: Sendable {
    private struct State {
        var jobs: [Job] = []
        var gatheredJobs: [Job] = []
        var gatheredRunning = 0
        var sleepers = 0
        var stopped = false
        var running = 0
    }
    private let state = Mutex(State())
    private let wake = Signal()
    private let workers = Mutex<[Worker]>([])
    let maxBatch: Int
    let maxQueued: Int
    let threads: Int
    private let gathered: @Sendable (Job) -> Bool
    private let gatheredThreads: Int

    /// Starts `threads` threads; `process(thread, batch)` gets up to `maxBatch` jobs in arrival order.
    /// At most `maxQueued` jobs wait; more are refused.
    init(
        name: String, threads: Int = 1, maxBatch: Int, maxQueued: Int = .max,
        gathered: @escaping @Sendable (Job) -> Bool = { _ in false }, gatheredThreads: Int = .max,
        process: @escaping @Sendable (Int, [Job]) -> Void, onStop: @escaping @Sendable (Int) -> Void = { _ in }
    ) {
        self.maxBatch = maxBatch
        self.maxQueued = max(1, maxQueued)
        self.threads = max(1, threads)
        self.gathered = gathered
        self.gatheredThreads = max(1, gatheredThreads)
        state.withLock { $0.running = self.threads }
        let started = (0..<self.threads).map { index in
            Worker(name: self.threads == 1 ? name : "\(name)-\(index)") { [self] _ in
                self.run(index, process)
                onStop(index)
            }
        }
        workers.withLock { $0 = started }
        for worker in started { worker.start() }
    }

    /// Convenience for one thread.
    convenience init(
        name: String, maxBatch: Int, maxQueued: Int = .max, process: @escaping @Sendable ([Job]) -> Void,
        onStop: @escaping @Sendable () -> Void = {}
    ) {
        self.init(
            name: name, threads: 1, maxBatch: maxBatch, maxQueued: maxQueued, process: { _, batch in process(batch) },
            onStop: { _ in onStop() })
    }

    /// Queues a job, unless the queue is full or the worker stopped.
    func submit(_ job: Job) -> Submission {
        let kind = gathered(job)
        let (accepted, wakeUp) = state.withLock { s -> (Submission, Bool) in
            if s.stopped { return (.stopped, false) }
            if s.jobs.count + s.gatheredJobs.count >= maxQueued { return (.full, false) }
            if kind {
                s.gatheredJobs.append(job)
                // No thread may take it before one of those taking its kind is done (which wakes a sleeper then).
                if s.gatheredRunning >= gatheredThreads { return (.queued, false) }
            } else {
                s.jobs.append(job)
            }
            guard s.sleepers > 0 else { return (.queued, false) }
            s.sleepers -= 1
            return (.queued, true)
        }
        if wakeUp { wake.signal() }
        return accepted
    }

    /// Jobs waiting (not yet taken by a thread).
    var queued: Int { state.withLock { $0.jobs.count + $0.gatheredJobs.count } }

    /// Runs what is queued, then ends the threads; blocks until they have.
    func stop() {
        let (first, sleepers) = state.withLock { s -> (Bool, Int) in
            if s.stopped { return (false, 0) }
            s.stopped = true
            let n = s.sleepers
            s.sleepers = 0
            return (true, n)
        }
        guard first else { return }
        for _ in 0..<sleepers { wake.signal() }
        for worker in workers.withLock({ $0 }) { _ = worker.waitStopped(until: .max) }
    }

    private func run(_ index: Int, _ process: (Int, [Job]) -> Void) {
        var lastGathered = false
        while true {
            let (batch, done, ofGathered) = state.withLock { s -> ([Job], Bool, Bool) in
                // After a batch of gathered jobs a thread takes the other jobs first, if any wait: a pool of one
                // thread under a stream of CreateOrders still runs everything else.
                if !s.gatheredJobs.isEmpty && s.gatheredRunning < gatheredThreads && !(lastGathered && !s.jobs.isEmpty) {
                    let n = min(s.gatheredJobs.count, maxBatch)
                    let b = Array(s.gatheredJobs.prefix(n))
                    s.gatheredJobs.removeFirst(n)
                    s.gatheredRunning += 1
                    return (b, false, true)
                }
                if s.jobs.isEmpty {
                    // Gathered jobs still queued are taken by a thread that finishes a batch of them.
                    if s.stopped && s.gatheredJobs.isEmpty { return ([], true, false) }
                    s.sleepers += 1
                    return ([], false, false)
                }
                let n = min(s.jobs.count, maxBatch)
                let b = Array(s.jobs.prefix(n))
                s.jobs.removeFirst(n)
                return (b, false, false)
            }
            if done { break }
            if batch.isEmpty {
                lastGathered = false
                wake.wait()
                continue
            }
            lastGathered = ofGathered
            process(index, batch)
            if ofGathered {
                // Gathered jobs that queued meanwhile: this thread takes them next (unless other jobs wait, then a
                // sleeper is woken for them). After a stop, the sleepers left with nothing to do are woken to end.
                let sleepers = state.withLock { s -> Int in
                    s.gatheredRunning -= 1
                    if s.stopped && s.gatheredJobs.isEmpty && s.gatheredRunning == 0 {
                        let n = s.sleepers
                        s.sleepers = 0
                        return n
                    }
                    guard !s.gatheredJobs.isEmpty && !s.jobs.isEmpty && s.sleepers > 0 else { return 0 }
                    s.sleepers -= 1
                    return 1
                }
                for _ in 0..<sleepers { wake.signal() }
            }
        }
        // Another thread may still be asleep while jobs are gone: nothing to do, stop() signals it.
    }
}

/// Counts of group commits: how many, how many writes, the largest group.
public final class GroupStats: Sendable {
    private let state = Mutex<(commits: Int, writes: Int, largest: Int)>((0, 0, 0))
    func record(_ size: Int) {
        state.withLock {
            $0.commits += 1; $0.writes += size; $0.largest = max($0.largest, size)
        }
    }
    public var commits: Int { state.withLock { $0.commits } }
    public var writes: Int { state.withLock { $0.writes } }
    public var largest: Int { state.withLock { $0.largest } }
}
