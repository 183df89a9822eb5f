import CNGHTTP2
import Glibc
import RPC

/// Request header blocks: each field checked and kept on its stream, and the complete block judged
/// (`CallRules`) into the `StreamState.Verdict` that starts the stream's life.
extension H2ServerSession {
    /// A request's header block begins: a stream (a spare one when there is one) takes its id.
    func beginHeaders(streamID: Int32) {
        pool?.pointee.caching = 1
        let stream: ServerStream
        if let spare = spareStreams.popLast() {
            spare.reassign(id: streamID)  // cleared when it closed
            stream = spare
        } else {
            stream = ServerStream(id: streamID, maxMessageBytes: shared.configuration.maxMessageBytes)
        }
        streams.insert(stream, id: streamID)
        lastStream = stream
    }

    /// The open stream `id`, or nil.
    @inline(__always)
    func stream(_ id: Int32) -> ServerStream? {
        if let last = lastStream, last.id == id { return last }
        let found = streams[id: id]
        if found != nil { lastStream = found }
        return found
    }

    /// One request field: checked (RFC 9113), counted against the header list limit, and kept when the
    /// server reads it (path, method, content type, timeout, metadata).
    func header(
        streamID: Int32, name: UnsafeBufferPointer<UInt8>, value rawValue: UnsafeBufferPointer<UInt8>,
        trailer: Bool
    ) {
        guard let stream = stream(streamID), stream.state.readsFields else { return }
        let kind = FieldName.of(name)
        switch RequestFieldCheck.check(name: name, kind: kind, value: rawValue, trailer: trailer, stream: stream) {
        case .use: break
        case .skip: return
        case .malformed:
            act(stream, stream.state.malformed())
            return
        }
        if trailer { return }  // gRPC requests carry no trailers worth reading
        stream.headerBytes += name.count + rawValue.count + 32
        if stream.headerBytes > shared.configuration.maxHeaderListBytes {
            // Answered with RESOURCE_EXHAUSTED once the block ends; what was kept is dropped now.
            if !stream.headerListTooLarge {
                stream.headerListTooLarge = true
                stream.metadata = []
            }
            return
        }
        if stream.headerListTooLarge { return }
        // Most fields are transport details no handler reads: their values are never copied.
        switch kind {
        case .path:
            let value = trimmed(rawValue)
            if !same(value, lastPath) {
                lastPath = Array(value)
                lastPathString = String(decoding: value, as: UTF8.self)
            }
            stream.path = lastPathString
        case .method:
            let value = trimmed(rawValue)
            stream.method = ByteLiteral.equal(value, "POST") ? "POST" : String(decoding: value, as: UTF8.self)
        case .contentType:
            let value = trimmed(rawValue)
            stream.contentType = ByteLiteral.equal(value, "application/grpc") ? "application/grpc" : String(decoding: value, as: UTF8.self)
        case .grpcTimeout:
            stream.timeout = String(decoding: trimmed(rawValue), as: UTF8.self)
        case .otherPseudo, .unread, .connectionSpecific:
            return
        case .other:
            stream.metadata.append(metadataStrings(name, trimmed(rawValue)))
        }
    }

