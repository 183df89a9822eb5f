import Glibc
package import IO
import Lifecycle
package import HTTP2
package import RPC
import Synchronization

/// A session host turned by hand: a manual clock, timers that fire only when the transport advances the
/// clock, and a task queue other threads post to. Confined to the thread that made it (a test's thread).
package final class ManualHost: SessionHost, @unchecked Sendable {
    // Sendable: `clock`, `timers` and `nextTimer` are touched on the creating thread only (checked by
    // `assertInHost`); other threads only append to `inbox`, a Mutex.
    private let thread = pthread_self()
    private let inbox = Mutex<[@Sendable () -> Void]>([])
    private let posted = Signal()
    // Starts at the real monotonic time: deadlines the session sets on it and handlers read against CallClock agree.
    package private(set) var clock: UInt64 = Monotonic.now()
    private var timers: [(at: UInt64, id: Int, action: () -> Void)] = []
    private var nextTimer = 1

    package var inHost: Bool { pthread_equal(thread, pthread_self()) != 0 }

    package func assertInHost(_ what: StaticString, file: StaticString, line: UInt) {
        precondition(inHost, "\(what) used off its host thread", file: file, line: line)
    }

    package func execute(_ task: @escaping @Sendable () -> Void) {
        inbox.withLock { $0.append(task) }
        posted.signal()
    }

    package func schedule(afterNanoseconds nanoseconds: Int64, _ action: @escaping () -> Void) -> Int {
        precondition(inHost)
        nextTimer += 1
        timers.append((clock &+ UInt64(max(0, nanoseconds)), nextTimer, action))
        return nextTimer
    }

    package func cancelTimer(_ id: Int) { timers.removeAll { $0.id == id } }

    package func now() -> UInt64 { clock }

    package var hasTimers: Bool { !timers.isEmpty }

    /// Runs the queued tasks (and the tasks they queue); false when there were none.
    @discardableResult
    package func runReady() -> Bool {
        var ran = false
        while true {
            let tasks = inbox.withLock { tasks in
                defer { tasks.removeAll() }
                return tasks
            }
            if tasks.isEmpty { return ran }
            ran = true
            for task in tasks { task() }
        }
    }

    /// Waits up to `milliseconds` of real time for another thread to post a task.
    package func waitForTask(milliseconds: Int) -> Bool {
        if inbox.withLock({ !$0.isEmpty }) { return true }
        // Woken by the post itself (a signal left from a task already run only makes the caller look again).
        return posted.wait(timeout: .milliseconds(milliseconds)) || inbox.withLock { !$0.isEmpty }
    }

    /// Moves the clock to the next timer and fires every timer due then; false when none is set.
    @discardableResult
    package func advanceToNextTimer() -> Bool {
        guard let next = timers.map(\.at).min() else { return false }
        advance(to: next)
        return true
    }

    /// Moves the clock to `time`, firing the timers due by then in order.
    package func advance(to time: UInt64) {
        clock = max(clock, time)
        while let index = timers.indices.filter({ timers[$0].at <= clock }).min(by: { timers[$0].at < timers[$1].at }) {
            let timer = timers.remove(at: index)
            timer.action()
        }
    }
}

/// The server side of an in-memory connection: an `H2ServerSession` on a `ManualHost`, whose bytes a
/// `Client` reads and writes directly (no socket, no thread). Reading runs the host's queued tasks, and
/// when nothing else can happen moves the manual clock to the next timer, so deadlines are deterministic.
package final class InMemoryTransport: ClientTransport, SessionOutput {
    package let host = ManualHost()
    package let shared: ServerShared
    package private(set) var session: H2ServerSession!
    private var toClient: [UInt8] = []
    private var ended = false
    /// Whether reads may move the clock (off for tests that hold the clock still).
    package var advancesClock = true
    /// Bytes the client may take per read (a small value stands in for a client that reads slowly).
    package var readLimit = Int.max

    package init(configuration: ServerConfiguration = ServerConfiguration(), router: Router) {
        shared = ServerShared(configuration: configuration, router: router)
        session = H2ServerSession(host: host, shared: shared, peer: "memory", peerSubject: nil, output: self)
    }

    /// A client on this transport.
    package func client() -> Client { Client(transport: self, authority: "memory") }

    package func outputPending() {}

    /// Takes what the session queued into the client's inbound buffer; ends the stream once the session is over.
    package func collect() {
        while !ended {
            switch session.nextOutput() {
            case .bytes(let bytes): toClient.append(contentsOf: bytes)
            case .idle:
                if session.isFinished {
                    session.close()
                    ended = true
                }
                return
            case .failed:
                session.close()
                ended = true
            }
        }
    }

    package var isTLS: Bool { false }

    package func write(_ bytes: UnsafeRawBufferPointer) throws(SocketError) -> Int {
        guard !ended else { throw .protocolError("connection closed") }
        session.receiveOrTerminate(bytes)
        host.runReady()
        collect()
        return bytes.count
    }

    package func read(_ buffer: UnsafeMutableRawBufferPointer, tolerateTimeout: Bool) throws(SocketError) -> Int? {
        while true {
            host.runReady()
            collect()
            if !toClient.isEmpty {
                let n = min(buffer.count, toClient.count, readLimit)
                toClient.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: n) }
                toClient.removeFirst(n)
                return n
            }
            if ended { return 0 }
            // Another thread may still answer; only then does the clock move.
            if host.waitForTask(milliseconds: host.hasTimers && advancesClock ? 20 : 2_000) { continue }
            if advancesClock && host.advanceToNextTimer() { continue }
            if tolerateTimeout { return nil }
            throw .system(call: "read", errno: ETIMEDOUT)
        }
    }

    package func setReceiveTimeout(milliseconds: Int) {}

    package var peerSpokeWhileIdle: Bool {
        collect()
        return ended || !toClient.isEmpty
    }

    package func close() {
        if !ended { session.close() }
        ended = true
    }
}
