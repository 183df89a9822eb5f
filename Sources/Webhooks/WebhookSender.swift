public import Billing
import Foundation
public import HTTPClient
public import ProtoJSON
import Synchronization
import Lifecycle

/// Delivers every event of the feed, in cursor order, to one webhook URL: one POST per event (Standard Webhooks
/// headers and signature), the next only after the previous got a 2xx, failures retried with exponential backoff
/// and jitter without end. The position lives in the database (`WebhookRules`), advanced only after a 2xx, so a
/// restart, a failover or an outage of the receiver loses nothing (at least once: an event whose 2xx was not yet
/// recorded is sent again). One replica sends at a time: it holds a lease in the same row, renewed at every step;
/// another takes over once the lease has run out.
///
/// One thread of its own (it blocks on the store and on the HTTP client, never on an event loop).
public final class WebhookSender: Sendable {
    public let configuration: WebhookConfiguration
    private let store: any OrderStore
    private let client: HTTPClient
    private let registry: ProtoJSON.Registry
    /// This replica's lease name: host, process and a random part.
    public let holder: String
    private let onAttempt: @Sendable (WebhookAttempt) -> Void
    private let now: @Sendable () -> Int64
    private let worker = Worker(name: "webhook-sender")
    /// Last known state, for gauges between database reads.
    private let snapshot: Mutex<WebhookStatus>

    public init(
        configuration: WebhookConfiguration, store: any OrderStore, client: HTTPClient, registry: ProtoJSON.Registry, holder: String,
        now: @escaping @Sendable () -> Int64, onAttempt: @escaping @Sendable (WebhookAttempt) -> Void
    ) {
        self.configuration = configuration
        self.store = store
        self.client = client
        self.registry = registry
        self.holder = holder
        self.now = now
        self.onAttempt = onAttempt
        snapshot = Mutex(
            WebhookStatus(
                url: configuration.url, position: 0, newest: 0, oldestUndeliveredAgeMs: 0, holder: "", leaseUntilMs: 0, failures: 0, lastError: "",
                lastAttemptMs: 0, lastDeliveryMs: 0, sendingHere: false))
    }

    /// Starts the sender's thread.
    public func start() {
        worker.start { [self] _ in run() }
    }

    /// A commit made events visible: look for them now rather than at the next poll.
    public func poke() { worker.wake() }

    /// Stops after the current attempt (the HTTP client's shutdown ends one in flight); waits up to `timeout`.
    public func stop(timeout: Duration = .seconds(15)) {
        worker.beginStop()
        // The client is the sender's own: its shutdown answers an attempt in flight at once (sent again after the
        // restart) instead of waiting out its 10 s.
        client.shutdown()
        _ = worker.waitStopped(until: Monotonic.after(timeout))
    }

    /// The last state this replica saw (gauges read it at every scrape without touching the database).
    public var lastStatus: WebhookStatus { snapshot.withLock { $0 } }

    /// The state read from the database now (`billingctl webhooks status`).
    public func status() -> Result<WebhookStatus, BillingError> {
        let holder = self.holder
        let url = configuration.url
        let nowMs = now()
        return Blocking.wait { done in
            store.read(
                { ledger throws(BillingError) -> WebhookStatus in
                    let cursor = try ledger.webhookCursor() ?? WebhookCursor()
                    let newest = try ledger.lastCursor()
                    let oldest = try ledger.events(after: cursor.position, limit: 1, accountID: nil).first
                    return WebhookStatus(
                        url: url, position: cursor.position, newest: newest, oldestUndeliveredAgeMs: oldest.map { max(0, nowMs - $0.timeMs) } ?? 0,
                        holder: cursor.holder, leaseUntilMs: cursor.leaseUntilMs, failures: cursor.failures, lastError: cursor.lastError,
                        lastAttemptMs: cursor.lastAttemptMs, lastDeliveryMs: cursor.lastDeliveryMs,
                        sendingHere: cursor.holder == holder && cursor.leaseUntilMs >= nowMs)
                }, completion: done)
        }
    }

    /// An operator's replay: delivery goes on with the first event after `position` (`--from C` is `C - 1`).
    public func replay(after position: UInt64) -> Result<WebhookCursor, BillingError> {
        let result: Result<WebhookCursor, BillingError> = Blocking.wait { done in
            store.write(abandoned: { false }, { ledger throws(BillingError) in try WebhookRules.replay(ledger, after: position) }, completion: done)
        }
        poke()
        return result
    }

    // MARK: The loop

    private var isStopping: Bool { worker.isStopping }

