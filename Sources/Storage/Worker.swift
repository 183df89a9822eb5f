import Foundation
import Synchronization

/// Dedicated threads that each own one resource (a database connection) and take jobs from one
/// queue in batches. Jobs never run on an event loop or the cooperative pool.
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
    let threads: Int

    /// Starts `threads` threads; `process(thread, batch)` gets up to `maxBatch` jobs in arrival order.
    init(name: String, threads: Int = 1, maxBatch: Int, process: @escaping @Sendable (Int, [Job]) -> Void,
         onStop: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.maxBatch = maxBatch
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
    convenience init(name: String, maxBatch: Int, process: @escaping @Sendable ([Job]) -> Void,
                     onStop: @escaping @Sendable () -> Void = {}) {
        self.init(name: name, threads: 1, maxBatch: maxBatch, process: { _, batch in process(batch) }, onStop: { _ in onStop() })
    }

    /// Queues a job. Returns false after `stop`.
    @discardableResult
    func submit(_ job: Job) -> Bool {
        let (accepted, wakeUp) = state.withLock { s -> (Bool, Bool) in
            if s.stopped { return (false, false) }
            s.jobs.append(job)
            guard s.sleepers > 0 else { return (true, false) }
            s.sleepers -= 1
            return (true, true)
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
