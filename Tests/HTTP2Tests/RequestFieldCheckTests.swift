@testable import HTTP2
import Testing

@Suite("Request fields as RFC 9113 8.2-8.3 reads them, connection-specific fields skipped")
struct RequestFieldCheckTests {
    /// Runs a header block (and optional trailers) through the check; the first verdict that is not `.use`
    /// wins, and a complete block without the required pseudo-fields is malformed.
    static func run(_ fields: [(String, String)], trailers: [(String, String)] = []) -> RequestFieldCheck.Verdict {
        var pseudo: UInt8 = 0
        var regular = false
        var skipped = false
        for (block, isTrailer) in [(fields, false), (trailers, true)] {
            for (name, value) in block {
                let n = Array(name.utf8), v = Array(value.utf8)
                let verdict = n.withUnsafeBufferPointer { nb in
                    v.withUnsafeBufferPointer { vb in
                        RequestFieldCheck.check(name: nb, value: vb, trailer: isTrailer, pseudoFields: &pseudo, sawRegularField: &regular)
                    }
                }
                if verdict == .malformed { return .malformed }
                if verdict == .skip { skipped = true }
            }
            if !isTrailer && pseudo & PseudoField.required != PseudoField.required { return .malformed }
        }
        return skipped ? .skip : .use
    }

    static func kind(_ name: String) -> FieldName {
        Array(name.utf8).withUnsafeBufferPointer { FieldName.of($0) }
    }

    @Test("field names: each known name is classified, and no name one byte away from it is")
    func fieldNames() {
        let known: [(String, FieldName)] = [
            ("te", .unread), (":path", .path), (":method", .method), ("upgrade", .connectionSpecific), ("user-agent", .unread),
            ("connection", .connectionSpecific), ("keep-alive", .connectionSpecific), ("content-type", .contentType),
            ("grpc-timeout", .grpcTimeout), ("accept-encoding", .unread), ("proxy-connection", .connectionSpecific),
            ("transfer-encoding", .connectionSpecific), ("grpc-accept-encoding", .unread),
        ]
        for (name, expected) in known {
            #expect(Self.kind(name) == expected, "\(name)")
            let bytes = Array(name.utf8)
            for i in bytes.indices {
                var changed = bytes
                changed[i] ^= 0x20  // case flipped, or another byte
                let other = changed.withUnsafeBufferPointer { FieldName.of($0) }
                #expect(other == (changed.first == UInt8(ascii: ":") ? .otherPseudo : .other), "\(name) byte \(i)")
            }
            #expect(Self.kind(name + "x") != expected && Self.kind(String(name.dropLast())) != expected)
        }
        #expect(Self.kind(":scheme") == .otherPseudo && Self.kind("authorization") == .other && Self.kind("") == .other)
    }

    @Test("byte literals: equal only to the same bytes, at every length from 0 to 24")
    func byteLiterals() {
        let literals: [StaticString] = [
            "", "a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg", "abcdefgh", "abcdefghi", "abcdefghijklmno", "abcdefghijklmnop",
            "abcdefghijklmnopq", "abcdefghijklmnopqrstuvwx",
        ]
        for literal in literals {
            let bytes = Array(UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
            #expect(bytes.withUnsafeBufferPointer { ByteLiteral.equal($0, literal) })
            for i in bytes.indices {
                var changed = bytes
                changed[i] &+= 1
                #expect(!changed.withUnsafeBufferPointer { ByteLiteral.equal($0, literal) })
            }
            #expect(!(bytes + [0x61]).withUnsafeBufferPointer { ByteLiteral.equal($0, literal) })
        }
    }

    static let base = [(":method", "POST"), (":scheme", "http"), (":path", "/grpc.health.v1.Health/Check"), (":authority", "h")]

    @Test("a plain gRPC request is read")
    func plain() {
        #expect(Self.run(Self.base + [("content-type", "application/grpc"), ("te", "trailers"), ("authorization", "Bearer ")]) == .use)
        #expect(Self.run(Array(Self.base.prefix(3))) == .use)  // :authority is optional
    }

    @Test(
        "connection-specific fields and names that are not lowercase tokens are skipped, not fatal",
        arguments: ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "X-Upper", "bad name", "bad:colon"])
    func skipped(_ name: String) {
        #expect(Self.run(Self.base + [(name, "keep-alive")]) == .skip)
    }

    @Test(
        "malformed requests",
        arguments: [
            [(":method", "POST"), (":scheme", "http")] as [(String, String)],  // no :path
            [(":method", "POST"), (":path", "/x")],  // no :scheme
            [(":scheme", "http"), (":path", "/x")],  // no :method
            base + [(":path", "/again")],  // repeated
            [(":method", "POST"), ("content-type", "application/grpc"), (":scheme", "http"), (":path", "/x")],  // pseudo after regular
            base + [(":status", "200")],  // a response's pseudo-field
            base + [(":protocol", "x")],  // unknown pseudo-field
            [(":method", "POST"), (":scheme", "http"), (":path", "")],  // empty :path
            base + [("x-note", "a\u{0}b")], base + [("x-note", "a\rb")], base + [("x-note", "a\nb")],  // NUL, CR, LF
            base + [("", "v")],  // empty name
        ])
    func malformed(_ fields: [(String, String)]) {
        #expect(Self.run(fields) == .malformed)
    }

    @Test("trailers carry no pseudo-fields; their regular fields are fine")
    func trailers() {
        #expect(Self.run(Self.base, trailers: [("x-trailer", "1")]) == .use)
        #expect(Self.run(Self.base, trailers: [(":path", "/x")]) == .malformed)
    }

    @Test("whitespace around a value is allowed (trimmed later)")
    func whitespace() {
        #expect(Self.run(Self.base + [("authorization", " Bearer k1 "), ("x-tab", "\tv\t")]) == .use)
    }
}

@Suite("The token bitmap")
struct TokenBitmapTests {
    @Test("agrees with RFC 9110's tchar without A-Z for every byte")
    func everyByte() {
        let tchar = Set(Array("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz".utf8))
        for b in 0...255 {
            #expect(RequestFieldCheck.isLowercaseTokenByte(UInt8(b)) == tchar.contains(UInt8(b)), "byte \(b)")
        }
    }
}

@Suite("The value scan")
struct ValueScanTests {
    /// Byte by byte, the rule itself.
    static func plain(_ bytes: [UInt8]) -> Bool { bytes.contains { $0 == 0 || $0 == 0x0A || $0 == 0x0D } }

    @Test("every byte value at every position of values 0-20 bytes long agrees with the byte-by-byte rule")
    func everyByteEveryPosition() {
        for length in 1...20 {
            for position in 0..<length {
                for b in 0...255 {
                    // Filler of every kind around it: printable, tab, high bytes.
                    for filler: UInt8 in [0x61, 0x09, 0xFF, 0x0E] {
                        var value = [UInt8](repeating: filler, count: length)
                        value[position] = UInt8(b)
                        let fast = value.withUnsafeBufferPointer { RequestFieldCheck.hasForbiddenValueByte($0) }
                        if fast != Self.plain(value) {
                            Issue.record("length \(length), byte \(b) at \(position) in \(filler): scan says \(fast)")
                            return
                        }
                    }
                }
            }
        }
    }

    @Test("an empty value is fine")
    func empty() {
        #expect(![UInt8]().withUnsafeBufferPointer { RequestFieldCheck.hasForbiddenValueByte($0) })
    }
}
