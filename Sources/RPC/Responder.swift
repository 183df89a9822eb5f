import Synchronization
public import ProtoWire

/// Where a transport takes the answers of its unary calls, by call id.
public protocol ResponseSink: AnyObject, Sendable {
    func deliver(id: Int32, _ result: Result<[UInt8], RPCError>)
}

/// The single answer to a unary call, handed to the transport once.
///
/// A handler may call `succeed` or `fail` from any thread; later calls are ignored.
public final class Responder: Sendable {
    public typealias Deliver = @Sendable (Result<[UInt8], RPCError>) -> Void
    private let answered = Atomic<Bool>(false)
    private let closure: Deliver?
    private let sink: (any ResponseSink)?
    private let id: Int32

    public init(_ deliver: @escaping Deliver) {
        closure = deliver
        sink = nil
        id = 0
    }

    /// Answers go to `sink` for call `id`: no closure context to allocate per call.
    public init(sink: any ResponseSink, id: Int32) {
        closure = nil
        self.sink = sink
        self.id = id
    }

    private func deliver(_ result: Result<[UInt8], RPCError>) {
        if let sink { sink.deliver(id: id, result) } else { closure?(result) }
    }

    /// Answers OK with an already length-prefixed message.
    public func succeed(framed: [UInt8]) {
        guard answered.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        deliver(.success(framed))
    }

    /// Answers OK with `message`, framed in one allocation. Inlinable so that each service's call is specialized
    /// for its message type (unspecialized, the message was copied and encoded through its witness table).
    @inlinable
    public func succeed(_ message: some ProtoMessage) {
        let size = message.encodedSize
        var writer = ProtoWriter(capacity: MessageFraming.prefixSize + size)
        writer.writeMessagePrefix(size: size)
        message.encode(to: &writer)
        succeed(framed: writer.finish())
    }

    public func fail(_ error: RPCError) {
        guard answered.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        deliver(.failure(error))
    }

    public var isAnswered: Bool { answered.load(ordering: .acquiring) }
}
