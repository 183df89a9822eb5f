import Foundation
import Lifecycle
import Synchronization
import Testing

/// The threads of this process, by name (Linux: /proc/self/task/*/comm).
func threadNames() -> [String] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
        .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
}

/// Waits (bounded) until `condition` holds; the test then checks it.
func eventually(_ seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let end = Monotonic.after(.milliseconds(Int(seconds * 1000)))
    let tick = Signal()
    while !condition() {
        if Monotonic.now() >= end { return false }
        _ = tick.wait(timeout: .milliseconds(5))
    }
    return true
}

/// A service that records what the group asked of it, with a worker behind it.
final class Recorded: Service {
    let name: String
    let log: Mutex<[String]>.Box
    let worker: Worker
    let fails: Bool

    /// Its thread is named `prefix + name` (each test its own prefix, so counts of threads do not mix).
    init(_ name: String, prefix: String, log: Mutex<[String]>.Box, fails: Bool = false, ignoresStop: Bool = false, release: Signal? = nil) {
        self.name = name
        self.log = log
        self.fails = fails
        worker = Worker(name: prefix + name) { worker in
            if ignoresStop {
                // Will not stop until the test releases it, whatever the group asks.
                release?.wait()
                return
            }
            while worker.pause(.seconds(60)) {}
        }
    }

    func start() throws {
        log.value.withLock { $0.append("start " + name) }
        if fails { throw Refused() }
        worker.start()
    }
    func beginStop() {
        log.value.withLock { $0.append("stop " + name) }
        worker.beginStop()
    }
    func waitStopped(until deadline: UInt64) -> Bool { worker.waitStopped(until: deadline) }
}

struct Refused: Error {}

extension Mutex where Value: Sendable {
    /// A Mutex on the heap, to share between closures.
    final class Box: Sendable {
        let value: Mutex<Value>
        init(_ v: Value) { value = Mutex(v) }
    }
}

@Suite("ServiceGroup and Worker", .serialized)
struct ServiceGroupTests {
    @Test("starts in order, stops in reverse, joined: no thread of theirs is left after stop")
    func order() {
        let log = Mutex<[String]>.Box([])
        let events = Mutex<[ServiceGroup.Event]>.Box([])
        let group = ServiceGroup([Recorded("a", prefix: "to-", log: log), Recorded("b", prefix: "to-", log: log), Recorded("c", prefix: "to-", log: log)]) {
            event in
            events.value.withLock { $0.append(event) }
        }
        #expect(throws: Never.self) { try group.start() }
        #expect(eventually { threadNames().filter { $0.hasPrefix("to-") }.sorted() == ["to-a", "to-b", "to-c"] })
        let stuck = group.stop(deadline: .seconds(10))
        #expect(stuck.isEmpty)
        #expect(log.value.withLock { $0 } == ["start a", "start b", "start c", "stop c", "stop b", "stop a"])
        // Joined: when stop returns, the bodies have returned; their threads end right after (bounded wait).
        #expect(eventually { !threadNames().contains { $0.hasPrefix("to-") } })
        let names = events.value.withLock { $0 }.compactMap { event -> String? in
            if case .stopped(let name, _) = event { return name }
            return nil
        }
        #expect(names == ["c", "b", "a"])
        #expect(group.stop(deadline: .seconds(1)).isEmpty)  // a second stop does nothing
    }

    @Test("a service that will not stop is reported after the deadline; the ones before it still stop")
    func stuck() {
        let log = Mutex<[String]>.Box([])
        let release = Signal()
        let events = Mutex<[ServiceGroup.Event]>.Box([])
        let group = ServiceGroup([
            Recorded("first", prefix: "ts-", log: log), Recorded("hung", prefix: "ts-", log: log, ignoresStop: true, release: release),
            Recorded("last", prefix: "ts-", log: log),
        ]) {
            event in events.value.withLock { $0.append(event) }
        }
        #expect(throws: Never.self) { try group.start() }
        let begun = Monotonic.now()
        let stuck = group.stop(deadline: .milliseconds(300))
        let took = Monotonic.seconds(since: begun)
        #expect(stuck == ["hung"])
        #expect(took >= 0.29)
        #expect(took < 5)
        let seen = events.value.withLock { $0 }
        #expect(seen.contains(.stuck("hung")))
        #expect(seen.contains { if case .stopped("first", _) = $0 { true } else { false } })
        #expect(seen.contains { if case .stopped("last", _) = $0 { true } else { false } })
        #expect(threadNames().contains("ts-hung"))
        release.signal()
        #expect(eventually { !threadNames().contains { $0.hasPrefix("ts-") } })
    }

    @Test("a service that fails to start: the started ones are stopped in reverse, the rest never start")
    func failedStart() {
        let log = Mutex<[String]>.Box([])
        let group = ServiceGroup([
            Recorded("a", prefix: "tf-", log: log), Recorded("b", prefix: "tf-", log: log), Recorded("bad", prefix: "tf-", log: log, fails: true),
            Recorded("never", prefix: "tf-", log: log),
        ])
        #expect(throws: Refused.self) { try group.start() }
        #expect(log.value.withLock { $0 } == ["start a", "start b", "start bad", "stop b", "stop a"])
        #expect(eventually { !threadNames().contains { $0.hasPrefix("tf-") } })
    }

    @Test("a worker's pause: wakes early on wake(), answers false once stopped, and a stop before start runs nothing")
    func pause() {
        let rounds = Mutex<Int>.Box(0)
        let worker = Worker(name: "t-pause") { worker in
            repeat { rounds.value.withLock { $0 += 1 } } while worker.pause(.seconds(60))
        }
        worker.start()
        #expect(eventually { rounds.value.withLock { $0 } == 1 })
        worker.wake()
        #expect(eventually { rounds.value.withLock { $0 } == 2 })
        let begun = Monotonic.now()
        worker.stop()
        #expect(Monotonic.seconds(since: begun) < 5)  // the 60 s pause ended at once
        #expect(worker.waitStopped(until: 0))
        let ran = Mutex<Bool>.Box(false)
        let never = Worker(name: "t-never") { _ in ran.value.withLock { $0 = true } }
        never.stop()
        never.start()
        #expect(never.waitStopped(until: 0))
        #expect(!ran.value.withLock { $0 })
    }

    @Test("a blocking stop (a store's close) is bounded by the deadline too")
    func stoppedBy() {
        let release = Signal()
        let closed = Mutex<Bool>.Box(false)
        let group = ServiceGroup([
            StoppedBy("store") { closed.value.withLock { $0 = true } },
            StoppedBy("slow") { release.wait() },
        ])
        #expect(throws: Never.self) { try group.start() }
        #expect(group.stop(deadline: .milliseconds(200)) == ["slow"])
        #expect(closed.value.withLock { $0 })
        release.signal()
        #expect(eventually { !threadNames().contains("stop-slow") })
    }

    @Test("Signal: counts, times out on the monotonic clock, and bounds slots")
    func signal() {
        let s = Signal(2)
        #expect(s.wait(timeout: .zero))
        #expect(s.wait(timeout: .zero))
        let begun = Monotonic.now()
        #expect(!s.wait(timeout: .milliseconds(50)))
        #expect(Monotonic.seconds(since: begun) >= 0.049)
        s.signal()
        #expect(s.wait(timeout: .seconds(1)))
    }
}
