import Foundation
import ProtoWire
import RPC
import Testing

@Suite("gRPC message framing")
struct FramingTests {
    static let message: [UInt8] = Array(0..<200).map { UInt8($0 & 0xFF) }

    @Test("a message split into chunks of any size reassembles", arguments: [1, 2, 3, 4, 5, 6, 7, 64, 204, 1000])
    func anySplit(_ chunk: Int) throws {
        let framed = MessageFraming.frame(Self.message)
        var deframer = MessageDeframer(maxMessageBytes: 1 << 20)
        var i = 0
        while i < framed.count {
            #expect(deframer.append(Array(framed[i..<min(i + chunk, framed.count)])) == nil)
            i += chunk
        }
        #expect(try deframer.finish().get() == Self.message)
    }

    @Test("a stream of messages split at any size arrives whole and in order", arguments: [1, 2, 5, 7, 64, 1000])
    func streamSplit(_ chunk: Int) {
        let messages: [[UInt8]] = [[], [1], Array(repeating: 7, count: 300), [2, 3]]
        let wire = messages.flatMap { MessageFraming.frame($0) }
        var deframer = MessageStreamDeframer(maxMessageBytes: 1000)
        var got: [[UInt8]] = []
        var i = 0
        while i < wire.count {
            let part = Array(wire[i..<min(i + chunk, wire.count)])
            #expect(part.withUnsafeBytes { deframer.append($0) { got.append($0) } } == nil)
            i += chunk
        }
        #expect(got == messages)
        #expect(deframer.isAtBoundary)
    }

    @Test("an empty message is valid")
    func emptyMessage() throws {
        var deframer = MessageDeframer(maxMessageBytes: 10)
        #expect(deframer.append([0, 0, 0, 0, 0]) == nil)
        #expect(try deframer.finish().get() == [])
    }

    @Test("an oversize prefix is refused before the body arrives")
    func tooLarge() {
        var deframer = MessageDeframer(maxMessageBytes: 100)
        let error = deframer.append([0, 0, 0, 0, 101])
        #expect(error?.code == .resourceExhausted)
        #expect(error?.reason == "MESSAGE_TOO_LARGE")
    }

    @Test("no body, a short prefix and a short body are framing errors")
    func truncated() {
        var empty = MessageDeframer(maxMessageBytes: 100)
        #expect(empty.finish().failureCode == .internal)
        var shortPrefix = MessageDeframer(maxMessageBytes: 100)
        _ = shortPrefix.append([0, 0, 0])
        #expect(shortPrefix.finish().failureCode == .internal)
        var shortBody = MessageDeframer(maxMessageBytes: 100)
        _ = shortBody.append([0, 0, 0, 0, 5, 1, 2])
        #expect(shortBody.finish().failureCode == .internal)
    }

    @Test("two messages in a unary call are refused")
    func twoMessages() {
        var deframer = MessageDeframer(maxMessageBytes: 100)
        let error = deframer.append([0, 0, 0, 0, 1, 9, 0, 0, 0, 0, 1, 9])
        #expect(error?.code == .internal)
    }

    @Test("a request in one chunk and the same request byte by byte end the same: message, refusal or framing error")
    func wholeChunkAgreesWithBytes() {
        let big = [UInt8](repeating: 7, count: 300)
        let inputs: [[UInt8]] = [
            [0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 42], [0, 0, 0, 1, 44] + big, [1, 0, 0, 0, 1, 9], [7, 0, 0, 0, 1, 9],
            [0, 0, 0, 0, 101] + [UInt8](repeating: 1, count: 101), [0, 0, 0, 0, 2, 1], [0, 0, 0, 0, 1, 9, 0],
            [0, 0, 0, 0, 1, 9, 0, 0, 0, 0, 1, 9],
        ]
        for input in inputs {
            var whole = MessageDeframer(maxMessageBytes: 100)
            var bytes = MessageDeframer(maxMessageBytes: 100)
            let wholeError = whole.append(input)
            var byteError: RPCError?
            for b in input where byteError == nil { byteError = bytes.append([b]) }
            #expect(wholeError?.code == byteError?.code, "\(input.prefix(8))")
            #expect(wholeError?.reason == byteError?.reason, "\(input.prefix(8))")
            if wholeError == nil {
                let a = try? whole.finish().get()
                let b = try? bytes.finish().get()
                #expect(a == b, "\(input.prefix(8))")
            }
        }
        // A second message after a whole one is still refused.
        var twice = MessageDeframer(maxMessageBytes: 100)
        #expect(twice.append([0, 0, 0, 0, 1, 9]) == nil)
        #expect(twice.append([0, 0, 0, 0, 1, 9])?.code == .internal)
    }

