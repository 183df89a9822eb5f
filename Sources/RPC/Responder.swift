import Synchronization
public import ProtoWire

/// Where a transport takes the answers of its unary calls, by call id.
public protocol ResponseSink: AnyObject, Sendable {
    func deliver(id: Int32, _ result: Result<[UInt8], RPCError>)
}

/// The single answer to a unary call, handed to the transport once.
///
/// A handler may call `succeed` or `fail` from any thread; later calls are ignored.
public final class Responder: @unchecked Sendable {
    // @unchecked Sendable: `id` is written only by `init` and by `rearm`, which a transport calls only while
    // it holds the sole reference (no other thread can see the object then); everything else is a `let` or atomic.
    public typealias Deliver = @Sendable (Result<[UInt8], RPCError>) -> Void
    private let answered = Atomic<Bool>(false)
    private let closure: Deliver?
    private let sink: (any ResponseSink)?
    private var id: Int32

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

    /// Storage for the answer's bytes, lent by the transport (`rearm`), taken by `succeed(_:)` once the
    /// answer is claimed (so only one thread touches it).
    @usableFromInline var spare: [UInt8] = []

    /// Ready for call `id` of the same sink: a transport reuses its responder once nothing else holds it
    /// (`isKnownUniquelyReferenced`), saving an allocation per call. `spare` lends the storage of an earlier
    /// answer for this one's bytes (exchanged, not copied).
    package func rearm(id: Int32, spare: inout [UInt8]) {
        self.id = id
        answered.store(false, ordering: .relaxed)
        swap(&self.spare, &spare)
    }

    /// True for the first answer only.
    @usableFromInline func claim() -> Bool {
        answered.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }

    /// The lent storage (empty if none), taken once the answer is claimed.
    @usableFromInline func takeSpare() -> [UInt8] {
        var taken: [UInt8] = []
        swap(&taken, &spare)
        return taken
    }

    /// Delivers a claimed answer.
    @usableFromInline func deliverClaimed(_ result: Result<[UInt8], RPCError>) { deliver(result) }

    private func deliver(_ result: Result<[UInt8], RPCError>) {
        if let sink { sink.deliver(id: id, result) } else { closure?(result) }
    }

    /// Answers OK with an already length-prefixed message.
    public func succeed(framed: [UInt8]) {
        guard answered.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        deliver(.success(framed))
    }

    /// Answers OK with `message`, framed in one allocation (none when the transport lent storage). Inlinable so that each service's call is specialized
    /// for its message type (unspecialized, the message was copied and encoded through its witness table).
    @inlinable
    public func succeed(_ message: some ProtoMessage) {
        guard claim() else { return }
        let size = message.encodedSize
        var writer = ProtoWriter(reusing: takeSpare(), capacity: MessageFraming.prefixSize + size)
        writer.writeMessagePrefix(size: size)
        message.encode(to: &writer)
        deliverClaimed(.success(writer.finish()))
    }

    public func fail(_ error: RPCError) {
        guard answered.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        deliver(.failure(error))
    }

    public var isAnswered: Bool { answered.load(ordering: .acquiring) }
}
