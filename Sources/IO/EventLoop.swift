import CSystem
import Glibc
import Synchronization
import Lifecycle

/// Something that writes its queued output once per loop iteration.
package protocol DeferredFlush: AnyObject {
    func flush()
}

/// Something registered with a loop's epoll set.
package protocol EventHandler: AnyObject {
    /// Called on the loop thread with the epoll event bits.
    func handle(events: UInt32)
}

/// A value that belongs to one event loop and crosses threads only to be handed back to it (swift-nio's
/// `NIOLoopBound`): reading it off its loop stops the process (in every build). Loop-confined
/// classes travel in this box instead of declaring themselves `@unchecked Sendable` one by one.
package struct LoopBound<Value>: @unchecked Sendable {
    // Sendable: `stored` is read only through `value`, which checks the loop.
    package let loop: EventLoop
    private let stored: Value

    /// Boxes `value` for `loop` (from any thread: a loop's objects are made before it runs).
    package init(_ value: Value, loop: EventLoop) {
        self.stored = value
        self.loop = loop
    }

    /// The value, on its loop.
    package var value: Value {
        loop.assertInEventLoop("a LoopBound value")
        return stored
    }

    /// Runs `body` with the value on its loop.
    package func execute(_ body: @escaping @Sendable (Value) -> Void) {
        loop.execute { body(self.value) }
    }
}

/// One thread, one epoll set: owns its sockets, TLS objects and nghttp2 sessions.
///
/// Other threads reach it only through `execute`, which queues a task and wakes
/// the loop through an eventfd. Nothing inside a loop takes a lock but that queue.
public final class EventLoop: @unchecked Sendable {
    // Sendable: every mutable field but `inbox` is touched on the loop thread only (checked in every build
    // by every loop-thread method once the loop runs); `inbox` is a Mutex and `wakeFD` is written
    // atomically by the kernel.
    private let epollFD: Int32
    private let wakeFD: Int32
    private let inbox = Mutex<[() -> Void]>([])
    private let wakePending = Atomic<Bool>(false)
    private var local: [() -> Void] = []
    private var handlers: [Int32: any EventHandler] = [:]
    private var dirty: [any DeferredFlush] = []
    private var timers = TimerHeap()
    /// The loop thread's id (0 until it runs), read from any thread by `inEventLoop`.
    private let threadID = Atomic<UInt>(0)
    private var stopping = false
    /// Shared read buffer for every connection of this loop.
    package let readBuffer: UnsafeMutableRawBufferPointer
    /// A short name for logs: `loop-0`.
    public let name: String

