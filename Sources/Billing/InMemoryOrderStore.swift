import Synchronization

/// The in-memory twin of the SQL stores, with the same rules; for tests.
public final class InMemoryOrderStore: OrderStore {
    private struct State {
        var orders: [String: Order] = [:]
        var byKey: [String: String] = [:]
        var transactions: [String: OwnedTransaction] = [:]
        var entitlements: [String: [String: EntitlementRecord]] = [:]
        var renewals: [String: RenewalState] = [:]
        var notifications: [String: NotificationRecord] = [:]
        var refundWatches: [String: RefundWatch] = [:]
        var webhook: WebhookCursor?
        var acknowledgements: [String: PlayAcknowledgement] = [:]
        var events: [EventRecord] = []
        var audit: [AuditRecord] = []
        var grants: [String: GrantRecord] = [:]
        var nextCursor: UInt64 = 1
    }

    /// A ledger over a copy of the state; committed by writing the copy back.
    private final class Ledger: PurchaseLedger {
        var state: State
        init(_ state: State) { self.state = state }
        func order(id: String) -> Order? { state.orders[id] }
        func owned(transactionID: String) -> OwnedTransaction? { state.transactions[transactionID] }
        func insert(_ owned: OwnedTransaction) { state.transactions[owned.transaction.transactionID] = owned }
        func reassign(transactionID: String, accountID: String, orderID: String?) {
            state.transactions[transactionID]?.accountID = accountID
            state.transactions[transactionID]?.orderID = orderID
        }
        func transfer(transactionID: String, to accountID: String) {
            state.transactions[transactionID]?.accountID = accountID
        }
        func update(_ transaction: StoreTransaction) {
            state.transactions[transaction.transactionID]?.transaction = transaction
        }
        func complete(_ order: Order) throws(BillingError) {
            guard let current = state.orders[order.id] else { throw .orderNotFound(orderID: order.id) }
            guard current.state == .pending else { throw .orderNotPending(orderID: order.id, state: current.state) }
            state.orders[order.id] = order
        }
        func move(orderID: String, from: OrderState, to: OrderState, nowMs: Int64) -> Order? {
            guard var o = state.orders[orderID], o.state == from else { return nil }
            o.state = to
            o.updateTimeMs = nowMs
            o.refundedQuantity = to == .refunded ? o.quantity : 0
            state.orders[orderID] = o
            return o
        }
        func refund(orderID: String, refundedQuantity: Int, state to: OrderState, nowMs: Int64) -> Order? {
            guard var o = state.orders[orderID], o.state == .completed || o.state == .refunded else { return nil }
            o.state = to
            o.refundedQuantity = refundedQuantity
            o.updateTimeMs = nowMs
            state.orders[orderID] = o
            return o
        }
        func history(accountID: String, after: HistoryCursor?, limit: Int) -> [OwnedTransaction] {
            let newestFirst = state.transactions.values.filter { $0.accountID == accountID }.sorted {
                ($0.transaction.purchaseTimeMs, $0.transaction.transactionID) > ($1.transaction.purchaseTimeMs, $1.transaction.transactionID)
            }
            guard let after else { return Array(newestFirst.prefix(limit)) }
            return Array(
                newestFirst.lazy.filter { ($0.transaction.purchaseTimeMs, $0.transaction.transactionID) < (after.purchaseTimeMs, after.transactionID) }
                    .prefix(limit))
        }
        func pendingOrders(createdBeforeMs: Int64, limit: Int) -> [String] {
            state.orders.values.filter { $0.state == .pending && $0.createTimeMs < createdBeforeMs }
                .sorted { ($0.createTimeMs, $0.id) < ($1.createTimeMs, $1.id) }.prefix(limit).map(\.id)
        }
        func transactions(accountID: String) -> [OwnedTransaction] {
            state.transactions.values.filter { $0.accountID == accountID }.sorted { $0.transaction.transactionID < $1.transaction.transactionID }
        }
        func transactions(originalTransactionID: String) -> [OwnedTransaction] {
            state.transactions.values.filter { $0.transaction.originalTransactionID == originalTransactionID }
                .sorted { $0.transaction.transactionID < $1.transaction.transactionID }
        }
        func transaction(purchaseToken: String) -> OwnedTransaction? {
            guard !purchaseToken.isEmpty else { return nil }
            return state.transactions.values.filter { $0.transaction.purchaseToken == purchaseToken }.max { a, b in
                (a.transaction.purchaseTimeMs, a.transaction.transactionID) < (b.transaction.purchaseTimeMs, b.transaction.transactionID)
            }
        }
        func entitlement(accountID: String, key: String) -> EntitlementRecord? { state.entitlements[accountID]?[key] }
        func entitlements(accountID: String) -> [EntitlementRecord] {
            (state.entitlements[accountID] ?? [:]).values.sorted { $0.key < $1.key }
        }
        func put(_ entitlement: EntitlementRecord) { state.entitlements[entitlement.accountID, default: [:]][entitlement.key] = entitlement }
        func deleteEntitlement(accountID: String, key: String) { state.entitlements[accountID]?[key] = nil }
        func renewal(originalTransactionID: String) -> RenewalState? { state.renewals[originalTransactionID] }
        func put(_ renewal: RenewalState) { state.renewals[renewal.originalTransactionID] = renewal }
        func notification(uuid: String) -> NotificationResult? { state.notifications[uuid]?.result }
        func record(_ notification: NotificationRecord) { state.notifications[notification.uuid] = notification }
        func newestNotificationSignedMs() -> Int64? { state.notifications.values.map(\.signedTimeMs).max() }
        func append(_ event: EventRecord) {
            var e = event
            e.cursor = state.nextCursor
            state.nextCursor += 1
            state.events.append(e)
        }
        func lastCursor() -> UInt64 { state.events.last?.cursor ?? 0 }
        func orders(accountID: String) -> [Order] {
            state.orders.values.filter { $0.accountID == accountID }.sorted { ($0.createTimeMs, $0.id) < ($1.createTimeMs, $1.id) }
        }
        func accounts(appAccountToken: String) -> [String] {
            Set(state.transactions.values.filter { $0.transaction.appAccountToken == appAccountToken && !$0.accountID.isEmpty }.map(\.accountID))
                .sorted()
        }
        func appendAudit(_ entry: AuditRecord) { state.audit.append(entry) }
        func auditEntries(_ filter: AuditFilter, after: AuditCursor?, limit: Int) -> [AuditRecord] {
            Array(
                state.audit.filter { filter.matches($0) && (after?.precedes($0) ?? true) }
                    .sorted { ($0.timeMs, $0.auditID) > ($1.timeMs, $1.auditID) }.prefix(limit))
        }
        func accounts(after account: String, limit: Int) -> [String] {
            Array(Set(state.transactions.values.map(\.accountID)).filter { $0 > account }.sorted().prefix(limit))
        }
        func watchRefunds(_ watch: RefundWatch) {
            let key = "\(watch.environment.rawValue):\(watch.transactionID)"
            if state.refundWatches[key] == nil { state.refundWatches[key] = watch }
        }
        func refundWatches(limit: Int) -> [RefundWatch] {
            Array(
                state.refundWatches.values.sorted {
                    ($0.checkedTimeMs, $0.environment.rawValue, $0.transactionID) < ($1.checkedTimeMs, $1.environment.rawValue, $1.transactionID)
                }.prefix(limit))
        }
        func refundWatchChecked(transactionID: String, environment: StoreEnvironment, nowMs: Int64) {
            state.refundWatches["\(environment.rawValue):\(transactionID)"]?.checkedTimeMs = nowMs
        }
        func webhookCursor() -> WebhookCursor? { state.webhook }
        func ensureWebhookCursor() { if state.webhook == nil { state.webhook = WebhookCursor() } }
        func takeWebhookLease(holder: String, nowMs: Int64, untilMs: Int64) -> Bool {
            guard var w = state.webhook, w.holder == holder || w.holder.isEmpty || w.leaseUntilMs < nowMs else { return false }
            w.holder = holder
            w.leaseUntilMs = untilMs
            state.webhook = w
            return true
        }
        func advanceWebhook(holder: String, from expected: UInt64, to position: UInt64, nowMs: Int64, untilMs: Int64, delivered: Bool) -> Bool {
            guard var w = state.webhook, w.holder == holder, w.position == expected else { return false }
            w.position = position
            w.leaseUntilMs = untilMs
            w.failures = 0
            w.lastError = ""
            if delivered {
                w.lastAttemptMs = nowMs
                w.lastDeliveryMs = nowMs
            }
            state.webhook = w
            return true
        }
        func webhookFailed(holder: String, error: String, nowMs: Int64, untilMs: Int64) -> Bool {
            guard var w = state.webhook, w.holder == holder else { return false }
            w.failures += 1
            w.lastError = error
            w.lastAttemptMs = nowMs
            w.leaseUntilMs = untilMs
            state.webhook = w
            return true
        }
        func queueAcknowledgement(_ a: PlayAcknowledgement) {
            if state.acknowledgements[a.purchaseToken] == nil { state.acknowledgements[a.purchaseToken] = a }
        }
        func claimAcknowledgements(nowMs: Int64, untilMs: Int64, limit: Int) -> [PlayAcknowledgement] {
            let due = Array(
                state.acknowledgements.values.filter { !$0.isDone && $0.nextAttemptMs <= nowMs }
                    .sorted { ($0.nextAttemptMs, $0.purchaseToken) < ($1.nextAttemptMs, $1.purchaseToken) }.prefix(limit))
            for a in due { state.acknowledgements[a.purchaseToken]?.nextAttemptMs = untilMs }
            return due
        }
        func updateAcknowledgement(_ a: PlayAcknowledgement) {
            if state.acknowledgements[a.purchaseToken] != nil { state.acknowledgements[a.purchaseToken] = a }
        }
        func unacknowledgedCount(createdBeforeMs: Int64) -> Int {
            state.acknowledgements.values.filter { $0.acknowledgedMs == 0 && $0.createdMs < createdBeforeMs }.count
        }
        func setWebhookPosition(_ position: UInt64) {
            state.webhook?.position = position
            state.webhook?.failures = 0
            state.webhook?.lastError = ""
        }
        func revenueTransactions(environment: StoreEnvironment, _ visit: (StoreTransaction, String, Int64) -> Void) {
            for o in state.transactions.values where o.transaction.environment == environment && RevenueBook.counts(o.transaction, accountID: o.accountID) {
                visit(o.transaction, o.accountID, state.renewals[o.transaction.originalTransactionID]?.gracePeriodExpiresTimeMs ?? 0)
            }
        }
        func revenueTransactions(ids: [String]) -> [(OwnedTransaction, Int64)] {
            ids.compactMap { id in
                state.transactions[id].map { ($0, state.renewals[$0.transaction.originalTransactionID]?.gracePeriodExpiresTimeMs ?? 0) }
            }
        }
        func gracePeriods(originalTransactionIDs: [String]) -> [String: Int64] {
            Dictionary(originalTransactionIDs.map { ($0, state.renewals[$0]?.gracePeriodExpiresTimeMs ?? 0) }) { a, _ in a }
        }
        func exportPage(environment: StoreEnvironment, fromMs: Int64, toMs: Int64, after: String, limit: Int) -> [OwnedTransaction] {
            Array(
                state.transactions.values.filter {
                    let t = $0.transaction
                    return t.environment == environment && t.purchaseTimeMs >= fromMs && t.purchaseTimeMs < toMs && t.transactionID > after
                }
                .sorted { $0.transaction.transactionID < $1.transaction.transactionID }.prefix(limit))
        }
        func firstPaidPurchases(originalTransactionIDs: [String]) -> [String: Int64] {
            let wanted = Set(originalTransactionIDs)
            var first: [String: Int64] = [:]
            for o in state.transactions.values
            where wanted.contains(o.transaction.originalTransactionID) && o.transaction.price.priceMilliunits > 0
                && RevenueBook.counts(o.transaction, accountID: o.accountID)
            {
                first[o.transaction.originalTransactionID] = min(first[o.transaction.originalTransactionID] ?? .max, o.transaction.purchaseTimeMs)
            }
            return first
        }
        func activeGrantCount(atMs: Int64) -> Int {
            state.grants.values.filter {
                $0.startTimeMs <= atMs && ($0.expiresTimeMs == 0 || atMs < $0.expiresTimeMs) && ($0.revocationTimeMs == 0 || atMs < $0.revocationTimeMs)
            }.count
        }
        func insertGrant(_ grant: GrantRecord) { state.grants[grant.grantID] = grant }
        func grant(id: String) -> GrantRecord? { state.grants[id] }
        func grant(accountID: String, idempotencyKey: String) -> GrantRecord? {
            state.grants.values.first { $0.accountID == accountID && $0.idempotencyKey == idempotencyKey }
        }
        func grants(accountID: String) -> [GrantRecord] {
            state.grants.values.filter { $0.accountID == accountID }.sorted { ($0.startTimeMs, $0.grantID) < ($1.startTimeMs, $1.grantID) }
        }
        func updateGrant(_ grant: GrantRecord) { state.grants[grant.grantID] = grant }
        func dueGrants(nowMs: Int64, limit: Int) -> [GrantRecord] {
            Array(
                state.grants.values.filter { $0.expiresTimeMs > 0 && $0.expiresTimeMs <= nowMs && $0.revocationTimeMs == 0 && !$0.expiryNoted }
                    .sorted { ($0.expiresTimeMs, $0.grantID) < ($1.expiresTimeMs, $1.grantID) }.prefix(limit))
        }
        func noteGrantExpired(grantID: String) -> Bool {
            guard let g = state.grants[grantID], !g.expiryNoted else { return false }
            state.grants[grantID]?.expiryNoted = true
            return true
        }
        func renameAccount(_ old: String, to new: String) -> ErasureCounts {
            var c = ErasureCounts()
            for (id, o) in state.orders where o.accountID == old {
                var renamed = o
                renamed.accountID = new
                if renamed.idempotencyKey != nil { c.idempotencyKeys += 1 }
                renamed.idempotencyKey = nil
                state.orders[id] = renamed
                c.orders += 1
            }
            state.byKey = state.byKey.filter { !$0.key.hasPrefix(old + "\u{0}") }
            for (id, t) in state.transactions where t.accountID == old {
                state.transactions[id]?.accountID = new
                c.transactions += 1
            }
            if let mine = state.entitlements.removeValue(forKey: old) {
                state.entitlements[new] = mine.mapValues { e in
                    var r = e
                    r.accountID = new
                    return r
                }
                c.entitlements = mine.count
            }
            for (id, g) in state.grants where g.accountID == old {
                state.grants[id]?.accountID = new
                if g.idempotencyKey != nil { c.idempotencyKeys += 1 }
                state.grants[id]?.idempotencyKey = nil
                c.grants += 1
            }
            for i in state.events.indices where state.events[i].accountID == old {
                state.events[i].accountID = new
                state.events[i].order?.accountID = new
                c.events += 1
            }
            for i in state.audit.indices where state.audit[i].accountID == old || state.audit[i].target == old {
                state.audit[i].accountID = state.audit[i].accountID == old ? new : state.audit[i].accountID
                state.audit[i].target = state.audit[i].target == old ? new : state.audit[i].target
                state.audit[i].requestJSON = AuditText.replacing(old, with: new, in: state.audit[i].requestJSON)
                c.auditEntries += 1
            }
            for (k, w) in state.refundWatches where w.accountID == old { state.refundWatches[k]?.accountID = new }
            for (k, a) in state.acknowledgements where a.accountID == old { state.acknowledgements[k]?.accountID = new }
            return c
        }
        func events(after cursor: UInt64, limit: Int, accountID: String?) -> [EventRecord] {
            // Cursors are the events' positions plus one: binary search is not needed for a test store.
            Array(state.events.lazy.filter { $0.cursor > cursor && (accountID == nil || $0.accountID == accountID) }.prefix(limit))
        }
    }
    private let state = Mutex(State())
    /// In a class box: a closure read back out of a `Mutex` is re-abstracted (and wrapped) on every read.
    private final class Listener: Sendable {
        let call: @Sendable () -> Void
        init(_ call: @escaping @Sendable () -> Void) { self.call = call }
    }
    private let listener = Mutex<Listener?>(nil)

