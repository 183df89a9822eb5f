import BillingAPI
import Foundation
import ProtoJSON
import ProtoWire

/// billingctl's support commands (billing.v1.Support): find a customer, explain their access, grant, transfer,
/// refund, erase, and read the audit trail. Answers print as proto3 JSON (`customer find` and `customer explain`
/// as lines a person reads, `--json` for the JSON).
enum SupportCommands {
    static let usage = """
          customer find QUERY                              FindCustomers: an account, order, transaction or original
                transaction id, a purchase token, a grant id, an appAccountToken or an App Store Order ID
          customer show ACCOUNT                            GetCustomer: summary, every entitlement, the grants
          customer explain ACCOUNT [PRODUCT]               ExplainAccess: why the account has, or lacks, access
          customer delete ACCOUNT --reason TEXT            DeleteCustomer: erase the account (its id becomes a pseudonym)
          grant ACCOUNT PRODUCT (--for 7d|12h|30m|SECONDS | --until DATE | neither: for good) --reason TEXT
                [--idempotency-key K]                      GrantEntitlement; DATE: 2026-12-31 or 2026-12-31T18:00:00Z
          grant revoke GRANT_ID --reason TEXT              RevokeGrant
          transfer FROM TO --reason TEXT [--original-transaction-id ID ...]   TransferPurchases (all of FROM's store
                purchases unless named)
          refund TRANSACTION_ID --reason TEXT [--revoke]   RefundPurchase (Google Play: orders.refund; --revoke also
                ends the access it gave)
          audit [--account ID] [--operator NAME] [--method M] [--since DATE] [--until DATE] [--limit N] [--page-token T]
                                                           ListAuditEntries, newest first
        """

    static let flags: [String: Set<String>] = [
        "customer": ["reason"],
        "grant": ["for", "until", "reason", "idempotency-key"],
        "transfer": ["reason", "original-transaction-id"],
        "refund": ["reason", "revoke"],
        "audit": ["account", "operator", "method", "since", "until", "limit", "page-token"],
    ]

    static func run(_ o: Options) throws {
        switch o.command {
        case "customer": try customer(o)
        case "grant": try grant(o)
        case "transfer":
            guard o.positional.count == 2 else { throw Usage(message: "transfer needs FROM and TO accounts") }
            var r = TransferPurchasesRequest()
            r.fromAccountID = o.positional[0]
            r.toAccountID = o.positional[1]
            r.originalTransactionIDs = o.repeated["original-transaction-id"] ?? []
            r.reason = try reason(o)
            try printJSON(call(o, "billing.v1.Support/TransferPurchases", r, TransferPurchasesResponse.self), "billing.v1.TransferPurchasesResponse")
        case "refund":
            guard o.positional.count == 1 else { throw Usage(message: "refund needs a TRANSACTION_ID") }
            var r = RefundPurchaseRequest()
            r.transactionID = o.positional[0]
            r.revokeAccess = o.named["revoke"] == "true"
            r.reason = try reason(o)
            try printJSON(call(o, "billing.v1.Support/RefundPurchase", r, RefundPurchaseResponse.self), "billing.v1.RefundPurchaseResponse")
        case "audit":
            var r = ListAuditEntriesRequest()
            r.accountID = o.named["account"] ?? ""
            r.operatorName = o.named["operator"] ?? ""
            r.method = o.named["method"] ?? ""
            if let s = o.named["since"] { r.sinceTimeMs = try time(s, flag: "--since") }
            if let s = o.named["until"] { r.untilTimeMs = try time(s, flag: "--until") }
            if let l = o.named["limit"] {
                guard let n = Int32(l), n > 0 else { throw Usage(message: "--limit needs a positive number") }
                r.limit = n
            }
            r.pageToken = o.named["page-token"] ?? ""
            try printJSON(call(o, "billing.v1.Support/ListAuditEntries", r, ListAuditEntriesResponse.self), "billing.v1.ListAuditEntriesResponse")
        default: throw Usage(message: "unknown command '\(o.command)'")
        }
    }

