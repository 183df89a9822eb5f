@testable import HTTP2
import ProtoWire
import RPC
import Testing

/// The per-stream state machine driven directly: every event in every phase that matters, no nghttp2.
@Suite("stream state machine")
struct StreamStateTests {
    @Test("a unary call: headers, request end, dispatch, answer, close")
    func unary() {
        var s = StreamState()
        #expect(s.headersEnded(.route(.unary), endStream: false) == .none)
        #expect(s.phase == .receiving(.unary) && s.takesData && !s.isAnswered)
        #expect(s.requestEnd() == .dispatch)
        s.handedOver()
        #expect(s.phase == .dispatched(.unary) && s.wasDispatched && !s.takesData)
        #expect(s.succeed() == .submitHeaders)
        #expect(s.phase == .answered)
        #expect(s.succeed() == .none, "a second answer is ignored")
        #expect(s.fail(.deadlineExceeded) == .none, "a deadline after the answer changes nothing")
        #expect(s.bodyDrained(tookBytes: true) == .trailers(nil))
        #expect(s.closed() == .none, "an answered call is not counted cancelled")
        #expect(s.phase == .closed)
    }

    @Test("headers that end the request dispatch at once")
    func headersOnly() {
        var s = StreamState()
        #expect(s.headersEnded(.route(.serverStreaming), endStream: true) == .dispatch)
        #expect(s.requestEnded)
    }

    @Test("verdicts other than a route answer or reset at the headers")
    func verdicts() {
        var a = StreamState()
        #expect(a.headersEnded(.malformed, endStream: true) == .reset)
        #expect(a.phase == .refused && !a.readsFields)
        #expect(a.requestEnd() == .none && a.malformed() == .none)
        var b = StreamState()
        #expect(b.headersEnded(.refuse(.shuttingDown), endStream: true) == .fail(.shuttingDown))
        #expect(b.phase == .answered && !b.wasDispatched)
        var c = StreamState()
        #expect(c.headersEnded(.notGRPC(status: "415", message: "m"), endStream: true) == .respondHTTP(status: "415", message: "m"))
        #expect(c.headersEnded(.route(.unary), endStream: true) == .none, "one header block per request")
    }

    @Test("a malformed field before dispatch refuses; after dispatch it resets and the close cancels")
    func malformed() {
        var s = StreamState()
        #expect(s.malformed() == .reset)
        #expect(s.phase == .refused)
        var t = StreamState()
        _ = t.headersEnded(.route(.unary), endStream: false)
        #expect(t.requestEnd() == .dispatch)
        t.handedOver()
        #expect(t.malformed() == .reset)
        #expect(t.closed() == .cancel)
    }

    @Test("a deadline before the answer fails the call once; a late answer is dropped")
    func deadline() {
        var s = StreamState()
        _ = s.headersEnded(.route(.unary), endStream: true)
        s.handedOver()
        #expect(s.deadline() == .fail(.deadlineExceeded))
        #expect(s.succeed() == .none)
        #expect(s.deadline() == .none)
        #expect(s.closed() == .none)
    }

    @Test("a reset while the handler runs cancels the call")
    func resetWhileRunning() {
        var s = StreamState()
        _ = s.headersEnded(.route(.unary), endStream: true)
        s.handedOver()
        #expect(s.closed() == .cancel)
        #expect(s.succeed() == .none, "no answer after close")
    }

    @Test("a reset before dispatch cancels nothing")
    func resetBeforeDispatch() {
        var s = StreamState()
        _ = s.headersEnded(.route(.unary), endStream: false)
        #expect(s.closed() == .none)
        #expect(!s.wasDispatched)
    }

    @Test("server streaming: first message sends headers, deferral and resume, finish, trailers")
    func serverStreaming() {
        var s = StreamState()
        _ = s.headersEnded(.route(.serverStreaming), endStream: true)
        s.handedOver()
        #expect(s.sendsMessages && s.isStreaming)
        #expect(s.message() == .submitHeaders)
        #expect(s.phase == .responding(.serverStreaming, finished: false))
        #expect(s.bodyDrained(tookBytes: true) == .more)
        #expect(s.bodyDrained(tookBytes: false) == .wait)
        #expect(s.deferred)
        #expect(s.message() == .resumeData)
        #expect(s.message() == .none, "not deferred any more")
        _ = s.bodyDrained(tookBytes: false)
        #expect(s.finish(nil) == .record(nil, resume: true))
        #expect(!s.sendsMessages)
        #expect(s.message() == .none, "messages after the finish are dropped")
        #expect(s.bodyDrained(tookBytes: false) == .trailers(nil))
        #expect(s.closed() == .none)
    }

