import ProtoWire
/// A small strict JSON reader for signed payloads: objects, arrays, strings (all escapes, surrogate
/// pairs), numbers (integers kept exact in 64 bits), booleans, null. Depth and size are bounded.
/// Faster than Foundation's JSONSerialization on Linux, which showed in SubmitReceipt profiles.
package enum JSONValue: Sendable, Equatable {
    case string(String)
    case integer(Int64)
    case number(Double)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object(JSONObject)
}

/// A JSON object's members in document order. Lookups scan from the end, so a repeated key reads as
/// its last value (as Foundation and Python read it). A signed payload has a few dozen keys: a scan
/// over them is cheaper than building and hashing a Dictionary (144 String hashes and 13 dictionary
/// allocations per notification before this type; callgrind).
package struct JSONObject: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    package struct Member: Sendable, Equatable {
        package var key: String
        package var value: JSONValue
    }

    package var members: [Member]

    package init() { members = [] }

    package init(dictionaryLiteral elements: (String, JSONValue)...) {
        members = elements.map { Member(key: $0.0, value: $0.1) }
    }

    package subscript(key: String) -> JSONValue? {
        let n = key.utf8.count
        var k = members.count
        while k > 0 {
            k -= 1
            if members[k].key.utf8.count == n, members[k].key == key { return members[k].value }
        }
        return nil
    }

    /// How many distinct keys.
    package var count: Int { Set(members.map(\.key)).count }

    /// Equal when they read the same: the same keys with the same (last) values, in any order.
    package static func == (a: JSONObject, b: JSONObject) -> Bool {
        guard a.count == b.count else { return false }
        for m in a.members where b[m.key] != a[m.key] { return false }
        return true
    }
}

