public import Billing
import BillingAPI
import Foundation
public import RPC
import Synchronization
import Lifecycle

/// WatchEvents: each watcher first reads its backlog from the store itself, then goes live; live events
/// come from one reader per process (`pump`), woken by the store after commits (PostgreSQL: by LISTEN,
/// so commits on other replicas arrive too), never one database poll per watcher.
///
/// Invariant: every live watcher has been sent every matching event with a cursor up to `delivered`,
/// and `position` (the last cursor it has seen, matching or not) is at least the last one it was sent.
/// The pump sends only events above a watcher's position, so nothing is repeated; a watcher goes live
/// only when its own reads have reached `delivered`, so nothing is missed.
///
/// Catch-ups run on a `StepPool` of `Limits.catchUpWidth` (a page a step, watchers taking turns), never a
/// thread per watcher: a watcher whose peer has not read its last page waits off the pool, polled with a
/// growing pause, until it reads or `Limits.maxStall` passes.
public final class EventFeed: Sendable {
    /// The caps of `--max-watchers`, `--max-watchers-per-key` and the unsent bytes one watcher may leave queued.
    public struct Limits: Sendable {
        /// Watchers at once in this process; more are refused with OVERLOADED.
        public var maxWatchers: Int
        /// Watchers at once per caller (API key, client certificate or peer address: `CallerIdentity`).
        public var maxWatchersPerKey: Int
        /// Unsent bytes a live watcher may leave queued before it is ended with RESOURCE_EXHAUSTED OVERLOADED
        /// (128 KiB: 500 watchers that never read then stay near 110 MiB RSS; 1 MiB would allow 500 MiB).
        public var maxBufferedBytes: Int
        /// Catch-up steps (a page read and sent) running at once, for all watchers together.
        public var catchUpWidth: Int
        /// How long a catching-up watcher may leave a quarter of its budget unread before it is ended with OVERLOADED.
        public var maxStall: Duration
        public init(
            maxWatchers: Int = 1000, maxWatchersPerKey: Int = 100, maxBufferedBytes: Int = 128 << 10, catchUpWidth: Int = 4,
            maxStall: Duration = .seconds(30)
        ) {
            self.maxWatchers = maxWatchers
            self.maxWatchersPerKey = maxWatchersPerKey
            self.maxBufferedBytes = maxBufferedBytes
            self.catchUpWidth = catchUpWidth
            self.maxStall = maxStall
        }
    }
    public let limits: Limits
    static let pageSize = 500

    final class Watcher: Sendable {
        let accountID: String?
        let writer: StreamWriter
        let key: String
        let position: Atomic<UInt64>
        let released = Atomic<Bool>(false)
        /// Catch-up only: whether the cursor was checked against the newest, and since when (and how many
        /// times) the peer has been waited for.
        let rangeChecked = Atomic<Bool>(false)
        let stalled = Mutex<(since: ContinuousClock.Instant, waits: Int)?>(nil)
        init(accountID: String?, writer: StreamWriter, after: UInt64, key: String) {
            self.accountID = accountID
            self.writer = writer
            self.key = key
            position = Atomic(after)
            sent = Mutex(Sent(confirmed: after))
        }
        func matches(_ e: EventRecord) -> Bool { accountID == nil || accountID == e.accountID }

        /// Events queued and not yet known taken whole by the transport: their end offsets in the bytes
        /// sent, and cursors. `confirmed`: the cursor of the last event taken whole.
        private struct Sent {
            var total = 0
            var queue: [(end: Int, cursor: UInt64)] = []
            var head = 0
            var confirmed: UInt64
            mutating func advance(consumed: Int) {
                while head < queue.count && queue[head].end <= consumed {
                    confirmed = queue[head].cursor
                    head += 1
                }
                if head == queue.count {
                    queue.removeAll(keepingCapacity: true)
                    head = 0
                } else if head >= 1024 {
                    queue.removeFirst(head)
                    head = 0
                }
            }
        }
        private let sent: Mutex<Sent>

        func send(_ e: EventRecord) {
            let n = writer.send(BillingAPI.Event(e))
            guard n > 0 else { return }
            let buffered = writer.bufferedBytes
            sent.withLock { s in
                s.total += n
                s.queue.append((s.total, e.cursor))
                s.advance(consumed: s.total - buffered)
            }
        }

        /// Where the client resumes when its unsent events are dropped: after the last event the transport
        /// took whole (a client may see a few again, never miss one); with nothing queued, its position.
        var resumeCursor: UInt64 {
            let buffered = writer.bufferedBytes
            return sent.withLock { s in
                s.advance(consumed: s.total - buffered)
                return s.queue.isEmpty ? max(s.confirmed, position.load(ordering: .relaxed)) : s.confirmed
            }
        }
    }

