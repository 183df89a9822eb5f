/// A registered method and its handler (one of the three kinds). A class, so that the Router's dictionaries
/// hold a reference: a closure stored as a Dictionary's value is kept at the most general abstraction, and
/// every call then went through two reabstraction thunks that copied its `CallContext` (about 450
/// instructions a Health/Check).
final class Registration: Sendable {
    let method: String
    let unary: UnaryHandler?
    let serverStreaming: ServerStreamingHandler?
    let bidi: BidiStreamingHandler?

    init(_ method: String, unary: UnaryHandler? = nil, serverStreaming: ServerStreamingHandler? = nil, bidi: BidiStreamingHandler? = nil) {
        self.method = method
        self.unary = unary
        self.serverStreaming = serverStreaming
        self.bidi = bidi
    }
}
