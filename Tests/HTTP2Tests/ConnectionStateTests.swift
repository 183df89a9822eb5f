@testable import HTTP2
import Testing

/// The connection's life without a socket: every transition `ServerConnection` carries out, decided here.
/// Evaluates a mutating step outside `#expect`'s expansion (it captures the value it expands immutably).
private func step<T>(_ value: T) -> T { value }

@Suite("ConnectionState: a connection's life as a value")
struct ConnectionStateTests {
    static let limits = ConnectionState.Limits(handshakeTimeout: 5_000, writeStall: 30_000, idleTimeout: 300_000)

    static func facts(now: UInt64, accepted: UInt64 = 0, activity: UInt64 = 0, progress: UInt64 = 0) -> ConnectionState.Facts {
        ConnectionState.Facts(now: now, acceptedAt: accepted, lastActivity: activity, lastWriteProgress: progress)
    }

    @Test("the first bytes of h2c: a prefix of the preface waits, the preface and garbage are HTTP/2, a request line is HTTP/1")
    func classify() {
        let p = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
        #expect(ConnectionState.classify(p[..<3]) == .incomplete)
        #expect(ConnectionState.classify(p[...]) == .http2)
        #expect(ConnectionState.classify(Array("GET / HTTP/1.1\r\n".utf8)[...]) == .http1)
        #expect(ConnectionState.classify(Array("POST".utf8)[...]) == .http1)
        #expect(ConnectionState.classify([0x00, 0x01][...]) == .http2, "garbage goes to nghttp2, which answers GOAWAY")
        #expect(ConnectionState.classify(Array("PRX".utf8)[...]) == .http1, "upper-case, not the preface: a request line")
    }

    @Test("h2c: the preface starts a session; a request line goes to libmicrohttpd, or gets one refusal and lingers")
    func preface() {
        var s = ConnectionState(tls: false)
        #expect(s.phase == .awaitingPreface)
        #expect(step(s.prefaceRead(.incomplete, servesHTTP1: true, now: 10)) == .wait)
        #expect(s.phase == .awaitingPreface)
        #expect(step(s.prefaceRead(.http2, servesHTTP1: true, now: 10)) == .startSession)
        #expect(s.isServing)
        #expect(step(s.prefaceRead(.http1, servesHTTP1: true, now: 10)) == .wait, "only the first bytes decide")

        var handed = ConnectionState(tls: false)
        #expect(step(handed.prefaceRead(.http1, servesHTTP1: true, now: 10)) == .handOff)
        #expect(handed.phase == .handedOff && handed.isOver)
        #expect(!step(handed.close()), "libmicrohttpd owns the socket now: closing here would close its descriptor")

        var refused = ConnectionState(tls: false)
        #expect(step(refused.prefaceRead(.http1, servesHTTP1: false, now: 10)) == .answerHTTP1)
        #expect(refused.isShutOut)
        #expect(refused.lingerUntil == 10 + ConnectionState.lingerNanoseconds)
    }

    @Test("TLS: ALPN h2 starts a session; http/1.1 or none is bridged where HTTP is served; another protocol closes")
    func handshake() {
        var h2 = ConnectionState(tls: true)
        #expect(h2.phase == .handshaking)
        #expect(step(h2.handshakeDone(alpn: "h2", servesHTTP1: true)) == .startSession)
        #expect(h2.isServing)

        var bridged = ConnectionState(tls: true)
        #expect(step(bridged.handshakeDone(alpn: nil, servesHTTP1: true)) == .startBridge)
        #expect(bridged.phase == .bridged)
        var http11 = ConnectionState(tls: true)
        #expect(step(http11.handshakeDone(alpn: "http/1.1", servesHTTP1: true)) == .startBridge)

        var grpcOnly = ConnectionState(tls: true)
        #expect(step(grpcOnly.handshakeDone(alpn: nil, servesHTTP1: false)) == .startSession, "no ALPN on a gRPC-only port: h2 is tried")
        var other = ConnectionState(tls: true)
        #expect(step(other.handshakeDone(alpn: "http/1.1", servesHTTP1: false)) == .close)
        #expect(step(other.close()))
        #expect(other.phase == .closed)
    }