    @Test("compressed messages are unimplemented; other flags are framing errors")
    func flags() {
        var compressed = MessageDeframer(maxMessageBytes: 100)
        #expect(compressed.append([1, 0, 0, 0, 1]).map(\.code) == .unimplemented)
        var bad = MessageDeframer(maxMessageBytes: 100)
        #expect(bad.append([7, 0, 0, 0, 1]).map(\.code) == .internal)
    }
}

extension Result where Failure == RPCError {
    var failureCode: StatusCode? {
        if case .failure(let e) = self { return e.code }
        return nil
    }
}

@Suite("gRPC header values")
struct HeaderTests {
    @Test(
        "grpc-timeout parses every unit",
        arguments: [
            ("1H", Int64(3_600_000_000_000)), ("2M", 120_000_000_000), ("3S", 3_000_000_000), ("4m", 4_000_000),
            ("5u", 5_000), ("6n", 6), ("99999999S", 99_999_999_000_000_000),
        ])
    func timeouts(_ text: String, _ nanos: Int64) {
        #expect(GRPCHeaders.parseTimeout(text) == nanos)
    }

    @Test("malformed grpc-timeout values are refused", arguments: ["", "S", "1", "1x", "123456789S", "-1S", "1.5S", " 1S"])
    func badTimeouts(_ text: String) {
        #expect(GRPCHeaders.parseTimeout(text) == nil)
    }

    @Test("formatted timeouts parse back to at least the same time", arguments: [Int64(1), 999, 1_000_001, 5_000_000_000, 86_400_000_000_000])
    func formatRoundTrip(_ nanos: Int64) {
        let parsed = GRPCHeaders.parseTimeout(GRPCHeaders.formatTimeout(nanoseconds: nanos))!
        #expect(parsed >= nanos)
    }

    @Test("grpc-message percent-encoding round-trips")
    func percent() {
        let text = "bad: 100% \u{e9}\n"
        let encoded = GRPCHeaders.percentEncode(text)
        #expect(encoded == "bad: 100%25 %C3%A9%0A")
        #expect(GRPCHeaders.percentDecode(encoded) == text)
    }

    @Test(
        "content types",
        arguments: [
            ("application/grpc", true), ("application/grpc+proto", true), ("application/grpc; charset=utf-8", true),
            ("Application/GRPC", true), ("application/grpc+json", false), ("application/json", false), ("", false),
            ("application/grpcx", false),
        ])
    func contentTypes(_ value: String, _ accepted: Bool) {
        #expect(GRPCHeaders.isGRPCContentType(value) == accepted)
    }

    @Test("base64 round-trips padded and unpadded", arguments: 0..<20)
    func base64(_ n: Int) {
        let bytes = (0..<n).map { UInt8(($0 * 37) & 0xFF) }
        #expect(Base64.decode(Base64.encode(bytes)) == bytes)
        #expect(Base64.decode(Base64.encode(bytes, padded: true)) == bytes)
    }

