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
        }
        #expect(EventSnapshot.decodeOrder("3:ab") == nil)
        #expect(EventSnapshot.decodeOrder("x:ab") == nil)
    }
}