    @Test("ending: GOAWAY once, the linger clock starts once, our side shuts after the output, close happens once")
    func ending() {
        var s = ConnectionState(tls: false)
        _ = s.prefaceRead(.http2, servesHTTP1: false, now: 0)
        #expect(step(s.terminate(now: 100)) == .goAway)
        #expect(s.lingerUntil == 100 + ConnectionState.lingerNanoseconds)
        #expect(step(s.terminate(now: 200)) == .goAway, "a second code may follow; the linger deadline does not move")
        #expect(s.lingerUntil == 100 + ConnectionState.lingerNanoseconds)
        #expect(step(s.outputShut(now: 300)))
        #expect(s.isShutOut)
        #expect(!step(s.outputShut(now: 400)))
        #expect(step(s.terminate(now: 500)) == .none, "shut out: nothing more is said")
        #expect(step(s.close()))
        #expect(!step(s.close()))
        #expect(step(s.terminate(now: 600)) == .none)

        var handshaking = ConnectionState(tls: true)
        #expect(step(handshaking.terminate(now: 1)) == .close, "no session to carry a GOAWAY")
    }

    @Test("draining: told to a serving session now, to a later one at its start; an idle connection is not ended while draining")
    func draining() {
        var early = ConnectionState(tls: true)
        #expect(!step(early.beginDrain()))
        #expect(early.draining)
        var serving = ConnectionState(tls: false)
        _ = serving.prefaceRead(.http2, servesHTTP1: false, now: 0)
        #expect(step(serving.beginDrain()))
        #expect(serving.sweep(Self.facts(now: 1_000_000), Self.limits) == .none)
    }

    @Test("the sweep: a handshake or preface past its timeout closes; the linger ends in a close")
    func sweepStart() {
        let s = ConnectionState(tls: true)
        #expect(s.sweep(Self.facts(now: 5_000), Self.limits) == .none)
        #expect(s.sweep(Self.facts(now: 5_001), Self.limits) == .close)
        var lingering = ConnectionState(tls: false)
        _ = lingering.prefaceRead(.http1, servesHTTP1: false, now: 0)
        #expect(lingering.sweep(Self.facts(now: 10_000), Self.limits) == .none, "lingering: the handshake timeout no longer applies")
        #expect(lingering.sweep(Self.facts(now: ConnectionState.lingerNanoseconds), Self.limits) == .close)
        var over = ConnectionState(tls: false)
        _ = over.close()
        #expect(over.sweep(Self.facts(now: .max), Self.limits) == .none)
    }

    @Test("the sweep of a serving connection: trickling headers and a stalled reader get ENHANCE_YOUR_CALM, idleness NO_ERROR")
    func sweepServing() {
        var s = ConnectionState(tls: false)
        _ = s.prefaceRead(.http2, servesHTTP1: false, now: 0)
        var f = Self.facts(now: 10_000_000, activity: 9_999_000, progress: 9_999_000)
        f.sessionIdle = false
        #expect(s.sweep(f, Self.limits) == .none)
        f.callsExpired = true
        #expect(s.sweep(f, Self.limits) == .calm)
        f.callsExpired = false
        f.outputWaiting = true
        #expect(s.sweep(f, Self.limits) == .none, "waiting, but the peer took bytes lately")
        f.lastWriteProgress = f.now - 30_001
        #expect(s.sweep(f, Self.limits) == .calm)
        f.outputWaiting = false
        f.sessionIdle = true
        f.lastActivity = f.now - 300_001
        #expect(s.sweep(f, Self.limits) == .idle)
        f.sessionIdle = false
        #expect(s.sweep(f, Self.limits) == .none, "a stream is open: not idle")

        var bridged = ConnectionState(tls: true)
        _ = bridged.handshakeDone(alpn: "http/1.1", servesHTTP1: true)
        #expect(bridged.sweep(Self.facts(now: 400_000, activity: 300_000), Self.limits) == .none, "bytes passed lately")
        #expect(bridged.sweep(Self.facts(now: 700_000, activity: 300_000), Self.limits) == .idle)
        #expect(step(bridged.terminate(now: 700_000)) == .close, "a bridge has no GOAWAY to send")
    }
}
