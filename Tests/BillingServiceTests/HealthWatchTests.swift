@testable import BillingService
import Foundation
import RPC
import Synchronization
import TestSupport
import Testing

@Suite("health Watch")
struct HealthWatchTests {
    @Test("a watcher added while the poller winds down is still polled")
    func watcherAddedAsPollerStops() {
        let reachable = Atomic<Bool>(true)
        let health = Mutex<HealthState?>(nil)
        let second = Mutex<Int>(0)  // messages the second watcher received
        let added = Atomic<Bool>(false)
        let secondWriter = StreamWriter(cancellation: Cancellation()) { event in
            if case .message = event { second.withLock { $0 += 1 } }
        }
        // The poller found no watcher and is stopping: exactly then, a second watcher arrives.
        let state = HealthState(
            storeReachable: { reachable.load(ordering: .relaxed) }, pollSeconds: 0.01,
            pollerStopped: {
                guard !added.exchange(true, ordering: .relaxed) else { return }
                health.withLock { $0 }?.watch("", secondWriter)
            })
        health.withLock { $0 = state }
        let first = StreamWriter(cancellation: Cancellation()) { _ in }
        state.watch("", first)
        first.finish()
        #expect(eventually { added.load(ordering: .relaxed) && second.withLock { $0 } == 1 })  // SERVING at once
        reachable.store(false, ordering: .relaxed)
        #expect(eventually { second.withLock { $0 } == 2 })  // NOT_SERVING, from a poller
        secondWriter.finish()
    }
}
