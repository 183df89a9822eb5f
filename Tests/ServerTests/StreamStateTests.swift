@testable import HTTP2
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
}
