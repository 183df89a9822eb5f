/// One entry of the audit trail: an operator's call (Support, and the Admin calls that change something), written
/// in the same database transaction as what the call changed, so that neither exists without the other. Entries
/// are append-only: no method updates or deletes one.
public struct AuditRecord: Sendable, Equatable {
    /// "audit_" + a lowercase UUID (version 7: time-ordered).
    public var auditID: String
    public var timeMs: Int64
    /// The API key's name, the client certificate's subject, or "anonymous" when neither identifies the caller.
    public var operatorName: String
    /// The full method name, `billing.v1.Support/GetCustomer`.
    public var method: String
    /// The account acted on or read; empty when none.
    public var accountID: String
    /// What else the call named: a query, a grant, a transaction or an order.
    public var target: String
    /// The request's reason, when it has one.
    public var reason: String
    /// "OK", or the ErrorInfo reason (else the status code name) the call failed with.
    public var outcome: String
    /// The request in proto3 JSON, secrets and emails removed.
    public var requestJSON: String

    public init(
        auditID: String, timeMs: Int64, operatorName: String, method: String, accountID: String, target: String,
        reason: String, outcome: String, requestJSON: String
    ) {
        self.auditID = auditID
        self.timeMs = timeMs
        self.operatorName = operatorName
        self.method = method
        self.accountID = accountID
        self.target = target
        self.reason = reason
        self.outcome = outcome
        self.requestJSON = requestJSON
    }
}

/// Which audit entries ListAuditEntries reads: every set field must match; times are inclusive, 0 is unbounded.
public struct AuditFilter: Sendable, Equatable {
    public var accountID = ""
    public var operatorName = ""
    public var method = ""
    public var sinceTimeMs: Int64 = 0
    public var untilTimeMs: Int64 = 0

    public init(accountID: String = "", operatorName: String = "", method: String = "", sinceTimeMs: Int64 = 0, untilTimeMs: Int64 = 0) {
        self.accountID = accountID
        self.operatorName = operatorName
        self.method = method
        self.sinceTimeMs = sinceTimeMs
        self.untilTimeMs = untilTimeMs
    }

    public func matches(_ e: AuditRecord) -> Bool {
        (accountID.isEmpty || e.accountID == accountID) && (operatorName.isEmpty || e.operatorName == operatorName)
            && (method.isEmpty || e.method == method) && (sinceTimeMs == 0 || e.timeMs >= sinceTimeMs)
            && (untilTimeMs == 0 || e.timeMs <= untilTimeMs)
    }
}

/// Where a page of the audit trail ends (newest first): the last entry answered.
public struct AuditCursor: Sendable, Equatable {
    public var timeMs: Int64
    public var auditID: String
    public init(timeMs: Int64, auditID: String) {
        self.timeMs = timeMs
        self.auditID = auditID
    }

    /// True when `e` comes after this cursor in the trail's order (time descending, then id descending).
    public func precedes(_ e: AuditRecord) -> Bool { (e.timeMs, e.auditID) < (timeMs, auditID) }
}

/// Money in one currency, in thousandths of its unit.
public struct MoneyAmount: Sendable, Equatable {
    public var currency: String
    public var milliunits: Int64
    public init(currency: String, milliunits: Int64) {
        self.currency = currency
        self.milliunits = milliunits
    }
}

/// What support sees of an account at a glance (billing.v1.CustomerSummary).
public struct AccountSummary: Sendable, Equatable {
    public var accountID: String
    /// Its oldest order or transaction; its newest.
    public var firstSeenTimeMs: Int64 = 0
    public var lastSeenTimeMs: Int64 = 0
    public var activeEntitlements = 0
    public var orders = 0
    /// Owned now.
    public var transactions = 0
    public var refundedTransactions = 0
    /// Paid, less refunds, per currency, sorted by currency (Revenue's definitions, every environment).
    public var spent: [MoneyAmount] = []
    /// The stores its transactions come from, in `Store` order.
    public var stores: [Store] = []

    public init(accountID: String) { self.accountID = accountID }

