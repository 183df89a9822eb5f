import Billing
import Foundation
import Synchronization

/// What became of a job handed to a `Worker`.
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
final class Worker<Job: Sendable>: Sendable {
    private struct State {
        var jobs: [Job] = []
        var sleepers = 0
        var stopped = false
        var running = 0
    }
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    let maxBatch: Int
    let maxQueued: Int
    let threads: Int

    /// Starts `threads` threads; `process(thread, batch)` gets up to `maxBatch` jobs in arrival order.
    /// At most `maxQueued` jobs wait; more are refused.
    init(
        name: String, threads: Int = 1, maxBatch: Int, maxQueued: Int = .max, process: @escaping @Sendable (Int, [Job]) -> Void,
        onStop: @escaping @Sendable (Int) -> Void = { _ in }
    ) {
        self.maxBatch = maxBatch
        self.maxQueued = max(1, maxQueued)
        self.threads = max(1, threads)
        state.withLock { $0.running = self.threads }
        for index in 0..<self.threads {
            let thread = Thread { [self] in
                self.run(index, process)
                onStop(index)
                self.finished.signal()
            }
            thread.name = self.threads == 1 ? name : "\(name)-\(index)"
            thread.stackSize = 1 << 20
            thread.start()
        }
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
        let (accepted, wakeUp) = state.withLock { s -> (Submission, Bool) in
            if s.stopped { return (.stopped, false) }
            if s.jobs.count >= maxQueued { return (.full, false) }
            s.jobs.append(job)
            guard s.sleepers > 0 else { return (.queued, false) }
            s.sleepers -= 1
            return (.queued, true)
        }
        if wakeUp { wake.signal() }
        return accepted
    }

    /// Jobs waiting (not yet taken by a thread).
    var queued: Int { state.withLock { $0.jobs.count } }

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
        for _ in 0..<threads { finished.wait() }
    }

    private func run(_ index: Int, _ process: (Int, [Job]) -> Void) {
        while true {
            let (batch, done) = state.withLock { s -> ([Job], Bool) in
                if s.jobs.isEmpty {
                    if s.stopped { return ([], true) }
                    s.sleepers += 1
                    return ([], false)
                }
                let n = min(s.jobs.count, maxBatch)
                let b = Array(s.jobs.prefix(n))
                s.jobs.removeFirst(n)
                return (b, false)
            }
            if done { break }
            if batch.isEmpty {
                wake.wait()
                continue
            }
            process(index, batch)
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
