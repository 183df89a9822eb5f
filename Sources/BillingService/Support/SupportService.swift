public import Billing
import BillingAPI
import ProtoWire
public import RPC
import Synchronization

/// billing.v1.Support: what support staff need to find a customer and see their account. Every call, reads too
/// (they show personal data), writes one audit entry: a call that answers writes it in the same database
/// transaction as its reads (and, for the calls that change something, its change); a refused call writes one
/// with the refusal as its outcome.
public final class SupportService: Sendable {
    public static let findCustomers = "billing.v1.Support/FindCustomers"
    public static let getCustomer = "billing.v1.Support/GetCustomer"
    public static let listAuditEntries = "billing.v1.Support/ListAuditEntries"
    public static let explainAccess = "billing.v1.Support/ExplainAccess"
    public static let grantEntitlement = "billing.v1.Support/GrantEntitlement"
    public static let revokeGrant = "billing.v1.Support/RevokeGrant"
    public static let transferPurchases = "billing.v1.Support/TransferPurchases"
    public static let refundPurchase = "billing.v1.Support/RefundPurchase"
    public static let deleteCustomer = "billing.v1.Support/DeleteCustomer"
    public static let methods = [
        findCustomers, getCustomer, explainAccess, grantEntitlement, revokeGrant, transferPurchases, refundPurchase, deleteCustomer,
        listAuditEntries,
    ]

    /// Bounds of the request fields (docs/SUPPORT.md).
    public enum Limits {
        public static let query = 512
        public static let filter = 512
        public static let reason = 500
        /// A grant's duration: at most 100 years.
        public static let grantSeconds: Int64 = 100 * 366 * 86_400
        /// Original transactions one TransferPurchases names.
        public static let transferIDs = 1000
    }

    let store: any OrderStore
    /// Where the calls that wait on a store API run.
    let pools: WorkerPools
    let clock: any WallClock
    let catalog: Catalog?
    /// RefundPurchase's store half (Google Play orders.refund and revoke); nil when Google Play is not configured.
    /// Blocking: called on the Google Play pool.
    let refunder: (any StoreRefunder)?
    /// Who calls: the API key's name, the client certificate's subject, or "anonymous".
    let operatorName: @Sendable (CallContext) -> String
    /// The request in proto3 JSON (message name, binary), for the audit entry.
    let requestJSON: @Sendable (String, [UInt8]) -> String
    /// The transaction ids of an App Store customer's Order ID (the App Store Server API's Look Up Order ID);
    /// nil when the API is not configured. Blocking: called on the App Store pool.
    let appleOrder: (@Sendable (String) throws(BillingError) -> [String])?
    /// A line for the operator's log (an audit entry that could not be written).
    let log: @Sendable (String) -> Void

    public init(
        store: any OrderStore, clock: any WallClock = SystemClock(), catalog: Catalog? = nil,
        operatorName: @escaping @Sendable (CallContext) -> String, requestJSON: @escaping @Sendable (String, [UInt8]) -> String,
        appleOrder: (@Sendable (String) throws(BillingError) -> [String])? = nil, refunder: (any StoreRefunder)? = nil,
        pools: WorkerPools = WorkerPools(), log: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.pools = pools
        self.log = log
        self.store = store
        self.clock = clock
        self.catalog = catalog
        self.refunder = refunder
        self.operatorName = operatorName
        self.requestJSON = requestJSON
        self.appleOrder = appleOrder
    }

