import Foundation
import HTTP2
import RPC
import Synchronization
import Lifecycle
import TestSupport
import Testing

/// The HTTP/2 server with hand-made handlers: deadlines, cancellation, draining.
final class Probe: Sendable {
    let cancelled = Mutex<[Cancellation]>([])
    let pending = Mutex<[Responder]>([])
}

func startServer(_ probe: Probe, _ tune: (inout ServerConfiguration) -> Void = { _ in }) throws -> (Server, String) {
    var router = Router()
    router.register("test.v1.T/Hang") { context, _, responder in
        probe.cancelled.withLock { $0.append(context.cancellation) }
        probe.pending.withLock { $0.append(responder) }
    }
    router.register("test.v1.T/Slow") { _, message, responder in
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { responder.succeed(framed: MessageFraming.frame(message)) }
    }
    router.register("test.v1.T/Echo") { _, message, responder in responder.succeed(framed: MessageFraming.frame(message)) }
    router.register("test.v1.T/Big") { _, _, responder in
        responder.succeed(framed: MessageFraming.frame([UInt8](repeating: 9, count: 4 << 20)))
    }
    var config = ServerConfiguration()
    config.listen = "127.0.0.1:0"
    config.threads = 2
    tune(&config)
    let server = try Server(configuration: config, router: router)
    return (server, try server.start())
}

@Suite("HTTP/2 transport", .serialized)
struct TransportTests {
    @Test("grpc-timeout ends a call with DEADLINE_EXCEEDED and cancels the handler")
    func deadline() throws {
        let probe = Probe()
        let (server, address) = try startServer(probe)
        defer { server.shutdown(graceSeconds: 0) }
        let c = try Client(address: address)
        let r = try c.unary("test.v1.T/Hang", message: [], timeoutNanoseconds: 50_000_000)
        #expect(r.code == .deadlineExceeded)
        #expect(probe.cancelled.withLock { $0.first?.isCancelled } == true)
        // A late answer is dropped; the connection still works.
        probe.pending.withLock { $0.first?.succeed(framed: [0, 0, 0, 0, 0]) }
        #expect(try c.unary("test.v1.T/Echo", message: [1, 2, 3]).message == [1, 2, 3])
    }

    @Test("a client RST_STREAM cancels the call")
    func reset() throws {
        let probe = Probe()
        let (server, address) = try startServer(probe)
        defer { server.shutdown(graceSeconds: 0) }
        let c = try Client(address: address)
        let id = try c.start("test.v1.T/Hang", body: MessageFraming.frame([]))
        try c.flush()
        #expect(eventually { probe.cancelled.withLock { !$0.isEmpty } })
        try c.reset(id)
        #expect(eventually { probe.cancelled.withLock { $0.first?.isCancelled } == true })
        #expect(eventually { server.inFlightCount == 0 })
        #expect(try c.unary("test.v1.T/Echo", message: [7]).message == [7])
    }

    @Test("a closed connection cancels its calls")
    func disconnect() throws {
        let probe = Probe()
        let (server, address) = try startServer(probe)
        defer { server.shutdown(graceSeconds: 0) }
        do {
            let c = try Client(address: address)
            _ = try c.start("test.v1.T/Hang", body: MessageFraming.frame([]))
            try c.flush()
            #expect(eventually { probe.cancelled.withLock { !$0.isEmpty } })
        }
        #expect(eventually { probe.cancelled.withLock { $0.first?.isCancelled } == true })
        #expect(eventually { server.connectionCount == 0 })
    }

    @Test("shutdown lets calls in flight finish")
    func drain() throws {
        let probe = Probe()
        let (server, address) = try startServer(probe)
        let c = try Client(address: address)
        let id = try c.start("test.v1.T/Slow", body: MessageFraming.frame([42]))
        try c.flush()
        #expect(eventually { server.inFlightCount == 1 })
        let stopped = Signal()
        Thread.detachNewThread {
            server.shutdown(graceSeconds: 5)
            stopped.signal()
        }
        try c.run { c.isDone(id) }
        let r = c.finish(id)
        #expect(r.code == .ok)
        #expect(r.message == [42])
        #expect(stopped.wait(timeout: .seconds(10)))
    }

    @Test("a large message arrives in many DATA frames and returns whole")
    func largeMessage() throws {
        let probe = Probe()
        let (server, address) = try startServer(probe)
        defer { server.shutdown(graceSeconds: 0) }
        let c = try Client(address: address)
        let payload = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let r = try c.unary("test.v1.T/Echo", message: payload)
        #expect(r.code == .ok)
        #expect(r.message == payload)
    }

    @Test("the server's deadline cap ends a call that gave no grpc-timeout")
    func deadlineCap() throws {
        let probe = Probe()
        let (server, address) = try startServer(probe) { $0.maxDeadlineNanoseconds = 500_000_000 }
        defer { server.shutdown(graceSeconds: 0) }
        let c = try Client(address: address)
        let started = Date()
        let r = try c.unary("test.v1.T/Hang", message: [])
        #expect(r.code == .deadlineExceeded)
        #expect(Date().timeIntervalSince(started) < 3)
        #expect(probe.cancelled.withLock { $0.first?.isCancelled } == true)
    }

    @Test("a request body that never ends is answered DEADLINE_EXCEEDED at the cap")
    func endlessRequest() throws {
        let probe = Probe()
        let (server, address) = try startServer(probe) { $0.maxDeadlineNanoseconds = 500_000_000 }
        defer { server.shutdown(graceSeconds: 0) }
        let c = try Client(address: address)
        // A prefix that promises 100 bytes, 3 of them, and a stream left open.
        let id = try c.start("test.v1.T/Echo", body: [0, 0, 0, 0, 100, 1, 2, 3], endStream: false)
        let started = Date()
        try c.run { c.isDone(id) }
        #expect(c.finish(id).code == .deadlineExceeded)
        #expect(Date().timeIntervalSince(started) < 4)
        #expect(try c.unary("test.v1.T/Echo", message: [9]).message == [9])
    }

    @Test("a peer that never reads is dropped and its memory freed; others are served")
    func slowReader() throws {
        let probe = Probe()
        let (server, address) = try startServer(probe) { $0.writeStallNanoseconds = 1_000_000_000 }
        defer { server.shutdown(graceSeconds: 0) }
        let stalled = try Client(address: address)
        // Ask for far more than the socket buffers and flow-control windows hold, then never read.
        for _ in 0..<8 { _ = try stalled.start("test.v1.T/Big", body: MessageFraming.frame([])) }
        try stalled.flush()
        let other = try Client(address: address)
        #expect(try other.unary("test.v1.T/Echo", message: [1]).message == [1])
        #expect(eventually(8) { server.connectionCount == 1 })
        #expect(try other.unary("test.v1.T/Echo", message: [2]).message == [2])
    }

    @Test("garbage instead of the HTTP/2 preface closes only that connection")
    func badPreface() throws {
        let probe = Probe()
        let (server, address) = try startServer(probe)
        defer { server.shutdown(graceSeconds: 0) }
        let bad = try Client(address: address)
        try bad.sendRaw(Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(eventually { server.connectionCount == 0 })
        let good = try Client(address: address)
        #expect(try good.unary("test.v1.T/Echo", message: [5]).message == [5])
        _ = bad
    }
}