    /// The Strings of a metadata field. A connection's calls repeat the same few fields (content-length,
    /// authorization, custom metadata): the first 8 names are kept with their value and reused byte for
    /// byte; a name whose value changes keeps only its name String (no copy of values that differ per call).
    private func metadataStrings(_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) -> (name: String, value: String) {
        for i in recentMetadata.indices where same(name, recentMetadata[i].nameBytes) {
            if !recentMetadata[i].varies {
                if same(value, recentMetadata[i].valueBytes) { return (recentMetadata[i].name, recentMetadata[i].value) }
                recentMetadata[i].varies = true
                recentMetadata[i].valueBytes = []
                recentMetadata[i].value = ""
            }
            return (recentMetadata[i].name, String(decoding: value, as: UTF8.self))
        }
        let field = (name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self))
        if recentMetadata.count < 8 && name.count + value.count <= 256 {
            recentMetadata.append((Array(name), Array(value), field.name, field.value, false))
        }
        return field
    }

    /// Trailers that do not end the request: malformed. (Rare: kept out of the frame callback.)
    @inline(never)
    func trailersWithoutEnd(streamID: Int32) {
        if let stream = stream(streamID) { act(stream, stream.state.malformed()) }
    }

    /// The request's headers are complete: judge them, route them, and dispatch if the body is empty.
    func headersComplete(streamID: Int32, endStream: Bool) {
        guard let stream = stream(streamID), stream.state.isIdle else { return }
        stream.startedAt = host.now()
        // A request body that never ends must not hold the stream forever: the sweep ends it at the cap.
        stream.capDeadline = CallRules.capDeadline(from: stream.startedAt, capNanoseconds: shared.configuration.maxDeadlineNanoseconds)
        act(stream, stream.state.headersEnded(verdict(stream), endStream: endStream))
    }

    /// What a complete header block means: the session gathers the facts, `CallRules` decides (RFC 9113
    /// first, then HTTP, drain, authentication and routing), and a routed call keeps its route.
    private func verdict(_ stream: ServerStream) -> StreamState.Verdict {
        switch CallRules.screen(
            requiredPseudoFields: stream.pseudoFields & PseudoField.required == PseudoField.required,
            servesHTTP: shared.configuration.http != nil, post: stream.method == "POST",
            grpcContentType: GRPCHeaders.isGRPCContentType(stream.contentType),
            headerListTooLarge: stream.headerListTooLarge, maxHeaderListBytes: shared.configuration.maxHeaderListBytes,
            draining: draining, servesGRPC: shared.configuration.servesGRPC)
        {
        case .decided(let verdict): return verdict
        case .exchange: return exchangeVerdict(stream, shared.configuration.http!)  // `servesHTTP`: it is there
        case .route: break
        }
        let router = shared.router
        let path = stream.path
        let route: Router.Route?
        if let routedPath, routedPath == path {
            route = routed
        } else {
            route = router.resolve(path: path)
            routedPath = path
            routed = route
        }
        stream.knownMethod = route != nil
        // Before anything per method, unknown methods included: their names are the peer's to choose.
        let refusal = router.authenticates ? authenticate(stream, path: path, router: router) : nil
        let verdict = CallRules.routed(route?.kind, path: path, refusal: refusal)
        guard case .route = verdict, let route else { return verdict }
        stream.route = route
        switch route {
        case .unary(let method, _), .serverStreaming(let method, _):
            stream.methodName = method
        case .bidi(let method, _):
            stream.methodName = method
            stream.streamDeframer = MessageStreamDeframer(maxMessageBytes: shared.configuration.maxMessageBytes)
        }
        return verdict
    }

    /// What the interceptors say of a call before it is routed (nil: accepted). The call's cancellation is
    /// made here, and kept for the call.
    @inline(__always)
    private func authenticate(_ stream: ServerStream, path: String, router: Router) -> RPCError? {
        let cancellation = stream.cancellation ?? Cancellation(keepsNotes: shared.configuration.keepsCallNotes)
        stream.cancellation = cancellation
        let context = CallContext(
            method: CallRules.methodName(path: path), metadata: stream.metadata, peer: peer,
            cancellation: cancellation, peerSubject: peerSubject)
        return router.refusal(for: context)
    }
}

/// A field value without the spaces and tabs around it (RFC 9110 5.5: they are not part of the value).
private func trimmed(_ value: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
    guard let base = value.baseAddress else { return value }
    var start = 0, end = value.count
    while start < end, value[start] == 0x20 || value[start] == 0x09 { start += 1 }
    while end > start, value[end - 1] == 0x20 || value[end - 1] == 0x09 { end -= 1 }
    return UnsafeBufferPointer(start: base + start, count: end - start)
}

/// Whether a field's bytes are `literal`'s (header names and values compared byte for byte on the hot path).
@inline(__always)
private func same(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: [UInt8]) -> Bool {
    guard bytes.count == literal.count else { return false }
    guard let base = bytes.baseAddress else { return literal.isEmpty }
    return literal.withUnsafeBufferPointer { memcmp(base, $0.baseAddress!, bytes.count) == 0 }
}