    @Test("an abort while messages wait: the trailers go at once, the DATA source sends nothing more")
    func abortWhileStreaming() {
        let overloaded = RPCError(code: .resourceExhausted, message: "slow", reason: "OVERLOADED")
        var s = StreamState()
        _ = s.headersEnded(.route(.serverStreaming), endStream: true)
        s.handedOver()
        #expect(s.message() == .submitHeaders)
        #expect(s.abort(overloaded) == .abort(overloaded))
        #expect(!s.sendsMessages)
        #expect(s.finish(nil) == .none, "one end only")
        #expect(s.bodyDrained(tookBytes: false) == .wait, "the trailers are already submitted")
        #expect(s.closed() == .none)
        var early = StreamState()
        _ = early.headersEnded(.route(.serverStreaming), endStream: true)
        early.handedOver()
        #expect(early.abort(overloaded) == .fail(overloaded), "before any message: trailers-only")
    }

    @Test("a stream that finishes before any message answers trailers-only")
    func finishBeforeMessage() {
        var s = StreamState()
        _ = s.headersEnded(.route(.serverStreaming), endStream: true)
        s.handedOver()
        #expect(s.finish(.deadlineExceeded) == .fail(.deadlineExceeded))
        #expect(s.phase == .answered)
        var ok = StreamState()
        _ = ok.headersEnded(.route(.serverStreaming), endStream: true)
        ok.handedOver()
        #expect(ok.finish(nil) == .fail(RPCError(code: .ok, message: "")))
    }

    @Test("a deadline while streaming becomes the trailers' status")
    func streamingDeadline() {
        var s = StreamState()
        _ = s.headersEnded(.route(.serverStreaming), endStream: true)
        s.handedOver()
        _ = s.message()
        #expect(s.deadline() == .record(.deadlineExceeded, resume: false))
        #expect(s.bodyDrained(tookBytes: false) == .trailers(.deadlineExceeded))
        #expect(s.closed() == .none)
    }

    @Test("a streaming call closed before it finished is cancelled")
    func streamingReset() {
        var s = StreamState()
        _ = s.headersEnded(.route(.serverStreaming), endStream: true)
        s.handedOver()
        _ = s.message()
        #expect(s.closed() == .cancel)
    }

    @Test("bidirectional: dispatched at the headers, input ends on a boundary or fails inside a message")
    func bidi() {
        var s = StreamState()
        #expect(s.headersEnded(.route(.bidi), endStream: false) == .startBidi(ended: false))
        #expect(s.wasDispatched && s.takesData)
        #expect(s.message() == .submitHeaders)
        #expect(s.takesData, "requests still arrive while answering")
        #expect(s.requestEnd(atMessageBoundary: true) == .endOfInput)
        var cut = StreamState()
        _ = cut.headersEnded(.route(.bidi), endStream: false)
        #expect(cut.requestEnd(atMessageBoundary: false) == .fail(.badFraming("the stream ended inside a message")))
        var ended = StreamState()
        #expect(ended.headersEnded(.route(.bidi), endStream: true) == .startBidi(ended: true))
        #expect(ended.requestEnded)
    }

    @Test("request DATA is read only while the call can use it")
    func takesData() {
        var s = StreamState()
        #expect(!s.takesData, "not before the headers are judged")
        _ = s.headersEnded(.route(.unary), endStream: false)
        #expect(s.takesData)
        _ = s.fail(.messageTooLarge(size: 10, limit: 1))
        #expect(!s.takesData)
    }

    @Test("the sweep's cap ends calls before their answer, except streams a handler has")
    func endsAtCap() {
        var s = StreamState()
        #expect(s.endsAtCap, "a header block that never ends")
        _ = s.headersEnded(.route(.serverStreaming), endStream: false)
        #expect(s.endsAtCap, "a request body that never ends")
        _ = s.requestEnd()
        s.handedOver()
        #expect(!s.endsAtCap, "a streaming call ends through its writer")
        var u = StreamState()
        _ = u.headersEnded(.route(.unary), endStream: true)
        u.handedOver()
        #expect(u.endsAtCap, "a unary call under the cap alone")
        _ = u.succeed()
        #expect(!u.endsAtCap, "answered")
        var b = StreamState()
        _ = b.headersEnded(.route(.bidi), endStream: false)
        #expect(!b.endsAtCap)
    }
}

