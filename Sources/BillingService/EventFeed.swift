public import Billing
import BillingAPI
import Foundation
public import RPC
import Synchronization

/// WatchEvents: each watcher first reads its backlog from the store itself, then goes live; live events
/// come from one reader per process (`pump`), woken by the store after commits (PostgreSQL: by LISTEN,
/// so commits on other replicas arrive too), never one database poll per watcher.
///
/// Invariant: every live watcher has been sent every matching event with a cursor up to `delivered`,
/// and `position` (the last cursor it has seen, matching or not) is at least the last one it was sent.
/// The pump sends only events above a watcher's position, so nothing is repeated; a watcher goes live
/// only when its own reads have reached `delivered`, so nothing is missed.
public final class EventFeed: Sendable {
    /// Queued bytes a live watcher may leave unread before it is ended with RESOURCE_EXHAUSTED.
    public static let maxBufferedBytes = 4 << 20
    /// Watchers at once; more are refused with OVERLOADED.
    public static let maxWatchers = 1000
    static let pageSize = 500

    final class Watcher: Sendable {
        let accountID: String?
        let writer: StreamWriter
        let position: Atomic<UInt64>
        init(accountID: String?, writer: StreamWriter, after: UInt64) {
            self.accountID = accountID
            self.writer = writer
            position = Atomic(after)
        }
        func matches(_ e: EventRecord) -> Bool { accountID == nil || accountID == e.accountID }
    }

    private struct State {
        var live: [ObjectIdentifier: Watcher] = [:]
        var catchingUp = 0
        var delivered: UInt64 = 0
        var dirty = false
        var pumping = false
    }
    private let state = Mutex(State())
    private let draining = Atomic<Bool>(false)
    private let store: any OrderStore
    private let pumpQueue = DispatchQueue(label: "billing.feed")

    public init(store: any OrderStore) {
        self.store = store
        store.setEventListener { [weak self] in self?.poke() }
    }

    /// Live watchers now (for metrics and tests).
    public var watcherCount: Int { state.withLock { $0.live.count + $0.catchingUp } }

