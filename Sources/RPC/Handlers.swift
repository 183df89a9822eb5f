/// A bidirectional method: started at the request headers; messages arrive through the receiver it
/// returns, answers leave through the writer.
public typealias BidiStreamingHandler = @Sendable (CallContext, StreamWriter) -> StreamReceiver

/// A server-streaming method: the request in, messages out through the writer until it finishes.
public typealias ServerStreamingHandler = @Sendable (CallContext, [UInt8], StreamWriter) -> Void

/// A unary method: request bytes (without the prefix) in, one answer out through the responder.
/// Handlers run on an event loop and must not block it.
public typealias UnaryHandler = @Sendable (CallContext, [UInt8], Responder) -> Void
