import Foundation
import Glibc
import HTTP2
import HTTPClient
import HTTPFront
import Synchronization
import TestSupport
import Testing

/// Sends through `client` and waits for the answer on this thread.
func exchange(_ client: HTTPClient, _ request: HTTPClientRequest) -> Result<HTTPClientResponse, HTTPClientError> {
    wait { done in client.send(request, completion: done) }
}

/// A listening socket that accepts and never answers (for time-outs), or is closed (for refused connections).
final class SilentListener {
    let fd: Int32
    let port: UInt16
    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        listen(fd, 16)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        self.fd = fd
        port = UInt16(bigEndian: address.sin_port)
    }
    func close() { Glibc.close(fd) }
}

@Suite("HTTPClient (libcurl on an IO loop) against the HTTP front", .serialized)
struct HTTPClientTests {
    @Test("HTTPS: HTTP/2 by ALPN, the body and headers both ways, a CA added to the system's")
    func httpsH2() throws {
        let cert = try TestCertificate()
        defer { cert.remove() }
        let front = try startFront { $0.tls = HTTPFrontConfiguration.TLS(certificatePath: cert.certificate, keyPath: cert.key) }
        defer { front.stop() }
        var config = HTTPClientConfiguration()
        config.extraCAPath = cert.certificate
        let client = try HTTPClient(configuration: config)
        defer { client.shutdown() }
        let answer = try exchange(
            client,
            HTTPClientRequest(
                method: "POST", url: "https://\(front.address)/notify", headers: [("Content-Type", "application/json")],
                body: Array(#"{"n":1}"#.utf8))
        ).get()
        #expect(answer.status == 200)
        #expect(answer.httpVersion == 2)
        #expect(answer.header("content-type") == "application/json")
        #expect(String(decoding: answer.body, as: UTF8.self) == #"{"echo":{"n":1},"version":"HTTP/2"}"#)
        let health = try exchange(client, HTTPClientRequest(url: "https://\(front.address)/healthz")).get()
        #expect(health.status == 200)
        #expect(health.header("x-seen-by") == "front")
    }

    @Test("HTTP/1.1 over cleartext when allowed; refused without allowCleartext, with nothing sent")
    func cleartext() throws {
        let probe = FrontProbe()
        let front = try startFront(probe: probe)
        defer { front.stop() }
        var config = HTTPClientConfiguration()
        config.allowCleartext = true
        let client = try HTTPClient(configuration: config)
        defer { client.shutdown() }
        let answer = try exchange(
            client,
            HTTPClientRequest(method: "POST", url: "http://\(front.address)/notify", headers: [("content-type", "application/json")], body: Array("[2]".utf8))
        ).get()
        #expect(answer.httpVersion == 1)
        #expect(String(decoding: answer.body, as: UTF8.self) == #"{"echo":[2],"version":"HTTP/1.1"}"#)
        let strict = try HTTPClient()
        defer { strict.shutdown() }
        let refused = exchange(strict, HTTPClientRequest(url: "http://\(front.address)/healthz"))
        guard case .failure(.invalidRequest) = refused else {
            Issue.record("http:// was not refused: \(refused)")
            return
        }
        #expect(probe.handled.withLock { $0 } == 1)
    }

    @Test("A certificate no CA vouches for is refused (system CAs only)")
    func untrusted() throws {
        let cert = try TestCertificate()
        defer { cert.remove() }
        let front = try startFront { $0.tls = HTTPFrontConfiguration.TLS(certificatePath: cert.certificate, keyPath: cert.key) }
        defer { front.stop() }
        let client = try HTTPClient()
        defer { client.shutdown() }
        let result = exchange(client, HTTPClientRequest(url: "https://\(front.address)/healthz"))
        guard case .failure(.tls) = result else {
            Issue.record("expected a TLS failure, got \(result)")
            return
        }
    }

    @Test("A trusted certificate for another name is refused (host name verified)")
    func wrongName() throws {
        let cert = try TestCertificate()
        defer { cert.remove() }
        let front = try startFront { $0.tls = HTTPFrontConfiguration.TLS(certificatePath: cert.certificate, keyPath: cert.key) }
        defer { front.stop() }
        var config = HTTPClientConfiguration()
        config.extraCAPath = cert.certificate
        let client = try HTTPClient(configuration: config)
        defer { client.shutdown() }
        let port = front.address.split(separator: ":").last!
        // localhost resolves to 127.0.0.1, but the certificate names only IP:127.0.0.1.
        let result = exchange(client, HTTPClientRequest(url: "https://localhost:\(port)/healthz"))
        guard case .failure(.tls) = result else {
            Issue.record("expected a TLS failure, got \(result)")
            return
        }
    }

    @Test("Time-out, refused connection, answers over the size limit, bad fields: each its own error")
    func failures() throws {
        let silent = try SilentListener()
        defer { silent.close() }
        var config = HTTPClientConfiguration()
        config.allowCleartext = true
        config.maxResponseBytes = 16
        let client = try HTTPClient(configuration: config)
        defer { client.shutdown() }
        let started = ContinuousClock.now
        let slow = exchange(client, HTTPClientRequest(url: "http://127.0.0.1:\(silent.port)/", timeoutMilliseconds: 300))
        #expect(slow.failure == .timeout)
        #expect(ContinuousClock.now - started < .seconds(3))

        let closed = try SilentListener()
        let port = closed.port
        closed.close()
        guard case .failure(.connect) = exchange(client, HTTPClientRequest(url: "http://127.0.0.1:\(port)/")) else {
            Issue.record("a refused connection was not .connect")
            return
        }

        let front = try startFront()
        defer { front.stop() }
        let big = exchange(
            client,
            HTTPClientRequest(
                method: "POST", url: "http://\(front.address)/notify", headers: [("content-type", "application/json")],
                body: Array(repeating: UInt8(ascii: "1"), count: 64)))
        #expect(big.failure == .responseTooLarge(limit: 16))

        let injected = exchange(client, HTTPClientRequest(url: "http://\(front.address)/healthz", headers: [("x-a", "1\r\nx-b: 2")]))
        guard case .failure(.invalidRequest) = injected else {
            Issue.record("a header with CRLF was not refused: \(injected)")
            return
        }
        guard case .failure(.invalidRequest) = exchange(client, HTTPClientRequest(url: "ftp://127.0.0.1/")) else {
            Issue.record("ftp:// was not refused")
            return
        }
    }

    @Test("Many requests at once on one loop thread; over maxQueued answers overloaded; shutdown answers the rest")
    func concurrencyAndShutdown() throws {
        let front = try startFront()
        defer { front.stop() }
        var config = HTTPClientConfiguration()
        config.allowCleartext = true
        config.maxQueued = 50
        let client = try HTTPClient(configuration: config)
        let results = Mutex<[Result<HTTPClientResponse, HTTPClientError>]>([])
        let group = DispatchGroup()
        for i in 0..<60 {
            group.enter()
            client.send(
                HTTPClientRequest(
                    method: "POST", url: "http://\(front.address)/notify", headers: [("content-type", "application/json")], body: Array("[\(i)]".utf8))
            ) { result in
                results.withLock { $0.append(result) }
                group.leave()
            }
        }
        #expect(group.wait(timeout: .now() + 20) == .success)
        let all = results.withLock { $0 }
        #expect(all.count == 60)
        #expect(all.filter { $0.failure == .overloaded }.count == 10)
        #expect(all.filter { (try? $0.get().status) == 200 }.count == 50)
        #expect(client.inFlight == 0)

        let silent = try SilentListener()
        defer { silent.close() }
        let parked = Mutex<[HTTPClientError]>([])
        for _ in 0..<3 {
            group.enter()
            client.send(HTTPClientRequest(url: "http://127.0.0.1:\(silent.port)/", timeoutMilliseconds: 60_000)) { result in
                if let f = result.failure { parked.withLock { $0.append(f) } }
                group.leave()
            }
        }
        client.shutdown()
        #expect(group.wait(timeout: .now() + 5) == .success)
        #expect(parked.withLock { $0 } == [.shutdown, .shutdown, .shutdown])
        #expect(exchange(client, HTTPClientRequest(url: "http://\(front.address)/healthz")).failure == .shutdown)
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let f) = self { return f }
        return nil
    }
}
