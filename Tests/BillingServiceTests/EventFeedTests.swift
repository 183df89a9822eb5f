import Billing
import BillingService
import Foundation
import RPC
import Synchronization
import Testing
import TestSupport

/// WatchEvents bounded (issue 22, item 2): the caps, slots given back without a commit, the per-watcher
/// budget and the out-of-range cursor, on the in-memory store.
@Suite("event feed bounds")
struct EventFeedTests {
    /// What a writer was given: framed messages (their sizes) and its end.
    final class Recorder: Sendable {
        let sizes = Mutex<[Int]>([])
        let end = Mutex<(RPCError?, aborted: Bool)?>(nil)
        /// Bytes the "transport" takes at once (nil: all, a reader that keeps up; 0: a stalled reader).
        let takes: Int?
        init(takes: Int?) { self.takes = takes }

        func writer() -> StreamWriter {
            let box = Mutex<StreamWriter?>(nil)
            let w = StreamWriter(cancellation: Cancellation()) { [self] event in
                switch event {
                case .message(let framed):
                    let index = sizes.withLock { s -> Int in
                        s.append(framed.count)
                        return s.count
                    }
                    // Takes the messages a reader that keeps up would, or the first `takes` only.
                    if takes == nil || index <= takes! { box.withLock { $0 }?.consumed(framed.count) }
                case .finish(let e): end.withLock { $0 = (e, false) }
                case .abort(let e): end.withLock { $0 = (e, true) }
                }
            }
            box.withLock { $0 = w }
            return w
        }
        var ended: (RPCError?, aborted: Bool)? { end.withLock { $0 } }
        var count: Int { sizes.withLock { $0.count } }
    }

    func service() -> (OrderService, InMemoryOrderStore) {
        let store = InMemoryOrderStore()
        return (OrderService(store: store, catalog: nil, clock: ManualClock(milliseconds: 1_700_000_000_000)), store)
    }

    func createOrders(_ orders: OrderService, _ n: Int, account: String = "acct") {
        for i in 0..<n {
            let r: Result<Order, BillingError> = wait { done in
                orders.createOrder(.init(accountID: account, productID: "p", idempotencyKey: "k\(account)\(i)"), completion: done)
            }
            if case .failure(let e) = r { Issue.record("createOrder: \(e)") }
        }
    }

    @Test("a cursor beyond the newest event ends the watch with OUT_OF_RANGE CURSOR_OUT_OF_RANGE")
    func outOfRange() {
        let (orders, store) = service()
        createOrders(orders, 2)
        let feed = EventFeed(store: store)
        let beyond = Recorder(takes: nil)
        feed.watch(after: 3, accountID: nil, writer: beyond.writer())
        #expect(eventually { beyond.ended != nil })
        #expect(beyond.ended?.0?.code == .outOfRange)
        #expect(beyond.ended?.0?.reason == "CURSOR_OUT_OF_RANGE")
        #expect(beyond.ended?.0?.metadata["newest_cursor"] == "2")
        #expect(eventually { feed.watcherCount == 0 })
        // At the newest cursor, the watch goes live and gets what commits next.
        let atEnd = Recorder(takes: nil)
        feed.watch(after: 2, accountID: nil, writer: atEnd.writer())
        #expect(eventually { feed.liveCount == 1 })
        createOrders(orders, 1, account: "other")
        #expect(eventually { atEnd.count == 1 })
        #expect(atEnd.ended == nil)
        feed.shutdown()
    }

    @Test("the per-key cap and the global cap refuse with RESOURCE_EXHAUSTED OVERLOADED, naming the cap")
    func caps() {
        let (_, store) = service()
        let feed = EventFeed(store: store, limits: .init(maxWatchers: 3, maxWatchersPerKey: 2))
        var recorders: [Recorder] = []
        func watch(_ key: String) -> Recorder {
            let r = Recorder(takes: nil)
            recorders.append(r)
            feed.watch(after: 0, accountID: nil, key: key, writer: r.writer())
            return r
        }
        _ = watch("a")
        _ = watch("a")
        let third = watch("a")
        #expect(third.ended?.0?.code == .resourceExhausted)
        #expect(third.ended?.0?.reason == "OVERLOADED")
        #expect(third.ended?.0?.metadata["cap"] == "max_watchers_per_key")
        let other = watch("b")
        #expect(other.ended == nil)
        let fourth = watch("c")
        #expect(fourth.ended?.0?.metadata["cap"] == "max_watchers")
        #expect(feed.watcherCount == 3)
        feed.shutdown()
        #expect(eventually { feed.watcherCount == 0 })
    }

    @Test("a cancelled watcher gives its slot back at once, with no commit")
    func releaseOnCancel() {
        let (_, store) = service()
        let feed = EventFeed(store: store, limits: .init(maxWatchers: 1, maxWatchersPerKey: 1))
        let first = Recorder(takes: nil)
        let writer = first.writer()
        feed.watch(after: 0, accountID: nil, key: "k", writer: writer)
        #expect(eventually { feed.liveCount == 1 })
        let refused = Recorder(takes: nil)
        feed.watch(after: 0, accountID: nil, key: "k", writer: refused.writer())
        #expect(refused.ended?.0?.reason == "OVERLOADED")
        // The client resets the stream: the transport cancels the call. Nothing commits.
        writer.cancellation.cancel()
        #expect(feed.watcherCount == 0)
        let next = Recorder(takes: nil)
        let nextWriter = next.writer()
        feed.watch(after: 0, accountID: nil, key: "k", writer: nextWriter)
        #expect(next.ended == nil)
        #expect(feed.watcherCount == 1)
        nextWriter.cancellation.cancel()
        #expect(feed.watcherCount == 0)
        feed.shutdown()
    }

    @Test("a watcher that does not read is ended over its budget, at once, with the cursor it resumes from")
    func budget() {
        let (orders, store) = service()
        let feed = EventFeed(store: store, limits: .init(maxBufferedBytes: 2048))
        // One reader takes its first 3 messages and then stalls; one never reads; one keeps up.
        let partly = Recorder(takes: 3)
        let stalled = Recorder(takes: 0)
        let reader = Recorder(takes: nil)
        feed.watch(after: 0, accountID: nil, key: "a", writer: partly.writer())
        feed.watch(after: 0, accountID: nil, key: "b", writer: stalled.writer())
        feed.watch(after: 0, accountID: nil, key: "c", writer: reader.writer())
        #expect(eventually { feed.liveCount == 3 })
        createOrders(orders, 200)
        #expect(eventually { stalled.ended != nil && partly.ended != nil && reader.count == 200 })
        for r in [stalled, partly] {
            #expect(r.ended?.aborted == true)
            #expect(r.ended?.0?.code == .resourceExhausted)
            #expect(r.ended?.0?.reason == "OVERLOADED")
            // Sent nothing more once over budget: a message or so past 2048 bytes, never all 200.
            #expect(r.count < 200)
        }
        #expect(stalled.ended?.0?.metadata["after_cursor"] == "0")
        #expect(partly.ended?.0?.metadata["after_cursor"] == "3")
        #expect(reader.ended == nil)
        #expect(feed.watcherCount == 1)
        feed.shutdown()
    }
}