    /// The summary of one account's records: its orders, the transactions it owns and its entitlements at `nowMs`.
    /// nil when it has none of them (billingd has no record of the account).
    public static func of(
        accountID: String, orders: [Order], transactions: [OwnedTransaction], entitlements: [Entitlement], grants: [GrantRecord] = []
    ) -> AccountSummary? {
        guard !orders.isEmpty || !transactions.isEmpty || !entitlements.isEmpty || !grants.isEmpty else { return nil }
        var s = AccountSummary(accountID: accountID)
        s.orders = orders.count
        s.transactions = transactions.count
        s.activeEntitlements = entitlements.filter(\.active).count
        let times = orders.map(\.createTimeMs) + transactions.map(\.transaction.purchaseTimeMs) + grants.map(\.startTimeMs)
        s.firstSeenTimeMs = times.min() ?? 0
        s.lastSeenTimeMs = times.max() ?? 0
        var spent: [String: Int64] = [:]
        var stores = Set<Store>()
        for owned in transactions {
            let t = owned.transaction
            stores.insert(t.store)
            if t.isRevoked && t.revocationType != .familyRevoke { s.refundedTransactions += 1 }
            let paid = t.paidMilliunits
            guard t.ownership == .purchased, !t.price.currency.isEmpty, paid > 0 else { continue }
            spent[t.price.currency, default: 0] += paid - t.refundedMilliunits
        }
        s.spent = spent.keys.sorted().map { MoneyAmount(currency: $0, milliunits: spent[$0]!) }
        s.stores = stores.sorted { $0.rawValue < $1.rawValue }
        return s
    }
}

extension StoreTransaction {
    /// What it paid: the unit price times the quantity (Revenue's GROSS); 0 when the price is unknown.
    public var paidMilliunits: Int64 { price.priceMilliunits * Int64(quantity) }

    /// What of it was refunded (Revenue's REFUNDS): all of it for a full refund (or a revocation that does not say
    /// how), the prorated share (rounded half away from zero) for a prorated one, nothing for a Family Sharing
    /// revocation or while not revoked.
    public var refundedMilliunits: Int64 {
        guard isRevoked else { return 0 }
        switch revocationType {
        case .unspecified, .refundFull: return paidMilliunits
        case .refundProrated:
            let (q, r) = (paidMilliunits * Int64(revocationPercentage)).quotientAndRemainder(dividingBy: 100_000)
            return q + (r * 2 >= 100_000 ? 1 : 0)
        case .familyRevoke: return 0
        }
    }
}

/// What a support query matched, as `CustomerMatch.matched` names it.
public enum CustomerMatchKind: String, Sendable, Equatable, CaseIterable {
    case accountID = "account_id"
    case orderID = "order_id"
    case transactionID = "transaction_id"
    case originalTransactionID = "original_transaction_id"
    case purchaseToken = "purchase_token"
    case appAccountToken = "app_account_token"
    case appleOrderID = "apple_order_id"
    case grantID = "grant_id"
}

/// The account id an erasure leaves: "deleted_" + a lowercase UUID.
public enum Pseudonym {
    public static func make(nowMs: Int64) -> String { "deleted_" + OrderID.make(milliseconds: nowMs) }
    public static func isPseudonym(_ s: String) -> Bool {
        s.hasPrefix("deleted_") && OrderID.canonical(String(s.dropFirst(8))) == String(s.dropFirst(8))
    }
}

/// The audit trail's text rewrites (erasure).
public enum AuditText {
    /// `json` with every JSON string whose value is exactly `old` replaced by one whose value is `new`.
    public static func replacing(_ old: String, with new: String, in json: String) -> String {
        let from = "\"" + escaped(old) + "\"", to = "\"" + escaped(new) + "\""
        guard json.contains(from) else { return json }
        return json.replacingAll(from, with: to)
    }

    /// A string's JSON form without its quotes (RFC 8259: quote, backslash and control characters escaped).
    public static func escaped(_ s: String) -> String {
        var out = ""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if u.value < 0x20 {
                    let hex = Array("0123456789abcdef")
                    out += "\\u00" + String(hex[Int(u.value >> 4)]) + String(hex[Int(u.value & 15)])
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        return out
    }
}

extension String {
    /// Every occurrence of `target` (not empty) replaced, left to right (bytewise: both are UTF-8).
    func replacingAll(_ target: String, with replacement: String) -> String {
        let t = Array(target.utf8), bytes = Array(utf8), r = Array(replacement.utf8)
        guard !t.isEmpty, bytes.count >= t.count else { return self }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if i + t.count <= bytes.count && bytes[i] == t[0] && bytes[i..<(i + t.count)].elementsEqual(t) {
                out += r
                i += t.count
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
