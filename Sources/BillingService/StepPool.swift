import Dispatch
import Synchronization

/// Runs resumable jobs, at most `width` at once, first come first served, on `width` serial Dispatch queues
/// (lanes): no thread is made or held per job. A job is a step function run again until it answers `.done`; `.again` puts it at the
/// back of the queue (the others get a turn between its steps); `.after(milliseconds:)` takes it out of the queue
/// for that long without holding a thread (a timer queues it again). One job's steps never overlap, and each step sees
/// what the previous one wrote (they are handed on through the pool's lock or the timer queue).
///
/// Serial lanes, not one concurrent queue: Dispatch gives a concurrent queue no more threads than cores while
/// its threads block (a catch-up step waits on the store), so steps would queue behind unrelated work; a serial
/// queue always gets a thread of its own while it has work.
final class StepPool: Sendable {
    /// What a job does after a step.
    enum Step: Sendable {
        case done
        case again
        case after(milliseconds: Int)
    }
    typealias Job = @Sendable () -> Step

    private struct State {
        var queue: [Job] = []
        var head = 0
        /// Lanes not running a worker.
        var idle: [Int]

        mutating func pop() -> Job? {
            guard head < queue.count else {
                queue.removeAll(keepingCapacity: true)
                head = 0
                return nil
            }
            let job = queue[head]
            head += 1
            if head >= 1024 {
                queue.removeFirst(head)
                head = 0
            }
            return job
        }
    }
    private let state: Mutex<State>
    private let lanes: [DispatchQueue]
    private let timers: DispatchQueue

    /// `width`: steps running at once, at most (at least 1).
    init(width: Int, label: String) {
        let width = max(1, width)
        lanes = (0..<width).map { DispatchQueue(label: "\(label).\($0)") }
        timers = DispatchQueue(label: label + ".timers")
        state = Mutex(State(idle: Array((0..<width).reversed())))
    }

    /// Steps running at once, at most.
    var width: Int { lanes.count }

    /// Queues a job; a worker starts on an idle lane, if there is one.
    func submit(_ job: @escaping Job) {
        let lane = state.withLock { s -> Int? in
            s.queue.append(job)
            return s.idle.popLast()
        }
        if let lane { lanes[lane].async { [self] in work(lane) } }
    }

    /// Jobs waiting for a worker (not those running or waiting on a timer).
    var queued: Int { state.withLock { $0.queue.count - $0.head } }

    /// One worker, on its lane: steps jobs until the queue is empty.
    private func work(_ lane: Int) {
        while let job = state.withLock({ s -> Job? in
            guard let job = s.pop() else {
                s.idle.append(lane)
                return nil
            }
            return job
        }) {
            switch job() {
            case .done: break
            case .again: state.withLock { $0.queue.append(job) }
            case .after(let ms): timers.asyncAfter(deadline: .now() + .milliseconds(ms)) { [self] in submit(job) }
            }
        }
    }
}