    public func register(in router: inout Router) {
        let looksUpApple = appleOrder != nil, pools = self.pools
        router.register(
            Self.findCustomers, FindCustomersRequest.self,
            on: { request in looksUpApple && Self.mayBeAppleOrderID(Self.trimmed(request.query)) ? .pool(pools.appStore) : .loop }
        ) { [self] context, request, responder in
            findCustomers(context, request, responder)
        }
        router.register(Self.getCustomer, GetCustomerRequest.self) { [self] context, request, responder in
            getCustomer(context, request, responder)
        }
        router.register(Self.listAuditEntries, ListAuditEntriesRequest.self) { [self] context, request, responder in
            listAuditEntries(context, request, responder)
        }
        router.register(Self.explainAccess, ExplainAccessRequest.self) { [self] context, request, responder in
            explainAccess(context, request, responder)
        }
        router.register(Self.grantEntitlement, GrantEntitlementRequest.self) { [self] context, request, responder in
            grantEntitlement(context, request, responder)
        }
        router.register(Self.revokeGrant, RevokeGrantRequest.self) { [self] context, request, responder in
            revokeGrant(context, request, responder)
        }
        router.register(Self.transferPurchases, TransferPurchasesRequest.self) { [self] context, request, responder in
            transferPurchases(context, request, responder)
        }
        // On the Google Play pool always: it reads the ledger, then may wait on the store, blocking its thread.
        router.register(Self.refundPurchase, RefundPurchaseRequest.self, on: .pool(pools.googlePlay)) {
            [self] context, request, responder in
            refundPurchase(context, request, responder)
        }
        router.register(Self.deleteCustomer, DeleteCustomerRequest.self) { [self] context, request, responder in
            deleteCustomer(context, request, responder)
        }
    }

    // MARK: The audit trail

    /// What one call's audit entry says, before its outcome is known.
    struct Audit: Sendable {
        var operatorName: String
        var method: String
        var accountID: String
        var target: String
        var reason: String
        var requestJSON: String

        func record(outcome: String, timeMs: Int64) -> AuditRecord {
            let (id, ms) = AuditID.make(timeMs)
            return AuditRecord(
                auditID: id, timeMs: ms, operatorName: operatorName, method: method, accountID: accountID,
                target: target, reason: reason, outcome: outcome, requestJSON: requestJSON)
        }
    }

    func makeAudit<M: ProtoMessage>(
        _ context: CallContext, _ message: String, _ request: M, account: String, target: String, reason: String = ""
    )
        -> Audit
    {
        Audit(
            operatorName: operatorName(context), method: context.method, accountID: Self.bounded(account), target: Self.redacted(Self.bounded(target)),
            reason: Self.bounded(reason), requestJSON: Self.redacted(requestJSON(message, request.encoded())))
    }

    /// Runs `body` in one database transaction with the call's audit entry (outcome OK) and answers its value;
    /// a refusal or a failure rolls both back, then the entry is written alone with the refusal as its outcome.
    /// `adjust` may rewrite the entry from the answer before it is written (erasure: the pseudonym, not the id).
    func run<R: ProtoMessage>(
        _ audit: Audit, _ context: CallContext, _ responder: Responder,
        adjust: (@Sendable (inout Audit, R) -> Void)? = nil, abandonable: Bool = true,
        _ body: @escaping @Sendable (any PurchaseLedger, Int64) throws(BillingError) -> R
    ) {
        let clock = self.clock
        store.write(
            abandoned: { abandonable && context.isExpired },
            { ledger throws(BillingError) in
                let now = clock.nowMilliseconds()
                let answer = try body(ledger, now)
                var entry = audit
                adjust?(&entry, answer)
                try ledger.appendAudit(entry.record(outcome: "OK", timeMs: now))
                return answer
            }
        ) { [self] result in
            switch result {
            case .success(let answer): responder.succeed(answer)
            case .failure(let error): refuse(error.rpcError, audit, responder)
            }
        }
    }

    /// Answers a refusal once its audit entry is written (or could not be: the refusal still answers, and the
    /// failure to audit is the caller's error only when the refusal is not already a storage failure).
    func refuse(_ error: RPCError, _ audit: Audit, _ responder: Responder) {
        let record = audit.record(outcome: Self.outcome(error), timeMs: clock.nowMilliseconds())
        store.write(abandoned: { false }, { ledger throws(BillingError) in try ledger.appendAudit(record) }) { _ in
            responder.fail(error)
        }
    }

    /// A call refused before it reached the service (UNAUTHENTICATED, PERMISSION_DENIED): its entry, under the
    /// presented key's name when it has one. Written after the refusal is answered.
    public func auditRefusal(_ context: CallContext, _ error: RPCError) {
        let (id, ms) = AuditID.make(clock.nowMilliseconds())
        let record = AuditRecord(
            auditID: id, timeMs: ms, operatorName: operatorName(context),
            method: context.method, accountID: "", target: "", reason: "", outcome: Self.outcome(error), requestJSON: "")
        store.write(abandoned: { false }, { ledger throws(BillingError) in try ledger.appendAudit(record) }) { [self] written in
            if case .failure(let e) = written { log("audit entry not written for refused \(record.method) by \(record.operatorName): \(e)") }
        }
    }

