public import Billing
import Foundation
public import GooglePlayAPI
import Synchronization
import Lifecycle

/// Acknowledges (and, for consumables, consumes) every Google Play purchase billingd recorded as paid, from the
/// queue the recording wrote (`PlayAcknowledgement`), until Google has it: failures are retried with backoff
/// (5 s doubling to an hour), and the queue lives in the database, so a restart loses nothing. Google refunds a
/// purchase not acknowledged within three days; `oldUnacknowledged` counts those queued over 48 hours ago.
///
/// One thread of its own, woken after each recorded purchase and every 5 s.
public final class PlayAcknowledger: Sendable {
    private let api: any GooglePlayDeveloperAPI
    private let store: any OrderStore
    private let now: @Sendable () -> Int64
    /// Each attempt's outcome: the queued purchase, the result (`acknowledged`, `consumed`, `failed`), the error.
    private let onAttempt: @Sendable (PlayAcknowledgement, String, String) -> Void
    /// Called with the count of purchases over 48 hours unacknowledged, at most every 15 minutes while there are any.
    private let onOverdue: @Sendable (Int) -> Void
    private let lastOverdueWarning = Atomic<Int64>(0)
    private let worker = Worker(name: "play-ack")
    private let oldCount = Atomic<Int>(0)

    /// Queued over this long ago and not acknowledged: the warning threshold (Google refunds at 72 hours).
    public static let warnAfterMs: Int64 = 48 * 3_600_000

    public init(
        api: any GooglePlayDeveloperAPI, store: any OrderStore, now: @escaping @Sendable () -> Int64,
        onAttempt: @escaping @Sendable (PlayAcknowledgement, String, String) -> Void = { _, _, _ in },
        onOverdue: @escaping @Sendable (Int) -> Void = { _ in }
    ) {
        self.api = api
        self.store = store
        self.now = now
        self.onAttempt = onAttempt
        self.onOverdue = onOverdue
    }

    /// Purchases queued over 48 hours ago and still not acknowledged, as last counted (every pass).
    public var oldUnacknowledged: Int { oldCount.load(ordering: .relaxed) }

    public func start() {
        worker.start { [self] worker in
            while !worker.isStopping {
                let busy = pass()
                if !busy { worker.pause(.seconds(5)) }
            }
        }
    }

    /// A purchase was recorded: look at the queue now.
    public func poke() { worker.wake() }

    /// Ends the loop after the attempt in flight (its outcome is stored); waits at most 15 s for it.
    public func stop() {
        worker.beginStop()
        _ = worker.waitStopped(until: Monotonic.after(.seconds(15)))
    }

    /// One pass over what is due; true when it worked through a full batch (more may wait).
    @discardableResult
    public func pass(limit: Int = 50) -> Bool {
        let nowMs = now()
        // Claimed for a minute: another replica's acknowledger skips them meanwhile; a failure sets its own retry.
        let read: Result<([PlayAcknowledgement], Int), BillingError> = Blocking.wait { done in
            store.write(
                abandoned: { false },
                { ledger throws(BillingError) in
                    (
                        try ledger.claimAcknowledgements(nowMs: nowMs, untilMs: nowMs + 60_000, limit: limit),
                        try ledger.unacknowledgedCount(createdBeforeMs: nowMs - Self.warnAfterMs)
                    )
                }, completion: done)
        }
        guard case .success(let (due, old)) = read else { return false }
        oldCount.store(old, ordering: .relaxed)
        if old > 0 && nowMs - lastOverdueWarning.load(ordering: .relaxed) >= 15 * 60_000 {
            lastOverdueWarning.store(nowMs, ordering: .relaxed)
            onOverdue(old)
        }
        for item in due where !worker.isStopping {
            let (updated, outcome, error) = attempt(item)
            let saved: Result<Void, BillingError> = Blocking.wait { done in
                store.write(abandoned: { false }, { ledger throws(BillingError) in try ledger.updateAcknowledgement(updated) }, completion: done)
            }
            if case .failure = saved { return false }
            // Told once it is recorded: a failure logged is one whose retry time is stored (a restart right after the
            // line retries at that time, not when the claim's minute runs out).
            if let outcome { onAttempt(updated, outcome, error) }
        }
        return due.count == limit
    }

    /// Asks Google for what is still missing; answers the record to store and what happened (`acknowledged`,
    /// `consumed` or `failed`, with the error; nil when nothing was asked).
    func attempt(_ item: PlayAcknowledgement) -> (PlayAcknowledgement, String?, String) {
        var a = item
        var outcome: String?
        do {
            if a.acknowledgedMs == 0 {
                if a.consume {
                    // Consuming acknowledges too.
                    try consume(a)
                    a.acknowledgedMs = now()
                    a.consumedMs = a.acknowledgedMs
                    outcome = "consumed"
                } else if a.subscription {
                    try api.acknowledgeSubscription(
                        packageName: a.packageName, subscriptionID: a.productID, token: a.purchaseToken, developerPayload: nil, externalAccountIDs: nil)
                    a.acknowledgedMs = now()
                    outcome = "acknowledged"
                } else {
                    try api.acknowledgeProduct(packageName: a.packageName, productID: a.productID, token: a.purchaseToken, developerPayload: nil)
                    a.acknowledgedMs = now()
                    outcome = "acknowledged"
                }
            } else if a.consume && a.consumedMs == 0 {
                try consume(a)
                a.consumedMs = now()
                outcome = "consumed"
            }
            a.lastError = ""
        } catch {
            a.attempts += 1
            a.lastError = error.description
            a.nextAttemptMs = now() + Self.backoff(attempts: a.attempts)
            return (a, "failed", error.description)
        }
        return (a, outcome, "")
    }

    /// purchases.products.consume; a repeat that Google refuses because it is already consumed counts as done.
    private func consume(_ a: PlayAcknowledgement) throws(GooglePlayAPIError) {
        do {
            try api.consumeProduct(packageName: a.packageName, productID: a.productID, token: a.purchaseToken)
        } catch .rejected(let status, let reason, let message) {
            let p = try api.productPurchase(packageName: a.packageName, productID: a.productID, token: a.purchaseToken)
            guard p.isConsumed else { throw .rejected(status: status, reason: reason, message: message) }
        }
    }

    /// 5 s doubling to an hour.
    static func backoff(attempts: Int) -> Int64 {
        min(3_600_000, Int64(5_000) << Int64(min(max(0, attempts - 1), 20)))
    }
}