    public init() {}

    /// Every event so far, oldest first (for tests).
    public var allEvents: [EventRecord] { state.withLock { $0.events } }

    public func create(
        _ order: NewOrder, abandoned: @escaping @Sendable () -> Bool,
        completion: @escaping @Sendable (Result<CreateOutcome, BillingError>) -> Void
    ) {
        let result: Result<CreateOutcome, BillingError> = state.withLock { s in
            if let key = order.idempotencyKey, let existing = s.byKey[order.accountID + "\u{0}" + key], let found = s.orders[existing] {
                return .success(.existing(found))
            }
            if abandoned() { return .failure(.abandoned) }
            let stored = order.pendingOrder
            let ledger = Ledger(s)
            ledger.state.orders[order.id] = stored
            if let key = order.idempotencyKey { ledger.state.byKey[order.accountID + "\u{0}" + key] = order.id }
            ledger.append(
                EventRecord(
                    kind: .orderCreated, timeMs: order.createTimeMs, accountID: order.accountID, order: stored,
                    cause: .createOrder))
            s = ledger.state
            return .success(.created(stored))
        }
        if case .success(.created) = result { notifyListener() }
        completion(result)
    }

    public func order(id: String, completion: @escaping @Sendable (Result<Order?, BillingError>) -> Void) {
        completion(.success(state.withLock { $0.orders[id] }))
    }

