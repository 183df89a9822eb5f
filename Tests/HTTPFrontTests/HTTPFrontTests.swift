import HTTP2
import Foundation
import HTTPFront
import Synchronization
import TestSupport
import Testing

/// What the handler saw: how many requests, and the completions it holds back.
final class FrontProbe: Sendable {
    let handled = Mutex(0)
    let held = Mutex<[@Sendable (HTTPResponse) -> Void]>([])
}

/// The notification-like endpoint the tests serve: POST JSON to /notify (echoed by an asynchronous handler,
/// 200 ms later, from another thread); GET /healthz; everything else refused by the precheck.
func startFront(
    _ tune: (inout HTTPFrontConfiguration) -> Void = { _ in },
    probe: FrontProbe = FrontProbe()
) throws -> HTTPFront {
    var config = HTTPFrontConfiguration(listen: "127.0.0.1:0")
    tune(&config)
    return try HTTPFront(
        configuration: config,
        precheck: { request in
            switch (request.method, request.path) {
            case ("GET", "/healthz"), ("HEAD", "/healthz"), ("POST", "/notify"), ("POST", "/hold"): break
            case (_, "/healthz"), (_, "/notify"): return HTTPResponse(status: 405, text: "method not allowed")
            default: return HTTPResponse(status: 404, text: "not found")
            }
            if request.method == "POST", request.header("content-type") != "application/json" {
                return HTTPResponse(status: 415, text: "want application/json")
            }
            return nil
        },
        handler: { request, respond in
            probe.handled.withLock { $0 += 1 }
            switch request.path {
            case "/healthz": respond(HTTPResponse(status: 200, text: "ok\n", headers: [("X-Seen-By", "front")]))
            case "/hold": probe.held.withLock { $0.append(respond) }
            default:
                let reply = HTTPResponse(
                    status: 200, contentType: "application/json",
                    body: Array("{\"echo\":".utf8) + request.body + Array(",\"version\":\"\(request.httpVersion)\"}".utf8))
                DispatchQueue.global().asyncAfter(deadline: .now() + 0.2) { respond(reply) }
            }
        })
}

@Suite("HTTPFront against real clients", .serialized)
struct HTTPFrontTests {
    @Test("HTTP/1.1 POST with a JSON body, answered later from another thread")
    func http1AsyncPost() throws {
        let front = try startFront()
        defer { front.stop() }
        let out = try python(
            front.address,
            """
            c = http.client.HTTPConnection(host, port, timeout=5)
            c.request('POST', '/notify?x=1', body=b'{"signedPayload":"abc"}', headers={'Content-Type': 'application/json'})
            r = c.getresponse()
            print(r.status, r.getheader('Content-Type'), r.read().decode())
            """)
        #expect(out == #"200 application/json {"echo":{"signedPayload":"abc"},"version":"HTTP/1.1"}"#)
    }

    @Test("h2c (prior knowledge) POST on the same port")
    func h2cPost() throws {
        let front = try startFront()
        defer { front.stop() }
        let r = try curl([
            "--http2-prior-knowledge", "-H", "content-type: application/json", "--data-binary", #"{"a":1}"#,
            "http://\(front.address)/notify",
        ])
        #expect(r.status == 200)
        #expect(r.version == "2")
        #expect(r.body == #"{"echo":{"a":1},"version":"HTTP/2"}"#)
    }

    @Test("TLS: ALPN h2 and ALPN http/1.1 on one port", arguments: [("--http2", "2", "HTTP/2"), ("--http1.1", "1.1", "HTTP/1.1")])
    func tls(flag: String, version: String, seen: String) throws {
        let cert = try TestCertificate()
        defer { cert.remove() }
        let front = try startFront { $0.tls = HTTPFrontConfiguration.TLS(certificatePath: cert.certificate, keyPath: cert.key) }
        defer { front.stop() }
        let r = try curl([
            flag, "--cacert", cert.certificate, "-H", "content-type: application/json", "--data-binary", "[1]",
            "https://\(front.address)/notify",
        ])
        #expect(r.status == 200)
        #expect(r.version == version)
        #expect(r.body == #"{"echo":[1],"version":"\#(seen)"}"#)
        let health = try curl([flag, "--cacert", cert.certificate, "https://\(front.address)/healthz"])
        #expect(health.status == 200 && health.body == "ok\n")
    }

