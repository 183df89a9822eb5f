import Foundation
@testable import Storage
import Synchronization
import Testing

@Suite("JobQueue: gathered jobs")
struct JobQueueTests {
    /// What ran: how many gathered batches at once at most, the batches' kinds, and every job once.
    final class Record: Sendable {
        let state = Mutex<(running: Int, most: Int, batches: [[Int]], done: Set<Int>)>((0, 0, [], []))
    }

    @Test("gathered jobs are taken by at most gatheredThreads threads, in batches of their kind only; stop runs everything")
    func gatheredLimit() {
        let record = Record()
        let worker = JobQueue<Int>(
            name: "test-gathered", threads: 6, maxBatch: 64, gathered: { $0 % 3 != 0 }, gatheredThreads: 2,
            process: { _, batch in
                let gathered = batch[0] % 3 != 0
                if gathered {
                    record.state.withLock { s in
                        s.running += 1
                        s.most = max(s.most, s.running)
                    }
                }
                usleep(2000)
                record.state.withLock { s in
                    if gathered { s.running -= 1 }
                    s.batches.append(batch)
                    for job in batch { #expect(s.done.insert(job).inserted) }
                }
            })
        for job in 0..<3000 {
            #expect(worker.submit(job).refusal == nil)
            if job % 100 == 0 { usleep(500) }
        }
        worker.stop()
        let (most, batches, done) = record.state.withLock { ($0.most, $0.batches, $0.done) }
        #expect(done == Set(0..<3000))
        #expect(most <= 2)
        #expect(batches.allSatisfy { batch in batch.allSatisfy { ($0 % 3 != 0) == (batch[0] % 3 != 0) } })
        // Gathered while the two threads were busy: far fewer, larger batches than one per job.
        let gathered = batches.filter { $0[0] % 3 != 0 }
        #expect(gathered.count < 2000 / 4)
    }

    @Test("a pool of one thread under a stream of gathered jobs still runs the others")
    func oneThreadNoStarvation() {
        let order = Mutex<[Int]>([])
        let worker = JobQueue<Int>(
            name: "test-one", threads: 1, maxBatch: 4, gathered: { $0 >= 0 }, gatheredThreads: 1,
            process: { _, batch in
                usleep(1000)
                order.withLock { $0 += batch }
            })
        for job in 0..<40 { _ = worker.submit(job) }
        _ = worker.submit(-1)
        for job in 40..<80 { _ = worker.submit(job) }
        worker.stop()
        let ran = order.withLock { $0 }
        #expect(ran.count == 81)
        // The other job ran right after a gathered batch, not after all 80.
        #expect((ran.firstIndex(of: -1) ?? 81) <= 12)
    }

    @Test("array literals for unnest: quotes and backslashes escaped, NULL bare")
    func arrayLiteral() {
        #expect(FeedCursors.arrayLiteral([.int(1), .null, .int(-3)]) == "{1,NULL,-3}")
        #expect(FeedCursors.arrayLiteral([.text("a\"b"), .text("c\\d"), .text(""), .text("NULL"), .null]) == #"{"a\"b","c\\d","","NULL",NULL}"#)
    }
}