    public func write<T: Sendable>(
        abandoned: @escaping @Sendable () -> Bool,
        _ body: @escaping @Sendable (any PurchaseLedger) throws(BillingError) -> T,
        completion: @escaping @Sendable (Result<T, BillingError>) -> Void
    ) {
        let (result, appended): (Result<T, BillingError>, Bool) = state.withLock { s in
            if abandoned() { return (.failure(.abandoned), false) }
            let ledger = Ledger(s)
            do throws(BillingError) {
                let value = try body(ledger)
                let appended = ledger.state.events.count != s.events.count
                s = ledger.state
                return (.success(value), appended)
            } catch {
                return (.failure(error), false)
            }
        }
        if appended { notifyListener() }
        completion(result)
    }

    public func read<T: Sendable>(
        _ body: @escaping @Sendable (any PurchaseLedger) throws(BillingError) -> T,
        completion: @escaping @Sendable (Result<T, BillingError>) -> Void
    ) {
        let ledger = Ledger(state.withLock { $0 })
        do throws(BillingError) {
            completion(.success(try body(ledger)))
        } catch {
            completion(.failure(error))
        }
    }

    public func setEventListener(_ listener: @escaping @Sendable () -> Void) { self.listener.withLock { $0 = Listener(listener) } }

    private func notifyListener() { listener.withLock { $0 }?.call() }

    public func isReachable() -> Bool { true }
    public func close() {}
}
