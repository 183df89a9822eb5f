import BillingTesting
import IO
import Dispatch
@testable import HTTP2
import ProtoWire
import RPC
import Synchronization
import Testing
import Lifecycle

/// Handlers for the in-memory transport tests; what they saw, for the assertions.
final class MemoryProbe: Sendable {
    let cancellations = Mutex<[Cancellation]>([])
    let responders = Mutex<[Responder]>([])
    let writers = Mutex<[StreamWriter]>([])
    let records = Mutex<[CallRecord]>([])
    let received = Mutex<[[UInt8]]>([])
    /// What t.T/Mark saw of its call's cancellation when it started: (cancelled, notes).
    let marks = Mutex<[(Bool, Int)]>([])
    let kept = Mutex<[Cancellation]>([])
    let metadata = Mutex<[[String]]>([])
    let contexts = Mutex<[CallContext]>([])
    /// The responders t.T/Who answered with, by identity.
    let responderIDs = Mutex<[ObjectIdentifier]>([])

    var router: Router {
        var router = Router()
        router.register("t.T/Echo") { _, message, responder in responder.succeed(framed: MessageFraming.frame(message)) }
        router.register("t.T/Hang") { [self] context, _, responder in
            cancellations.withLock { $0.append(context.cancellation) }
            responders.withLock { $0.append(responder) }
        }
        router.register("t.T/Mark") { [self] context, message, responder in
            let c = context.cancellation
            marks.withLock { $0.append((c.isCancelled, c.noted.count)) }
            c.note("mark", "1")
            c.cancel()
            responder.succeed(framed: MessageFraming.frame(message))
        }
        router.register("t.T/Meta") { [self] context, message, responder in
            metadata.withLock { $0.append(context.metadata.map { "\($0.name)=\($0.value)" }) }
            responder.succeed(framed: MessageFraming.frame(message))
        }
        router.register("t.T/Keep") { [self] context, message, responder in
            kept.withLock { $0.append(context.cancellation) }
            responder.succeed(framed: MessageFraming.frame(message))
        }
        router.register("t.T/KeepContext") { [self] context, message, responder in
            contexts.withLock { $0.append(context) }
            responder.succeed(framed: MessageFraming.frame(message))
        }
        router.register("t.T/Who") { [self] _, message, responder in
            responderIDs.withLock { $0.append(ObjectIdentifier(responder)) }
            responder.succeed(framed: MessageFraming.frame(message))
        }
        router.register("t.T/KeepResponder") { [self] _, message, responder in
            responders.withLock { $0.append(responder) }
            responder.succeed(framed: MessageFraming.frame(message))
        }
        router.register("t.T/Blob", Blob.self) { _, request, responder in responder.succeed(Blob(request.bytes.reversed())) }
        router.register("t.T/Elsewhere") { _, message, responder in
            DispatchQueue.global().async { responder.succeed(framed: MessageFraming.frame(message)) }
        }
        router.register("t.T/Fail") { _, _, responder in
            responder.fail(RPCError(code: .failedPrecondition, message: "no", reason: "ORDER_NOT_PENDING"))
        }
        router.registerServerStreaming("t.T/Count", Blob.self) { [self] context, request, writer in
            let message = request.bytes
            cancellations.withLock { $0.append(context.cancellation) }
            writers.withLock { $0.append(writer) }
            // [count, size in 64 KiB units, keep open]: `count` messages, then the end unless a third byte says stay open.
            let count = Int(message.first ?? 0), size = message.count > 1 ? Int(message[1]) << 16 : 10
            for i in 0..<count { writer.send(Blob([UInt8](repeating: UInt8(i), count: size))) }
            if message.count < 3 { writer.finish() }
        }
        router.registerBidiStreaming("t.T/Chat") { [self] context, writer in
            cancellations.withLock { $0.append(context.cancellation) }
            return StreamReceiver(
                onMessage: { [self] m in
                    received.withLock { $0.append(m) }
                    writer.send(Blob(m.reversed()))
                }, onEnd: { writer.finish() })
        }
        router.intercept(ServerInterceptor(finished: { [self] record in records.withLock { $0.append(record) } }))
        return router
    }

