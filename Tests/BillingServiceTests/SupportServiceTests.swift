import Billing
import BillingAPI
@testable import BillingService
import Testing

/// The support service's pure parts: audit ids, the e-mail redaction of the trail, page tokens, and the money of
/// a customer's summary (Revenue's definitions).
@Suite("Support: audit ids, redaction, summary money")
struct SupportServiceTests {
    @Test("audit ids of one millisecond sort in the order they were made; the time never goes back")
    func auditIDs() {
        var made: [(String, Int64)] = []
        for _ in 0..<5000 { made.append(AuditID.make(1_800_000_000_000)) }
        made.append(AuditID.make(1_700_000_000_000))  // a clock that stepped back
        let keys = made.map { ($0.1, $0.0) }
        #expect(zip(keys, keys.dropFirst()).allSatisfy { $0 < $1 })
        #expect(made.allSatisfy { $0.0.hasPrefix("audit_") && OrderID.canonical(String($0.0.dropFirst(6))) != nil })
        #expect(made.last!.1 >= 1_800_000_000_001)  // 4096 a millisecond, then the next one
    }

    @Test("e-mail addresses are replaced, other text is kept")
    func redaction() {
        #expect(SupportService.redacted(#"{"query":"ann.lee+x@mail.example.com"}"#) == #"{"query":"[email]"}"#)
        #expect(SupportService.redacted("a@b.co and c@d.org") == "[email] and [email]")
        #expect(SupportService.redacted("user-42") == "user-42")
        #expect(SupportService.redacted("@handle, x@localhost, @") == "@handle, x@localhost, @")
        #expect(SupportService.redacted("José@exämple.de") == "[email]")
    }

    @Test("page tokens: one token per cursor, anything else refused")
    func pageTokens() {
        let cursor = AuditCursor(timeMs: 1_800_000_000_123, auditID: AuditID.make(1_800_000_000_123).id)
        let token = AuditPageToken.encode(cursor)
        #expect(AuditPageToken.decode(token) == cursor)
        for bad in ["", "nope", token + "A", String(token.dropLast()), "MTox"] { #expect(AuditPageToken.decode(bad) == nil) }
    }

    @Test("queries: trimmed; Apple order ids look like the receipt's")
    func queries() {
        #expect(SupportService.trimmed(" \tuser-1 \t") == "user-1")
        #expect(SupportService.mayBeAppleOrderID("MK5TTTVWJH"))
        #expect(!SupportService.mayBeAppleOrderID("2000000000000042"))  // a transaction id: digits only
        #expect(!SupportService.mayBeAppleOrderID("user-1") && !SupportService.mayBeAppleOrderID("ABC"))
    }

    @Test("spent: paid less refunds per currency; family copies and unknown prices count nothing")
    func spent() {
        func t(_ id: String, price: Int64, currency: String, quantity: Int = 1) -> StoreTransaction {
            var t = StoreTransaction(
                transactionID: id, originalTransactionID: id, productID: "p", productKind: .consumable, purchaseTimeMs: 1000,
                quantity: quantity, environment: .sandbox, bundleID: "b")
            t.price = PriceFacts(priceMilliunits: price, currency: currency, storefront: "USA", offerID: "", offerType: "")
            return t
        }
        var full = t("2", price: 990, currency: "EUR")
        full.revocationTimeMs = 2000
        var prorated = t("3", price: 4990, currency: "USD")
        prorated.revocationTimeMs = 2000
        prorated.revocationType = .refundProrated
        prorated.revocationPercentage = 25_000
        var family = t("4", price: 4990, currency: "USD")
        family.ownership = .familyShared
        var familyRevoked = t("5", price: 4990, currency: "USD")
        familyRevoked.revocationTimeMs = 2000
        familyRevoked.revocationType = .familyRevoke
        let owned = [t("1", price: 1990, currency: "USD", quantity: 2), full, prorated, family, familyRevoked, t("6", price: 0, currency: "")]
            .map { OwnedTransaction(transaction: $0, accountID: "a", orderID: nil) }
        let s = AccountSummary.of(accountID: "a", orders: [], transactions: owned, entitlements: [])!
        // 25% of 4990 is 1247.5 milliunits: rounded half away from zero, 1248 refunded.
        #expect(s.spent == [MoneyAmount(currency: "EUR", milliunits: 0), MoneyAmount(currency: "USD", milliunits: 3980 + 4990 + 4990 - 1248)])
        #expect(s.refundedTransactions == 2 && s.transactions == 6 && s.stores == [.appStore])
        #expect(AccountSummary.of(accountID: "a", orders: [], transactions: [], entitlements: []) == nil)
    }
}
