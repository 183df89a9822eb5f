import Logging

import Foundation
import Testing

@Suite("log line format")
struct LogFormatTests {
    /// Strings with every ASCII byte, escapes at the start, middle and end, and multi-byte UTF-8.
    static let samples: [String] = {
        var list = ["", "plain", "\"", "\\", "a\"b\\c", "\n\r\t", "end\"", "\"start", "é ü 中文 🙂", "tab\tin\u{1}side\u{1f}", "\u{7f}del"]
        list.append(String(decoding: (0..<128).map { UInt8($0) }, as: UTF8.self))
        list.append(String(repeating: "long value without escapes ", count: 40))
        return list
    }()

    @Test("every string comes back unchanged through a JSON parser, and control bytes are escaped")
    func roundTrip() throws {
        for value in Self.samples {
            let line = Logger.format(.info, value, [("field", .string(value)), (value, .int(7))])
            #expect(line.last == 0x0A)
            #expect(!line.dropLast().contains { $0 < 0x20 }, "a raw control byte in \(Logger.quote(value))")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
            #expect(object["msg"] as? String == value)
            #expect(object["field"] as? String == value)
            #expect(object[value] as? Int == 7)
        }
    }

    @Test("escapes as JSON spells them")
    func escapes() {
        #expect(Logger.quote("a\"b\\c\nd\re\tf\u{1}") == #""a\"b\\c\nd\re\tf\u0001""#)
        #expect(Logger.quote("") == #""""#)
    }
}
