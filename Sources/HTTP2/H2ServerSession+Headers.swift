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
        lastStream = Unmanaged.passUnretained(stream)
        reading.reset()
        readingStreamID = streamID
    }

    /// The open stream `id`, unretained, or nil.
    @inline(__always)
    func streamRef(_ id: Int32) -> Unmanaged<ServerStream>? {
        if let last = lastStream, last._withUnsafeGuaranteedRef({ $0.id }) == id { return last }
        let found = streams.ref(id)
        if found != nil { lastStream = found }
        return found
    }

    /// The open stream `id`, or nil.
    @inline(__always)
    func stream(_ id: Int32) -> ServerStream? { streamRef(id)?.takeUnretainedValue() }

    /// Runs `body` with the open stream `id` without a reference count of its own (about 45 instructions
    /// and two atomic operations per callback): the table keeps the stream for the whole callback, as only
    /// nghttp2's stream-close callback takes a stream out, and nghttp2 never calls it from inside `body`
    /// (streams close inside `nghttp2_session_mem_recv`/`send`, which no callback body calls). Nil when
    /// there is no such stream.
    @inline(__always)
    func withStream<T>(_ id: Int32, _ body: (ServerStream) -> T) -> T? {
        guard let ref = streamRef(id) else { return nil }
        return ref._withUnsafeGuaranteedRef(body)
    }

    /// One field of a header block. A request's block is read into `reading` (no stream lookup per field);
    /// trailers and what follows a malformed field take the slower path.
    @inline(__always)
    func header(
        streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, trailer: Bool
    ) {
        if streamID == readingStreamID && !trailer {
            requestField(name: name, value: value)
        } else {
            otherField(streamID: streamID, name: name, value: value, trailer: trailer)
        }
    }

    /// A field of the request block being read: checked (RFC 9113), counted against the header list limit,
    /// and kept when the server reads it (path, method, content type, timeout, metadata).
    @inline(__always)
    private func requestField(name: UnsafeBufferPointer<UInt8>, value rawValue: UnsafeBufferPointer<UInt8>) {
        let kind = FieldName.of(name)
        // Copied out and back: two inout accesses into `reading` at once would overlap (exclusivity).
        var pseudoFields = reading.pseudoFields, sawRegularField = reading.sawRegularField
        let verdict = RequestFieldCheck.check(
            name: name, kind: kind, value: rawValue, trailer: false, pseudoFields: &pseudoFields, sawRegularField: &sawRegularField)
        reading.pseudoFields = pseudoFields
        reading.sawRegularField = sawRegularField
        switch verdict {
        case .use: break
        case .skip: return
        case .malformed:
            malformedBlock()
            return
        }
        reading.headerBytes += name.count + rawValue.count + 32
        if reading.headerBytes > shared.configuration.maxHeaderListBytes {
            // Answered with RESOURCE_EXHAUSTED once the block ends; what was kept is dropped now.
            if !reading.tooLarge {
                reading.tooLarge = true
                reading.metadata = []
            }
            return
        }
        if reading.tooLarge { return }
        // Most fields are transport details no handler reads: their values are never copied.
        switch kind {
        case .path:
            let value = trimmed(rawValue)
            if !same(value, lastPath) {
                lastPath = Array(value)
                lastPathString = String(decoding: value, as: UTF8.self)
            }
            reading.path = lastPathString
        case .method:
            let value = trimmed(rawValue)
            reading.method = ByteLiteral.equal(value, "POST") ? "POST" : String(decoding: value, as: UTF8.self)
        case .contentType:
            let value = trimmed(rawValue)
            reading.contentType = ByteLiteral.equal(value, "application/grpc") ? "application/grpc" : String(decoding: value, as: UTF8.self)
        case .grpcTimeout:
            reading.timeout = String(decoding: trimmed(rawValue), as: UTF8.self)
        case .otherPseudo, .unread, .connectionSpecific:
            return
        case .other:
            reading.metadata.append(metadataStrings(name, trimmed(rawValue)))
        }
    }

    /// The block being read broke RFC 9113: its stream is reset, and its remaining fields are passed over.
    @inline(never)
    private func malformedBlock() {
        let id = readingStreamID
        readingStreamID = 0
        if let stream = stream(id) { act(stream, stream.state.malformed()) }
    }

    /// A trailer field (checked, then not read: gRPC requests carry no trailers worth reading), or a field of
    /// a block already found malformed (its stream no longer reads fields).
    @inline(never)
    private func otherField(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, trailer: Bool) {
        guard let stream = stream(streamID), stream.state.readsFields else { return }
        // Trailers carry no pseudo-header field and come after the request's (8.1): only the field's own checks apply.
        var pseudoFields = PseudoField.required | PseudoField.authority
        var sawRegularField = true
        let verdict = RequestFieldCheck.check(
            name: name, value: value, trailer: trailer, pseudoFields: &pseudoFields, sawRegularField: &sawRegularField)
        if verdict == .malformed { act(stream, stream.state.malformed()) }
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
        withStream(streamID) { headersComplete($0, endStream: endStream) }
    }

    private func headersComplete(_ stream: ServerStream, endStream: Bool) {
        guard stream.state.isIdle else { return }
        let streamID = stream.id
        if readingStreamID == streamID {
            // Exchanged, not copied: the stream's cleared head (its buffers) is the next block's.
            swap(&stream.head, &reading)
            readingStreamID = 0
        }
        stream.startedAt = host.now()
        // A request body that never ends must not hold the stream forever: the sweep ends it at the cap.
        stream.capDeadline = CallRules.capDeadline(from: stream.startedAt, capNanoseconds: shared.pipeline.maxDeadlineNanoseconds)
        act(stream, stream.state.headersEnded(verdict(stream), endStream: endStream))
    }

    /// What a complete header block means: the session gathers the facts, `CallRules` decides (RFC 9113
    /// first, then HTTP, drain, authentication and routing), and a routed call keeps its route.
    private func verdict(_ stream: ServerStream) -> StreamState.Verdict {
        switch CallRules.screen(
            requiredPseudoFields: stream.head.pseudoFields & PseudoField.required == PseudoField.required,
            servesHTTP: shared.configuration.http != nil, post: stream.head.method == "POST",
            grpcContentType: GRPCHeaders.isGRPCContentType(stream.head.contentType),
            headerListTooLarge: stream.head.tooLarge, maxHeaderListBytes: shared.configuration.maxHeaderListBytes,
            draining: draining, servesGRPC: shared.configuration.servesGRPC)
        {
        case .decided(let verdict): return verdict
        case .exchange: return exchangeVerdict(stream, shared.configuration.http!)  // `servesHTTP`: it is there
        case .route: break
        }
        // Read in place, not bound to locals: each local copy of the path or the route was a reference count.
        if routedPath != stream.head.path {
            routed = shared.router.resolve(path: stream.head.path).map(RoutedMethod.init)
            routedPath = stream.head.path
        }
        stream.knownMethod = routed != nil
        // Before anything per method, unknown methods included: their names are the peer's to choose.
        let refusal = shared.authenticates ? authenticate(stream, path: stream.head.path) : nil
        let verdict = CallRules.routed(routed?.kind, path: stream.head.path, refusal: refusal)
        guard case .route = verdict else { return verdict }
        stream.route = routed
        if stream.route!.kind == .bidi {
            stream.streamDeframer = MessageStreamDeframer(maxMessageBytes: shared.configuration.maxMessageBytes)
        }
        return verdict
    }

    /// What the interceptors say of a call before it is routed (nil: accepted). The call's object (and its
    /// cancellation) is made here, and kept for the call.
    @inline(__always)
    private func authenticate(_ stream: ServerStream, path: String) -> RPCError? {
        let info = readyCall(stream)
        info.prepare(method: CallRules.methodName(path: path), metadata: stream.head.metadata, monotonicDeadline: 0, requestNumber: 0)
        return shared.router.refusal(for: CallContext(info))
    }
}

/// A field value without the spaces and tabs around it (RFC 9110 5.5: they are not part of the value).
@inline(__always)
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
