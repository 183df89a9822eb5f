import Logging
import BillingService
import Billing
import Lifecycle
import Synchronization

/// billingd's own background loops, each a `Worker` of the App's service group (`App.start`): started after the
/// store and listeners, stopped (joined) before them.
extension App {
    /// Google Play's voided purchases at start and every --reconcile-interval, on its own thread, until stop.
    func voidedReconciliationWorker() -> Worker? {
        guard let processor = googlePlay?.processor, configuration.appStoreAPI.reconcileInterval > 0 else { return nil }
        let period = configuration.appStoreAPI.reconcileInterval
        let metrics = self.metrics, logger = self.logger
        return Worker(name: "googleplay-voided") { [self] worker in
            while !worker.isStopping {
                GooglePlaySetup.reconcileVoided(processor, metrics: metrics, logger: logger)
                worker.pause(.milliseconds(Int(period * 1000)))
            }
        }
    }

    /// Reconciles at start and every --reconcile-interval, on its own thread, until stop.
    func reconciliationWorker() -> Worker? {
        guard reconciler != nil, configuration.appStoreAPI.reconcileInterval > 0 else { return nil }
        let period = configuration.appStoreAPI.reconcileInterval
        return Worker(name: "reconcile") { [self] worker in
            while !worker.isStopping {
                reconcile()
                worker.pause(.milliseconds(Int(period * 1000)))
            }
        }
    }

    /// PENDING -> EXPIRED for orders older than --order-ttl, checked every tenth of the TTL (1 s to 60 s).
    ///
    /// Order create times are wall-clock milliseconds (shared by replicas, kept across restarts), but the wall
    /// clock steps (NTP, an operator, a VM resumed): a +1 h step must not expire every order younger than an hour
    /// while its buyer is paying (SubmitReceipt would then answer ORDER_NOT_PENDING for money taken). So the
    /// "now" expiry uses never runs ahead of an anchor (a wall time and the monotonic time it was read at) plus the
    /// monotonic time since: a forward step delays expiry by at most one TTL (harmless), never hastens it; a
    /// backward step only delays it.
    func orderExpiryWorker() -> Worker? {
        guard configuration.purchases.orderTTL > 0 else { return nil }
        let ttlMs = Int64(configuration.purchases.orderTTL * 1000)
        let period = min(60.0, max(1.0, configuration.purchases.orderTTL / 10))
        let store = self.store, logger = self.logger
        return Worker(name: "order-expiry") { [self] worker in
            var anchorWall = SystemClock().nowMilliseconds()
            var anchorMono = Monotonic.now()
            var aheadSince: UInt64?
            while !worker.isStopping {
                let wall = SystemClock().nowMilliseconds()
                let mono = Monotonic.now()
                let monotonic = anchorWall + Int64((mono &- anchorMono) / 1_000_000)
                if wall < monotonic {
                    // Behind: the wall clock is used as it is (later expiry), and becomes the new anchor.
                    anchorWall = wall
                    anchorMono = mono
                    aheadSince = nil
                } else if wall - monotonic > 1000 {
                    // Ahead: once the step is a TTL old (monotonic), every order created before it is really older
                    // than the TTL, and the orders created since carry the new wall time: trust the wall clock again.
                    if aheadSince == nil {
                        aheadSince = mono
                        logger.log(
                            .warning, "wall clock stepped ahead of monotonic time: order expiry holds back for one TTL",
                            [("ahead_ms", .int(Int(wall - monotonic)))])
                    }
                    if let since = aheadSince, Int64((mono &- since) / 1_000_000) >= ttlMs {
                        anchorWall = wall
                        anchorMono = mono
                        aheadSince = nil
                    }
                } else {
                    aheadSince = nil
                }
                let now = min(wall, anchorWall + Int64((mono &- anchorMono) / 1_000_000))
                let n = Blocking.wait { done in
                    store.expire(createdBeforeMs: now - ttlMs, nowMs: now, limit: 1000) { result in
                        switch result {
                        case .success(let n): done(n)
                        case .failure(let e):
                            logger.log(.warning, "order expiry failed", [("error", .string(e.description))])
                            done(0)
                        }
                    }
                }
                if n > 0 { logger.log(.info, "orders expired", [("count", .int(n))]) }
                if n == 1000 { continue }  // more are due
                worker.pause(.milliseconds(Int(period * 1000)))
            }
        }
    }

    /// Every 5 s: each grant past its end writes ENTITLEMENT_EXPIRED (cause grant_expiry) once, whichever replica
    /// sweeps first (`GrantRules.expireDue`), so an app hears of it within seconds, as of any store expiry.
    func grantExpiryWorker() -> Worker {
        let store = self.store, logger = self.logger
        return Worker(name: "grant-expiry") { [self] worker in
            while !worker.isStopping {
                let n = Blocking.wait { done in
                    store.write(
                        abandoned: { false },
                        { ledger throws(BillingError) in
                            try GrantRules.expireDue(
                                ledger, context: RuleContext(nowMs: SystemClock().nowMilliseconds(), cause: .grantExpiry, catalog: nil),
                                limit: 500)
                        }
                    ) { result in
                        switch result {
                        case .success(let n): done(n)
                        case .failure(let e):
                            logger.log(.warning, "grant expiry failed", [("error", .string(e.description))])
                            done(0)
                        }
                    }
                }
                if n > 0 { logger.log(.info, "grants expired", [("count", .int(n))]) }
                if n == 500 { continue }  // more are due
                worker.pause(.milliseconds(Int(5 * 1000)))
            }
        }
    }

    /// Every minute (the first at start): the production summary behind the revenue gauges. Only with
    /// --metrics-listen: nothing else reads them.
    func revenueGaugesWorker() -> Worker {
        let revenue = self.revenue, gauges = revenueGauges, logger = self.logger
        return Worker(name: "revenue-gauges") { [self] worker in
            while !worker.isStopping {
                let now = SystemClock().nowMilliseconds()
                switch (revenue.summary(environment: .production, asOfMs: now, nowMs: now), revenue.activeByStore(environment: .production, nowMs: now)) {
                case (.success(let summary), .success(let rows)):
                    gauges.values.withLock { g in
                        g.mrr = summary.mrr
                        for row in rows {
                            g.subscriptions[row.store] = row.subscriptions
                            g.trials[row.store] = row.trials
                        }
                    }
                case (.failure(let e), _), (_, .failure(let e)):
                    logger.log(.warning, "revenue gauges not refreshed", [("error", .string(e.description))])
                }
                worker.pause(.milliseconds(Int(60 * 1000)))
            }
        }
    }
}
