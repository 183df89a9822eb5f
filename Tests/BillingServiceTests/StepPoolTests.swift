@testable import BillingService
import Foundation
import Synchronization
import Testing
import TestSupport

/// The pool WatchEvents catch-ups run on: bounded, one job's steps in order, waiting jobs holding no lane.
@Suite("step pool")
struct StepPoolTests {
    @Test("never more steps at once than its width; every job runs each of its steps once, in order")
    func bounded() {
        let pool = StepPool(width: 3, label: "test.pool")
        let running = Atomic<Int>(0)
        let peak = Atomic<Int>(0)
        let steps = Mutex<[Int: [Int]]>([:])
        let jobs = 40
        for job in 0..<jobs {
            let next = Atomic<Int>(0)
            pool.submit {
                let now = running.add(1, ordering: .sequentiallyConsistent).newValue
                _ = peak.max(now, ordering: .sequentiallyConsistent)
                let step = next.add(1, ordering: .relaxed).oldValue
                steps.withLock { $0[job, default: []].append(step) }
                usleep(200)  // work that takes a while, so that steps of different jobs overlap when they may
                running.subtract(1, ordering: .sequentiallyConsistent)
                return step < 4 ? .again : .done
            }
        }
        #expect(eventually(10) { steps.withLock { $0.values.reduce(0) { $0 + $1.count } } == jobs * 5 })
        #expect(peak.load(ordering: .sequentiallyConsistent) <= 3)
        #expect(steps.withLock { s in s.count == jobs && s.values.allSatisfy { $0 == [0, 1, 2, 3, 4] } })
        #expect(eventually { pool.queued == 0 })
    }

    @Test("a job that waits (`.after`) gives its lane to the others: one lane is enough for a job that waits on another")
    func waitingHoldsNoLane() {
        let pool = StepPool(width: 1, label: "test.pool.one")
        let released = Atomic<Bool>(false)
        let waits = Atomic<Int>(0)
        let finished = Atomic<Int>(0)
        // Waits until the second job ran: with its lane held while it waits, that never happens.
        pool.submit {
            guard released.load(ordering: .acquiring) else {
                waits.add(1, ordering: .relaxed)
                return .after(milliseconds: 5)
            }
            finished.add(1, ordering: .relaxed)
            return .done
        }
        pool.submit {
            released.store(true, ordering: .releasing)
            finished.add(1, ordering: .relaxed)
            return .done
        }
        #expect(eventually(10) { finished.load(ordering: .relaxed) == 2 })
        // The first job ran first (one lane, first come first served) and had to wait for the second.
        #expect(waits.load(ordering: .relaxed) >= 1)
    }
}