/// The gRPC rules of a call as pure decisions: the header verdict, the deadline, the status fields.
@Suite("call rules")
struct CallRulesTests {
    /// `CallRules.screen` with a well-formed gRPC request, changed by the arguments.
    static func screen(
        pseudo: Bool = true, http: Bool = false, method: String = "POST", contentType: String = "application/grpc",
        tooLarge: Bool = false, draining: Bool = false
    ) -> CallRules.Screening {
        CallRules.screen(
            requiredPseudoFields: pseudo, servesHTTP: http, post: method == "POST",
            grpcContentType: GRPCHeaders.isGRPCContentType(contentType),
            headerListTooLarge: tooLarge, maxHeaderListBytes: 8192, draining: draining)
    }

    static let tooLarge = RPCError(code: .resourceExhausted, message: "request headers exceed the limit of 8192 bytes")

    @Test("a header block is screened in order: RFC 9113, HTTP, header size, method, content type, drain")
    func screening() {
        #expect(Self.screen() == .route)
        #expect(Self.screen(contentType: "application/grpc+proto") == .route)
        #expect(Self.screen(pseudo: false, http: true, method: "GET", tooLarge: true, draining: true) == .decided(.malformed))
        #expect(Self.screen(method: "GET", tooLarge: true, draining: true) == .decided(.refuse(Self.tooLarge)))
        #expect(Self.screen(method: "GET", draining: true) == .decided(.notGRPC(status: "405", message: "gRPC calls use POST")))
        let type = StreamState.Verdict.notGRPC(status: "415", message: "content-type must be application/grpc")
        #expect(Self.screen(contentType: "text/plain", draining: true) == .decided(type))
        #expect(Self.screen(contentType: "") == .decided(type))
        #expect(Self.screen(draining: true) == .decided(.refuse(.shuttingDown)))
    }

    @Test("with an HTTPService, what is not a gRPC call is an exchange, judged by its own rules")
    func exchange() {
        #expect(Self.screen(http: true, method: "GET") == .exchange)
        #expect(Self.screen(http: true, method: "GET", tooLarge: true, draining: true) == .exchange)
        #expect(Self.screen(http: true, contentType: "application/json") == .exchange)
        #expect(Self.screen(http: true) == .route, "gRPC calls still go to the router")
        #expect(Self.screen(http: true, tooLarge: true) == .decided(.refuse(Self.tooLarge)))
        #expect(Self.screen(http: true, draining: true) == .decided(.refuse(.shuttingDown)))
    }

    @Test("a routed call: the interceptors' refusal first, then an unknown method, then its kind")
    func routed() {
        let denied = RPCError(code: .unauthenticated, message: "no token")
        #expect(CallRules.routed(.unary, path: "/a.B/C", refusal: denied) == .refuse(denied))
        #expect(CallRules.routed(nil, path: "/a.B/C", refusal: denied) == .refuse(denied), "unknown methods are authenticated too")
        #expect(CallRules.routed(nil, path: "/a.B/C", refusal: nil) == .refuse(.unimplemented("a.B/C")))
        #expect(CallRules.routed(nil, path: "x", refusal: nil) == .refuse(.unimplemented("x")))
        #expect(CallRules.routed(.unary, path: "/a.B/C", refusal: nil) == .route(.unary))
        #expect(CallRules.routed(.serverStreaming, path: "/a.B/C", refusal: nil) == .route(.serverStreaming))
        #expect(CallRules.routed(.bidi, path: "/a.B/C", refusal: nil) == .route(.bidi))
        #expect(CallRules.methodName(path: "/grpc.health.v1.Health/Check") == "grpc.health.v1.Health/Check")
    }

    static let second: Int64 = 1_000_000_000