    func codes() -> [StatusCode] { records.withLock { $0.map(\.code) } }
}

/// A message of one bytes field (field 1): what the streaming test handlers read and send.
struct Blob: ProtoMessage, Equatable {
    var bytes: [UInt8] = []
    init() {}
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    mutating func decodeFields(from r: inout ProtoReader) throws(WireError) {
        while let (field, wireType) = try r.nextTag() {
            if field == 1 { bytes = try r.readBytes() } else { try r.skip(wireType) }
        }
    }
    var encodedSize: Int { ProtoSize.bytes(1, bytes) }
    func encode(to w: inout ProtoWriter) { w.bytesField(1, bytes) }
    var encoded: [UInt8] {
        var w = ProtoWriter(capacity: encodedSize)
        encode(to: &w)
        return w.finish()
    }
}

private func pair(_ probe: MemoryProbe, _ tune: (inout ServerConfiguration) -> Void = { _ in }) -> (InMemoryTransport, Client) {
    var config = ServerConfiguration()
    tune(&config)
    let transport = InMemoryTransport(configuration: config, router: probe.router)
    return (transport, transport.client())
}

/// The transport, client and server session paired in memory: no sockets, no threads, a manual clock.
@Suite("HTTP/2 transport in memory")
struct InMemoryTransportTests {
    @Test("a unary call is answered with its message, headers and OK trailers")
    func unary() throws {
        let probe = MemoryProbe()
        let (_, c) = pair(probe)
        let r = try c.unary("t.T/Echo", message: [1, 2, 3])
        #expect(r.httpStatus == 200 && r.code == .ok && r.message == [1, 2, 3])
        #expect(r.headers.contains { $0 == ("content-type", "application/grpc") })
        #expect(r.trailers.contains { $0 == ("grpc-status", "0") })
        // The stream object is reused for the next call on the session.
        #expect(try c.unary("t.T/Echo", message: [4]).message == [4])
        #expect(probe.codes() == [.ok, .ok])
    }

