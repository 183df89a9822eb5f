import Dispatch
import RPC
import Synchronization
import Testing

/// The one in-flight count every protocol shares (`--max-in-flight`).
@Suite("call admission")
struct CallAdmissionTests {
    @Test("the limit admits exactly limit calls, a refusal takes nothing, a leave frees one")
    func limit() {
        let a = CallAdmission(limit: 3)
        #expect((0..<5).map { _ in a.enter() } == [true, true, true, false, false])
        #expect(a.count == 3)
        a.leave()
        #expect(a.enter() && !a.enter() && a.count == 3)
        a.enterUnchecked()  // a bidirectional call, admitted at its headers
        #expect(a.count == 4 && !a.enter())
        for _ in 0..<4 { a.leave() }
        #expect(a.count == 0)
        #expect(CallAdmission(limit: 0).limit == 1)
    }

    @Test("admitted at once from many threads, never more than the limit hold a slot")
    func concurrent() {
        let a = CallAdmission(limit: 64)
        let admitted = Atomic<Int>(0)
        let most = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 20_000) { _ in
            guard a.enter() else { return }
            admitted.add(1, ordering: .relaxed)
            let held = a.count
            var seen = most.load(ordering: .relaxed)
            while held > seen {
                let (exchanged, original) = most.compareExchange(expected: seen, desired: held, ordering: .relaxed)
                if exchanged { break }
                seen = original
            }
            a.leave()
        }
        #expect(a.count == 0)
        #expect(most.load(ordering: .relaxed) <= 64)
        #expect(admitted.load(ordering: .relaxed) > 0)
    }
}