    @Test("a body over the limit is 413 before any handler: Content-Length, chunked, HTTP/2")
    func oversize() throws {
        let probe = FrontProbe()
        let front = try startFront({ $0.maxBodyBytes = 1000 }, probe: probe)
        defer { front.stop() }
        let declared = try python(
            front.address,
            """
            c = http.client.HTTPConnection(host, port, timeout=5)
            c.request('POST', '/notify', body=b'x' * 5000, headers={'Content-Type': 'application/json'})
            print(c.getresponse().status)
            """)
        #expect(declared == "413")
        let chunked = try python(
            front.address,
            """
            c = http.client.HTTPConnection(host, port, timeout=5)
            c.request('POST', '/notify', body=iter([b'y' * 700, b'y' * 700]), headers={'Content-Type': 'application/json'}, encode_chunked=True)
            print(c.getresponse().status)
            """)
        #expect(chunked == "413")
        let h2 = try curl([
            "--http2-prior-knowledge", "-H", "content-type: application/json", "--data-binary", String(repeating: "z", count: 5000),
            "http://\(front.address)/notify",
        ])
        #expect(h2.status == 413)
        // Still sending long after the answer came (as a loaded client may be): the rest is read and dropped,
        // and the client sees its 413 rather than a reset stream.
        let h2Long = try curl([
            "--http2-prior-knowledge", "-H", "content-type: application/json", "--data-binary",
            String(repeating: "z", count: 120_000), "http://\(front.address)/notify",
        ])
        #expect(h2Long.status == 413)
        // Within the limit still works.
        let fits = try curl([
            "-H", "content-type: application/json", "--data-binary", "[" + String(repeating: "1,", count: 400) + "1]",
            "http://\(front.address)/notify",
        ])
        #expect(fits.status == 200)
        #expect(probe.handled.withLock { $0 } == 1)
    }

    @Test("precheck answers 404, 405 and 415 without the handler", arguments: ["--http1.1", "--http2-prior-knowledge"])
    func precheck(flag: String) throws {
        let probe = FrontProbe()
        let front = try startFront(probe: probe)
        defer { front.stop() }
        let base = "http://\(front.address)"
        #expect(try curl([flag, base + "/nowhere"]).status == 404)
        #expect(try curl([flag, "-X", "DELETE", base + "/healthz"]).status == 405)
        #expect(try curl([flag, "-H", "content-type: text/plain", "--data-binary", "x", base + "/notify"]).status == 415)
        #expect(probe.handled.withLock { $0 } == 0)
    }

    @Test("header fields over maxHeaderBytes are refused before any handler", arguments: ["--http1.1", "--http2-prior-knowledge"])
    func headerLimit(flag: String) throws {
        let probe = FrontProbe()
        let front = try startFront({ $0.maxHeaderBytes = 4096 }, probe: probe)
        defer { front.stop() }
        let url = "http://\(front.address)/healthz"
        let over = try curl([flag, "-H", "x-big: " + String(repeating: "a", count: 6000), url])
        #expect(over.status == 431)
        // Far over: libmicrohttpd's own error (or nghttp2's reset) without reaching the handler either.
        let huge = try curl([flag, "-H", "x-big: " + String(repeating: "a", count: 60000), url])
        #expect(huge.status != 200)
        #expect(probe.handled.withLock { $0 } == 0)
        #expect(try curl([flag, url]).status == 200)
    }

    @Test("HEAD is answered like GET without a body", arguments: ["--http1.1", "--http2-prior-knowledge"])
    func head(flag: String) throws {
        let front = try startFront()
        defer { front.stop() }
        let r = try runPeer(["curl", "-sS", "--max-time", "5", flag, "-I", "http://\(front.address)/healthz"])
        #expect(r.output.lowercased().contains("content-length: 3"))
        #expect(r.output.lowercased().contains("x-seen-by: front"))
        #expect(!r.output.contains("ok\n"))
    }