    @Test("nghttp2 keeps no closed streams and takes its blocks from the session's cache once warm")
    func allocations() throws {
        let probe = MemoryProbe()
        let (t, c) = pair(probe)
        for _ in 0..<20 { _ = try c.unary("t.T/Echo", message: [1]) }
        let warm = t.session.allocatorCounts
        for _ in 0..<200 { #expect(try c.unary("t.T/Echo", message: [2]).code == .ok) }
        let after = t.session.allocatorCounts
        // A call's blocks are freed when its stream closes, so the next call reuses them: nothing new from malloc.
        #expect(after.fresh == warm.fresh)
        #expect(after.reused - warm.reused >= 200 * 4)
        #expect(after.cached <= 6 * 16 * 1024)
        // Idle: the once-a-second sweep gives the cache back.
        t.session.expireCalls(now: 0)
        #expect(t.session.allocatorCounts.cached == 0)
    }

    @Test("a stream's cancellation is reused for the next call only when nothing holds it, and always starts new")
    func cancellationReuse() throws {
        let probe = MemoryProbe()
        let (_, c) = pair(probe, { $0.keepsCallNotes = true })
        for _ in 0..<3 { #expect(try c.unary("t.T/Mark", message: [1]).code == .ok) }
        // A handler that keeps its call's cancellation: the next call must not get that object.
        #expect(try c.unary("t.T/Keep", message: [1]).code == .ok)
        for k in probe.kept.withLock({ $0 }) { k.cancel() }
        #expect(try c.unary("t.T/Mark", message: [1]).code == .ok)
        let marks = probe.marks.withLock { $0 }
        #expect(marks.count == 4)
        #expect(marks.allSatisfy { !$0.0 && $0.1 == 0 }, "\(marks)")
        #expect(probe.kept.withLock { $0.allSatisfy(\.isCancelled) })
    }

    @Test("each call sees its own metadata, though the stream object and its metadata buffer are reused")
    func metadataPerCall() throws {
        let probe = MemoryProbe()
        let (_, c) = pair(probe)
        _ = try c.unary("t.T/Meta", message: [1], metadata: [("x-a", "1"), ("x-b", "2"), ("x-c", "3")])
        _ = try c.unary("t.T/Meta", message: [1], metadata: [("x-d", "4")])
        _ = try c.unary("t.T/Meta", message: [1])
        _ = try c.unary("t.T/Meta", message: [1], metadata: [("x-a", "5"), ("x-e", "6")])
        #expect(probe.metadata.withLock { $0 } == [["x-a=1", "x-b=2", "x-c=3"], ["x-d=4"], [], ["x-a=5", "x-e=6"]])
    }

    @Test("a context a handler keeps keeps its own call's method and metadata, though the stream's is reused")
    func keptContexts() throws {
        let probe = MemoryProbe()
        let (_, c) = pair(probe)
        _ = try c.unary("t.T/KeepContext", message: [1], metadata: [("x-a", "1")])
        _ = try c.unary("t.T/Meta", message: [1], metadata: [("x-b", "2")])
        _ = try c.unary("t.T/KeepContext", message: [1], metadata: [("x-c", "3")])
        _ = try c.unary("t.T/Echo", message: [1])
        let kept = probe.contexts.withLock { $0 }
        #expect(kept.map(\.method) == ["t.T/KeepContext", "t.T/KeepContext"])
        #expect(kept.map { $0.metadata.map { "\($0.name)=\($0.value)" } } == [["x-a=1"], ["x-c=3"]])
        #expect(kept.map(\.requestID).count == 2 && kept[0].requestID != kept[1].requestID)
    }

    @Test("a stream's responder is reused for the next call only when nothing holds it")
    func responderReuse() throws {
        let probe = MemoryProbe()
        let (_, c) = pair(probe)
        for _ in 0..<3 { #expect(try c.unary("t.T/Who", message: [1]).message == [1]) }
        // Calls one after another use the same stream object, so the same responder.
        #expect(Set(probe.responderIDs.withLock { $0 }).count == 1)
        // A handler keeps its responder: the next call must get another one, and a late second answer through
        // the kept one changes nothing.
        #expect(try c.unary("t.T/KeepResponder", message: [2]).message == [2])
        #expect(try c.unary("t.T/Who", message: [3]).message == [3])
        let ids = probe.responderIDs.withLock { $0 }
        let kept = try #require(probe.responders.withLock { $0.first })
        #expect(ids.last != ObjectIdentifier(kept))
        kept.succeed(framed: MessageFraming.frame([9, 9]))
        for i: UInt8 in 4...6 { #expect(try c.unary("t.T/Who", message: [i]).message == [i]) }
        #expect(probe.codes().allSatisfy { $0 == .ok } && probe.codes().count == 8)
    }

    @Test("answers encoded into storage lent from the stream's last answer are each call's own bytes")
    func answerStorageReuse() throws {
        let probe = MemoryProbe()
        let (_, c) = pair(probe)
        // Sizes up and down, over and under the storage kept between calls (1 KiB): each answer whole and its own.
        for size in [3, 1, 600, 2, 2000, 5, 0, 1023, 7] {
            let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ size) }
            let r = try c.unary("t.T/Blob", message: Blob(bytes).encoded)
            #expect(r.code == .ok)
            #expect(try Blob(decoding: r.message).bytes == bytes.reversed(), "size \(size)")
        }
    }

    @Test("a closed session is freed: its spare streams' responders no longer hold it")
    func sessionFreedAfterClose() throws {
        weak var session: H2ServerSession?
        do {
            let probe = MemoryProbe()
            let (t, c) = pair(probe)
            for _ in 0..<3 { #expect(try c.unary("t.T/Echo", message: [1]).code == .ok) }
            session = t.session
            t.session.close()
        }
        #expect(session == nil)
    }

    @Test("an answer made on another thread comes back through the host")
    func otherThread() throws {
        let probe = MemoryProbe()
        let (_, c) = pair(probe)
        #expect(try c.unary("t.T/Elsewhere", message: [7]).message == [7])
    }

    @Test("a handler's error is a trailers-only status with ErrorInfo")
    func failure() throws {
        let probe = MemoryProbe()
        let (_, c) = pair(probe)
        let r = try c.unary("t.T/Fail", message: [])
        #expect(r.code == .failedPrecondition && r.error?.reason == "ORDER_NOT_PENDING")
        #expect(r.trailers.isEmpty, "trailers-only: the status is in the headers")
    }

    @Test("an unknown method is UNIMPLEMENTED and labelled unknown")
    func unknown() throws {
        let probe = MemoryProbe()
        let (_, c) = pair(probe)
        #expect(try c.unary("t.T/Nope", message: []).code == .unimplemented)
        #expect(probe.records.withLock { $0.first?.knownMethod } == false)
    }

    @Test("grpc-timeout: the manual clock reaches the deadline, the handler is cancelled, a late answer is dropped")
    func deadline() throws {
        let probe = MemoryProbe()
        let (t, c) = pair(probe)
        let before = t.host.clock
        let r = try c.unary("t.T/Hang", message: [], timeoutNanoseconds: 250_000_000)
        #expect(r.code == .deadlineExceeded)
        #expect(t.host.clock - before == 250_000_000, "the deadline fired exactly at the timeout")
        #expect(probe.cancellations.withLock { $0.first?.isCancelled } == true)
        probe.responders.withLock { $0.first?.succeed(framed: MessageFraming.frame([9])) }
        #expect(try c.unary("t.T/Echo", message: [1]).message == [1])
        #expect(probe.codes() == [.deadlineExceeded, .ok])
    }

    @Test("the server's cap ends a request body that never ends, at the sweep")
    func cap() throws {
        let probe = MemoryProbe()
        let (t, c) = pair(probe) { $0.maxDeadlineNanoseconds = 2_000_000_000 }
        t.advancesClock = false
        let id = try c.start("t.T/Echo", body: [0, 0, 0, 0, 9, 1], endStream: false)
        try c.flush()
        t.session.expireCalls(now: t.host.clock + 1_999_999_999)
        #expect(c.response(id)?.code == .unknown, "not before the cap")
        t.session.expireCalls(now: t.host.clock + 2_000_000_000)
        try c.run { c.isDone(id) }
        #expect(c.finish(id).code == .deadlineExceeded)
    }

    @Test("a client RST_STREAM cancels the running call and records CANCELLED")
    func reset() throws {
        let probe = MemoryProbe()
        let (_, c) = pair(probe)
        let id = try c.start("t.T/Hang", body: MessageFraming.frame([]))
        try c.flush()
        #expect(probe.cancellations.withLock { $0.count } == 1)
        try c.reset(id)
        #expect(probe.cancellations.withLock { $0[0].isCancelled })
        #expect(probe.codes() == [.cancelled])
        #expect(try c.unary("t.T/Echo", message: [2]).message == [2], "the connection serves on")
    }

    @Test("drain: calls in flight finish, new ones are refused, then the final GOAWAY ends the session")
    func drain() throws {
        let probe = MemoryProbe()
        let (t, c) = pair(probe)
        let running = try c.start("t.T/Hang", body: MessageFraming.frame([]))
        try c.flush()
        t.session.beginDrain()
        let late = try c.unary("t.T/Echo", message: [1])
        #expect(late.code == .unavailable && late.error?.reason == "SHUTTING_DOWN")
        probe.responders.withLock { $0[0].succeed(framed: MessageFraming.frame([5])) }
        try c.run { c.isDone(running) }
        #expect(c.finish(running).message == [5])
        t.host.advance(to: t.host.clock + 500_000_000)  // the final GOAWAY
        t.collect()
        #expect(t.session.isFinished, "GOAWAY out, no stream open: the owner may shut the connection")
        // The client heard the final GOAWAY: a new call is refused before it leaves (REFUSED_STREAM, retryable).
        #expect(try c.unary("t.T/Echo", message: [1]).resetCode == 7)
    }

    @Test("malformed requests are reset with PROTOCOL_ERROR and the session serves on")
    func malformed() throws {
        let probe = MemoryProbe()
        let (_, c) = pair(probe)
        #expect(throws: SocketError.self) {
            _ = try c.request("POST", path: "", headers: [("content-type", "application/grpc")], deadline: Monotonic.now() + 5_000_000_000)
        }
        #expect(throws: SocketError.self) {
            _ = try c.request(
                "POST", path: "/t.T/Echo", headers: [("content-type", "application/grpc"), ("x-bad", "a\u{0}b")],
                deadline: Monotonic.now() + 5_000_000_000)
        }
        #expect(try c.unary("t.T/Echo", message: [3]).message == [3])
        #expect(probe.codes() == [.ok], "a reset request is never a call")
    }

    @Test("not gRPC: wrong method 405, wrong content type 415")
    func notGRPC() throws {
        let probe = MemoryProbe()
        let (_, c) = pair(probe)
        let get = try c.request("GET", path: "/t.T/Echo", deadline: Monotonic.now() + 5_000_000_000)
        #expect(get.httpStatus == 405)
        let json = try c.request(
            "POST", path: "/t.T/Echo", headers: [("content-type", "application/json")], body: [1],
            deadline: Monotonic.now() + 5_000_000_000)
        #expect(json.httpStatus == 415)
    }

    @Test("flow control: a 3 MiB stream goes out through 1 MiB windows, deferred and resumed")
    func flowControl() throws {
        let probe = MemoryProbe()
        let (_, c) = pair(probe)
        // 12 messages of 256 KiB: more than the client's 1 MiB stream window.
        let r = try c.unary("t.T/Count", message: Blob([12, 4]).encoded)
        #expect(r.code == .ok)
        #expect(r.body.count == 12 * (5 + Blob([UInt8](repeating: 0, count: 4 << 16)).encodedSize))
    }

    @Test("a reader that takes nothing leaves the answer held behind the window")
    func heldBehindWindow() throws {
        let probe = MemoryProbe()
        let (t, c) = pair(probe)
        let id = try c.start("t.T/Count", body: MessageFraming.frame(Blob([32, 4, 1]).encoded))  // 8 MiB, not finished
        try c.flush()
        // The client reads nothing: what the windows allow is out, the rest waits in the session.
        t.collect()
        #expect(t.session.holdsAnswers)
        try c.run { c.response(id)?.httpStatus == 200 }
        try c.reset(id)
        #expect(probe.cancellations.withLock { $0[0].isCancelled })
    }

    @Test("an abort ends a stream held behind the window at once: queued DATA dropped, the status in trailers")
    func abortHeldBehindWindow() throws {
        let probe = MemoryProbe()
        let (t, c) = pair(probe)
        let id = try c.start("t.T/Count", body: MessageFraming.frame(Blob([32, 4, 1]).encoded))  // 8 MiB, not finished
        try c.flush()
        t.collect()
        try c.run { c.response(id)?.httpStatus == 200 }
        #expect(t.session.holdsAnswers)
        let writer = try #require(probe.writers.withLock { $0.first })
        #expect(writer.bufferedBytes > 4 << 20)
        writer.abort(RPCError(code: .resourceExhausted, message: "slow", reason: "OVERLOADED", metadata: ["after_cursor": "7"]))
        try c.run { c.isDone(id) }
        #expect(writer.bufferedBytes == 0, "the queued messages were dropped")
        let r = try #require(c.response(id))
        #expect(r.code == .resourceExhausted)
        #expect(r.body.count < 4 << 20, "the status did not wait for the 8 MiB queued behind the window")
        #expect(!t.session.holdsAnswers)
        #expect(probe.cancellations.withLock { $0[0].isCancelled })
        #expect(probe.codes() == [.resourceExhausted])
    }

    @Test("a server-streaming call past its grpc-timeout ends with the status after its messages")
    func streamingDeadline() throws {
        let probe = MemoryProbe()
        let (_, c) = pair(probe)
        let r = try c.unary("t.T/Count", message: Blob([2, 0, 1]).encoded, timeoutNanoseconds: 100_000_000)
        #expect(r.code == .deadlineExceeded)
        #expect(r.trailers.contains { $0.name == "grpc-status" }, "the status came in trailers, after the messages")
        #expect(probe.cancellations.withLock { $0[0].isCancelled })
    }

    @Test("bidirectional: every message answered in order, the end of input ends the call OK")
    func bidi() throws {
        let probe = MemoryProbe()
        let (_, c) = pair(probe)
        let body = MessageFraming.frame([1, 2]) + MessageFraming.frame([3, 4, 5])
        let id = try c.start("t.T/Chat", body: body)
        try c.run { c.isDone(id) }
        let r = c.finish(id)
        #expect(r.code == .ok)
        #expect(r.body == MessageFraming.frame(Blob([2, 1]).encoded) + MessageFraming.frame(Blob([5, 4, 3]).encoded))
        #expect(probe.received.withLock { $0 } == [[1, 2], [3, 4, 5]])
    }

    @Test("a bidirectional request cut inside a message fails INTERNAL and cancels the handler")
    func bidiCut() throws {
        let probe = MemoryProbe()
        let (_, c) = pair(probe)
        let id = try c.start("t.T/Chat", body: [0, 0, 0, 0, 9, 1, 2])
        try c.run { c.isDone(id) }
        #expect(c.finish(id).code == .internal)
        #expect(probe.cancellations.withLock { $0[0].isCancelled })
    }

    @Test("limits: message size, header list, connection budget, calls in flight")
    func limits() throws {
        let probe = MemoryProbe()
        let (_, c) = pair(probe) {
            $0.maxMessageBytes = 1_000
            $0.maxHeaderListBytes = 2_000
            $0.maxConnectionBufferBytes = 1_500
            $0.maxInFlight = 1
        }
        #expect(try c.unary("t.T/Echo", message: [UInt8](repeating: 1, count: 1_001)).code == .resourceExhausted)
        let big = try c.unary("t.T/Echo", message: [], metadata: [("x-big", String(repeating: "a", count: 3_000))])
        #expect(big.code == .resourceExhausted)
        // Two unfinished 900-byte messages: the second crosses the 1,500-byte budget.
        let a = try c.start("t.T/Echo", body: [0, 0, 0, 3, 132] + [UInt8](repeating: 1, count: 800), endStream: false)
        let b = try c.start("t.T/Echo", body: [0, 0, 0, 3, 132] + [UInt8](repeating: 1, count: 800), endStream: false)
        try c.run { c.isDone(b) }
        #expect(c.finish(b).error?.reason == "OVERLOADED")
        try c.reset(a)
        // One call in flight at most: the second is refused while the first hangs.
        let hang = try c.start("t.T/Hang", body: MessageFraming.frame([]))
        try c.flush()
        #expect(try c.unary("t.T/Echo", message: [1]).error?.reason == "OVERLOADED")
        try c.reset(hang)
        #expect(try c.unary("t.T/Echo", message: [1]).code == .ok)
    }

    @Test("a flood nghttp2 refuses ends the session with GOAWAY, not a crash")
    func flood() throws {
        let probe = MemoryProbe()
        let (t, c) = pair(probe)
        #expect(try c.unary("t.T/Echo", message: [1]).code == .ok)
        // 20,000 PINGs in one write: nghttp2 stops reading at its outbound-queue limit and answers ENHANCE_YOUR_CALM.
        var pings: [UInt8] = []
        for i in 0..<20_000 { pings += [0, 0, 8, 6, 0, 0, 0, 0, 0] + [UInt8](repeating: UInt8(i & 0xff), count: 8) }
        try c.sendRaw(pings)
        t.collect()
        #expect(t.session.isFinished, "GOAWAY ENHANCE_YOUR_CALM sent and the session over")
        #expect(throws: SocketError.self) { _ = try c.unary("t.T/Echo", message: [1]) }
    }
}
