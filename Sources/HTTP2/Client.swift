public import IO
import CNGHTTP2
import CSystem
import Glibc
public import RPC
import ProtoWire
import Lifecycle

/// What a unary call answered, as seen on the wire.
public struct UnaryResponse: Sendable {
    /// The HTTP `:status` (200 for every gRPC answer).
    public var httpStatus = 0
    public var headers: [(name: String, value: String)] = []
    public var trailers: [(name: String, value: String)] = []
    /// The response message without its prefix (empty on error).
    public var message: [UInt8] = []
    /// The whole response body as received (for calls that are not gRPC).
    public var body: [UInt8] = []
    /// From `grpc-status` (trailers, or headers of a trailers-only answer).
    public var code: StatusCode = .unknown
    /// `grpc-message`, percent-decoded.
    public var statusMessage = ""
    /// `grpc-status-details-bin`, decoded.
    public var details: RichStatus?
    /// The stream was reset instead of answered.
    public var resetCode: UInt32?

    /// The error this answer means, or nil for OK.
    public var error: RPCError? {
        if code == .ok { return nil }
        let info = details?.errorInfo
        return RPCError(code: code, message: statusMessage, reason: info?.reason, metadata: info?.metadata ?? [:])
    }
}

/// A blocking HTTP/2 gRPC client on one connection and one nghttp2 client session.
/// For billingctl and tests; one thread uses it at a time.
public final class Client {
    private let transport: any ClientTransport
    private var session: OpaquePointer?
    private var calls: [Int32: CallState] = [:]
    private var failure: SocketError?
    private var justFinished: [Int32] = []
    private let authority: String
    /// The socket timeout; also the longest a write may make no progress.
    private let timeoutNanoseconds: UInt64
    /// Sent with every call after its own metadata (e.g. `authorization: Bearer KEY`).
    public var metadata: [(String, String)] = []
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)

    final class CallState {
        var response = UnaryResponse()
        var body: [UInt8]
        var bodyOffset = 0
        /// False to leave the request open after the body (protocol tests).
        var endStream = true
        var inTrailers = false
        var data: [UInt8] = []
        var done = false
        init(body: [UInt8]) { self.body = body }
    }

    /// Connects to `HOST:PORT`, with TLS (ALPN h2) when a context is given. `authority` (default the address)
    /// is what requests name as `:authority`.
    public convenience init(
        address: String, tls context: TLSContext? = nil, serverName: String? = nil, timeoutSeconds: Int = 10,
        authority: String? = nil
    ) throws(SocketError) {
        let transport = try SocketTransport(address: address, tls: context, serverName: serverName, timeoutSeconds: timeoutSeconds)
        self.init(transport: transport, authority: authority ?? address, timeoutSeconds: timeoutSeconds)
    }

    /// A client over any transport (the in-memory transport tests pair it with a server session in memory).
    package init(transport: any ClientTransport, authority: String, timeoutSeconds: Int = 10) {
        self.transport = transport
        self.authority = authority
        self.timeoutNanoseconds = UInt64(max(1, timeoutSeconds)) * 1_000_000_000
        session = NGHTTP2Setup.makeSession(
            .client, callbacks: Self.nghttp2Callbacks, options: .init(), settings: .init(),
            userData: Unmanaged.passUnretained(self).toOpaque())
    }

    /// The client's nghttp2 callbacks: answer headers and trailers, DATA, and the end of each stream.
    private static let nghttp2Callbacks = NGHTTP2Setup.Callbacks(
        onHeader: clientOnHeader, onFrameRecv: clientOnFrameRecv, onDataChunkRecv: clientOnData, onStreamClose: clientOnStreamClose)

    deinit {
        if let session { nghttp2_session_del(session) }
        transport.close()
        readBuffer.deallocate()
    }

    /// Calls `method` (`package.Service/Method`) with an encoded request message and waits for the answer.
    public func unary(
        _ method: String, message: [UInt8], metadata: [(String, String)] = [],
        timeoutNanoseconds: Int64? = nil
    ) throws(SocketError) -> UnaryResponse {
        let id = try start(method, body: MessageFraming.frame(message), metadata: metadata, timeoutNanoseconds: timeoutNanoseconds)
        try run { self.calls[id]?.done ?? true }
        return finish(id)
    }

    /// Starts a call with a raw body (already framed, or deliberately not); returns its stream id.
    public func start(
        _ method: String, body: [UInt8], metadata: [(String, String)] = [],
        contentType: String = "application/grpc", timeoutNanoseconds: Int64? = nil,
        endStream: Bool = true
    ) throws(SocketError) -> Int32 {
        guard let session else { throw .protocolError("session closed") }
        var fields: [(String, String)] = [
            (":method", "POST"), (":scheme", transport.isTLS ? "https" : "http"), (":path", "/" + method),
            (":authority", authority), ("content-type", contentType), ("te", "trailers"),
        ]
        if let timeoutNanoseconds { fields.append(("grpc-timeout", GRPCHeaders.formatTimeout(nanoseconds: timeoutNanoseconds))) }
        fields.append(contentsOf: metadata)
        fields.append(contentsOf: self.metadata)
        let headers = HeaderList(fields)
        let call = CallState(body: body)
        call.endStream = endStream
        var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: clientReadBody)
        let id = nghttp2_submit_request(session, nil, headers.nva, headers.count, &provider, nil)
        guard id > 0 else { throw .protocolError("submit_request failed: \(id)") }
        calls[id] = call
        return id
    }

    /// A plain HTTP/2 request (`GET`, `POST`, `PUT`, ...) that must be answered by `deadline` (monotonic
    /// nanoseconds): the answer's `httpStatus`, `headers` and `body`. Past the deadline the stream is reset and
    /// the call throws `ETIMEDOUT`; the connection stays usable for later requests only if it answered.
    public func request(
        _ method: String, path: String, headers: [(String, String)] = [], body: [UInt8] = [],
        deadline: UInt64
    ) throws(SocketError) -> UnaryResponse {
        guard let session else { throw .protocolError("session closed") }
        var fields: [(String, String)] = [
            (":method", method), (":scheme", transport.isTLS ? "https" : "http"), (":path", path),
            (":authority", authority),
        ]
        fields.append(contentsOf: headers)
        if !body.isEmpty { fields.append(("content-length", String(body.count))) }
        let list = HeaderList(fields)
        let call = CallState(body: body)
        let id: Int32
        if body.isEmpty {
            id = nghttp2_submit_request(session, nil, list.nva, list.count, nil, nil)
        } else {
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: clientReadBody)
            id = nghttp2_submit_request(session, nil, list.nva, list.count, &provider, nil)
        }
        guard id > 0 else { throw .protocolError("submit_request failed: \(id)") }
        calls[id] = call
        while true {
            try send()
            if call.done { break }
            if let failure { throw failure }
            let now = Monotonic.now()
            guard now < deadline else {
                _ = try? reset(id)
                calls[id] = nil
                throw .system(call: "request", errno: ETIMEDOUT)
            }
            guard let session = self.session, nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0 else {
                throw .protocolError("connection ended by the server")
            }
            setReceiveTimeout(milliseconds: max(1, min(1000, Int((deadline - now) / 1_000_000))))
            try receive(tolerateTimeout: true)
        }
        justFinished.removeAll { $0 == id }
        if let code = call.response.resetCode {
            // Reset or cut before its end, even after the headers: the body may be partial.
            calls[id] = nil
            throw .protocolError("stream reset (\(code))")
        }
        return finish(id)
    }

    /// True when the idle connection has something to say (a GOAWAY, a TLS close) or was closed: not to be
    /// reused for a new request.
    public var peerSpokeWhileIdle: Bool {
        transport.peerSpokeWhileIdle
    }

    /// False once the server ended the connection (GOAWAY or close): a new one is needed.
    public var isUsable: Bool {
        guard failure == nil, let session else { return false }
        return nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0
    }

    /// Sends and receives until `done` says stop.
    public func run(until done: () -> Bool) throws(SocketError) {
        while true {
            try send()
            if done() { return }
            if let failure { throw failure }
            guard let session, nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0 else {
                throw .protocolError("connection ended by the server")
            }
            try receive()
        }
    }

    /// Sends what is queued, reads once (waiting up to the socket timeout), and answers the calls that
    /// finished meanwhile (for load generators keeping many calls in flight).
    public func poll() throws(SocketError) -> [Int32] {
        try send()
        if justFinished.isEmpty {
            guard let session, nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0 else {
                throw .protocolError("connection ended by the server")
            }
            try receive(tolerateTimeout: true)
            try send()
        }
        let done = justFinished
        justFinished.removeAll(keepingCapacity: true)
        return done
    }

    /// Sets how long `poll` may wait for the server.
    public func setReceiveTimeout(milliseconds: Int) {
        transport.setReceiveTimeout(milliseconds: milliseconds)
    }

    /// Removes a finished call and returns its answer.
    public func finish(_ id: Int32) -> UnaryResponse {
        guard let call = calls.removeValue(forKey: id) else { return UnaryResponse() }
        var r = call.response
        if call.data.count >= 5 { r.message = Array(call.data[5...]) }
        r.body = call.data
        return r
    }

    /// Takes the body bytes received so far for a call that is still open (server streaming).
    public func takeData(_ id: Int32) -> [UInt8] {
        guard let call = calls[id] else { return [] }
        defer { call.data.removeAll(keepingCapacity: true) }
        return call.data
    }

    /// The answer headers and status so far of a call that is still open.
    public func response(_ id: Int32) -> UnaryResponse? { calls[id]?.response }

    public func isDone(_ id: Int32) -> Bool { calls[id]?.done ?? true }

    /// Resets a stream (the client cancels).
    public func reset(_ id: Int32) throws(SocketError) {
        guard let session else { return }
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, UInt32(NGHTTP2_CANCEL.rawValue))
        calls[id]?.done = true
        try send()
    }

    /// Sends whatever is queued without waiting for answers.
    public func flush() throws(SocketError) { try send() }

    private func send() throws(SocketError) {
        guard let session else { return }
        while true {
            var data: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &data)
            if n < 0 { throw .protocolError("mem_send: \(n)") }
            if n == 0 { return }
            var off = 0
            var stalledSince: UInt64?
            while off < n {
                let w = try transport.write(UnsafeRawBufferPointer(start: data! + off, count: n - off))
                if w == 0 {
                    let now = Monotonic.now()
                    if let since = stalledSince, now &- since > timeoutNanoseconds { throw .system(call: "write", errno: ETIMEDOUT) }
                    if stalledSince == nil { stalledSince = now }
                } else {
                    stalledSince = nil
                }
                off += w
            }
        }
    }

    private func receive(tolerateTimeout: Bool = false) throws(SocketError) {
        guard let n = try transport.read(readBuffer, tolerateTimeout: tolerateTimeout) else { return }
        if n == 0 {
            for call in calls.values where !call.done { call.done = true; call.response.resetCode = UInt32(NGHTTP2_CONNECT_ERROR.rawValue) }
            if let session { nghttp2_session_del(session) }
            session = nil
            return
        }
        let rv = nghttp2_session_mem_recv(session, readBuffer.baseAddress!.assumingMemoryBound(to: UInt8.self), n)
        if rv < 0 { throw .protocolError("mem_recv: \(rv)") }
    }

    /// Sends raw bytes on the socket, bypassing nghttp2 (for protocol tests).
    public func sendRaw(_ bytes: [UInt8]) throws(SocketError) {
        var off = 0
        while off < bytes.count {
            let result = bytes.withUnsafeBytes { raw in
                Result { () throws(SocketError) -> Int in try transport.write(UnsafeRawBufferPointer(rebasing: raw[off...])) }
            }
            let n = try result.get()
            if n == 0 { throw .system(call: "write", errno: EAGAIN) }
            off += n
        }
    }

    // MARK: callbacks

    fileprivate func header(_ id: Int32, _ name: String, _ value: String) {
        guard let call = calls[id] else { return }
        if name == ":status" {
            call.response.httpStatus = Int(value) ?? 0
            return
        }
        if call.inTrailers { call.response.trailers.append((name, value)) } else { call.response.headers.append((name, value)) }
        switch name {
        case "grpc-status": call.response.code = Int32(value).flatMap(StatusCode.init(rawValue:)) ?? .unknown
        case "grpc-message": call.response.statusMessage = GRPCHeaders.percentDecode(value)
        case "grpc-status-details-bin":
            if let bytes = Base64.decode(value) { call.response.details = try? RichStatus(decoding: bytes) }
        default: break
        }
    }

    fileprivate func headersDone(_ id: Int32) { calls[id]?.inTrailers = true }
    fileprivate func data(_ id: Int32, _ bytes: UnsafeRawBufferPointer) { calls[id]?.data.append(contentsOf: bytes) }
    fileprivate func closed(_ id: Int32, _ code: UInt32) {
        guard let call = calls[id] else { return }
        if code != 0 && call.response.code == .unknown { call.response.resetCode = code }
        call.done = true
        justFinished.append(id)
    }
    fileprivate func readBody(_ id: Int32, _ buf: UnsafeMutablePointer<UInt8>, _ length: Int, _ flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let call = calls[id] else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let n = min(length, call.body.count - call.bodyOffset)
        if n > 0 {
            call.body.withUnsafeBytes { UnsafeMutableRawPointer(buf).copyMemory(from: $0.baseAddress! + call.bodyOffset, byteCount: n) }
            call.bodyOffset += n
        }
        if call.bodyOffset == call.body.count {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            if !call.endStream { flags.pointee |= NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue }
            call.body = []
        }
        return n
    }
}