    static func customer(_ o: Options) throws {
        guard let verb = o.positional.first else { throw Usage(message: "customer needs find, show, explain or delete") }
        let rest = Array(o.positional.dropFirst())
        let json = o.named["json"] == "true"
        switch verb {
        case "find":
            guard rest.count == 1 else { throw Usage(message: "customer find needs one QUERY") }
            let r = try call(o, "billing.v1.Support/FindCustomers", FindCustomersRequest(query: rest[0]), FindCustomersResponse.self)
            if json { return try printJSON(r, "billing.v1.FindCustomersResponse") }
            if r.matches.isEmpty { print("no customer matches \(rest[0])") }
            for m in r.matches {
                guard let c = m.customer else { continue }
                let money = c.spent.map { "\(Double($0.milliunits) / 1000) \($0.currency)" }.joined(separator: ", ")
                print(
                    "\(c.accountID)  (matched \(m.matched))  \(c.activeEntitlements) active, \(c.orders) orders, "
                        + "\(c.transactions) transactions, spent \(money.isEmpty ? "nothing" : money)\(c.deleted ? ", erased" : "")")
            }
        case "show":
            guard rest.count == 1 else { throw Usage(message: "customer show needs one ACCOUNT") }
            var r = GetCustomerRequest()
            r.accountID = rest[0]
            try printJSON(call(o, "billing.v1.Support/GetCustomer", r, GetCustomerResponse.self), "billing.v1.GetCustomerResponse")
        case "explain":
            guard rest.count == 1 || rest.count == 2 else { throw Usage(message: "customer explain needs ACCOUNT [PRODUCT]") }
            var r = ExplainAccessRequest()
            r.accountID = rest[0]
            r.productID = rest.count == 2 ? rest[1] : ""
            let a = try call(o, "billing.v1.Support/ExplainAccess", r, ExplainAccessResponse.self)
            if json { return try printJSON(a, "billing.v1.ExplainAccessResponse") }
            print(a.hasAccess ? "\(rest[0]) has access" : "\(rest[0]) has no access\(rest.count == 2 ? " to \(rest[1])" : "")")
            for f in a.facts {
                print("  \(f.grantsAccess ? "+" : "-") \(f.productID)  \(f.reason.description.replacingOccurrences(of: "ACCESS_REASON_", with: ""))  \(f.why)")
            }
        case "delete":
            guard rest.count == 1 else { throw Usage(message: "customer delete needs one ACCOUNT") }
            var r = DeleteCustomerRequest()
            r.accountID = rest[0]
            r.reason = try reason(o)
            try printJSON(call(o, "billing.v1.Support/DeleteCustomer", r, DeleteCustomerResponse.self), "billing.v1.DeleteCustomerResponse")
        default:
            throw Usage(message: "customer needs find, show, explain or delete, not \(verb)")
        }
    }

    static func grant(_ o: Options) throws {
        if o.positional.first == "revoke" {
            guard o.positional.count == 2 else { throw Usage(message: "grant revoke needs a GRANT_ID") }
            var r = RevokeGrantRequest()
            r.grantID = o.positional[1]
            r.reason = try reason(o)
            return try printJSON(call(o, "billing.v1.Support/RevokeGrant", r, RevokeGrantResponse.self), "billing.v1.RevokeGrantResponse")
        }
        guard o.positional.count == 2 else { throw Usage(message: "grant needs ACCOUNT and PRODUCT (or: grant revoke GRANT_ID)") }
        var r = GrantEntitlementRequest()
        r.accountID = o.positional[0]
        r.productID = o.positional[1]
        r.reason = try reason(o)
        r.idempotencyKey = o.named["idempotency-key"] ?? ""
        if o.named["for"] != nil && o.named["until"] != nil { throw Usage(message: "grant takes --for or --until, not both") }
        if let d = o.named["for"] { r.durationSeconds = try seconds(d) }
        if let u = o.named["until"] { r.expiresTimeMs = try time(u, flag: "--until") }
        try printJSON(call(o, "billing.v1.Support/GrantEntitlement", r, GrantEntitlementResponse.self), "billing.v1.GrantEntitlementResponse")
    }

    static func reason(_ o: Options) throws -> String {
        guard let r = o.named["reason"], !r.isEmpty else { throw Usage(message: "\(o.command) needs --reason TEXT (the audit trail keeps it)") }
        return r
    }

    /// "7d", "12h", "30m", "90s" or a number of seconds.
    static func seconds(_ text: String) throws -> Int64 {
        let units: [Character: Int64] = ["d": 86_400, "h": 3_600, "m": 60, "s": 1]
        var digits = Substring(text)
        var unit: Int64 = 1
        if let last = text.last, let u = units[last] {
            unit = u
            digits = digits.dropLast()
        }
        guard let n = Int64(digits), n > 0, n <= Int64.max / 1000 / unit else {
            throw Usage(message: "--for needs a duration such as 7d, 12h, 30m or 90 (seconds), not \(text)")
        }
        return n * unit
    }

    /// A date (2026-12-31, midnight UTC), a time (2026-12-31T18:00:00Z) or Unix milliseconds.
    static func time(_ text: String, flag: String) throws -> Int64 {
        if let ms = Int64(text), ms > 0 { return ms }
        let f = ISO8601DateFormatter()
        if let d = f.date(from: text) { return Int64((d.timeIntervalSince1970 * 1000).rounded()) }
        f.formatOptions = [.withFullDate]
        if let d = f.date(from: text) { return Int64((d.timeIntervalSince1970 * 1000).rounded()) }
        throw Usage(message: "\(flag) needs a date (2026-12-31), a time (2026-12-31T18:00:00Z) or Unix milliseconds, not \(text)")
    }

    static let registry = Result { try Registry(base64Files: BillingDescriptors.files.values) }

    /// The answer in canonical proto3 JSON.
    static func printJSON(_ message: some ProtoMessage, _ type: String) throws {
        let json = try registry.get().toJSON(type, binary: message.encoded())
        print(String(decoding: json, as: UTF8.self))
    }
}
