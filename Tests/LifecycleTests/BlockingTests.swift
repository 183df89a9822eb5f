import Lifecycle
import Synchronization
import Testing

/// `Blocking.wait`, the one way a worker thread waits for a callback-style answer.
@Suite("Blocking.wait")
struct BlockingTests {
    @Test("returns what the answer gave, whether it came before `start` returned or from another thread")
    func answers() {
        let now: Int = Blocking.wait { done in done(7) }
        #expect(now == 7)
        let answerer = Mutex<Worker?>(nil)
        let later: String = Blocking.wait { done in
            let worker = Worker(name: "test-answer") { worker in
                worker.pause(.milliseconds(10))
                done("late")
            }
            answerer.withLock { $0 = worker }
            worker.start()
        }
        #expect(later == "late")
        answerer.withLock { $0 }?.stop()
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
