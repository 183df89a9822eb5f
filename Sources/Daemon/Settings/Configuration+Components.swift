import Logging
import Connect
import HTTP2

/// The components' own configurations, composed from the flags in one place each (the App hands them over
/// whole instead of copying fields one by one).
extension Configuration {
    /// The gRPC port's server: listener, loops, limits, deadlines (TLS, the pipeline and the HTTP service are
    /// added by the App, which loads and builds them).
    var server: ServerConfiguration {
        var s = ServerConfiguration()
        s.listen = listen
        s.threads = threads
        s.maxMessageBytes = maxMessageBytes
        s.maxConcurrentStreams = maxConcurrentStreams
        s.maxConnections = maxConnections
        s.maxInFlight = maxInFlight
        s.maxHeaderListBytes = maxHeaderListBytes
        s.maxConnectionBufferBytes = maxConnectionBufferBytes
        s.maxDeadlineNanoseconds = Int64(maxDeadline * 1e9)
        s.idleTimeoutNanoseconds = Int64(idleTimeout * 1e9)
        s.keepsCallNotes = logLevel <= .info
        s.servesGRPC = servedProtocols.contains(.grpc)
        return s
    }

    /// The protocols `--protocols` names.
    var servedProtocols: Set<WireProtocol> { Set(protocols.compactMap(WireProtocol.init(rawValue:))) }

    /// Connect and gRPC-Web on the same port (the App adds the port's pipeline).
    var connect: ConnectConfiguration {
        var c = ConnectConfiguration()
        c.protocols = servedProtocols
        c.corsOrigins = corsOrigins
        c.maxMessageBytes = maxMessageBytes
        c.maxDeadlineNanoseconds = Int64(maxDeadline * 1e9)
        c.maxInFlight = maxInFlight
        return c
    }
}
