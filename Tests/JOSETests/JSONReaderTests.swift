@testable import JOSE
import ProtoWire
import Foundation
import Testing

@Suite("The payload JSON reader")
struct JSONReaderTests {
    @Test("values, escapes and surrogate pairs")
    func values() throws {
        let text =
            #"{"s":"a\"b\\c\/d\n\u00e9\ud83d\ude00","i":1759302518835,"f":1697679936049.7297,"neg":-5,"e":1e3,"t":true,"n":null,"a":[1,"x",{}],"o":{"k":false}}"#
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

    @Test("a repeated key reads as its last value; integers read exactly at every length")
    func repeatedKeysAndIntegers() throws {
        guard case .object(let o) = try JSONReader.parse(Array(#"{"k":1,"x":"a","k":2}"#.utf8)) else { Issue.record("not an object"); return }
        #expect(o["k"] == .integer(2))
        #expect(o.count == 2)
        #expect(o == ["x": .string("a"), "k": .integer(2)])
        let cases: [(String, JSONValue)] = [
            ("0", .integer(0)), ("-0", .integer(0)), ("7", .integer(7)), ("-42", .integer(-42)),
            ("999999999999999999", .integer(999_999_999_999_999_999)), ("-999999999999999999", .integer(-999_999_999_999_999_999)),
            ("9223372036854775807", .integer(Int64.max)), ("-9223372036854775808", .integer(Int64.min)),
            ("9223372036854775808", .number(9223372036854775808.0)), ("12.5", .number(12.5)),
        ]
        for (text, value) in cases {
            #expect(try JSONReader.parse(Array(text.utf8)) == value, "\(text)")
        }
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

    @Test(
        "malformed input is refused",
        arguments: [
            "", "{", "{\"a\":}", "{\"a\":1,}", "[1,]", "01", "1.", "-", "\"\\x\"", "\"\\ud800\"", "\"a\u{1}\"", "{\"a\" 1}",
            "tru", "nul", "{}x", String(repeating: "[", count: 40) + String(repeating: "]", count: 40),
        ])
    func malformed(_ text: String) {
        #expect(throws: JSONReader.Failure.self) { try JSONReader.parse(Array(text.utf8)) }
    }
}

@Suite("ByteScan: the word-at-a-time scan finds what the byte loop finds")
struct ByteScanTests {
    static func reference(_ bytes: [UInt8], from start: Int) -> Int {
        var i = start
        while i < bytes.count, bytes[i] != 0x22, bytes[i] != 0x5C, bytes[i] >= 0x20 { i += 1 }
        return i
    }

    @Test("every special byte at every offset, among plain, high and near-miss bytes")
    func exhaustive() {
        let specials: [UInt8] = Array(0x00...0x1F) + [0x22, 0x5C]
        let fillers: [UInt8] = [0x41, 0x2E, 0x21, 0x23, 0x5B, 0x5D, 0x20, 0x7F, 0x80, 0xA2, 0xDC, 0xFF]
        for filler in fillers {
            for length in [0, 1, 7, 8, 9, 15, 16, 17, 33] {
                let plain = [UInt8](repeating: filler, count: length)
                for start in 0...min(length, 9) {
                    #expect(plain.withUnsafeBufferPointer { ByteScan.firstSpecial($0, from: start) } == length)
                }
                for position in 0..<length {
                    for special in specials {
                        var bytes = plain
                        bytes[position] = special
                        let got = bytes.withUnsafeBufferPointer { ByteScan.firstSpecial($0, from: 0) }
                        #expect(got == Self.reference(bytes, from: 0))
                    }
                }
            }
        }
        // Random mixes, several specials, every start.
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let bytes = (0..<Int.random(in: 0...40, using: &rng)).map { _ in
                Bool.random(using: &rng) ? UInt8.random(in: 0x23...0x5B, using: &rng) : UInt8.random(in: 0...255, using: &rng)
            }
            let start = Int.random(in: 0...bytes.count, using: &rng)
            #expect(bytes.withUnsafeBufferPointer { ByteScan.firstSpecial($0, from: start) } == Self.reference(bytes, from: start))
        }
    }
}

@Suite("ASCII strings skip validation; everything else is still validated")
struct JSONStringValidationTests {
    @Test("isASCII agrees with the byte rule for every byte at every position")
    func isASCII() {
        for length in 0...20 {
            for position in 0..<max(length, 1) where length > 0 {
                for b in 0...255 {
                    var bytes = [UInt8](repeating: 0x61, count: length)
                    bytes[position] = UInt8(b)
                    #expect(bytes.withUnsafeBufferPointer { ASCII.isASCII($0) } == (b < 0x80))
                }
            }
        }
        #expect([UInt8]().withUnsafeBufferPointer { ASCII.isASCII($0) })
    }

    @Test("a string with invalid UTF-8 is refused; valid non-ASCII text is read")
    func utf8() throws {
        let bad: [UInt8] = Array(#"{"a":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)
        #expect(throws: JSONReader.Failure.self) { try JSONReader.parse(bad) }
        let good = try JSONReader.parse(Array(#"{"a":"café – ok"}"#.utf8))
        guard case .object(let o) = good, case .string(let s)? = o["a"] else {
            Issue.record("not read as an object with a string")
            return
        }
        #expect(s == "café – ok")
    }
}