    private struct State {
        var live: [ObjectIdentifier: Watcher] = [:]
        /// Slots taken (catching up or live), in all and per caller.
        var taken = 0
        var perKey: [String: Int] = [:]
        var delivered: UInt64 = 0
        var dirty = false
        var pumping = false
    }
    private let state = Mutex(State())
    private let draining = Atomic<Bool>(false)
    private let store: any OrderStore
    private let pumpQueue = DispatchQueue(label: "billing.feed")
    private let catchUps: StepPool

    public init(store: any OrderStore, limits: Limits = Limits()) {
        self.store = store
        self.limits = limits
        catchUps = StepPool(width: limits.catchUpWidth, label: "billing.feed.catch-up")
        store.setEventListener { [weak self] in
            guard let self else { return }
            poke()
            for observer in observers.withLock({ $0 }) { observer() }
        }
    }

    private let observers = Mutex<[@Sendable () -> Void]>([])

    /// Calls `observer` (on a store thread; it must not block) after each commit that made events visible, as the
    /// feed's own watchers are woken (the webhook sender uses it).
    public func onCommit(_ observer: @escaping @Sendable () -> Void) {
        observers.withLock { $0.append(observer) }
    }

    /// Watchers holding a slot now (for metrics and tests).
    public var watcherCount: Int { state.withLock { $0.taken } }

    /// Watchers past their backlog, sent each commit as it happens (tests wait for this rather than for time).
    public var liveCount: Int { state.withLock { $0.live.count } }

    /// Streams the events after `after` (for one account, or all), then each new one as it commits.
    /// `key` names the caller for `maxWatchersPerKey`.
    public func watch(after: UInt64, accountID: String?, key: String = "", writer: StreamWriter) {
        if draining.load(ordering: .relaxed) { return writer.finish(Self.shuttingDown) }
        let refused = state.withLock { s -> String? in
            if s.taken >= limits.maxWatchers { return "max_watchers" }
            if s.perKey[key, default: 0] >= limits.maxWatchersPerKey { return "max_watchers_per_key" }
            s.taken += 1
            s.perKey[key, default: 0] += 1
            return nil
        }
        if let cap = refused {
            let limit = cap == "max_watchers" ? limits.maxWatchers : limits.maxWatchersPerKey
            writer.finish(
                RPCError(
                    code: .resourceExhausted, message: "too many event watchers (\(cap.replacingOccurrences(of: "_", with: "-")) \(limit)); retry later",
                    reason: .overloaded, metadata: ["cap": cap, "limit": String(limit)]))
            return
        }
        let watcher = Watcher(accountID: accountID, writer: writer, after: after, key: key)
        // The slot is given back the moment the client goes (reset, connection closed), not at the next commit.
        writer.cancellation.onCancel { [weak self, weak watcher] in
            if let self, let watcher { self.release(watcher) }
        }
        catchUps.submit { [self] in
            switch catchUpStep(watcher) {
            case .more: return .again
            case .waitForReader(let ms): return .after(milliseconds: ms)
            case .live: return .done
            case .ended:
                release(watcher)
                return .done
            }
        }
    }

    /// Gives a watcher's slot back (once).
    private func release(_ w: Watcher) {
        guard !w.released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        state.withLock { s in
            s.live[ObjectIdentifier(w)] = nil
            s.taken -= 1
            let left = s.perKey[w.key, default: 1] - 1
            s.perKey[w.key] = left > 0 ? left : nil
        }
    }

    /// Ends a watcher's stream and gives its slot back.
    private func end(_ w: Watcher, _ error: RPCError?) {
        w.writer.finish(error)
        release(w)
    }

    /// The newest committed (on PostgreSQL: numbered) cursor, when `after` is beyond it; a reader's own
    /// just-committed events count (the store numbers what is committed first). Blocks: feed threads only.
    func outOfRange(after: UInt64) -> BillingError? {
        guard after > 0 else { return nil }
        let probe: Result<[EventRecord], BillingError> = Blocking.wait { done in
            store.events(after: after, limit: 1, accountID: nil, completion: done)
        }
        guard case .success(let page) = probe, page.isEmpty else { return nil }
        let newest: Result<UInt64, BillingError> = Blocking.wait { done in
            store.read({ ledger throws(BillingError) in try ledger.lastCursor() }, completion: done)
        }
        if case .success(let n) = newest, after > n { return .cursorOutOfRange(cursor: after, newest: n) }
        return nil
    }

    /// What one catch-up step left: more to read, a peer to wait for, a watcher handed to the pump, or an end.
    private enum CatchUpStep {
        case more
        case waitForReader(milliseconds: Int)
        case live
        case ended
    }

