import IO
import HTTP2
import Testing

@Suite("Socket addresses")
struct SocketAddressTests {
    @Test("a malformed address asks for HOST:PORT")
    func malformed() {
        #expect(throws: SocketError.self) { _ = try SocketAddress.resolve("localhost") }
        do {
            _ = try SocketAddress.resolve("localhost:http")
            Issue.record("resolved")
        } catch {
            #expect(error.description.contains("expected HOST:PORT"))
        }
    }

    @Test("a well-formed address whose name does not resolve says so, not HOST:PORT")
    func unresolvable() {
        do {
            _ = try SocketAddress.resolve("no-such-host.invalid:443")
            Issue.record("resolved")
        } catch {
            guard case .unresolvable(let host, _) = error else { Issue.record("\(error)"); return }
            #expect(host == "no-such-host.invalid")
            #expect(error.description.hasPrefix("cannot resolve host 'no-such-host.invalid'"))
            #expect(!error.description.contains("HOST:PORT"))
        }
    }

    @Test("names and literals resolve")
    func resolves() throws {
        #expect(try SocketAddress.resolve("127.0.0.1:80").family == 2)
        _ = try SocketAddress.resolve("localhost:80")
    }
}