    @Test("a slow sender is cut off after the request timeout")
    func slowSender() throws {
        let probe = FrontProbe()
        let front = try startFront({ $0.requestTimeoutSeconds = 1 }, probe: probe)
        defer { front.stop() }
        let started = Date()
        let out = try python(
            front.address,
            """
            s = socket.create_connection((host, port), timeout=10)
            s.sendall(b'POST /notify HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\nContent-Length: 40\\r\\n\\r\\n')
            try:
                for i in range(40):
                    time.sleep(0.25)
                    s.sendall(b'1')
                print('not cut')
            except OSError:
                print('cut')
            """)
        #expect(out == "cut")
        #expect(Date().timeIntervalSince(started) < 6)
        #expect(probe.handled.withLock { $0 } == 0)
        // HTTP/2 too: a stream whose body never ends.
        let h2 = RawClient(front.address)
        h2.send("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        #expect(h2.closedByServer(within: 5))
    }

    @Test("a silent connection does not stall /healthz")
    func silentConnection() throws {
        let front = try startFront()
        defer { front.stop() }
        let silent = RawClient(front.address)
        let started = Date()
        let r = try curl(["http://\(front.address)/healthz"])
        #expect(r.status == 200)
        #expect(Date().timeIntervalSince(started) < 0.4)  // less than the acceptor's 0.5 s peek at the silent one
        let h2 = try curl(["--http2-prior-knowledge", "http://\(front.address)/healthz"])
        #expect(h2.status == 200)
        _ = silent
    }

    @Test("connections over maxConnections are closed at accept")
    func maxConnections() throws {
        let front = try startFront { $0.maxConnections = 2 }
        defer { front.stop() }
        var held = [RawClient(front.address), RawClient(front.address)]
        #expect(eventually { front.connectionCount == 2 })
        let refused = RawClient(front.address)
        #expect(refused.closedByServer(within: 5))
        #expect(front.refusedConnectionCount >= 1)
        held.removeLast()
        #expect(eventually { front.connectionCount == 1 })
        #expect(try curl(["http://\(front.address)/healthz"]).status == 200)
    }

    @Test("stop() returns promptly with connections open and a handler that never answers")
    func stopPrompt() throws {
        let cert = try TestCertificate()
        defer { cert.remove() }
        let probe = FrontProbe()
        let front = try startFront({ $0.tls = HTTPFrontConfiguration.TLS(certificatePath: cert.certificate, keyPath: cert.key) }, probe: probe)
        let plain = try startFront(probe: probe)
        let silent = [RawClient(front.address), RawClient(plain.address)]
        // Requests parked in handlers, over TLS HTTP/1.1, TLS h2, h1 and h2c.
        let clients = [
            ["--http1.1", "--cacert", cert.certificate, "https://\(front.address)/hold"],
            ["--http2", "--cacert", cert.certificate, "https://\(front.address)/hold"],
            ["http://\(plain.address)/hold"], ["--http2-prior-knowledge", "http://\(plain.address)/hold"],
        ]
        let statuses = Mutex<[Int]>([])
        let group = DispatchGroup()
        for args in clients {
            DispatchQueue.global().async(group: group) {
                let s = (try? curl(["-H", "content-type: application/json", "--data-binary", "{}"] + args))?.status ?? -1
                statuses.withLock { $0.append(s) }
            }
        }
        #expect(eventually(10) { probe.held.withLock { $0.count } == 4 })
        let started = Date()
        front.stop()
        plain.stop()
        #expect(Date().timeIntervalSince(started) < 6.5)  // each waits at most 3 s for its 503s to go out
        #expect(group.wait(timeout: .now() + 10) == .success)
        // HTTP/1.1 requests get 503; HTTP/2 streams end with the connection.
        #expect(statuses.withLock { $0.filter { $0 == 503 }.count } >= 2)
        probe.held.withLock { $0.forEach { $0(HTTPResponse(status: 200)) } }  // late answers are dropped
        _ = silent
    }
}
