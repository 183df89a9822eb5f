import Foundation
import ProtoWire
import Testing

@Suite("JSON string literals")
struct JSONStringTests {
    /// Every ASCII byte, escapes at the start, middle and end, multi-byte UTF-8, and a long run without escapes.
    static let samples: [String] = {
        var list = ["", "plain", "\"", "\\", "a\"b\\c", "\n\r\t", "end\"", "\"start", "é ü 中文 🙂", "tab\tin\u{1}side\u{1f}", "\u{7f}del"]
        list.append(String(decoding: (0..<128).map { UInt8($0) }, as: UTF8.self))
        list.append(String(repeating: "long value without escapes ", count: 40))
        return list
    }()

    @Test("escapes as JSON spells them: short forms for \\n \\r \\t, \\u00XX for other control bytes")
    func escapes() {
        #expect(JSONString.quote("a\"b\\c\nd\re\tf\u{1}") == #""a\"b\\c\nd\re\tf\u0001""#)
        #expect(JSONString.quote("") == #""""#)
        #expect(JSONString.quote("\u{1f}\u{7f}é") == "\"\\u001f\u{7f}é\"")
    }

    @Test("quote and append agree, and every sample comes back unchanged through a JSON parser", arguments: samples)
    func roundTrip(_ value: String) throws {
        var bytes: [UInt8] = Array("[".utf8)
        JSONString.append(value, to: &bytes)
        bytes.append(UInt8(ascii: "]"))
        #expect(String(decoding: bytes.dropFirst().dropLast(), as: UTF8.self) == JSONString.quote(value))
        #expect(!bytes.contains { $0 < 0x20 })
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String])
        #expect(parsed == [value])
    }
}
