import JOSE
import AppStore
import Glibc
import Synchronization

/// The in-memory twin of the App Store Server API, for tests: seeded with signed transactions (JWS, signed by the
/// test's own store; their payloads are read here without verification), it answers the endpoints with Apple's
/// shapes and error codes (the same rules `IntegrationTests/appstore_fake.py` keeps, which Apple's own client
/// checks), records every call, and fails the next call of an endpoint on request. It signs nothing itself:
/// Set App Account Token is recorded (`appAccountTokens`), the transactions it serves keep their JWS.
public final class InMemoryAppStoreAPI: AppStoreServerAPI {
    /// One call as the twin saw it: the endpoint's name (the client's metric name), the environment, the id in
    /// its path (or the product id) and the JSON fields that matter.
    public struct Call: Sendable, Equatable {
        public var endpoint: String
        public var environment: AppStoreAPIEnvironment
        public var id: String
        public var detail: String
    }

    private struct Entry {
        var jws: String
        var transactionID: String
        var originalTransactionID: String
        var productID: String
        var customer: String
        var expiresMs: Int64
        var revocationMs: Int64
        var familyShared: Bool
        var seq: Int
    }

    private struct State {
        var transactions: [AppStoreAPIEnvironment: [String: Entry]] = [:]
        var appTransactions: [AppStoreAPIEnvironment: [String: String]] = [:]
        var notifications: [AppStoreAPIEnvironment: [(signedMs: Int64, jws: String)]] = [:]
        var orders: [AppStoreAPIEnvironment: [String: [String]]] = [:]
        var massExtensions: [AppStoreAPIEnvironment: [String: AppStoreAPIModel.MassExtensionStatus]] = [:]
        var extensionsPerOriginal: [String: Int] = [:]
        var appAccountTokens: [String: String] = [:]
        var failures: [String: [AppStoreAPIError]] = [:]
        var calls: [Call] = []
        var seq = 0
    }

    private let state = Mutex(State())
    private let nowMs: @Sendable () -> Int64
    /// Items per page (Apple: 20).
    public let pageSize: Int

    /// `nowMs`: the clock that decides which subscriptions are active (default: the system's).
    public init(pageSize: Int = 20, nowMs: (@Sendable () -> Int64)? = nil) {
        self.pageSize = max(1, pageSize)
        self.nowMs = nowMs ?? { Int64(time(nil)) * 1000 }
    }

    // MARK: seeding and inspection

    /// Adds (or replaces, by transactionId) a signed transaction; `customer` is whose history it joins (default:
    /// the customer of its original transaction, else the original transaction id).
    public func add(_ jws: String, customer: String? = nil, in environment: AppStoreAPIEnvironment = .sandbox) {
        guard let parsed = try? JWS.parse(jws), case .object(let o)? = try? JSONReader.parse(parsed.payload),
            case .string(let id)? = o["transactionId"]
        else { preconditionFailure("InMemoryAppStoreAPI.add takes a signed transaction with a transactionId") }
        func text(_ k: String) -> String { if case .string(let s)? = o[k] { s } else { "" } }
        func int(_ k: String) -> Int64 { if case .integer(let n)? = o[k] { n } else { 0 } }
        let original = text("originalTransactionId").isEmpty ? id : text("originalTransactionId")
        state.withLock { s in
            s.seq += 1
            let known = s.transactions[environment]?.values.first { $0.originalTransactionID == original }?.customer
            s.transactions[environment, default: [:]][id] = Entry(
                jws: jws, transactionID: id, originalTransactionID: original, productID: text("productId"),
                customer: customer ?? s.transactions[environment]?[id]?.customer ?? known ?? original, expiresMs: int("expiresDate"),
                revocationMs: int("revocationDate"), familyShared: text("inAppOwnershipType") == "FAMILY_SHARED", seq: s.seq)
        }
    }

    /// The signed app transaction Get App Transaction Info answers for a customer.
    public func addAppTransaction(_ jws: String, customer: String, in environment: AppStoreAPIEnvironment = .sandbox) {
        state.withLock { $0.appTransactions[environment, default: [:]][customer] = jws }
    }

    /// A notification for Get Notification History.
    public func addNotification(_ jws: String, signedMs: Int64, in environment: AppStoreAPIEnvironment = .sandbox) {
        state.withLock { $0.notifications[environment, default: []].append((signedMs, jws)) }
    }

