import Billing
import BillingAPI
import BillingService
import ProtoWire
import RPC
import Synchronization
import Testing
import TestSupport

/// WatchEvents delivery (issue 20): every event once, in cursor order, across catch-up pages and the hand-over to
/// the live pump; resumes after a cursor; catch-ups on a bounded pool where a stalled watcher holds no worker.
@Suite("event feed delivery")
struct EventFeedDeliveryTests {
    /// A client of one watch: the events it decoded, its end, and whether it reads (takes what is sent).
    final class Client: Sendable {
        let events = Mutex<[BillingAPI.Event]>([])
        let end = Mutex<(error: RPCError?, aborted: Bool)?>(nil)
        private let reading: Atomic<Bool>
        /// Bytes sent and not taken while it did not read.
        private let unread = Atomic<Int>(0)
        private let box = Mutex<StreamWriter?>(nil)

        init(reading: Bool = true) { self.reading = Atomic(reading) }

        func writer() -> StreamWriter {
            let w = StreamWriter(cancellation: Cancellation()) { [self] event in
                switch event {
                case .message(let framed):
                    let e = try! BillingAPI.Event(decoding: Array(framed.dropFirst(5)))
                    events.withLock { $0.append(e) }
                    if reading.load(ordering: .acquiring) {
                        box.withLock { $0 }?.consumed(framed.count)
                    } else {
                        unread.add(framed.count, ordering: .relaxed)
                    }
                case .finish(let e): end.withLock { $0 = (e, false) }
                case .abort(let e): end.withLock { $0 = (e, true) }
                }
            }
            box.withLock { $0 = w }
            return w
        }

        /// Starts reading: takes what was left unread, and everything from now on.
        func startReading() {
            reading.store(true, ordering: .releasing)
            let n = unread.exchange(0, ordering: .relaxed)
            box.withLock { $0 }?.consumed(n)
        }

        var cursors: [UInt64] { events.withLock { $0.map(\.cursor) } }
        var count: Int { events.withLock { $0.count } }
        var ended: (error: RPCError?, aborted: Bool)? { end.withLock { $0 } }
        func cancel() { box.withLock { $0 }?.cancellation.cancel() }
    }

    struct World {
        let store = InMemoryOrderStore()
        let orders: OrderService
        init() { orders = OrderService(store: store, catalog: nil, clock: ManualClock(milliseconds: 1_700_000_000_000)) }

        /// `n` orders (one ORDER_CREATED event each), alternating over `accounts`.
        func create(_ n: Int, accounts: [String] = ["acct"], tag: String = "") {
            for i in 0..<n {
                let account = accounts[i % accounts.count]
                let r: Result<Billing.Order, BillingError> = wait { done in
                    orders.createOrder(.init(accountID: account, productID: "p", idempotencyKey: "k\(tag)\(i)"), completion: done)
                }
                if case .failure(let e) = r { Issue.record("createOrder: \(e)") }
            }
        }

        func watch(_ feed: EventFeed, after: UInt64 = 0, account: String? = nil, key: String = "", reading: Bool = true) -> Client {
            let c = Client(reading: reading)
            feed.watch(after: after, accountID: account, key: key, writer: c.writer())
            return c
        }
    }

    @Test("a backlog of several pages arrives whole and in cursor order, and what commits meanwhile follows it without gap or repeat")
    func backlogThenLive() {
        let w = World()
        w.create(1205)  // three catch-up pages
        let feed = EventFeed(store: w.store)
        defer { feed.shutdown() }
        let client = w.watch(feed)
        w.create(300, tag: "more")  // while it catches up, or once it is live
        #expect(eventually(20) { client.count >= 1505 })
        #expect(client.cursors == Array(1...1505))
        #expect(client.events.withLock { $0.allSatisfy { $0.type.description == "EVENT_TYPE_ORDER_CREATED" } })
        #expect(client.ended == nil)
        w.create(5, tag: "live")
        #expect(eventually(10) { client.count >= 1510 })
        #expect(client.cursors == Array(1...1510))
    }

    @Test("a watch resumes after its cursor; an account's watch sees that account's events only")
    func resumeAndFilter() {
        let w = World()
        w.create(10, accounts: ["a", "b"])  // a: 1, 3, 5, 7, 9; b: 2, 4, ...
        let feed = EventFeed(store: w.store)
        defer { feed.shutdown() }
        let all = w.watch(feed, after: 4)
        let a = w.watch(feed, after: 3, account: "a")
        let atEnd = w.watch(feed, after: 10)
        #expect(eventually { all.count >= 6 && a.count >= 3 })
        #expect(all.cursors == Array(5...10))
        #expect(a.cursors == [5, 7, 9] && a.events.withLock { $0.allSatisfy { $0.accountID == "a" } })
        w.create(4, accounts: ["a", "b"], tag: "x")  // a: 11, 13
        #expect(eventually { all.count >= 10 && a.count >= 5 && atEnd.count >= 4 })
        #expect(all.cursors == Array(5...14))
        #expect(a.cursors == [5, 7, 9, 11, 13])
        #expect(atEnd.cursors == Array(11...14))
        // Resuming from the last cursor a client saw repeats nothing.
        let resumed = w.watch(feed, after: all.cursors.last!)
        w.create(1, tag: "y")
        #expect(eventually { resumed.count >= 1 })
        #expect(resumed.cursors == [15])
    }