    /// The Admin calls that change something, with their request types: each is audited as a Support call is
    /// (`auditing`), its entry written once the call has its outcome, before the caller hears it.
    public static let auditedAdminMethods: [(method: String, request: String)] = [
        ("billing.admin.v1.Admin/Reconcile", "billing.admin.v1.ReconcileRequest"),
        ("billing.admin.v1.Admin/ExtendRenewalDate", "billing.admin.v1.ExtendRenewalDateRequest"),
        ("billing.admin.v1.Admin/ExtendRenewalDatesForAll", "billing.admin.v1.ExtendRenewalDatesForAllRequest"),
        ("billing.admin.v1.Admin/SetAppAccountToken", "billing.admin.v1.SetAppAccountTokenRequest"),
        ("billing.admin.v1.Admin/ReplayWebhooks", "billing.admin.v1.ReplayWebhooksRequest"),
        ("billing.admin.v1.Admin/RequestTestNotification", "billing.admin.v1.RequestTestNotificationRequest"),
    ]

    /// Whether calls of `method` are in the audit trail: every Support method, and the Admin methods that change something.
    public static func isAudited(_ method: String) -> Bool {
        method.hasPrefix("billing.v1.Support/") || auditedAdminMethods.contains { $0.method == method }
    }

    /// `handler` with its audit entry: the operator, the method, the request in JSON (emails removed), and the
    /// outcome, written before the answer is delivered (a caller that saw the answer finds the entry).
    public func auditing(_ requestType: String, _ handler: @escaping UnaryHandler) -> UnaryHandler {
        { [self] context, bytes, responder in
            let json = Self.redacted(requestJSON(requestType, bytes))
            let name = operatorName(context)
            let audited = Responder { [self] result in
                let outcome: String
                switch result {
                case .success: outcome = "OK"
                case .failure(let error): outcome = Self.outcome(error)
                }
                let (id, ms) = AuditID.make(clock.nowMilliseconds())
                let record = AuditRecord(
                    auditID: id, timeMs: ms, operatorName: name, method: context.method, accountID: Self.bounded(Self.accountNamed(json)),
                    target: "", reason: Self.bounded(Self.fieldNamed("reason", json)), outcome: outcome, requestJSON: json)
                store.write(abandoned: { false }, { ledger throws(BillingError) in try ledger.appendAudit(record) }) { [self] written in
                    if case .failure(let error) = written {
                        log("audit entry not written for \(record.method) by \(record.operatorName) (outcome \(outcome)): \(error)")
                    }
                    switch result {
                    case .success(let framed): responder.succeed(framed: framed)
                    case .failure(let error): responder.fail(error)
                    }
                }
            }
            handler(context, bytes, audited)
        }
    }

    /// The `accountId` member of a request's JSON, when it has one.
    static func accountNamed(_ json: String) -> String { fieldNamed("accountId", json) }

    /// A top-level string member of the request's canonical JSON (`"name":"value"`, no escapes), or "".
    static func fieldNamed(_ name: String, _ json: String) -> String {
        let key = Array("\"\(name)\":\"".utf8), bytes = Array(json.utf8)
        guard bytes.count > key.count else { return "" }
        for i in 0...(bytes.count - key.count) where bytes[i..<(i + key.count)].elementsEqual(key) {
            var j = i + key.count
            var value: [UInt8] = []
            while j < bytes.count, bytes[j] != UInt8(ascii: "\""), bytes[j] != UInt8(ascii: "\\") {
                value.append(bytes[j])
                j += 1
            }
            return j < bytes.count && bytes[j] == UInt8(ascii: "\"") ? String(decoding: value, as: UTF8.self) : ""
        }
        return ""
    }

    /// "OK", the ErrorInfo reason, else the status code's name.
    static func outcome(_ error: RPCError) -> String {
        if let reason = error.reason, !reason.isEmpty { return reason }
        return error.code.description
    }

    // MARK: FindCustomers

