import BillingAPI
import Foundation

/// `billingctl history` (ListTransactions, every page) and `billingctl transaction` (GetTransaction): the support view.
enum TransactionCommands {
    /// An account's transactions newest first, one line each (`--json`: one JSON object per line); follows
    /// `next_page_token` until the last page, or until `--limit` lines.
    static func history(_ options: Options) throws {
        guard let account = options.positional.first ?? options.named["account"] else { throw Usage(message: "history needs an ACCOUNT") }
        var remaining = Int.max
        if let l = options.named["limit"] {
            guard let n = Int(l), n > 0 else { throw Usage(message: "--limit takes a positive number") }
            remaining = n
        }
        let client = try options.client()
        var req = ListTransactionsRequest()
        req.accountID = account
        var seen: Set<String> = []
        while remaining > 0 {
            req.limit = Int32(min(remaining, 1000))
            let page = try call(options, "billing.v1.Billing/ListTransactions", req, ListTransactionsResponse.self, client: client)
            for t in page.transactions.prefix(remaining) {
                print(options.named["json"] != nil ? JSON.line(JSON.transactionFields(t)) : line(t))
            }
            remaining -= page.transactions.count
            // A token seen before would loop forever; the server never sends one, but a client should not trust that.
            guard !page.nextPageToken.isEmpty, seen.insert(page.nextPageToken).inserted else { break }
            req.pageToken = page.nextPageToken
        }
    }

    /// One transaction by its id (or its original transaction id), with its account and order, as JSON.
    static func transaction(_ options: Options) throws {
        guard let id = options.positional.first ?? options.named["transaction-id"] else { throw Usage(message: "transaction needs an ID") }
        let r = try call(options, "billing.v1.Billing/GetTransaction", GetTransactionRequest(transactionID: id), GetTransactionResponse.self)
        print(
            JSON.object([
                ("transaction", r.transaction.map { JSON.transaction($0, indent: 1) }),
                ("accountId", r.accountID.isEmpty ? nil : JSON.quote(r.accountID)), ("order", r.order.map { JSON.order($0, indent: 1) }),
            ]))
    }

    /// purchase time, transaction id, product, price and currency, ownership, revocation; tab-separated, `-` for none.
    static func line(_ t: Transaction) -> String {
        [
            time(t.purchaseTimeMs), t.transactionID, t.productID, price(t), short(t.ownership.description, "OWNERSHIP_"),
            revocation(t),
        ].joined(separator: "\t")
    }

    /// UTC, to the millisecond: 2026-01-31T12:00:00.000Z.
    static func time(_ ms: Int64) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        f.timeZone = TimeZone(identifier: "UTC")
        return f.string(from: Date(timeIntervalSince1970: Double(ms) / 1000))
    }

    /// Milliunits as a decimal amount (at least two places) and the currency: `4.99 USD`; `-` when unknown.
    static func price(_ t: Transaction) -> String {
        guard t.priceMilliunits != 0 || !t.currency.isEmpty else { return "-" }
        let m = t.priceMilliunits.magnitude
        var fraction = String(m % 1000)
        fraction = String(repeating: "0", count: 3 - fraction.count) + fraction
        if fraction.hasSuffix("0") { fraction.removeLast() }
        let amount = (t.priceMilliunits < 0 ? "-" : "") + "\(m / 1000).\(fraction)"
        return t.currency.isEmpty ? amount : amount + " " + t.currency
    }

    /// `-`, or how and when it was revoked: `REFUND_PRORATED 33.333% 2026-01-31T12:00:00.000Z APP_ISSUE`.
    static func revocation(_ t: Transaction) -> String {
        guard t.revocationTimeMs != 0 || t.revocationType != .unspecified else { return "-" }
        var parts = [t.revocationType == .unspecified ? "REVOKED" : short(t.revocationType.description, "REVOCATION_TYPE_")]
        if t.revocationPercentage != 0 {
            let p = Int(t.revocationPercentage)
            let thousandths = String(p % 1000)
            parts.append("\(p / 1000).\(String(repeating: "0", count: 3 - thousandths.count) + thousandths)%")
        }
        if t.revocationTimeMs != 0 { parts.append(time(t.revocationTimeMs)) }
        if !t.revocationReason.isEmpty { parts.append(t.revocationReason) }
        return parts.joined(separator: " ")
    }

    /// An enum name without its prefix; `-` for the unspecified value.
    static func short(_ name: String, _ prefix: String) -> String {
        let s = name.hasPrefix(prefix) ? String(name.dropFirst(prefix.count)) : name
        return s == "UNSPECIFIED" ? "-" : s
    }
}
