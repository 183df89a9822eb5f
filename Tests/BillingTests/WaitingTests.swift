import Billing
import Dispatch
import Synchronization
import Testing

/// `Blocking.wait`, the one way a worker thread waits for a callback-style answer.
@Suite("Blocking.wait")
struct WaitingTests {
    @Test("returns what the answer gave, whether it came before `start` returned or from another thread")
    func answers() {
        let now: Int = Blocking.wait { done in done(7) }
        #expect(now == 7)
        let later: String = Blocking.wait { done in
            DispatchQueue(label: "test.answer").asyncAfter(deadline: .now() + .milliseconds(10)) { done("late") }
        }
        #expect(later == "late")
        let store = InMemoryOrderStore()
        let cursor: Result<UInt64, BillingError> = Blocking.wait { done in
            store.read({ ledger throws(BillingError) in try ledger.lastCursor() }, completion: done)
        }
        #expect(cursor == .success(0))
    }

    @Test("the first answer wins; later ones are dropped")
    func firstWins() {
        let value: Int = Blocking.wait { done in
            done(1)
            done(2)
        }
        #expect(value == 1)
    }

    @Test("with a timeout: nil when nobody answers in time, the value when someone does")
    func timeout() {
        let kept = Mutex<(@Sendable (Int) -> Void)?>(nil)
        let none: Int? = Blocking.wait(timeout: .milliseconds(20)) { done in kept.withLock { $0 = done } }
        #expect(none == nil)
        // A late answer after the timeout goes nowhere and harms nothing.
        kept.withLock { $0 }?(3)
        let some: Int? = Blocking.wait(timeout: .seconds(10)) { done in done(4) }
        #expect(some == 4)
        let negative: Int? = Blocking.wait(timeout: .seconds(-1)) { _ in }
        #expect(negative == nil)
    }
}