    /// Makes the transactions findable by an order id of a receipt email.
    public func addOrder(_ customerOrderID: String, transactionIDs: [String], in environment: AppStoreAPIEnvironment = .sandbox) {
        state.withLock { $0.orders[environment, default: [:]][customerOrderID] = transactionIDs }
    }

    /// The next call of `endpoint` (the client's metric name: `extend_renewal_date`, `refund_history`, ...) fails with `error`.
    public func failNext(_ endpoint: String, with error: AppStoreAPIError) {
        state.withLock { $0.failures[endpoint, default: []].append(error) }
    }

    /// Every call so far, oldest first.
    public var calls: [Call] { state.withLock { $0.calls } }

    /// The app account tokens set, by original transaction id.
    public var appAccountTokens: [String: String] { state.withLock { $0.appAccountTokens } }

    // MARK: the endpoints

    public func transactionInfo(_ transactionID: String, in environment: AppStoreAPIEnvironment) throws(AppStoreAPIError) -> String {
        try begin("transaction_info", environment, transactionID)
        return try entry(transactionID, environment).jws
    }

    public func transactionHistory(
        _ transactionID: String, revision: String?, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> AppStoreAPIModel.HistoryPage {
        try begin("transaction_history", environment, transactionID)
        let customer = try entry(transactionID, environment, originals: true).customer
        let rows = state.withLock { s in (s.transactions[environment] ?? [:]).values.filter { $0.customer == customer }.sorted { $0.seq < $1.seq } }
        return try page(rows.map(\.jws), revision)
    }

    public func subscriptionStatuses(
        _ transactionID: String, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> [AppStoreAPIModel.SubscriptionStatus] {
        try begin("subscription_statuses", environment, transactionID)
        let customer = try entry(transactionID, environment, originals: true).customer
        let now = nowMs()
        var latest: [String: Entry] = [:]
        for e in state.withLock({ s in (s.transactions[environment] ?? [:]).values.filter { $0.customer == customer && $0.expiresMs > 0 } }) {
            if let seen = latest[e.originalTransactionID], seen.seq > e.seq { continue }
            latest[e.originalTransactionID] = e
        }
        return latest.values.sorted { $0.seq < $1.seq }.map { e in
            AppStoreAPIModel.SubscriptionStatus(
                groupID: "", status: e.revocationMs > 0 ? 5 : (e.expiresMs > now ? 1 : 2), originalTransactionID: e.originalTransactionID,
                signedTransactionInfo: e.jws, signedRenewalInfo: "")
        }
    }

    public func notificationHistory(
        startMs: Int64, endMs: Int64, paginationToken: String?, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> AppStoreAPIModel.NotificationPage {
        try begin("notification_history", environment, "", "\(startMs)-\(endMs)")
        let rows = state.withLock { s in (s.notifications[environment] ?? []).filter { $0.signedMs >= startMs && $0.signedMs < endMs } }
            .sorted { $0.signedMs < $1.signedMs }.map(\.jws)
        let p = try page(rows, paginationToken)
        return AppStoreAPIModel.NotificationPage(signedPayloads: p.signedTransactions, paginationToken: p.hasMore ? p.revision : nil, hasMore: p.hasMore)
    }

    public func sendConsumption(
        _ transactionID: String, _ information: AppStoreAPIModel.ConsumptionInformation, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) {
        try begin("send_consumption", environment, transactionID, information.deliveryStatus)
        _ = try entry(transactionID, environment)
    }

    public func sendConsumptionV1(
        _ transactionID: String, _ information: AppStoreAPIModel.ConsumptionInformation, appAccountToken: String,
        in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) {
        try begin("send_consumption_v1", environment, transactionID, information.deliveryStatus)
        _ = try entry(transactionID, environment)
    }

    public func lookUpOrder(_ orderID: String, in environment: AppStoreAPIEnvironment) throws(AppStoreAPIError) -> [String]? {
        try begin("look_up_order", environment, orderID)
        return state.withLock { s in
            s.orders[environment]?[orderID].map { ids in ids.compactMap { s.transactions[environment]?[$0]?.jws } }
        }
    }

    public func requestTestNotification(in environment: AppStoreAPIEnvironment) throws(AppStoreAPIError) -> String {
        try begin("request_test_notification", environment, "")
        return "test-notification-\(state.withLock { $0.calls.count })"
    }

    public func testNotificationStatus(
        _ token: String, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> (signedPayload: String, attempts: [String]) {
        try begin("test_notification_status", environment, token)
        throw Self.notFound(4_040_008, "Test notification not found.")
    }

    public func extendRenewalDate(
        _ originalTransactionID: String, _ request: AppStoreAPIModel.RenewalExtension, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> AppStoreAPIModel.RenewalExtensionResult {
        try begin(
            "extend_renewal_date", environment, originalTransactionID,
            "\(request.extendByDays) \(request.reasonCode) \(request.requestIdentifier)")
        try Self.check(request)
        let family = state.withLock { s in (s.transactions[environment] ?? [:]).values.filter { $0.originalTransactionID == originalTransactionID } }
        guard let latest = family.max(by: { $0.expiresMs < $1.expiresMs }) else {
            throw Self.notFound(4_040_005, "Original transaction id not found.")
        }
        if latest.familyShared { throw .rejected(status: 403, code: 4_030_007, message: "Family Shared subscription extension ineligible.") }
        if latest.revocationMs > 0 || latest.expiresMs <= nowMs() {
            throw .rejected(status: 403, code: 4_030_004, message: "Subscription extension ineligible.")
        }
        let count = state.withLock { s in
            s.extensionsPerOriginal[originalTransactionID, default: 0] += 1
            return s.extensionsPerOriginal[originalTransactionID]!
        }
        if count > 2 { throw .rejected(status: 403, code: 4_030_005, message: "Subscription max extension.") }
        return AppStoreAPIModel.RenewalExtensionResult(
            originalTransactionID: originalTransactionID, webOrderLineItemID: "wol-" + latest.transactionID, success: true,
            effectiveDateMs: latest.expiresMs + Int64(request.extendByDays) * 86_400_000)
    }

    public func extendRenewalDatesForAll(
        productID: String, _ request: AppStoreAPIModel.RenewalExtension, storefrontCountryCodes: [String],
        in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> String {
        try begin(
            "extend_renewal_dates_mass", environment, productID,
            "\(request.extendByDays) \(request.reasonCode) \(request.requestIdentifier) \(storefrontCountryCodes.joined(separator: ","))")
        try Self.check(request)
        guard Self.isUUID(request.requestIdentifier) else { throw Self.badRequest(4_000_011, "Invalid request identifier.") }
        if productID.isEmpty { throw Self.badRequest(4_000_023, "Invalid product id.") }
        if storefrontCountryCodes.contains(where: { $0.utf8.count != 3 || !$0.utf8.allSatisfy { (65...90).contains($0) } }) {
            throw Self.badRequest(4_000_028, "Invalid storefront country code.")
        }
        let now = nowMs()
        state.withLock { s in
            let active = Set(
                (s.transactions[environment] ?? [:]).values.filter { $0.productID == productID && $0.revocationMs == 0 && $0.expiresMs > now }
                    .map(\.originalTransactionID))
            s.massExtensions[environment, default: [:]][productID + "/" + request.requestIdentifier] = AppStoreAPIModel.MassExtensionStatus(
                requestIdentifier: request.requestIdentifier, complete: true, completeDateMs: now, succeededCount: Int64(active.count),
                failedCount: 0)
        }
        return request.requestIdentifier
    }

    public func extensionStatus(
        productID: String, requestIdentifier: String, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> AppStoreAPIModel.MassExtensionStatus {
        try begin("extension_status", environment, productID, requestIdentifier)
        guard Self.isUUID(requestIdentifier) else { throw Self.badRequest(4_000_011, "Invalid request identifier.") }
        guard let status = state.withLock({ $0.massExtensions[environment]?[productID + "/" + requestIdentifier] }) else {
            throw Self.notFound(4_040_009, "Status request not found.")
        }
        return status
    }

    public func setAppAccountToken(
        _ originalTransactionID: String, appAccountToken: String, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) {
        try begin("set_app_account_token", environment, originalTransactionID, appAccountToken)
        guard Self.isUUID(appAccountToken) else { throw Self.badRequest(4_000_183, "Invalid request. The app account token field must be a valid UUID.") }
        let e = try entry(originalTransactionID, environment)
        if e.originalTransactionID != originalTransactionID {
            throw Self.badRequest(4_000_187, "Invalid request. The transaction ID provided is not an original transaction ID.")
        }
        if e.familyShared {
            throw Self.badRequest(4_000_185, "Invalid request. Family Sharing transactions aren't supported by this endpoint.")
        }
        state.withLock { $0.appAccountTokens[originalTransactionID] = appAccountToken }
    }

    public func refundHistory(
        _ transactionID: String, revision: String?, in environment: AppStoreAPIEnvironment
    ) throws(AppStoreAPIError) -> AppStoreAPIModel.HistoryPage {
        try begin("refund_history", environment, transactionID)
        let customer = try entry(transactionID, environment, originals: true).customer
        let rows = state.withLock { s in
            (s.transactions[environment] ?? [:]).values.filter { $0.customer == customer && $0.revocationMs > 0 }
                .sorted { ($0.revocationMs, $0.seq) < ($1.revocationMs, $1.seq) }
        }
        return try page(rows.map(\.jws), revision)
    }

    public func appTransactionInfo(_ transactionID: String, in environment: AppStoreAPIEnvironment) throws(AppStoreAPIError) -> String {
        try begin("app_transaction_info", environment, transactionID)
        let customer = try entry(transactionID, environment, originals: true).customer
        guard let jws = state.withLock({ $0.appTransactions[environment]?[customer] }) else {
            throw Self.notFound(4_040_019, "No AppTransaction exists for the customer.")
        }
        return jws
    }

    // MARK: helpers

    /// Logs the call, then fails it if a failure was queued for its endpoint.
    private func begin(_ endpoint: String, _ environment: AppStoreAPIEnvironment, _ id: String, _ detail: String = "") throws(AppStoreAPIError) {
        let failure: AppStoreAPIError? = state.withLock { s in
            s.calls.append(Call(endpoint: endpoint, environment: environment, id: id, detail: detail))
            guard var queued = s.failures[endpoint], !queued.isEmpty else { return nil }
            let first = queued.removeFirst()
            s.failures[endpoint] = queued
            return first
        }
        if let failure { throw failure }
    }

    /// The transaction with that id (with `originals`, also a transaction of an original id not stored itself).
    private func entry(_ id: String, _ environment: AppStoreAPIEnvironment, originals: Bool = false) throws(AppStoreAPIError) -> Entry {
        guard !id.isEmpty, id.utf8.allSatisfy({ (48...57).contains($0) }) else { throw Self.badRequest(4_000_006, "Invalid transaction id.") }
        let found = state.withLock { s -> Entry? in
            let all = s.transactions[environment] ?? [:]
            return all[id] ?? (originals ? all.values.first { $0.originalTransactionID == id } : nil)
        }
        guard let found else { throw Self.notFound(4_040_010, "Transaction id not found.") }
        return found
    }

    /// A page of `rows` after the revision (the count already answered, as text).
    private func page(_ rows: [String], _ revision: String?) throws(AppStoreAPIError) -> AppStoreAPIModel.HistoryPage {
        var start = 0
        if let revision {
            guard let n = Int(revision), n >= 0 else { throw Self.badRequest(4_000_005, "Invalid request revision.") }
            start = min(n, rows.count)
        }
        let end = min(rows.count, start + pageSize)
        return AppStoreAPIModel.HistoryPage(signedTransactions: Array(rows[start..<end]), revision: String(end), hasMore: end < rows.count)
    }

    private static func check(_ r: AppStoreAPIModel.RenewalExtension) throws(AppStoreAPIError) {
        guard (1...90).contains(r.extendByDays) else { throw badRequest(4_000_009, "Invalid extend by days value.") }
        guard (0...3).contains(r.reasonCode) else { throw badRequest(4_000_010, "Invalid extend reason code.") }
        guard !r.requestIdentifier.isEmpty, r.requestIdentifier.utf8.count <= 128 else {
            throw badRequest(4_000_011, "Invalid request identifier.")
        }
    }

    static func isUUID(_ s: String) -> Bool {
        let b = Array(s.utf8)
        guard b.count == 36 else { return false }
        for (i, c) in b.enumerated() {
            if [8, 13, 18, 23].contains(i) {
                if c != UInt8(ascii: "-") { return false }
            } else if !((48...57).contains(c) || (65...70).contains(c) || (97...102).contains(c)) {
                return false
            }
        }
        return true
    }

    private static func badRequest(_ code: Int64, _ message: String) -> AppStoreAPIError { .rejected(status: 400, code: code, message: message) }
    private static func notFound(_ code: Int64, _ message: String) -> AppStoreAPIError { .notFound(code: code, message: message) }
}
