import Logging
import Connect
import HTTP2

/// The components' own configurations, composed from the flags in one place each (the App hands them over
/// whole instead of copying fields one by one).
extension Configuration {
    /// The gRPC port's server: listener, loops, limits, deadlines (TLS, the pipeline and the HTTP service are
    /// added by the App, which loads and builds them).
    var serverConfiguration: ServerConfiguration {
        var s = ServerConfiguration()
        s.listen = server.listen
        s.threads = server.threads
        s.maxMessageBytes = limits.maxMessageBytes
        s.maxConcurrentStreams = limits.maxConcurrentStreams
        s.maxConnections = limits.maxConnections
        s.maxInFlight = limits.maxInFlight
        s.maxHeaderListBytes = limits.maxHeaderListBytes
        s.maxConnectionBufferBytes = limits.maxConnectionBufferBytes
        s.maxDeadlineNanoseconds = Int64(limits.maxDeadline * 1e9)
        s.idleTimeoutNanoseconds = Int64(limits.idleTimeout * 1e9)
        s.keepsCallNotes = observability.logLevel <= .info
        s.servesGRPC = servedProtocols.contains(.grpc)
        return s
    }

    /// The protocols `--protocols` names.
    var servedProtocols: Set<WireProtocol> { Set(server.protocols.compactMap(WireProtocol.init(rawValue:))) }

    /// Connect and gRPC-Web on the same port (the App adds the port's pipeline).
    var connectConfiguration: ConnectConfiguration {
        var c = ConnectConfiguration()
        c.protocols = servedProtocols
        c.corsOrigins = server.corsOrigins
        c.maxMessageBytes = limits.maxMessageBytes
        c.maxDeadlineNanoseconds = Int64(limits.maxDeadline * 1e9)
        c.maxInFlight = limits.maxInFlight
        return c
    }
}