    private func run() {
        var retry = Backoff(first: configuration.firstRetryMilliseconds, longest: configuration.longestRetryMilliseconds)
        while !isStopping {
            guard let cursor = lease() else {
                // Another replica sends (or the database failed): look again before its lease could run out.
                sleep(milliseconds: configuration.leaseMilliseconds / 3)
                continue
            }
            let batch: [EventRecord]
            switch read(after: cursor.position) {
            case .success(let events): batch = events
            case .failure:
                sleep(milliseconds: 1_000)
                continue
            }
            if batch.isEmpty {
                noteIdle(cursor)
                sleep(milliseconds: configuration.leaseMilliseconds / 3, wakeable: true)
                continue
            }
            deliver(batch, from: cursor, retry: &retry)
        }
    }

    /// Delivers `batch` in order until it is done, the lease is lost, the position moved (replay) or the sender stops.
    private func deliver(_ batch: [EventRecord], from cursor: WebhookCursor, retry: inout Backoff) {
        var position = cursor.position
        var skippedTo: UInt64?
        for event in batch {
            if isStopping { return }
            if let wanted = configuration.events, !wanted.contains(event.kind) {
                skippedTo = event.cursor
                onAttempt(
                    WebhookAttempt(
                        cursor: event.cursor, type: event.kind.typeName, result: .skipped, status: 0, error: "", failures: 0, retryInMilliseconds: 0,
                        durationMilliseconds: 0))
                continue
            }
            if let skipped = skippedTo {
                guard advance(from: position, to: skipped, delivered: false) else { return }
                position = skipped
                skippedTo = nil
            }
            note(position: position, oldest: event)
            guard sendUntilDelivered(event, retry: &retry) else { return }
            guard advance(from: position, to: event.cursor, delivered: true) else { return }
            position = event.cursor
        }
        if let skipped = skippedTo, advance(from: position, to: skipped, delivered: false) { position = skipped }
        snapshot.withLock { $0.position = position }
    }

    /// Sends `event` until a 2xx; false when the sender stops or loses its lease first.
    private func sendUntilDelivered(_ event: EventRecord, retry: inout Backoff) -> Bool {
        let message: WebhookMessage
        do {
            message = try WebhookMessage(event, registry: registry)
        } catch {
            // Cannot happen for an event the store wrote; retried like a failed attempt so that nothing is skipped.
            return fail(event, result: .failed, status: 0, error: "encoding: \(error)", started: now(), retry: &retry)
        }
        while !isStopping {
            let started = now()
            let request = HTTPClientRequest(
                method: "POST", url: configuration.url, headers: message.headers(secret: configuration.secret, nowSeconds: started / 1000),
                body: message.body, timeoutMilliseconds: configuration.attemptTimeoutMilliseconds)
            let answer: Result<HTTPClientResponse, HTTPClientError> = Blocking.wait { done in client.send(request, completion: done) }
            switch answer {
            case .success(let response) where (200..<300).contains(response.status):
                retry.reset()
                onAttempt(
                    WebhookAttempt(
                        cursor: event.cursor, type: event.kind.typeName, result: .delivered, status: response.status, error: "", failures: 0,
                        retryInMilliseconds: 0, durationMilliseconds: now() - started))
                return true
            case .success(let response):
                guard fail(event, result: .rejected, status: response.status, error: "HTTP \(response.status)", started: started, retry: &retry) else {
                    return false
                }
            case .failure(.shutdown):
                return false
            case .failure(.timeout):
                guard fail(event, result: .timeout, status: 0, error: "timed out", started: started, retry: &retry) else { return false }
            case .failure(let error):
                guard fail(event, result: .failed, status: 0, error: error.description, started: started, retry: &retry) else { return false }
            }
        }
        return false
    }

    /// Records a failed attempt, waits out the backoff (renewing the lease); false when the sender stops or the
    /// lease is lost.
    private func fail(_ event: EventRecord, result: WebhookAttempt.Result, status: Int, error: String, started: Int64, retry: inout Backoff) -> Bool {
        let wait = retry.next()
        let recorded: Result<Bool, BillingError> = write { [holder, configuration] ledger, nowMs throws(BillingError) in
            try WebhookRules.failed(ledger, holder: holder, error: error, nowMs: nowMs, untilMs: nowMs + wait + configuration.leaseMilliseconds)
        }
        onAttempt(
            WebhookAttempt(
                cursor: event.cursor, type: event.kind.typeName, result: result, status: status, error: error, failures: retry.failures,
                retryInMilliseconds: wait, durationMilliseconds: now() - started))
        snapshot.withLock {
            $0.failures = retry.failures
            $0.lastError = error
            $0.lastAttemptMs = started
        }
        if case .success(false) = recorded { return false }
        refreshNewest()
        // The lease was renewed past the wait; the database failing is waited out the same way.
        sleep(milliseconds: wait)
        return !isStopping
    }

