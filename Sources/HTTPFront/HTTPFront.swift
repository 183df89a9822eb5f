public import HTTP2
import IO
import RPC

/// A small HTTP server for billingd's side ports (metrics and health, App Store notifications): an HTTP2
/// `Server` with no gRPC methods and an `HTTPService`, on its own event loop. HTTP/1.1 through
/// libmicrohttpd and HTTP/2 through nghttp2 (h2c by prior knowledge, or TLS with ALPN `h2` / `http/1.1`)
/// share the port; no thread is made per connection, and every peer is bounded: connections in all and
/// per address, the handshake and the first bytes, each request's arrival, body and header sizes.
public final class HTTPFront: Sendable {
    private let server: Server

    /// The bound `HOST:PORT` (the real port when the configuration asked for 0).
    public let address: String

    /// Binds and starts serving.
    ///
    /// - Parameters:
    ///   - precheck: sees method, path and headers before any body byte is read, on the server's loop; it
    ///     must return at once, with an answer (404, 405, 415...) or nil to read the body.
    ///   - handler: gets the whole request and calls its completion exactly once, from any thread, now or
    ///     later. It must not block the calling thread.
    public init(
        configuration: HTTPFrontConfiguration,
        precheck: @escaping HTTPService.Precheck,
        handler: @escaping HTTPService.Handler
    ) throws(HTTPFrontError) {
        var config = ServerConfiguration()
        config.listen = configuration.listen
        config.threads = 1
        config.threadName = configuration.threadName
        config.maxConnections = configuration.maxConnections
        config.maxConnectionsPerAddress = configuration.maxConnectionsPerAddress
        config.handshakeTimeoutNanoseconds = Int64(max(1, configuration.handshakeTimeoutSeconds)) * 1_000_000_000
        config.maxHeaderListBytes = configuration.maxHeaderBytes
        config.maxMessageBytes = configuration.maxBodyBytes
        // An HTTP/2 connection with no request open is closed as an HTTP/1.1 one is (libmicrohttpd's
        // connection timeout): after the request timeout.
        config.idleTimeoutNanoseconds = Int64(max(1, configuration.requestTimeoutSeconds)) * 1_000_000_000
        config.keepsCallNotes = false
        // Every request is the service's, gRPC's content type included (it answers what it does not serve).
        config.servesGRPC = false
        config.http = HTTPService(
            maxBodyBytes: configuration.maxBodyBytes, maxHeaderBytes: configuration.maxHeaderBytes,
            requestTimeoutSeconds: configuration.requestTimeoutSeconds, precheck: precheck, handler: handler)
        if let files = configuration.tls {
            do {
                config.tls = try TLSContext(certificatePath: files.certificatePath, keyPath: files.keyPath, alpn: ["h2", "http/1.1"])
            } catch {
                throw .tls(error.description)
            }
        }
        do {
            server = try Server(configuration: config, router: Router())
            address = try server.start()
        } catch {
            throw .listen(error.description)
        }
    }

    deinit { server.shutdown(graceSeconds: 0) }

    /// Connections open now (all protocols).
    public var connectionCount: Int { server.connectionCount }

    /// Connections closed at accept because `maxConnections` (or `maxConnectionsPerAddress`) were open.
    public var refusedConnectionCount: Int { server.refusedConnectionCount }

    /// Stops accepting, ends every connection (HTTP/1.1 requests awaiting a handler get 503, for up to 3 s
    /// while they go out), and stops the loop.
    public func stop() { server.shutdown(graceSeconds: 0) }
}