    func findCustomers(_ context: CallContext, _ request: FindCustomersRequest, _ responder: Responder) {
        let query = Self.trimmed(request.query)
        let audit = makeAudit(context, "billing.v1.FindCustomersRequest", request, account: "", target: query)
        do throws(BillingError) {
            try OrderService.checkText(query, field: "query", max: Limits.query, required: true)
        } catch {
            return refuse(error.rpcError, audit, responder)
        }
        // The App Store Order ID on a customer's invoice: Apple names its transactions (a blocking call, on the
        // App Store pool: `register` put this call there).
        var appleTransactions: [String] = []
        if let appleOrder, Self.mayBeAppleOrderID(query) {
            do throws(BillingError) {
                appleTransactions = try appleOrder(query)
            } catch {
                if case .invalidField = error {
                    // Not an order id Apple knows the shape of: no Apple match.
                } else {
                    return refuse(error.rpcError, audit, responder)
                }
            }
        }
        let found = appleTransactions
        run(audit, context, responder) { ledger, now throws(BillingError) in
            var matches: [(account: String, kind: CustomerMatchKind)] = []
            func add(_ account: String, _ kind: CustomerMatchKind) {
                guard !account.isEmpty, !matches.contains(where: { $0.account == account }) else { return }
                matches.append((account, kind))
            }
            if Self.isAccountID(query), try Self.known(ledger, accountID: query) { add(query, .accountID) }
            if let id = OrderID.canonical(query) {
                if let order = try ledger.order(id: id) { add(order.accountID, .orderID) }
                // billingd's order ids are the appAccountTokens apps pass to StoreKit.
                for account in try ledger.accounts(appAccountToken: id) { add(account, .appAccountToken) }
            }
            if query.utf8.count <= BillingService.maxLookupIDBytes {
                if let owned = try ledger.owned(transactionID: query) { add(owned.accountID, .transactionID) }
                for owned in try ledger.transactions(originalTransactionID: query) { add(owned.accountID, .originalTransactionID) }
                if let owned = try ledger.transaction(purchaseToken: query) {
                    // Every account that held a transaction of the token's subscription.
                    for t in try ledger.transactions(originalTransactionID: owned.transaction.originalTransactionID) {
                        add(t.accountID, .purchaseToken)
                    }
                    add(owned.accountID, .purchaseToken)
                }
            }
            if query.hasPrefix("grant_"), let grant = try ledger.grant(id: query) { add(grant.accountID, .grantID) }
            for id in found {
                if let owned = try ledger.owned(transactionID: id) { add(owned.accountID, .appleOrderID) }
            }
            var response = FindCustomersResponse()
            for m in matches {
                guard let summary = try Self.summary(ledger, accountID: m.account, nowMs: now) else { continue }
                var match = CustomerMatch()
                match.customer = summary
                match.matched = m.kind.rawValue
                response.matches.append(match)
            }
            return response
        }
    }

