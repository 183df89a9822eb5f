import ProtoJSON
import ProtoWire
import TestSupport
import Testing

@Suite("Proto3 JSON errors and hostile input")
struct ErrorTests {
    /// JSON the mapping refuses, and the error, which names the field path.
    static let jsonCases: [(String, String, String)] = [
        ("Scalars", #"{"i32":"x"}"#, #"i32: expected an integer, got "x""#),
        ("Scalars", #"{"i32":2147483648}"#, "i32: 2147483648 is out of range for int32"),
        ("Scalars", #"{"i64":"9223372036854775808"}"#, "i64: 9223372036854775808 is out of range for int64"),
        ("Scalars", #"{"u32":-1}"#, "u32: -1 is out of range for uint32"),
        ("Scalars", #"{"u64":"-1"}"#, "u64: -1 is out of range for uint64"),
        ("Scalars", #"{"i64":1.5}"#, "i64: 1.5 is not an integer"),
        ("Scalars", #"{"i64":" 1"}"#, #"i64: expected an integer, got " 1""#),
        ("Scalars", #"{"flag":"true"}"#, "flag: expected true or false, got a string"),
        ("Scalars", #"{"text":1}"#, "text: expected a string, got a number"),
        ("Scalars", #"{"inner":{"value":true}}"#, "inner.value: expected an integer, got a boolean"),
        ("Scalars", #"{"inner":[]}"#, "inner: expected an object, got an array"),
        ("Scalars", #"{"data":"!!"}"#, "data: not base64"),
        ("Scalars", #"{"flt":1e39}"#, "flt: 1e39 is out of range for float"),
        ("Scalars", #"{"dbl":1e400}"#, "dbl: 1e400 is out of range"),
        ("Scalars", #"{"dbl":"nan"}"#, #"dbl: expected a number, got "nan""#),
        ("Scalars", #"{"color":true}"#, "color: expected an enum name or number, got a boolean"),
        ("Scalars", #"{"color":4294967297}"#, "color: 4294967297 is out of range for int32"),
        ("Repeated", #"{"inner":[{},{"value":"x"}]}"#, #"inner[1].value: expected an integer, got "x""#),
        ("Repeated", #"{"i32":[1,null]}"#, "i32[1]: null is not an element"),
        ("Repeated", #"{"i32":1}"#, "i32: expected an array, got a number"),
        ("Maps", #"{"byId":{"x":{}}}"#, #"byId["x"]: expected an integer, got "x""#),
        ("Maps", #"{"byId":{"1":{"color":[]}}}"#, #"byId["1"].color: expected an enum name or number, got an array"#),
        ("Maps", #"{"flags":{"yes":""}}"#, #"flags["yes"]: a bool key must be "true" or "false""#),
        ("Maps", #"{"labels":{"a":"1","a":"2"}}"#, #"labels["a"]: key given twice"#),
        ("Maps", #"{"labels":{"a":null}}"#, #"labels["a"]: null is not a map value"#),
        ("Maps", #"{"labels":[]}"#, "labels: expected an object, got an array"),
        ("Presence", #"{"choiceText":"a","choiceNumber":1}"#, "choiceNumber: oneof choice is already set by choiceText"),
        ("Names", #"{"custom":"a","explicit":"b"}"#, "explicit: field explicit is given twice (JSON name and .proto name?)"),
        ("Scalars", "[]", "expected an object, got an array"),
        ("Holder", #"{"any":{"name":"x"}}"#, "any.@type: an Any needs @type"),
        ("Holder", #"{"anys":[{"@type":"type.googleapis.com/nope.X"}]}"#, "anys[0].@type: type.googleapis.com/nope.X names a type the registry does not hold"),
        ("Holder", #"{"any":{"@type":"t/jsontest.Inner","value":true}}"#, "any.value: expected an integer, got a boolean"),
        ("Holder", #"{"any":{"@type":"t/google.protobuf.Any"}}"#, "any.value: an Any holding google.protobuf.Any needs one value"),
        ("Scalars", #"{"i32":1,}"#, "invalid JSON at byte 9: expected a member name"),
        ("Scalars", #"{"i32":01}"#, "invalid JSON at byte 8: expected ',' or '}'"),
        ("Scalars", #"{"i32":1} x"#, "invalid JSON at byte 10: unexpected bytes after the value"),
        ("Scalars", #"{"text":"\ud800"}"#, "invalid JSON at byte 15: unpaired surrogate"),
        ("Scalars", "{\"text\":\"\u{1}\"}", "invalid JSON at byte 9: control character in a string"),
        ("Scalars", #"{"text":"\x"}"#, "invalid JSON at byte 11: invalid escape"),
        ("Scalars", "", "invalid JSON at byte 0: unexpected end of input"),
        ("Scalars", #"{"i32":tru}"#, "invalid JSON at byte 7: unexpected character"),
    ]

    @Test("refused JSON names the field", arguments: jsonCases)
    func refused(_ type: String, _ json: String, _ message: String) throws {
        let error = #expect(throws: ProtoJSONError.self) { try testRegistry().toBinary("jsontest." + type, json: Array(json.utf8)) }
        #expect(error?.description == message)
    }

    @Test("strings that are not UTF-8 are refused both ways")
    func notUTF8() throws {
        let registry = try testRegistry()
        let error = #expect(throws: ProtoJSONError.self) { try registry.toJSON("jsontest.Scalars", binary: [0x62, 0x01, 0xFF]) }
        #expect(error?.description == "text: string is not UTF-8")
        #expect(throws: ProtoJSONError.self) { try registry.toBinary("jsontest.Scalars", json: [0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D]) }
    }

    @Test("with ignoresUnknownFields false, unknown members and enum names are errors")
    func strict() throws {
        let registry = try testRegistry(ignoresUnknownFields: false)
        let unknown = #expect(throws: ProtoJSONError.self) { try registry.toBinary("jsontest.Scalars", json: Array(#"{"nope":1}"#.utf8)) }
        #expect(unknown?.description == "nope: jsontest.Scalars has no such field")
        let name = #expect(throws: ProtoJSONError.self) { try registry.toBinary("jsontest.Scalars", json: Array(#"{"color":"COLOR_PURPLE"}"#.utf8)) }
        #expect(name?.description == #"color: jsontest.Color has no value named "COLOR_PURPLE""#)
    }

    @Test("unknown message types, truncated and malformed binary")
    func binaryErrors() throws {
        let registry = try testRegistry()
        func failure(_ type: String, _ bytes: [UInt8]) -> String? {
            (#expect(throws: ProtoJSONError.self) { try registry.toJSON("jsontest." + type, binary: bytes) })?.description
        }
        #expect(failure("Nope", []) == "unknown message type jsontest.Nope")
        #expect(failure("Scalars", [0x08]) == "message truncated")
        #expect(failure("Scalars", [0x8A, 0x01, 0x02, 0x12, 0x05]) == "inner: length 5 exceeds the input or the limit")
        #expect(failure("Repeated", [0x8A, 0x01, 0x01, 0x08]) == "inner[0]: message truncated")
        #expect(failure("Scalars", [0x0B]) == "invalid wire type 3")
        #expect(failure("Scalars", [0x00]) == "invalid field number 0")
        #expect(failure("Holder", [0x0A, 0x03, 0x12, 0x01, 0x00]) == "any.@type: an Any with a value has no type URL")
        #expect(failure("Holder", [0x0A, 0x04, 0x0A, 0x02, 0x78, 0x2F]) == "any.@type: x/ names a type the registry does not hold")
    }

    /// `Recursive` nested `levels` deep, in binary.
    static func nested(_ levels: Int) -> [UInt8] {
        var bytes: [UInt8] = [0x10, 0x01]
        for _ in 0..<levels {
            var w = ProtoWriter()
            w.writeTag(1, .lengthDelimited)
            w.writeVarint(UInt64(bytes.count))
            w.writeRaw(bytes)
            bytes = w.finish()
        }
        return bytes
    }

    @Test("nesting is bounded at 100 messages, in binary and in JSON")
    func depth() throws {
        let registry = try testRegistry()
        let ok = try registry.toJSON("jsontest.Recursive", binary: Self.nested(100))
        #expect(try registry.toBinary("jsontest.Recursive", json: ok) == Self.nested(100))
        let deep = #expect(throws: ProtoJSONError.self) { try registry.toJSON("jsontest.Recursive", binary: Self.nested(101)) }
        #expect(deep?.description.hasSuffix("child: messages nest too deep") == true)
        let json = String(repeating: #"{"child":"#, count: 101) + "{}" + String(repeating: "}", count: 101)
        let deepJSON = #expect(throws: ProtoJSONError.self) { try registry.toBinary("jsontest.Recursive", json: Array(json.utf8)) }
        #expect(deepJSON?.description.hasSuffix("child: messages nest too deep") == true)
        // Arrays and unknown members nest only as deep as the parser allows, and no deeper than the stack can take.
        for open in ["[", #"{"x":"#, #"{"child":"#] {
            let hostile = String(repeating: open, count: 200_000)
            #expect(throws: ProtoJSONError.self) { try registry.toBinary("jsontest.Recursive", json: Array(hostile.utf8)) }
        }
    }

    @Test("input and output sizes are bounded")
    func sizes() throws {
        var registry = try testRegistry()
        registry.limits = ProtoJSONLimits(maxDepth: 100, maxInputBytes: 64, maxOutputBytes: 40)
        #expect(throws: ProtoJSONError.tooLarge(limit: 64)) { try registry.toJSON("jsontest.Scalars", binary: [UInt8](repeating: 0, count: 65)) }
        #expect(throws: ProtoJSONError.tooLarge(limit: 64)) { try registry.toBinary("jsontest.Scalars", json: [UInt8](repeating: 0x20, count: 65)) }
        // 20 empty messages in 60 bytes of binary are 20 `{}` of JSON, and the name.
        let many = [UInt8]((0..<20).flatMap { _ in [0x8A, 0x01, 0x00] as [UInt8] })
        #expect(throws: ProtoJSONError.tooLarge(limit: 40)) { try registry.toJSON("jsontest.Repeated", binary: many) }
    }

    @Test("random bytes and mutated JSON never trap; whatever converts converts back the same", arguments: 0..<8)
    func fuzz(_ seed: Int) throws {
        let registry = try testRegistry()
        var rng = SplitMix(seed: UInt64(seed) &* 0x9E37_79B9 &+ 1)
        let types = ["Scalars", "Repeated", "Maps", "Presence", "Holder", "Recursive", "Names"].map { "jsontest." + $0 }
        let seeds = MappingTests.canonicalCases.map { Array($0.1.utf8) }
        for round in 0..<400 {
            let type = types[round % types.count]
            // Binary: random bytes, half of them starting with a plausible tag.
            var bytes = (0..<Int.random(in: 0..<48, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if round % 2 == 0 && !bytes.isEmpty { bytes[0] = UInt8(Int.random(in: 1...18, using: &rng) << 3 | Int.random(in: 0...2, using: &rng)) }
            if let json = try? registry.toJSON(type, binary: bytes) {
                let back = try registry.toBinary(type, json: json)
                #expect(try registry.toJSON(type, binary: back) == json)
            }
            // JSON: a canonical case with bytes replaced, inserted or dropped.
            var text = seeds[Int.random(in: 0..<seeds.count, using: &rng)]
            for _ in 0..<Int.random(in: 1...4, using: &rng) where !text.isEmpty {
                let at = Int.random(in: 0..<text.count, using: &rng)
                let pick = Array(#"{}[]",:0-9e."\u"#.utf8) + [0xFF, 0xC3, 0x00, 0x20]
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: text[at] = pick[Int.random(in: 0..<pick.count, using: &rng)]
                case 1: text.insert(pick[Int.random(in: 0..<pick.count, using: &rng)], at: at)
                default: text.remove(at: at)
                }
            }
            for t in types {
                if let binary = try? registry.toBinary(t, json: text) {
                    let json = try registry.toJSON(t, binary: binary)
                    #expect(try registry.toBinary(t, json: json) == binary)
                }
            }
        }
    }
}
