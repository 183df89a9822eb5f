@testable import Billing
import Testing

@Suite("Event snapshots (the order or entitlement stored with each event)")
struct EventSnapshotTests {
    @Test("the stored text: each field as its UTF-8 length, a colon and its bytes")
    func format() {
        #expect(EventSnapshot.join([]) == "")
        #expect(EventSnapshot.join(["", "a", "héllo", String(repeating: "x", count: 12)]) == "0:1:a6:héllo12:xxxxxxxxxxxx")
        for n in [0, 1, 9, 10, 99, 100, 12345, Int.max] {
            var out: [UInt8] = []
            EventSnapshot.appendDecimal(n, to: &out)
            #expect(String(decoding: out, as: UTF8.self) == String(n))
        }
    }

    @Test("the writer gives join's bytes: texts, and numbers as String(n) would write them, negatives included")
    func writer() {
        let numbers: [Int64] = [0, 1, 9, 10, 99, 100, 12345, -1, -10, -987654321, Int64.max, Int64.min]
        let texts = ["", "a", "héllo", "12:34", String(repeating: "x", count: 300)]
        var w = EventSnapshot.Writer(capacity: 0)
        var expected: [String] = []
        for (i, n) in numbers.enumerated() {
            w.int(n)
            expected.append(String(n))
            let t = texts[i % texts.count]
            w.text(t)
            expected.append(t)
        }
        #expect(w.string == EventSnapshot.join(expected))
        #expect(EventSnapshot.split(w.string) == expected)
    }

    @Test("an order comes back field for field, unicode, empty and colon-bearing fields included")
    func orderRoundTrip() {
        let orders = [
            Order(
                id: "7f1c0d9e-0000-4000-8000-000000000001", accountID: "acct:with:colons", productID: "com.example.prémium 🙂",
                quantity: 3, state: .completed, idempotencyKey: "12:34", createTimeMs: 1_700_000_000_000,
                updateTimeMs: 1_700_000_000_123, transactionID: "2000000123456789", environment: .sandbox),
            Order(
                id: "o", accountID: "", productID: "p", quantity: 1, state: .pending, idempotencyKey: nil, createTimeMs: 0,
                updateTimeMs: 0),
        ]
        for order in orders {
            #expect(EventSnapshot.decodeOrder(EventSnapshot.encode(order)) == order)
            // The very bytes the field list always gave (stored snapshots are compared and decoded by older builds).
            let o = order
            #expect(
                EventSnapshot.encode(order)
                    == EventSnapshot.join([
                        o.id, o.accountID, o.productID, String(o.quantity), String(o.state.rawValue), o.idempotencyKey ?? "",
                        String(o.createTimeMs), String(o.updateTimeMs), o.transactionID ?? "", String(o.environment?.rawValue ?? 0),
                        String(o.refundedQuantity), String(o.store?.rawValue ?? 0),
                    ]))
        }
        #expect(EventSnapshot.decodeOrder("3:ab") == nil)
        #expect(EventSnapshot.decodeOrder("x:ab") == nil)
    }

    @Test("an entitlement's snapshot: the bytes the field list gave, and it comes back whole")
    func entitlementSnapshot() {
        var e = Entitlement(
            productID: "com.example.pro", productKind: .autoRenewableSubscription, originalTransactionID: "1000",
            latestTransactionID: "1003", purchaseTimeMs: 1_700_000_000_000, expiresTimeMs: -5, active: false, orderID: nil,
            revocationTimeMs: 1_700_000_500_000, gracePeriodExpiresTimeMs: 0, autoRenew: true, environment: .sandbox)
        e.state = .billingRetry
        e.ownership = .familyShared
        e.store = .googlePlay
        e.subscriptionGroupID = "grp:1"
        e.pendingProductID = "com.example.prö"
        let expected = EventSnapshot.join([
            e.productID, e.productKind.rawValue, e.originalTransactionID, e.latestTransactionID, String(e.purchaseTimeMs),
            String(e.expiresTimeMs), e.active ? "1" : "0", e.orderID ?? "", String(e.revocationTimeMs),
            String(e.gracePeriodExpiresTimeMs), e.autoRenew ? "1" : "0", String(e.environment?.rawValue ?? 0),
            String(e.state.rawValue), String(e.ownership.rawValue), String(e.store.rawValue), e.subscriptionGroupID,
            e.pendingProductID,
        ])
        #expect(EventSnapshot.encode(e) == expected)
        #expect(EventSnapshot.decodeEntitlement(EventSnapshot.encode(e)) == e)
    }
}