    /// One step of a catch-up: reads and sends one page of the backlog; once the watcher has reached what the
    /// pump delivered, hands it to the pump. While the peer has more than a quarter of the budget unread, it
    /// waits (5 ms, doubling to 80 ms) and is ended after `maxStall`.
    private func catchUpStep(_ w: Watcher) -> CatchUpStep {
        if !w.rangeChecked.exchange(true, ordering: .relaxed), let e = outOfRange(after: w.position.load(ordering: .relaxed)) {
            w.writer.finish(e.rpcError)
            return .ended
        }
        if w.writer.isDone || w.released.load(ordering: .acquiring) { return .ended }
        if draining.load(ordering: .relaxed) {
            w.writer.finish(Self.shuttingDown)
            return .ended
        }
        if w.writer.bufferedBytes > limits.maxBufferedBytes / 4 {
            let now = ContinuousClock.now
            let (since, waits) = w.stalled.withLock { s in
                let next = (since: s?.since ?? now, waits: (s?.waits ?? -1) + 1)
                s = next
                return next
            }
            guard since.duration(to: now) < limits.maxStall else {
                w.writer.abort(Self.tooSlow(w))
                return .ended
            }
            return .waitForReader(milliseconds: 5 << min(waits, 4))
        }
        w.stalled.withLock { $0 = nil }
        let from = w.position.load(ordering: .relaxed)
        let read: Result<(UInt64, [EventRecord]), BillingError> = Blocking.wait { done in
            store.read(
                { ledger throws(BillingError) in
                    // The newest cursor first: every matching event up to it is in the page that follows.
                    let newest = try ledger.lastCursor()
                    return (newest, try ledger.events(after: from, limit: Self.pageSize, accountID: w.accountID))
                }, completion: done)
        }
        let newest: UInt64
        let page: [EventRecord]
        switch read {
        case .success(let r): (newest, page) = r
        case .failure(let e):
            w.writer.finish(e.rpcError)
            return .ended
        }
        if let last = page.last {
            for e in page { w.send(e) }
            w.position.store(last.cursor, ordering: .relaxed)
            return .more
        }
        let reached = max(from, newest)
        let wentLive = state.withLock { s -> Bool in
            // With nobody live, what the pump delivered is only a starting point: move it up.
            if s.live.isEmpty && s.delivered < reached { s.delivered = reached }
            // The pump has sent nothing this watcher has not read itself: from here on, it sends the rest.
            guard s.delivered <= reached else { return false }
            // Not after `shutdown` took the live watchers (the next step then ends this one), nor once released.
            guard !w.released.load(ordering: .acquiring), !draining.load(ordering: .relaxed) else { return false }
            w.position.store(max(reached, w.position.load(ordering: .relaxed)), ordering: .relaxed)
            s.live[ObjectIdentifier(w)] = w
            return true
        }
        if wentLive {
            poke()
            return .live
        }
        // The pump delivered past what this read reached: read again.
        return .more
    }

    static func tooSlow(_ w: Watcher) -> RPCError {
        let resume = w.resumeCursor
        return RPCError(
            code: .resourceExhausted,
            message: "the watcher reads too slowly; resume with after_cursor \(resume)",
            reason: .overloaded, metadata: ["after_cursor": String(resume), "cap": "watcher_buffer"])
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
                let gone = s.live.values.filter { $0.writer.isDone }
                for w in gone where !w.released.exchange(true, ordering: .acquiringAndReleasing) {
                    s.live[ObjectIdentifier(w)] = nil
                    s.taken -= 1
                    let left = s.perKey[w.key, default: 1] - 1
                    s.perKey[w.key] = left > 0 ? left : nil
                }
                return (s.delivered, !s.live.isEmpty)
            }
            var cursor = from
            if anyone {
                let read: Result<[EventRecord], BillingError> = Blocking.wait { done in
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
                        // Over budget, a watcher is sent nothing more: it is ended with the last cursor it was sent.
                        var sent = w.position.load(ordering: .relaxed)
                        var over = w.writer.bufferedBytes > limits.maxBufferedBytes
                        for e in page where !over && e.cursor > sent {
                            if w.matches(e) {
                                w.send(e)
                                over = w.writer.bufferedBytes > limits.maxBufferedBytes
                            }
                            sent = e.cursor
                        }
                        w.position.store(sent, ordering: .relaxed)
                        if over {
                            w.writer.abort(Self.tooSlow(w))
                            release(w)
                        }
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
        for w in all { end(w, Self.shuttingDown) }
    }

    static let shuttingDown = RPCError(
        code: .unavailable, message: "the server is draining; resume on another replica",
        reason: .shuttingDown)
}