private func client(_ userData: UnsafeMutableRawPointer?) -> Client {
    Unmanaged<Client>.fromOpaque(userData!).takeUnretainedValue()
}

private let clientOnHeader: nghttp2_on_header_callback = { _, frame, name, namelen, value, valuelen, _, userData in
    guard let frame else { return 0 }
    client(userData).header(
        frame.pointee.hd.stream_id,
        String(decoding: UnsafeBufferPointer(start: name, count: namelen), as: UTF8.self),
        String(decoding: UnsafeBufferPointer(start: value, count: valuelen), as: UTF8.self))
    return 0
}

private let clientOnFrameRecv: nghttp2_on_frame_recv_callback = { _, frame, userData in
    guard let frame else { return 0 }
    if UInt32(frame.pointee.hd.type) == NGHTTP2_HEADERS.rawValue {
        client(userData).headersDone(frame.pointee.hd.stream_id)
    }
    return 0
}

private let clientOnData: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, len, userData in
    client(userData).data(streamID, UnsafeRawBufferPointer(start: data, count: len))
    return 0
}

private let clientOnStreamClose: nghttp2_on_stream_close_callback = { _, streamID, code, userData in
    client(userData).closed(streamID, code)
    return 0
}

private let clientReadBody: nghttp2_data_source_read_callback = { _, streamID, buf, length, flags, _, userData in
    client(userData).readBody(streamID, buf!, length, flags!)
}
