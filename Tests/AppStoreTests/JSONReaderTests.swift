@testable import AppStore
import Foundation
import Testing

@Suite("The payload JSON reader")
struct JSONReaderTests {
    @Test("values, escapes and surrogate pairs")
    func values() throws {
        let text = #"{"s":"a\"b\\c\/d\n\u00e9\ud83d\ude00","i":1759302518835,"f":1697679936049.7297,"neg":-5,"e":1e3,"t":true,"n":null,"a":[1,"x",{}],"o":{"k":false}}"#
        guard case .object(let o) = try JSONReader.parse(Array(text.utf8)) else { Issue.record("not an object"); return }
        #expect(o["s"] == .string("a\"b\\c/d\n\u{e9}\u{1F600}"))
        #expect(o["i"] == .integer(1_759_302_518_835))
        #expect(o["f"] == .number(1697679936049.7297))
        #expect(o["neg"] == .integer(-5))
        #expect(o["e"] == .number(1000))
        #expect(o["t"] == .bool(true))
        #expect(o["n"] == .null)
        #expect(o["a"] == .array([.integer(1), .string("x"), .object([:])]))
        #expect(o["o"] == .object(["k": .bool(false)]))
    }

    @Test("agrees with Foundation on real payload shapes")
    func agreesWithFoundation() throws {
        let text = #"{"transactionId":"2000001024998954","price":1990,"purchaseDate":1759302552000,"isUpgraded":false,"eligibleWinBackOfferIds":["a","b"]}"#
        let mine = try JSONReader.parse(Array(text.utf8))
        let theirs = try JSONSerialization.jsonObject(with: Data(text.utf8)) as! [String: Any]
        guard case .object(let o) = mine else { Issue.record("not an object"); return }
        #expect(o.count == theirs.count)
        #expect(o["transactionId"] == .string(theirs["transactionId"] as! String))
    }

    @Test("malformed input is refused", arguments: [
        "", "{", "{\"a\":}", "{\"a\":1,}", "[1,]", "01", "1.", "-", "\"\\x\"", "\"\\ud800\"", "\"a\u{1}\"", "{\"a\" 1}",
        "tru", "nul", "{}x", String(repeating: "[", count: 40) + String(repeating: "]", count: 40),
    ])
    func malformed(_ text: String) {
        #expect(throws: JSONReader.Failure.self) { try JSONReader.parse(Array(text.utf8)) }
    }
}
