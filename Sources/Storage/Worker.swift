import Foundation
import Glibc
import Synchronization

/// A dedicated thread that owns one resource (a database connection) and runs jobs
/// on it in batches. Jobs never run on an event loop or the cooperative pool.
final class Worker<Job: Sendable>: Sendable {
    private struct State {
        var jobs: [Job] = []
        var sleeping = false
        var stopped = false
    }
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    let maxBatch: Int

    /// Starts the thread; `process` gets each batch of up to `maxBatch` jobs in arrival order.
    init(name: String, maxBatch: Int, process: @escaping @Sendable ([Job]) -> Void,
         onStop: @escaping @Sendable () -> Void = {}) {
        self.maxBatch = maxBatch
        let thread = Thread { [self] in
            self.run(process)
            onStop()
            self.finished.signal()
        }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Queues a job. Returns false after `stop`.
    @discardableResult
    func submit(_ job: Job) -> Bool {
        let (accepted, wakeUp) = state.withLock { s -> (Bool, Bool) in
            if s.stopped { return (false, false) }
            s.jobs.append(job)
            let w = s.sleeping
            s.sleeping = false
            return (true, w)
        }
        if wakeUp { wake.signal() }
        return accepted
    }

    /// Jobs waiting (not yet taken by the thread).
    var queued: Int { state.withLock { $0.jobs.count } }

    /// Runs what is queued, then ends the thread; blocks until it has.
    func stop() {
        let (first, wakeUp) = state.withLock { s -> (Bool, Bool) in
            if s.stopped { return (false, false) }
            s.stopped = true
            let w = s.sleeping
            s.sleeping = false
            return (true, w)
        }
        guard first else { return }
        if wakeUp { wake.signal() }
        finished.wait()
    }

    private func run(_ process: ([Job]) -> Void) {
        while true {
            let (batch, done) = state.withLock { s -> ([Job], Bool) in
                if s.jobs.isEmpty {
                    if s.stopped { return ([], true) }
                    s.sleeping = true
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
            process(batch)
        }
    }
}