    @Test("a reader that pauses during its catch-up continues where it stopped once it reads again")
    func pauseDuringCatchUp() {
        let w = World()
        w.create(1200)
        let feed = EventFeed(store: w.store, limits: .init(maxBufferedBytes: 8192))
        defer { feed.shutdown() }
        let client = w.watch(feed, reading: false)
        // The first page is sent; the next waits until the peer reads.
        #expect(eventually { client.count == 500 })
        #expect(client.ended == nil && feed.watcherCount == 1)
        client.startReading()
        #expect(eventually(10) { client.count >= 1200 })
        #expect(client.cursors == Array(1...1200))
        #expect(client.ended == nil)
    }

    @Test("with one catch-up worker, a watcher that stops reading holds it not: the others catch up; shutdown ends it")
    func stalledHoldsNoWorker() {
        let w = World()
        w.create(50)
        let feed = EventFeed(store: w.store, limits: .init(maxBufferedBytes: 2048, catchUpWidth: 1))
        let stalled = w.watch(feed, key: "s", reading: false)
        #expect(eventually { stalled.count == 50 })  // its first page, over a quarter of its budget, unread
        let readers = (0..<20).map { w.watch(feed, key: "r\($0)") }
        #expect(eventually(10) { readers.allSatisfy { $0.count >= 50 } })
        #expect(readers.allSatisfy { $0.cursors == Array(1...50) && $0.ended == nil })
        #expect(stalled.ended == nil && feed.watcherCount == 21)
        feed.shutdown()
        #expect(eventually { stalled.ended != nil && feed.watcherCount == 0 })
        #expect(stalled.ended?.error?.code == .unavailable && stalled.ended?.error?.reason == "SHUTTING_DOWN")
        #expect(readers.allSatisfy { $0.ended?.error?.reason == "SHUTTING_DOWN" })
    }

    @Test("a catching-up watcher that reads nothing for maxStall is ended with OVERLOADED and the cursor it resumes from")
    func stallLimit() {
        let w = World()
        w.create(50)
        let feed = EventFeed(store: w.store, limits: .init(maxBufferedBytes: 2048, maxStall: .milliseconds(100)))
        defer { feed.shutdown() }
        let stalled = w.watch(feed, reading: false)
        #expect(eventually(10) { stalled.ended != nil })
        let end = stalled.ended
        #expect(end?.aborted == true && end?.error?.code == .resourceExhausted && end?.error?.reason == "OVERLOADED")
        #expect(end?.error?.metadata["cap"] == "watcher_buffer")
        // Nothing was taken whole: it resumes from the start.
        #expect(end?.error?.metadata["after_cursor"] == "0")
        #expect(eventually { feed.watcherCount == 0 })
    }

    @Test("watchers still catching up hold their slots; a cancelled one gives its slot back at once")
    func capsDuringCatchUp() {
        let w = World()
        w.create(50)
        let feed = EventFeed(store: w.store, limits: .init(maxWatchers: 3, maxWatchersPerKey: 2, maxBufferedBytes: 2048))
        defer { feed.shutdown() }
        let a1 = w.watch(feed, key: "a", reading: false)
        let a2 = w.watch(feed, key: "a", reading: false)
        let a3 = w.watch(feed, key: "a", reading: false)
        #expect(a3.ended?.error?.code == .resourceExhausted && a3.ended?.error?.metadata["cap"] == "max_watchers_per_key")
        #expect(a3.ended?.error?.metadata["limit"] == "2")
        let b1 = w.watch(feed, key: "b", reading: false)
        let b2 = w.watch(feed, key: "b", reading: false)
        #expect(b2.ended?.error?.metadata["cap"] == "max_watchers" && b2.ended?.error?.metadata["limit"] == "3")
        #expect(feed.watcherCount == 3)
        #expect(eventually { a1.count == 50 && a2.count == 50 && b1.count == 50 })
        #expect(a1.ended == nil && a2.ended == nil && b1.ended == nil)
        a1.cancel()
        #expect(feed.watcherCount == 2)
        let a4 = w.watch(feed, key: "a")
        #expect(a4.ended == nil && feed.watcherCount == 3)
        #expect(eventually { a4.count >= 50 })
        #expect(a4.cursors == Array(1...50))
    }
}
