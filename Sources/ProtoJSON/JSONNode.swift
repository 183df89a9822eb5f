/// A parsed JSON value (RFC 8259) as proto3's JSON mapping reads it. Numbers keep their literal text, so 64-bit integers
/// lose nothing and `1e2` for an int64 can be refused; JOSE's `JSONValue` is the signed payloads' reader (Sources/JOSE/README.md).
enum JSONNode: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The number as written: `-12`, `1.5e3`.
    case number(String)
    case string(String)
    case array([JSONNode])
    /// Members in input order; duplicate keys are kept for the caller to refuse.
    case object([(key: String, value: JSONNode)])

    static func == (a: JSONNode, b: JSONNode) -> Bool {
        switch (a, b) {
        case (.null, .null): true
        case (.bool(let x), .bool(let y)): x == y
        case (.number(let x), .number(let y)): x == y
        case (.string(let x), .string(let y)): x == y
        case (.array(let x), .array(let y)): x == y
        case (.object(let x), .object(let y)): x.count == y.count && zip(x, y).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    /// What a value is, for error messages.
    var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// A byte-level JSON parser with a nesting bound; it never reads past its input or recurses unboundedly.
struct JSONParser {
    private let bytes: [UInt8]
    private var i = 0
    private let maxNesting: Int

    /// Parses one JSON text; whitespace may surround it, nothing else.
    static func parse(_ bytes: [UInt8], maxNesting: Int) throws(ProtoJSONError) -> JSONNode {
        var parser = JSONParser(bytes: bytes, maxNesting: maxNesting)
        parser.skipSpace()
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.i == bytes.count else { throw parser.fail("unexpected bytes after the value") }
        return value
    }

    private init(bytes: [UInt8], maxNesting: Int) {
        self.bytes = bytes
        self.maxNesting = maxNesting
    }

    private func fail(_ reason: String) -> ProtoJSONError { .invalidJSON(offset: i, reason: reason) }

    private mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    private mutating func value(depth: Int) throws(ProtoJSONError) -> JSONNode {
        guard i < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[i] {
        case UInt8(ascii: "{"):
            guard depth < maxNesting else { throw fail("nested too deep") }
            i += 1
            var members: [(key: String, value: JSONNode)] = []
            skipSpace()
            if i < bytes.count && bytes[i] == UInt8(ascii: "}") {
                i += 1
                return .object(members)
            }
            while true {
                skipSpace()
                guard i < bytes.count && bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a member name") }
                let key = try string()
                skipSpace()
                guard i < bytes.count && bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                i += 1
                skipSpace()
                members.append((key, try value(depth: depth + 1)))
                skipSpace()
                guard i < bytes.count else { throw fail("unexpected end of input") }
                if bytes[i] == UInt8(ascii: ",") {
                    i += 1
                } else if bytes[i] == UInt8(ascii: "}") {
                    i += 1
                    return .object(members)
                } else {
                    throw fail("expected ',' or '}'")
                }
            }
        case UInt8(ascii: "["):
            guard depth < maxNesting else { throw fail("nested too deep") }
            i += 1
            var elements: [JSONNode] = []
            skipSpace()
            if i < bytes.count && bytes[i] == UInt8(ascii: "]") {
                i += 1
                return .array(elements)
            }
            while true {
                skipSpace()
                elements.append(try value(depth: depth + 1))
                skipSpace()
                guard i < bytes.count else { throw fail("unexpected end of input") }
                if bytes[i] == UInt8(ascii: ",") {
                    i += 1
                } else if bytes[i] == UInt8(ascii: "]") {
                    i += 1
                    return .array(elements)
                } else {
                    throw fail("expected ',' or ']'")
                }
            }
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            let start = i
            guard let end = JSONNumber.scan(bytes, from: i) else { throw fail("malformed number") }
            i = end
            return .number(String(decoding: bytes[start..<end], as: UTF8.self))
        default: throw fail("unexpected character")
        }
    }

    private mutating func literal(_ word: String, _ value: JSONNode) throws(ProtoJSONError) -> JSONNode {
        let expected = Array(word.utf8)
        guard i + expected.count <= bytes.count, bytes[i..<i + expected.count].elementsEqual(expected) else {
            throw fail("unexpected character")
        }
        i += expected.count
        return value
    }

    /// A string literal starting at the opening quote: escapes resolved, UTF-8 checked.
    private mutating func string() throws(ProtoJSONError) -> String {
        i += 1
        var out: [UInt8] = []
        var start = i
        while true {
            guard i < bytes.count else { throw fail("unterminated string") }
            let b = bytes[i]
            if b == UInt8(ascii: "\"") { break }
            if b < 0x20 { throw fail("control character in a string") }
            if b != UInt8(ascii: "\\") {
                i += 1
                continue
            }
            out.append(contentsOf: bytes[start..<i])
            i += 1
            guard i < bytes.count else { throw fail("unterminated string") }
            let e = bytes[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800..<0xDC00).contains(scalar) {
                    guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                        throw fail("unpaired surrogate")
                    }
                    i += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw fail("unpaired surrogate") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00..<0xE000).contains(scalar) {
                    throw fail("unpaired surrogate")
                }
                guard let u = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                out.append(contentsOf: Array(String(Character(u)).utf8))
            default: throw fail("invalid escape")
            }
            start = i
        }
        let s: String?
        if out.isEmpty {
            s = String(validating: bytes[start..<i], as: UTF8.self)
        } else {
            out.append(contentsOf: bytes[start..<i])
            s = String(validating: out, as: UTF8.self)
        }
        guard let s else { throw fail("string is not UTF-8") }
        i += 1
        return s
    }

    private mutating func hex4() throws(ProtoJSONError) -> UInt32 {
        guard i + 4 <= bytes.count else { throw fail("unterminated \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[i]
            let d: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = b - UInt8(ascii: "A") + 10
            default: throw fail("invalid \\u escape")
            }
            v = v << 4 | UInt32(d)
            i += 1
        }
        return v
    }
}

/// The JSON number grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
enum JSONNumber {
    /// The end of the number starting at `start`, or nil when the bytes there are not one.
    static func scan(_ bytes: [UInt8], from start: Int) -> Int? {
        var i = start
        func digit(_ k: Int) -> Bool { k < bytes.count && bytes[k] >= UInt8(ascii: "0") && bytes[k] <= UInt8(ascii: "9") }
        if i < bytes.count && bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard digit(i) else { return nil }
        if bytes[i] == UInt8(ascii: "0") {
            i += 1
        } else {
            while digit(i) { i += 1 }
        }
        if i < bytes.count && bytes[i] == UInt8(ascii: ".") {
            i += 1
            guard digit(i) else { return nil }
            while digit(i) { i += 1 }
        }
        if i < bytes.count && (bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E")) {
            i += 1
            if i < bytes.count && (bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-")) { i += 1 }
            guard digit(i) else { return nil }
            while digit(i) { i += 1 }
        }
        return i
    }

    /// Whether all of `text` is one JSON number (numeric strings in protobuf JSON follow the same grammar).
    static func isNumber(_ text: String) -> Bool {
        let utf8 = Array(text.utf8)
        return scan(utf8, from: 0) == utf8.count
    }
}