    // MARK: The store

    private func write<T: Sendable>(_ body: @escaping @Sendable (any PurchaseLedger, Int64) throws(BillingError) -> T) -> Result<T, BillingError> {
        let nowMs = now()
        return Blocking.wait { done in
            store.write(abandoned: { false }, { ledger throws(BillingError) in try body(ledger, nowMs) }, completion: done)
        }
    }

    private func lease() -> WebhookCursor? {
        let result = write { [holder, configuration] ledger, nowMs throws(BillingError) in
            try WebhookRules.lease(ledger, holder: holder, nowMs: nowMs, untilMs: nowMs + configuration.leaseMilliseconds)
        }
        let cursor = try? result.get()
        snapshot.withLock { s in
            s.sendingHere = cursor != nil
            if let cursor {
                s.position = cursor.position
                s.holder = cursor.holder
                s.leaseUntilMs = cursor.leaseUntilMs
                s.failures = cursor.failures
                s.lastError = cursor.lastError
            }
        }
        return cursor
    }

    private func advance(from expected: UInt64, to position: UInt64, delivered: Bool) -> Bool {
        let result = write { [holder, configuration] ledger, nowMs throws(BillingError) in
            try WebhookRules.advance(
                ledger, holder: holder, from: expected, to: position, nowMs: nowMs, untilMs: nowMs + configuration.leaseMilliseconds, delivered: delivered)
        }
        if case .success(true) = result {
            snapshot.withLock {
                $0.position = position
                $0.failures = 0
                $0.lastError = ""
                if delivered { $0.lastDeliveryMs = now() }
            }
            return true
        }
        // Lost the lease, an operator moved the position, or the database failed: start over from the row.
        return false
    }

    private func read(after position: UInt64) -> Result<[EventRecord], BillingError> {
        let limit = configuration.batch
        let result: Result<([EventRecord], UInt64), BillingError> = Blocking.wait { done in
            store.read(
                { ledger throws(BillingError) in (try ledger.events(after: position, limit: limit, accountID: nil), try ledger.lastCursor()) }, completion: done
            )
        }
        return result.map { events, newest in
            snapshot.withLock { $0.newest = max(newest, events.last?.cursor ?? 0) }
            return events
        }
    }

    private func note(position: UInt64, oldest: EventRecord) {
        let age = max(0, now() - oldest.timeMs)
        snapshot.withLock {
            $0.position = position
            $0.oldestUndeliveredAgeMs = age
        }
    }

    private func noteIdle(_ cursor: WebhookCursor) {
        snapshot.withLock {
            $0.position = cursor.position
            $0.oldestUndeliveredAgeMs = 0
            $0.newest = max($0.newest, cursor.position)
        }
    }

    /// Sleeps up to `milliseconds`; returns early when stopping, and on a commit when `wakeable`.
    private func sleep(milliseconds: Int64, wakeable: Bool = false) {
        let deadline = Monotonic.after(.milliseconds(max(0, milliseconds)))
        while true {
            let now = Monotonic.now()
            guard now < deadline, worker.pause(.nanoseconds(Int64(deadline - now))) else { return }
            if Monotonic.now() >= deadline || wakeable { return }
            // Waiting out a retry while commits go on: the lag gauge follows them (the cursor distance it promises),
            // not the newest cursor of the batch being retried.
            refreshNewest()
        }
    }

    /// Reads the newest committed cursor into the snapshot (one small read; the next batch is read after the retry).
    private func refreshNewest() {
        let newest: Result<UInt64, BillingError> = Blocking.wait { done in
            store.read({ ledger throws(BillingError) in try ledger.lastCursor() }, completion: done)
        }
        if case .success(let n) = newest { snapshot.withLock { $0.newest = max($0.newest, n) } }
    }
}

/// Exponential backoff with jitter: `first` doubled per failure up to `longest`, each wait drawn from [w/2, w].
struct Backoff {
    let first: Int64
    let longest: Int64
    private(set) var failures = 0

    init(first: Int64, longest: Int64) {
        self.first = max(1, first)
        self.longest = max(self.first, longest)
    }

    mutating func next() -> Int64 {
        failures += 1
        let shift = min(failures - 1, 30)
        let ceiling = min(longest, first << shift)
        return ceiling / 2 + Int64.random(in: 0...(ceiling - ceiling / 2))
    }

    mutating func reset() { failures = 0 }
}
