@testable import Billing
import Testing

@Suite("Order ids")
struct OrderIDTests {
    @Test("order ids: canonical version 7 UUIDs with the RFC 9562 variant, random bits differing")
    func orderIDs() {
        let ids = (0..<1_000).map { _ in OrderID.make(milliseconds: 1_700_000_000_000) }
        for id in ids {
            #expect(OrderID.canonical(id) == id)
            let u = Array(id.utf8)
            #expect(u[14] == UInt8(ascii: "7"))
            #expect([UInt8(ascii: "8"), UInt8(ascii: "9"), UInt8(ascii: "a"), UInt8(ascii: "b")].contains(u[19]))
            #expect(id.hasPrefix("018bcfe5-6800-7"))
        }
        #expect(Set(ids).count == ids.count)
    }
}