package struct JSONReader {
    package struct Failure: Error {}

    static let maxDepth = 32

    package static func parse(_ bytes: [UInt8]) throws(Failure) -> JSONValue {
        try bytes.withUnsafeBufferPointer { (buf: UnsafeBufferPointer<UInt8>) throws(Failure) -> JSONValue in
            var r = JSONReader(buf: buf, i: 0)
            let v = try r.value(depth: 0)
            r.skipSpace()
            guard r.i == buf.count else { throw Failure() }
            return v
        }
    }

    let buf: UnsafeBufferPointer<UInt8>
    var i: Int

    mutating func skipSpace() {
        while i < buf.count, buf[i] == 0x20 || buf[i] == 0x0A || buf[i] == 0x0D || buf[i] == 0x09 { i += 1 }
    }

    mutating func value(depth: Int) throws(Failure) -> JSONValue {
        guard depth <= Self.maxDepth else { throw Failure() }
        skipSpace()
        guard i < buf.count else { throw Failure() }
        switch buf[i] {
        case UInt8(ascii: "{"):
            i += 1
            var object = JSONObject()
            skipSpace()
            if i < buf.count, buf[i] == UInt8(ascii: "}") { i += 1; return .object(object) }
            while true {
                skipSpace()
                guard i < buf.count, buf[i] == UInt8(ascii: "\"") else { throw Failure() }
                let key = try string()
                skipSpace()
                guard i < buf.count, buf[i] == UInt8(ascii: ":") else { throw Failure() }
                i += 1
                object.members.append(JSONObject.Member(key: key, value: try value(depth: depth + 1)))
                skipSpace()
                guard i < buf.count else { throw Failure() }
                if buf[i] == UInt8(ascii: ",") { i += 1; continue }
                if buf[i] == UInt8(ascii: "}") { i += 1; return .object(object) }
                throw Failure()
            }
        case UInt8(ascii: "["):
            i += 1
            var array: [JSONValue] = []
            skipSpace()
            if i < buf.count, buf[i] == UInt8(ascii: "]") { i += 1; return .array(array) }
            while true {
                array.append(try value(depth: depth + 1))
                skipSpace()
                guard i < buf.count else { throw Failure() }
                if buf[i] == UInt8(ascii: ",") { i += 1; continue }
                if buf[i] == UInt8(ascii: "]") { i += 1; return .array(array) }
                throw Failure()
            }
        case UInt8(ascii: "\""):
            return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        default:
            return try number()
        }
    }

    mutating func literal(_ word: StaticString) throws(Failure) {
        let n = word.utf8CodeUnitCount
        guard i + n <= buf.count else { throw Failure() }
        for k in 0..<n where buf[i + k] != word.utf8Start[k] { throw Failure() }
        i += n
    }

    mutating func number() throws(Failure) -> JSONValue {
        let start = i
        if i < buf.count, buf[i] == UInt8(ascii: "-") { i += 1 }
        let digitsStart = i
        while i < buf.count, buf[i] >= 0x30, buf[i] <= 0x39 { i += 1 }
        guard i > digitsStart else { throw Failure() }
        if buf[digitsStart] == 0x30 && i - digitsStart > 1 { throw Failure() }  // no leading zeros
        var isInteger = true
        if i < buf.count, buf[i] == UInt8(ascii: ".") {
            isInteger = false
            i += 1
            let f = i
            while i < buf.count, buf[i] >= 0x30, buf[i] <= 0x39 { i += 1 }
            guard i > f else { throw Failure() }
        }
        if i < buf.count, buf[i] == UInt8(ascii: "e") || buf[i] == UInt8(ascii: "E") {
            isInteger = false
            i += 1
            if i < buf.count, buf[i] == UInt8(ascii: "+") || buf[i] == UInt8(ascii: "-") { i += 1 }
            let e = i
            while i < buf.count, buf[i] >= 0x30, buf[i] <= 0x39 { i += 1 }
            guard i > e else { throw Failure() }
        }
        if isInteger, i - digitsStart <= 18 {
            // Up to 18 digits cannot overflow Int64: read them directly, no String.
            var n: Int64 = 0
            for k in digitsStart..<i { n = n &* 10 &+ Int64(buf[k] &- 0x30) }
            return .integer(digitsStart > start ? -n : n)
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: buf[start..<i]), as: UTF8.self)
        if isInteger, let n = Int64(text) { return .integer(n) }
        guard let d = Double(text) else { throw Failure() }
        return .number(d)
    }

    mutating func hex4() throws(Failure) -> UInt32 {
        guard i + 4 <= buf.count else { throw Failure() }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = buf[i]
            i += 1
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            default: throw Failure()
            }
            v = v << 4 | d
        }
        return v
    }

    mutating func string() throws(Failure) -> String {
        i += 1  // opening quote
        let start = i
        // Fast path: no escapes (word at a time: embedded JWS strings are kilobytes long).
        i = ByteScan.firstSpecial(buf, from: i)
        guard i < buf.count, buf[i] >= 0x20 else { throw Failure() }
        if buf[i] == UInt8(ascii: "\"") {
            let s = UnsafeBufferPointer(rebasing: buf[start..<i])
            i += 1
            // ASCII (every string Apple signs but free text) needs no validation; `String(validating:)` is generic
            // and looked its metadata up on every call (about 1,000 instructions, 43 strings per notification).
            if ASCII.isASCII(s) { return String(decoding: s, as: UTF8.self) }
            guard let text = String(validating: s, as: UTF8.self) else { throw Failure() }
            return text
        }
        var out = Array(UnsafeBufferPointer(rebasing: buf[start..<i]))
        while i < buf.count {
            let c = buf[i]
            if c == UInt8(ascii: "\"") {
                i += 1
                guard let text = String(validating: out, as: UTF8.self) else { throw Failure() }
                return text
            }
            guard c >= 0x20 else { throw Failure() }
            if c != UInt8(ascii: "\\") {
                out.append(c)
                i += 1
                continue
            }
            i += 1
            guard i < buf.count else { throw Failure() }
            let e = buf[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard i + 6 <= buf.count, buf[i] == UInt8(ascii: "\\"), buf[i + 1] == UInt8(ascii: "u") else { throw Failure() }
                    i += 2
                    let low = try hex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw Failure() }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw Failure()
                }
                guard let u = Unicode.Scalar(scalar) else { throw Failure() }
                out.append(contentsOf: String(Character(u)).utf8)
            default: throw Failure()
            }
        }
        throw Failure()
    }
}