    /// An App Store customer's Order ID as the invoice shows it (letters and digits, e.g. MK5TTTVWJH).
    static func mayBeAppleOrderID(_ s: String) -> Bool {
        s.utf8.count >= 6 && s.utf8.count <= 32
            && s.utf8.allSatisfy { ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || ($0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z")) }
            && s.utf8.contains { $0 >= UInt8(ascii: "A") }
    }

    // MARK: GetCustomer

    func getCustomer(_ context: CallContext, _ request: GetCustomerRequest, _ responder: Responder) {
        let account = request.accountID
        let audit = makeAudit(context, "billing.v1.GetCustomerRequest", request, account: account, target: "")
        do throws(BillingError) {
            try OrderService.checkAccountID(account, required: true)
        } catch {
            return refuse(error.rpcError, audit, responder)
        }
        run(audit, context, responder) { ledger, now throws(BillingError) in
            guard let summary = try Self.summary(ledger, accountID: account, nowMs: now) else {
                throw .accountNotFound(accountID: account)
            }
            var response = GetCustomerResponse()
            response.customer = summary
            response.entitlements = try ledger.entitlements(accountID: account).map { $0.entitlement(nowMs: now) }
                .sorted { ($0.productID, $0.originalTransactionID) < ($1.productID, $1.originalTransactionID) }
                .map(BillingAPI.Entitlement.init)
            response.grants = try ledger.grants(accountID: account).map(BillingAPI.Grant.init)
            return response
        }
    }

    static func isAccountID(_ s: String) -> Bool {
        do throws(BillingError) {
            try OrderService.checkAccountID(s, required: true)
            return true
        } catch {
            return false
        }
    }

    static func known(_ ledger: any PurchaseLedger, accountID: String) throws(BillingError) -> Bool {
        try AccountRules.known(ledger, accountID: accountID)
    }

    static func summary(_ ledger: any PurchaseLedger, accountID: String, nowMs: Int64) throws(BillingError) -> BillingAPI.CustomerSummary? {
        let entitlements = try ledger.entitlements(accountID: accountID).map { $0.entitlement(nowMs: nowMs) }
        let orders = try ledger.orders(accountID: accountID)
        let transactions = try ledger.transactions(accountID: accountID)
        let grants = try ledger.grants(accountID: accountID)
        guard
            let s = AccountSummary.of(
                accountID: accountID, orders: orders, transactions: transactions, entitlements: entitlements, grants: grants)
        else { return nil }
        var out = BillingAPI.CustomerSummary()
        out.accountID = s.accountID
        out.firstSeenTimeMs = s.firstSeenTimeMs
        out.lastSeenTimeMs = s.lastSeenTimeMs
        out.activeEntitlements = Int32(clamping: s.activeEntitlements)
        out.orders = Int32(clamping: s.orders)
        out.transactions = Int32(clamping: s.transactions)
        out.refundedTransactions = Int32(clamping: s.refundedTransactions)
        out.spent = s.spent.map { Money(currency: $0.currency, milliunits: $0.milliunits) }
        out.stores = s.stores.map { BillingAPI.Store(rawValue: Int32($0.rawValue)) }
        out.deleted = Pseudonym.isPseudonym(accountID)
        return out
    }

    // MARK: ListAuditEntries

    func listAuditEntries(_ context: CallContext, _ request: ListAuditEntriesRequest, _ responder: Responder) {
        let audit = makeAudit(context, "billing.v1.ListAuditEntriesRequest", request, account: request.accountID, target: request.operatorName)
        for (field, value) in [("account_id", request.accountID), ("operator", request.operatorName), ("method", request.method)] {
            do throws(BillingError) {
                try OrderService.checkText(value, field: field, max: Limits.filter, required: false)
            } catch {
                return refuse(error.rpcError, audit, responder)
            }
        }
        guard request.limit >= 0 else {
            return refuse(BillingError.invalidField(field: "limit", problem: "must not be negative (0 means 100)").rpcError, audit, responder)
        }
        guard request.sinceTimeMs >= 0, request.untilTimeMs >= 0 else {
            return refuse(BillingError.invalidField(field: "since_time_ms", problem: "must not be negative").rpcError, audit, responder)
        }
        var after: AuditCursor?
        if !request.pageToken.isEmpty {
            guard let cursor = AuditPageToken.decode(request.pageToken) else {
                return refuse(
                    BillingError.invalidField(field: "page_token", problem: "is not a token ListAuditEntries made").rpcError, audit, responder)
            }
            after = cursor
        }
        let limit = request.limit == 0 ? 100 : min(Int(request.limit), 1000)
        let filter = AuditFilter(
            accountID: request.accountID, operatorName: request.operatorName, method: request.method, sinceTimeMs: request.sinceTimeMs,
            untilTimeMs: request.untilTimeMs)
        let start = after
        run(audit, context, responder) { ledger, _ throws(BillingError) in
            // One more than the page: whether another page follows, without an empty last page.
            let rows = try ledger.auditEntries(filter, after: start, limit: limit + 1)
            var response = ListAuditEntriesResponse()
            response.entries = rows.prefix(limit).map { e in
                var out = AuditEntry()
                out.auditID = e.auditID
                out.timeMs = e.timeMs
                out.operatorName = e.operatorName
                out.method = e.method
                out.accountID = e.accountID
                out.target = e.target
                out.reason = e.reason
                out.outcome = e.outcome
                out.requestJSON = e.requestJSON
                return out
            }
            if rows.count > limit, let last = rows.prefix(limit).last {
                response.nextPageToken = AuditPageToken.encode(AuditCursor(timeMs: last.timeMs, auditID: last.auditID))
            }
            return response
        }
    }

    // MARK: Text

    /// Spaces and tabs around a query are ignored.
    static func trimmed(_ s: String) -> String {
        var u = Substring(s)
        while let c = u.first, c == " " || c == "\t" { u.removeFirst() }
        while let c = u.last, c == " " || c == "\t" { u.removeLast() }
        return String(u)
    }

    /// At most 512 bytes of a value kept in the trail (whole UTF-8 characters).
    static func bounded(_ s: String) -> String {
        guard s.utf8.count > 512 else { return s }
        var out = ""
        for c in s {
            if out.utf8.count + c.utf8.count > 512 { break }
            out.append(c)
        }
        return out
    }

    /// Every e-mail address replaced by `[email]`: the trail keeps who acted and on what, not a person's address.
    static func redacted(_ s: String) -> String {
        guard s.contains("@") else { return s }
        let scalars = Array(s.unicodeScalars)
        func local(_ c: Unicode.Scalar) -> Bool {
            (c.properties.isAlphabetic || c.properties.numericType != nil) || "._%+-'".unicodeScalars.contains(c)
        }
        func domain(_ c: Unicode.Scalar) -> Bool { c.properties.isAlphabetic || c.properties.numericType != nil || c == "-" || c == "." }
        var out = String.UnicodeScalarView()
        var i = 0
        var pendingStart = 0
        while i < scalars.count {
            if scalars[i] == "@" {
                var start = i
                while start > pendingStart && local(scalars[start - 1]) { start -= 1 }
                var end = i + 1
                while end < scalars.count && domain(scalars[end]) { end += 1 }
                let host = scalars[(i + 1)..<end]
                if start < i, host.contains("."), host.first != ".", host.last != "." {
                    out.append(contentsOf: scalars[pendingStart..<start])
                    out.append(contentsOf: "[email]".unicodeScalars)
                    pendingStart = end
                    i = end
                    continue
                }
            }
            i += 1
        }
        out.append(contentsOf: scalars[pendingStart...])
        return String(out)
    }
}

/// Audit ids: "audit_" + a UUID v7 whose 12 bits after the version are a counter within the millisecond
/// (RFC 9562, 6.2 method 1), so that one process's entries sort by (time, id) in the order they were made, even
/// several in one millisecond; the time never goes back within a process.
enum AuditID {
    private static let last = Mutex<(ms: Int64, counter: Int)>((0, 0))

    static func make(_ nowMs: Int64) -> (id: String, ms: Int64) {
        let (ms, counter) = last.withLock { state -> (Int64, Int) in
            if nowMs > state.ms {
                state = (nowMs, 0)
            } else if state.counter < 0xFFF {
                state.counter += 1
            } else {
                state = (state.ms + 1, 0)
            }
            return state
        }
        var id = Array(OrderID.make(milliseconds: ms).utf8)
        // Characters 15-17 of the canonical form are the 12 bits after the version digit (index 14).
        let hex = Array("0123456789abcdef".utf8)
        id[15] = hex[(counter >> 8) & 15]
        id[16] = hex[(counter >> 4) & 15]
        id[17] = hex[counter & 15]
        return ("audit_" + String(decoding: id, as: UTF8.self), ms)
    }
}

/// ListAuditEntries' `page_token`: unpadded base64url of `<time ms>:<audit id>`, the last entry of the page.
enum AuditPageToken {
    static func encode(_ cursor: AuditCursor) -> String { PageToken.base64URL("\(cursor.timeMs):\(cursor.auditID)") }

    static func decode(_ token: String) -> AuditCursor? {
        guard token.utf8.count <= 128, let bytes = Base64.decode(token), let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
            let ms = Int64(String(decoding: bytes[..<colon], as: UTF8.self)), ms >= 0,
            let id = String(validating: bytes[(colon + 1)...], as: UTF8.self), id.hasPrefix("audit_"),
            OrderID.canonical(String(id.dropFirst(6))) == String(id.dropFirst(6))
        else { return nil }
        let cursor = AuditCursor(timeMs: ms, auditID: id)
        return encode(cursor) == token ? cursor : nil
    }
}