    package init(name: String) throws(SocketError) {
        self.name = name
        epollFD = try check("epoll_create1", epoll_create1(Int32(EPOLL_CLOEXEC)))
        wakeFD = try check("eventfd", eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC)))
        readBuffer = .allocate(byteCount: 64 * 1024, alignment: 16)
        var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: wakeFD))
        _ = epoll_ctl(epollFD, EPOLL_CTL_ADD, wakeFD, &event)
    }

    deinit {
        close(epollFD)
        close(wakeFD)
        readBuffer.deallocate()
    }

    /// True on this loop's own thread.
    public var inEventLoop: Bool {
        let id = threadID.load(ordering: .acquiring)
        return id != 0 && pthread_equal(pthread_t(id), pthread_self()) != 0
    }

    /// Stops the process when called off this loop's thread (swift-nio's `NIOLoopBound` check), in every
    /// build: a load and a compare of the running thread's id (`pthread_self` reads the thread pointer
    /// register). Loop-confined objects call it where they are entered.
    @inline(__always)
    package func assertInEventLoop(_ what: StaticString, file: StaticString = #fileID, line: UInt = #line) {
        if _slowPath(!inEventLoop) { confinementBroken(what, file: file, line: line) }
    }

    @inline(never)
    private func confinementBroken(_ what: StaticString, file: StaticString, line: UInt) -> Never {
        fatalError("\(what) used off its event loop \(name)", file: file, line: line)
    }

    /// Runs `task` on the loop thread: soon, after the current event, if called from it.
    public func execute(_ task: @escaping @Sendable () -> Void) {
        if inEventLoop {
            local.append(task)
            return
        }
        inbox.withLock { $0.append(task) }
        if !wakePending.exchange(true, ordering: .acquiringAndReleasing) {
            var one: UInt64 = 1
            _ = write(wakeFD, &one, 8)
        }
    }

    // MARK: Loop-thread API

    /// Stops the process when the loop's own state is touched from another thread
    /// once the loop runs (before it starts, the thread setting it up owns it).
    @inline(__always)
    private func assertOwned(_ what: StaticString) {
        if _slowPath(threadID.load(ordering: .acquiring) != 0 && !inEventLoop) {
            confinementBroken(what, file: #fileID, line: #line)
        }
    }

    package func register(_ fd: Int32, _ handler: any EventHandler, events: UInt32) {
        assertOwned("EventLoop.register")
        handlers[fd] = handler
        var event = epoll_event(events: events, data: epoll_data_t(fd: fd))
        _ = epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event)
    }

    package func modify(_ fd: Int32, events: UInt32) {
        assertOwned("EventLoop.modify")
        var event = epoll_event(events: events, data: epoll_data_t(fd: fd))
        _ = epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, &event)
    }

    package func deregister(_ fd: Int32) {
        assertOwned("EventLoop.deregister")
        _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, nil)
        handlers[fd] = nil
    }

    /// Runs `action` on this loop after `nanoseconds`; returns an id for `cancelTimer`.
    @discardableResult
    package func schedule(afterNanoseconds nanoseconds: Int64, _ action: @escaping () -> Void) -> Int {
        assertOwned("EventLoop.schedule")
        return timers.schedule(at: Monotonic.now() &+ UInt64(max(0, nanoseconds)), action)
    }

    package func cancelTimer(_ id: Int) {
        assertOwned("EventLoop.cancelTimer")
        timers.cancel(id)
    }

    /// Asks for `target.flush()` at the end of this iteration, after every event and task,
    /// so answers produced together leave in one write. Callers keep their own "scheduled" flag.
    package func flushLater(_ target: any DeferredFlush) {
        assertOwned("EventLoop.flushLater")
        dirty.append(target)
    }

    /// Stops the loop after the current iteration.
    package func stop() { stopping = true }
    package var isStopping: Bool { stopping }

    package var handlerCount: Int { handlers.count }

    // MARK: Running

    /// Starts the loop on a new thread (a Lifecycle `Worker` named after the loop).
    package func start() {
        let worker = Worker(name: name) { [self] _ in run() }
        thread.withLock { $0 = worker }
        worker.start()
    }

    private let thread = Mutex<Worker?>(nil)

    /// Waits for the loop thread to end (joined: the thread is gone when this returns).
    package func join() {
        _ = thread.withLock({ $0 })?.waitStopped(until: .max)
    }

    private func run() {
        threadID.store(UInt(pthread_self()), ordering: .releasing)
        let capacity = 256
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        while !stopping {
            let timeout = timers.millisecondsUntilNext(now: Monotonic.now())
            let n = epoll_wait(epollFD, events, Int32(capacity), local.isEmpty ? timeout : Int32(0))
            if n < 0 && errno != EINTR { break }
            if n > 0 {
                for i in 0..<Int(n) {
                    let fd = events[i].data.fd
                    if fd == wakeFD {
                        var value: UInt64 = 0
                        _ = read(wakeFD, &value, 8)
                        continue
                    }
                    handlers[fd]?.handle(events: events[i].events)
                }
            }
            runTasks()
            // Take the due timers first: their actions may schedule or cancel timers.
            for action in timers.takeDue(now: Monotonic.now()) { action() }
            runTasks()
            while !dirty.isEmpty {
                let targets = dirty
                dirty.removeAll(keepingCapacity: true)
                for t in targets { t.flush() }
            }
        }
        // Tasks posted after this point (late store answers at exit) are dropped with the loop.
        threadID.store(0, ordering: .releasing)
    }

    private func runTasks() {
        wakePending.store(false, ordering: .releasing)
        let remote = inbox.withLock { tasks -> [() -> Void] in
            let t = tasks
            tasks.removeAll(keepingCapacity: true)
            return t
        }
        for task in remote { task() }
        // Tasks may queue more local tasks; run until quiet, bounded to keep timers fair.
        var rounds = 0
        while !local.isEmpty && rounds < 16 {
            let batch = local
            local.removeAll(keepingCapacity: true)
            for task in batch { task() }
            rounds += 1
        }
    }
}

/// A binary min-heap of timers with lazy cancellation.
package struct TimerHeap {
    private var heap: [(at: UInt64, id: Int)] = []
    private var actions: [Int: () -> Void] = [:]
    private var nextID = 1

    package init() {}

    package mutating func schedule(at: UInt64, _ action: @escaping () -> Void) -> Int {
        let id = nextID
        nextID += 1
        actions[id] = action
        heap.append((at, id))
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            if heap[parent].at <= heap[i].at { break }
            heap.swapAt(parent, i)
            i = parent
        }
        return id
    }

    package mutating func cancel(_ id: Int) {
        actions[id] = nil
        // Cancelled entries stay in the heap until they reach the top; rebuild when they dominate.
        if heap.count > 1024 && heap.count > 4 * actions.count {
            heap = heap.filter { actions[$0.id] != nil }
            heap.sort { $0.at < $1.at }  // a sorted array is a valid min-heap
        }
    }

    private mutating func popMin() -> (at: UInt64, id: Int) {
        let top = heap[0]
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            var i = 0
            while true {
                let l = 2 * i + 1, r = l + 1
                var m = i
                if l < heap.count && heap[l].at < heap[m].at { m = l }
                if r < heap.count && heap[r].at < heap[m].at { m = r }
                if m == i { break }
                heap.swapAt(i, m)
                i = m
            }
        }
        return top
    }

    package mutating func millisecondsUntilNext(now: UInt64) -> Int32 {
        while let first = heap.first, actions[first.id] == nil { _ = popMin() }
        guard let first = heap.first else { return -1 }
        if first.at <= now { return 0 }
        return Int32(min((first.at - now + 999_999) / 1_000_000, 60_000))
    }

    package mutating func takeDue(now: UInt64) -> [() -> Void] {
        var due: [() -> Void] = []
        while let first = heap.first, first.at <= now {
            _ = popMin()
            if let action = actions.removeValue(forKey: first.id) { due.append(action) }
        }
        return due
    }
}
