import Synchronization

/// A response body written while it is sent (a server stream over Connect or gRPC-Web): the producer
/// writes chunks from any thread and finishes; the transport takes what is there when the peer can take it,
/// and is told when more comes. Each chunk carries a credit the producer gets back (`onTaken`) once the
/// transport took the whole chunk, so a producer can bound what a slow reader leaves queued. When the
/// connection goes first, `onCancel` runs once.
public final class HTTPBodyStream: Sendable {
    private struct State {
        var chunks: [(bytes: [UInt8], credit: Int)] = []
        var offset = 0
        var finished = false
        var cancelled = false
        var notify: (@Sendable () -> Void)?
        var onTaken: (@Sendable (Int) -> Void)?
        var onCancel: (@Sendable () -> Void)?
    }
    private let state = Mutex(State())

    public init() {}

    /// Called with a chunk's credit once the transport took all of it.
    public func onTaken(_ body: @escaping @Sendable (Int) -> Void) { state.withLock { $0.onTaken = body } }

    /// Called once if the transport drops the stream before it finished (the client went away).
    public func onCancel(_ body: @escaping @Sendable () -> Void) {
        let now = state.withLock { s -> Bool in
            s.onCancel = body
            return s.cancelled
        }
        if now { body() }
    }

    /// Queues `bytes` (ignored once finished); `credit` comes back through `onTaken`.
    public func write(_ bytes: [UInt8], credit: Int = 0) {
        let notify = state.withLock { s -> (@Sendable () -> Void)? in
            guard !s.finished, !s.cancelled else { return nil }
            s.chunks.append((bytes, credit))
            return s.notify
        }
        notify?()
    }

    /// Ends the body after what is queued; `dropPending`: what is queued is dropped first (its credit given back).
    public func finish(last: [UInt8] = [], dropPending: Bool = false) {
        var returned = 0
        let (notify, taken) = state.withLock { s -> ((@Sendable () -> Void)?, (@Sendable (Int) -> Void)?) in
            guard !s.finished else { return (nil, nil) }
            if dropPending {
                returned = s.chunks.reduce(0) { $0 + $1.credit }
                s.chunks.removeAll()
                s.offset = 0
            }
            if !last.isEmpty { s.chunks.append((last, 0)) }
            s.finished = true
            return (s.notify, s.onTaken)
        }
        if returned > 0 { taken?(returned) }
        notify?()
    }

    // MARK: The transport's side

    /// Sets what the transport runs (from the producer's thread) when a chunk or the end comes.
    package func attach(_ notify: @escaping @Sendable () -> Void) { state.withLock { $0.notify = notify } }

    /// Takes up to `max` bytes: the bytes, and whether the body is over once they are sent.
    package func take(max: Int) -> (bytes: [UInt8], ended: Bool) {
        var credit = 0
        let (result, taken) = state.withLock { s -> (([UInt8], Bool), (@Sendable (Int) -> Void)?) in
            var out: [UInt8] = []
            while out.count < max, !s.chunks.isEmpty {
                let chunk = s.chunks[0].bytes
                let n = min(max - out.count, chunk.count - s.offset)
                out.append(contentsOf: chunk[s.offset..<(s.offset + n)])
                s.offset += n
                if s.offset == chunk.count {
                    credit += s.chunks[0].credit
                    s.chunks.removeFirst()
                    s.offset = 0
                }
            }
            return ((out, s.finished && s.chunks.isEmpty), s.onTaken)
        }
        if credit > 0 { taken?(credit) }
        return result
    }

    /// The transport dropped the stream (its connection or stream closed) before the end.
    package func cancel() {
        let onCancel = state.withLock { s -> (@Sendable () -> Void)? in
            guard !s.finished || !s.chunks.isEmpty, !s.cancelled else { return nil }
            s.cancelled = true
            s.chunks.removeAll()
            s.notify = nil
            return s.onCancel
        }
        onCancel?()
    }
}