    @Test(
        "grpc-timeout against the server's cap",
        arguments: [
            // (grpc-timeout, streaming, cap, deadline)
            ("", false, 0, CallRules.Deadline.none),
            ("", false, 5 * second, .cap(nanoseconds: 5 * second)),
            ("1S", false, 5 * second, .timer(nanoseconds: second)),
            ("5S", false, 5 * second, .cap(nanoseconds: 5 * second)),
            ("10S", false, 5 * second, .cap(nanoseconds: 5 * second)),
            ("1S", false, 0, .timer(nanoseconds: second)),
            ("250m", false, 0, .timer(nanoseconds: second / 4)),
            ("99999999H", false, 5 * second, .cap(nanoseconds: 5 * second)),
            ("", true, 5 * second, .none),
            ("", true, 0, .none),
            ("10S", true, 5 * second, .timer(nanoseconds: 10 * second)),
            ("1S", true, 0, .timer(nanoseconds: second)),
        ] as [(String, Bool, Int64, CallRules.Deadline)])
    func deadline(timeout: String, streaming: Bool, cap: Int64, expected: CallRules.Deadline) {
        #expect(CallRules.deadline(timeout: timeout, streaming: streaming, capNanoseconds: cap) == expected)
    }

    @Test("a grpc-timeout that cannot be read fails the call INTERNAL", arguments: ["S", "1s", "-1S", "123456789S", "1 S", "x"])
    func malformedTimeout(timeout: String) {
        for streaming in [false, true] {
            #expect(
                CallRules.deadline(timeout: timeout, streaming: streaming, capNanoseconds: 5 * Self.second)
                    == .malformed(RPCError(code: .internal, message: "malformed grpc-timeout '\(timeout)'")))
        }
    }

    @Test("the cap's instant from a start, or 0 without a cap")
    func capDeadline() {
        #expect(CallRules.capDeadline(from: 100, capNanoseconds: 0) == 0)
        #expect(CallRules.capDeadline(from: 100, capNanoseconds: 50) == 150)
        #expect(CallRules.capDeadline(from: .max, capNanoseconds: 2) == 1, "wraps like the monotonic clock")
    }

    static func lines(_ fields: [(String, String)]) -> [String] { fields.map { "\($0.0): \($0.1)" } }

    @Test("a trailers-only status: HTTP 200, the gRPC content type, grpc-status and grpc-message")
    func trailersOnly() {
        #expect(
            Self.lines(GRPCStatusFields.trailersOnly(.deadlineExceeded)) == [
                ":status: 200", "content-type: application/grpc", "grpc-status: 4", "grpc-message: deadline exceeded",
            ])
        #expect(
            Self.lines(GRPCStatusFields.trailersOnly(RPCError(code: .invalidArgument, message: "100% é\n"))) == [
                ":status: 200", "content-type: application/grpc", "grpc-status: 3", "grpc-message: 100%25 %C3%A9%0A",
            ])
    }

    @Test("a service error carries its ErrorInfo in grpc-status-details-bin, trailers-only or after messages")
    func details() throws {
        let error = RPCError(code: .failedPrecondition, message: "spent", reason: "ALREADY_CONSUMED", metadata: ["order.id": "7"])
        for fields in [GRPCStatusFields.trailersOnly(error), GRPCStatusFields.trailers(error)] {
            #expect(fields.count == (fields.first?.0 == ":status" ? 5 : 3))
            let last = try #require(fields.last)
            #expect(last.0 == "grpc-status-details-bin")
            #expect(!last.1.hasSuffix("="), "unpadded base64")
            let status = try RichStatus(decoding: try #require(Base64.decode(last.1)))
            #expect(status == error.richStatus)
            #expect(status.code == StatusCode.failedPrecondition.rawValue)
            #expect(status.errorInfo == ErrorInfo(reason: "ALREADY_CONSUMED", domain: RPCError.domain, metadata: ["order.id": "7"]))
        }
        #expect(Self.lines(Array(GRPCStatusFields.trailers(error).prefix(2))) == ["grpc-status: 9", "grpc-message: spent"])
    }

    @Test("trailers after messages carry only the status; a request that is not gRPC gets plain HTTP")
    func trailersAndHTTP() {
        #expect(Self.lines(GRPCStatusFields.trailers(.overloaded)).prefix(1) == ["grpc-status: 8"])
        #expect(Self.lines(GRPCStatusFields.trailers(.cancelled)) == ["grpc-status: 1", "grpc-message: call cancelled by the client"])
        #expect(
            Self.lines(GRPCStatusFields.notGRPC(status: "415", message: "content-type must be application/grpc")) == [
                ":status: 415", "content-type: text/plain", "grpc-status: 13",
                "grpc-message: content-type must be application/grpc",
            ])
    }
}