    /// Streams the events after `after` (for one account, or all), then each new one as it commits.
    public func watch(after: UInt64, accountID: String?, writer: StreamWriter) {
        if draining.load(ordering: .relaxed) { return writer.finish(Self.shuttingDown) }
        let admitted = state.withLock { s -> Bool in
            guard s.live.count + s.catchingUp < Self.maxWatchers else { return false }
            s.catchingUp += 1
            return true
        }
        guard admitted else {
            writer.finish(RPCError(code: .resourceExhausted, message: "too many event watchers; retry later", reason: "OVERLOADED"))
            return
        }
        let watcher = Watcher(accountID: accountID, writer: writer, after: after)
        let thread = Thread { [self] in catchUp(watcher) }
        thread.name = "feed-catch-up"
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Sends the backlog page by page, waiting for the peer to read, until the watcher has reached what
    /// the pump delivered; then hands it to the pump.
    private func catchUp(_ w: Watcher) {
        defer { state.withLock { $0.catchingUp -= 1 } }
        while !w.writer.isDone {
            if draining.load(ordering: .relaxed) {
                w.writer.finish(Self.shuttingDown)
                return
            }
            let from = w.position.load(ordering: .relaxed)
            let read: Result<(UInt64, [EventRecord]), BillingError> = wait { done in
                store.read(
                    { ledger throws(BillingError) in
                        // The newest cursor first: every matching event up to it is in the page that follows.
                        let newest = try ledger.lastCursor()
                        return (newest, try ledger.events(after: from, limit: Self.pageSize, accountID: w.accountID))
                    }, completion: done)
            }
            guard case .success(let (newest, page)) = read else {
                if case .failure(let e) = read { w.writer.finish(e.rpcError) }
                return
            }
            if let last = page.last {
                for e in page { w.writer.send(BillingAPI.Event(e)) }
                w.position.store(last.cursor, ordering: .relaxed)
                guard drained(w) else { return }
                continue
            }
            let reached = max(from, newest)
            let wentLive = state.withLock { s -> Bool in
                // With nobody live, what the pump delivered is only a starting point: move it up.
                if s.live.isEmpty && s.delivered < reached { s.delivered = reached }
                // The pump has sent nothing this watcher has not read itself: from here on, it sends the rest.
                guard s.delivered <= reached else { return false }
                w.position.store(max(reached, w.position.load(ordering: .relaxed)), ordering: .relaxed)
                s.live[ObjectIdentifier(w)] = w
                return true
            }
            if wentLive {
                poke()
                return
            }
        }
    }

    /// Waits while the peer has more than a page's worth queued; false when it went away or stalled for 30 s.
    private func drained(_ w: Watcher) -> Bool {
        var waited = 0
        while w.writer.bufferedBytes > Self.maxBufferedBytes / 4 {
            if w.writer.isDone { return false }
            if waited >= 30_000 {
                w.writer.finish(Self.tooSlow(w))
                return false
            }
            usleep(5_000)
            waited += 5
        }
        return !w.writer.isDone
    }

    static func tooSlow(_ w: Watcher) -> RPCError {
        RPCError(
            code: .resourceExhausted,
            message: "the watcher reads too slowly; resume with after_cursor \(w.position.load(ordering: .relaxed))",
            reason: "OVERLOADED", metadata: ["after_cursor": String(w.position.load(ordering: .relaxed))])
    }

    /// After a commit: the pump reads what is new once for every live watcher.
    func poke() {
        let start = state.withLock { s -> Bool in
            s.dirty = true
            guard !s.pumping, !s.live.isEmpty else { return false }
            s.pumping = true
            return true
        }
        if start { pumpQueue.async { [self] in pump() } }
    }

    private func pump() {
        while true {
            let (from, anyone) = state.withLock { s -> (UInt64, Bool) in
                s.dirty = false
                s.live = s.live.filter { !$0.value.writer.isDone }
                return (s.delivered, !s.live.isEmpty)
            }
            var cursor = from
            if anyone {
                let read: Result<[EventRecord], BillingError> = wait { done in
                    store.events(after: from, limit: Self.pageSize, accountID: nil, completion: done)
                }
                if case .success(let page) = read, !page.isEmpty {
                    cursor = page.last?.cursor ?? from
                    // Who gets this page and the new `delivered` are decided together: a watcher that went live
                    // during the read (its position is at least `from`, as `delivered` was then) is sent the page
                    // past its position; one that goes live after this must have read up to `cursor` itself.
                    let watchers = state.withLock { s -> [Watcher] in
                        s.delivered = max(s.delivered, cursor)
                        s.dirty = s.dirty || page.count == Self.pageSize
                        return Array(s.live.values)
                    }
                    for w in watchers {
                        for e in page where e.cursor > w.position.load(ordering: .relaxed) && w.matches(e) {
                            w.writer.send(BillingAPI.Event(e))
                        }
                        if let last = page.last { w.position.store(max(last.cursor, w.position.load(ordering: .relaxed)), ordering: .relaxed) }
                        if w.writer.bufferedBytes > Self.maxBufferedBytes { w.writer.finish(Self.tooSlow(w)) }
                    }
                }
            }
            let again = state.withLock { s -> Bool in
                if s.dirty && !s.live.isEmpty { return true }
                s.pumping = false
                return false
            }
            if !again { return }
        }
    }

    /// Ends every watcher (draining): they resume elsewhere from their last cursor.
    public func shutdown() {
        draining.store(true, ordering: .relaxed)
        let all = state.withLock { s -> [Watcher] in
            let l = Array(s.live.values)
            s.live.removeAll()
            return l
        }
        for w in all { w.writer.finish(Self.shuttingDown) }
    }

    static let shuttingDown = RPCError(
        code: .unavailable, message: "the server is draining; resume on another replica",
        reason: "SHUTTING_DOWN")
}

/// Runs an asynchronous store call and waits for its answer (on feed threads only, never a loop).
func wait<T: Sendable>(_ call: (@escaping @Sendable (Result<T, BillingError>) -> Void) -> Void) -> Result<T, BillingError> {
    let box = Mutex<Result<T, BillingError>?>(nil)
    let done = DispatchSemaphore(value: 0)
    call { r in
        box.withLock { $0 = r }
        done.signal()
    }
    done.wait()
    return box.withLock { $0 }!
}
