public import AfterSale
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
