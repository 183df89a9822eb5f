/// ExportTransactions' rows: one per transaction (every ownership and store, so nothing is hidden), with what it
/// paid, what was refunded, the commission and the proceeds in the reporting currency (DESIGN "Revenue, defined").
public enum RevenueExport {
    public static let columns = [
        "transaction_id", "original_transaction_id", "account_id", "store", "product_id", "product_type", "environment",
        "ownership", "purchase_time", "revocation_time", "quantity", "price_milliunits", "currency", "revocation_type",
        "revocation_percentage", "storefront", "offer_type", "offer_id", "paid_milliunits", "refunded_milliunits",
        "commission_percent", "proceeds_milliunits",
    ]

    public enum Format: String, Sendable {
        case csv
        case jsonl
    }

    /// One cell: text, a number, or nothing (an unconverted amount, a time that is not).
    public enum Cell: Sendable, Equatable {
        case text(String)
        case number(String)
        case empty
    }

    /// The row of one transaction; `firstPaidMs` is its original transaction's first paid purchase (LATER commission).
    public static func row(
        _ owned: OwnedTransaction, firstPaidMs: Int64?, settings: RevenueSettings, currency target: String
    ) -> [Cell] {
        let t = owned.transaction
        let money = RevenueBook.counts(t, accountID: owned.accountID) && t.paidMilliunits > 0
        var paid = Cell.number("0"), refunded = Cell.number("0"), commission = Cell.number("0"), proceeds = Cell.number("0")
        if money {
            let later = RevenueBook.isLater(
                purchaseMs: t.purchaseTimeMs, firstPaidMs: firstPaidMs, subscription: t.productKind == .autoRenewableSubscription)
            let kept = settings.commission.kept(t.store, later: later)
            commission = .number(settings.commission.percent(t.store, later: later))
            let rates = settings.rates, currency = t.price.currency
            let purchaseDay = CivilDate.day(ofMs: t.purchaseTimeMs), refundDay = CivilDate.day(ofMs: t.revocationTimeMs)
            let gross = RevenueBook.convert(t.paidMilliunits, .one, currency: currency, day: purchaseDay, into: target, rates: rates).converted
            let grossKept = RevenueBook.convert(t.paidMilliunits, kept, currency: currency, day: purchaseDay, into: target, rates: rates).converted
            var refund: Int64? = 0, refundKept: Int64? = 0
            if let share = RevenueBook.refundedShare(t.revocationType, Int32(clamping: t.revocationPercentage), revoked: t.isRevoked) {
                refund = RevenueBook.convert(t.paidMilliunits, share, currency: currency, day: refundDay, into: target, rates: rates).converted
                refundKept =
                    RevenueBook.convert(t.paidMilliunits, share * kept, currency: currency, day: refundDay, into: target, rates: rates)
                    .converted
            }
            paid = gross.map { .number(String($0)) } ?? .empty
            refunded = refund.map { .number(String($0)) } ?? .empty
            if let a = grossKept, let b = refundKept { proceeds = .number(String(a - b)) } else { proceeds = .empty }
        }
        return [
            .text(t.transactionID), .text(t.originalTransactionID), .text(owned.accountID), .text(storeName(t.store)),
            .text(t.productID), .text(productTypeName(t.productKind)), .text(environmentName(t.environment)),
            .text(t.ownership == .purchased ? "PURCHASED" : "FAMILY_SHARED"), .text(CivilDate.rfc3339(ms: t.purchaseTimeMs)),
            t.isRevoked ? .text(CivilDate.rfc3339(ms: t.revocationTimeMs)) : .empty, .number(String(t.quantity)),
            .number(String(t.price.priceMilliunits)), .text(t.price.currency), .text(revocationTypeName(t.revocationType)),
            .number(String(t.revocationPercentage)), .text(t.price.storefront), .text(t.price.offerType), .text(t.price.offerID),
            paid, refunded, commission, proceeds,
        ]
    }

    /// The header line of the CSV.
    public static var csvHeader: String { columns.joined(separator: ",") + "\r\n" }

    /// One CSV line (RFC 4180: a field with a comma, quote or line break is quoted, quotes doubled; CRLF ends it).
    public static func csvLine(_ cells: [Cell], into out: inout [UInt8]) {
        for (i, cell) in cells.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            switch cell {
            case .empty: break
            case .number(let s): out.append(contentsOf: s.utf8)
            case .text(let s):
                let needsQuotes = s.utf8.contains { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\"") || $0 == 10 || $0 == 13 }
                if !needsQuotes {
                    out.append(contentsOf: s.utf8)
                    continue
                }
                out.append(UInt8(ascii: "\""))
                for b in s.utf8 {
                    if b == UInt8(ascii: "\"") { out.append(b) }
                    out.append(b)
                }
                out.append(UInt8(ascii: "\""))
            }
        }
        out.append(13)
        out.append(10)
    }

    /// One JSON object on a line, with the CSV's column names as keys: text as strings, numbers as numbers, an
    /// empty cell as null.
    public static func jsonLine(_ cells: [Cell], into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        for (i, cell) in cells.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: columns[i].utf8)
            out.append(contentsOf: "\":".utf8)
            switch cell {
            case .empty: out.append(contentsOf: "null".utf8)
            case .number(let s): out.append(contentsOf: s.utf8)
            case .text(let s): jsonString(s, into: &out)
            }
        }
        out.append(contentsOf: "}\n".utf8)
    }

    static func jsonString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "\""): out.append(contentsOf: "\\\"".utf8)
            case UInt8(ascii: "\\"): out.append(contentsOf: "\\\\".utf8)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: "\\u00".utf8)
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 15)])
            default: out.append(b)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    public static func storeName(_ s: Store) -> String { RevenueBook.storeName(s) }

    public static func productTypeName(_ k: ProductKind?) -> String {
        switch k {
        case .consumable: "CONSUMABLE"
        case .nonConsumable: "NON_CONSUMABLE"
        case .autoRenewableSubscription: "AUTO_RENEWABLE_SUBSCRIPTION"
        case .nonRenewingSubscription: "NON_RENEWING_SUBSCRIPTION"
        case nil: "UNSPECIFIED"
        }
    }

    public static func environmentName(_ e: StoreEnvironment) -> String {
        switch e {
        case .production: "PRODUCTION"
        case .sandbox: "SANDBOX"
        case .xcode: "XCODE"
        }
    }

    public static func revocationTypeName(_ r: RevocationType) -> String {
        switch r {
        case .unspecified: "UNSPECIFIED"
        case .refundFull: "REFUND_FULL"
        case .refundProrated: "REFUND_PRORATED"
        case .familyRevoke: "FAMILY_REVOKE"
        }
    }
}