    @Test("base64 decoding agrees with Foundation at every length 0-100, both alphabets; a bad character anywhere is refused")
    func base64AgainstFoundation() {
        var rng = SystemRandomNumberGenerator()
        for n in 0...100 {
            let bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let standard = Data(bytes).base64EncodedString()
            let urlSafe = standard.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            let unpadded = urlSafe.replacingOccurrences(of: "=", with: "")
            #expect(Base64.decode(standard) == bytes, "length \(n)")
            #expect(Base64.decode(unpadded) == bytes, "length \(n)")
            for position in 0..<min(unpadded.utf8.count, 24) {
                var broken = Array(unpadded.utf8)
                broken[position] = UInt8(ascii: "$")
                #expect(Base64.decode(String(decoding: broken, as: UTF8.self)) == nil, "length \(n), position \(position)")
            }
        }
    }

    @Test("malformed base64 is refused")
    func badBase64() {
        #expect(Base64.decode("a") == nil)
        #expect(Base64.decode("ab=c") == nil)
        #expect(Base64.decode("ab$c") == nil)
    }
}

@Suite("Rich error model")
struct RichStatusTests {
    @Test("a service error carries Status with one ErrorInfo in domain billing.v1")
    func errorInfo() throws {
        let error = RPCError(
            code: .invalidArgument, message: "account_id is required", reason: "INVALID_FIELD",
            metadata: ["field": "account_id"])
        let status = try RichStatus(decoding: error.richStatus!.encoded())
        #expect(status.code == 3)
        #expect(status.message == "account_id is required")
        #expect(status.details.first?.typeURL == "type.googleapis.com/google.rpc.ErrorInfo")
        #expect(status.errorInfo == ErrorInfo(reason: "INVALID_FIELD", domain: "billing.v1", metadata: ["field": "account_id"]))
    }

    @Test("transport errors have no details")
    func noDetails() {
        #expect(RPCError.deadlineExceeded.richStatus == nil)
        #expect(RPCError.unimplemented("x/y").code == .unimplemented)
    }

    @Test("a responder answers once")
    func responderOnce() {
        final class Box: @unchecked Sendable { var results: [Result<[UInt8], RPCError>] = [] }
        let box = Box()
        let responder = Responder { box.results.append($0) }
        responder.fail(.cancelled)
        responder.succeed(framed: [0, 0, 0, 0, 0])
        #expect(box.results.count == 1)
    }

    @Test("typed handlers answer INVALID_ARGUMENT for undecodable requests")
    func undecodable() {
        final class Box: @unchecked Sendable { var result: Result<[UInt8], RPCError>? }
        var router = Router()
        router.register("test.v1.T/M", WireProbe.self) { _, _, responder in responder.succeed(framed: []) }
        let box = Box()
        guard case .unary(_, let handler) = router.resolve(path: "/test.v1.T/M") else {
            Issue.record("test.v1.T/M is not routed as unary")
            return
        }
        handler(CallContext(method: "test.v1.T/M"), [0x0A, 0x05], Responder { box.result = $0 })
        #expect(box.result?.failureCode == .invalidArgument)
        #expect(router.resolve(path: "/test.v1.T/Other") == nil)
        #expect(!router.knows(path: "/test.v1.T/Other"))
    }
}

struct WireProbe: ProtoMessage {
    var s = ""
    init() {}
    mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (f, wt) = try r.nextTag() { if f == 1 { s = try r.readString(field: 1) } else { try r.skip(wt) } }
    }
    var encodedSize: Int { ProtoSize.string(1, s) }
    func encode(to w: inout ProtoWriter) { w.string(1, s) }
}

@Suite("grpc-message")
struct GRPCMessageTests {
    @Test("a long message is capped at 1 KiB of UTF-8, cut on a character boundary")
    func capped() {
        #expect(GRPCHeaders.capped("short") == "short")
        let long = String(repeating: "é", count: 5000)
        let cut = GRPCHeaders.capped(long)
        #expect(cut.utf8.count <= GRPCHeaders.maxMessageBytes)
        #expect(cut.hasSuffix("…"))
        #expect(cut.dropLast().allSatisfy { $0 == "é" })
        let encoded = GRPCHeaders.grpcMessage(String(repeating: "x", count: 60_000))
        #expect(GRPCHeaders.percentDecode(encoded).utf8.count <= GRPCHeaders.maxMessageBytes)
    }
}
