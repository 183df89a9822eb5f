import RPC

/// A routed `:path`: its stream kind, method name and handler, resolved once per path and connection. One
/// object, so a stream keeps it and a call reads it for one reference count (the `Router.Route` enum's
/// payload, a String and a closure, was copied four times a call: about 350 instructions).
final class RoutedMethod {
    let kind: StreamState.Kind
    /// The full method name, `billing.v1.Billing/CreateOrder`.
    let method: String
    /// The handler of `kind` (the other two are nil).
    let unary: UnaryHandler?
    let serverStreaming: ServerStreamingHandler?
    let bidi: BidiStreamingHandler?

    init(_ route: Router.Route) {
        kind = route.kind
        switch route {
        case .unary(let method, let handler):
            (self.method, unary, serverStreaming, bidi) = (method, handler, nil, nil)
        case .serverStreaming(let method, let handler):
            (self.method, unary, serverStreaming, bidi) = (method, nil, handler, nil)
        case .bidi(let method, let handler):
            (self.method, unary, serverStreaming, bidi) = (method, nil, nil, handler)
        }
    }
}
