// What Swift concurrency would cost billingd, measured on this machine (docs/ARCHITECTURE.md, "Why loops and
// threads"). Standalone: swiftc -O bench/async_costs.swift -o /tmp/async_costs && /tmp/async_costs
//
// 1. Blocking C calls (SQLite's step, libpq's PQexec, a curl wait) on the global executor: the latency of a
//    trivial task while N tasks each block 100 ms in usleep, and the process's threads then. (On Linux the
//    executor is libdispatch's, which adds threads as tasks block rather than starving: the cost is threads.)
// 2. A hop between threads, 200,000 round trips: a condition variable (Lifecycle's Signal, what a worker and the
//    store's reply use) against a Task resumed through a CheckedContinuation by another thread.
// 3. The allocations of one unstructured Task per call, against none (billingd's gRPC path allocates nothing per
//    call once warm).
import Dispatch
import Foundation
import Synchronization

func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

final class Gate: @unchecked Sendable {
    let c = NSCondition()
    var n = 0
    func signal() { c.lock(); n += 1; c.signal(); c.unlock() }
    func wait() { c.lock(); while n == 0 { c.wait() }; n -= 1; c.unlock() }
}

let cores = ProcessInfo.processInfo.activeProcessorCount

// 1. Starvation.
func trivialTaskLatency(blocking: Int) async -> Double {
    let started = Gate()
    for _ in 0..<blocking {
        Task.detached { started.signal(); usleep(100_000) }
    }
    // Those that got a thread have started (the others wait for one).
    for _ in 0..<min(blocking, cores) { started.wait() }
    usleep(10_000)
    let t0 = now()
    await Task.detached { () -> Int in 1 }.value
    let latency = Double(now() - t0) / 1e6
    threadsSeen = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? 0
    // Let the blocked ones drain before the next measurement.
    for _ in min(blocking, cores)..<blocking { started.wait() }
    usleep(200_000)
    return latency
}
nonisolated(unsafe) var threadsSeen = 0

// 2. Hops.
func conditionRoundTrips(_ n: Int) -> Double {
    let ping = Gate(), pong = Gate()
    let t = Thread { for _ in 0..<n { ping.wait(); pong.signal() } }
    t.start()
    let t0 = now()
    for _ in 0..<n { ping.signal(); pong.wait() }
    return Double(now() - t0) / Double(n)
}

final class Mailbox: @unchecked Sendable {
    let gate = Gate()
    var continuation: CheckedContinuation<Void, Never>?
    let lock = NSLock()
}

func continuationRoundTrips(_ n: Int) async -> Double {
    let box = Mailbox()
    let t = Thread {
        for _ in 0..<n {
            box.gate.wait()
            box.lock.lock()
            let c = box.continuation
            box.continuation = nil
            box.lock.unlock()
            c!.resume()
        }
    }
    t.start()
    let t0 = now()
    for _ in 0..<n {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            box.lock.lock()
            box.continuation = c
            box.lock.unlock()
            box.gate.signal()
        }
    }
    return Double(now() - t0) / Double(n)
}

// 3. A Task per call.
func taskPerCall(_ n: Int) async -> Double {
    let t0 = now()
    for i in 0..<n { _ = await Task { i &+ 1 }.value }
    return Double(now() - t0) / Double(n)
}

@main
struct Main {
    static func main() async {
        print("cores: \(cores) (the cooperative pool's width)")
        let idle = await trivialTaskLatency(blocking: 0)
        var line = String(format: "1. a trivial task: %.3f ms on an idle pool", idle)
        for blocked in [cores, 4 * cores, 32 * cores] {
            let starved = await trivialTaskLatency(blocking: blocked)
            line += String(format: "; %.1f ms while %d tasks block 100 ms in a C call (%d threads then)", starved, blocked, threadsSeen)
            usleep(300_000)
        }
        print(line)
        let n = 200_000
        let condition = conditionRoundTrips(n)
        let continuation = await continuationRoundTrips(n)
        print(String(format: "2. a round trip between two threads: %.0f ns by condition variable, %.0f ns by a continuation resumed from a thread", condition, continuation))
        let task = await taskPerCall(n)
        print(String(format: "3. one Task created and awaited per call: %.0f ns a call (heap-allocated task, job and context)", task))
    }
}
