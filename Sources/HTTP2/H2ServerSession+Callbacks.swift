import CNGHTTP2

// nghttp2 callbacks: they find the session through user_data and never throw into C.

extension H2ServerSession {
    /// The server's nghttp2 callbacks (installed by `NGHTTP2Setup.makeSession`).
    static let nghttp2Callbacks = NGHTTP2Setup.Callbacks(
        onBeginHeaders: onBeginHeaders, onHeader: onHeader, onFrameRecv: onFrameRecv, onDataChunkRecv: onDataChunk,
        onStreamClose: onStreamClose, onFrameSend: onFrameSend)
}

/// Runs `body` with the session behind `userData` without retaining it: nghttp2 calls back only from inside
/// `nghttp2_session_mem_recv`/`send` on the session's own thread, while the session is alive and in use.
@inline(__always)
private func withSession<T>(_ userData: UnsafeMutableRawPointer?, _ body: (H2ServerSession) -> T) -> T {
    Unmanaged<H2ServerSession>.fromOpaque(userData!)._withUnsafeGuaranteedRef { session in body(session) }
}

private let onBeginHeaders: nghttp2_on_begin_headers_callback = { _, frame, userData in
    guard let frame else { return 0 }
    if frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) && frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
        withSession(userData) { $0.beginHeaders(streamID: frame.pointee.hd.stream_id) }
    }
    return 0
}

private let onHeader: nghttp2_on_header_callback = { _, frame, name, namelen, value, valuelen, _, userData in
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
    withSession(userData) {
        $0.header(
            streamID: frame.pointee.hd.stream_id,
            name: UnsafeBufferPointer(start: name, count: namelen),
            value: UnsafeBufferPointer(start: value, count: valuelen),
            trailer: frame.pointee.headers.cat != NGHTTP2_HCAT_REQUEST)
    }
    return 0
}

private let onFrameRecv: nghttp2_on_frame_recv_callback = { _, frame, userData in
    switch frame.flatMap(RequestFrame.init) {
    case .headers(let id, let endStream): withSession(userData) { $0.headersComplete(streamID: id, endStream: endStream) }
    case .ended(let id): withSession(userData) { $0.requestEnded(streamID: id) }
    case .trailersWithoutEnd(let id): withSession(userData) { $0.trailersWithoutEnd(streamID: id) }
    case nil: break
    }
    return 0
}

private let onDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, len, userData in
    withSession(userData) { $0.data(streamID: streamID, bytes: UnsafeRawBufferPointer(start: data, count: len)) }
    return 0
}

private let onStreamClose: nghttp2_on_stream_close_callback = { _, streamID, _, userData in
    withSession(userData) { $0.streamClosed(streamID: streamID) }
    return 0
}

private let onFrameSend: nghttp2_on_frame_send_callback = { _, frame, userData in
    guard let frame else { return 0 }
    let type = UInt32(frame.pointee.hd.type)
    if (type == NGHTTP2_HEADERS.rawValue || type == NGHTTP2_DATA.rawValue),
        frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
    {
        withSession(userData) { $0.sentEndStream(streamID: frame.pointee.hd.stream_id) }
    }
    return 0
}

/// The DATA source of every answer body (`nghttp2_data_provider.read_callback`).
let readBodyCallback: nghttp2_data_source_read_callback = { _, streamID, buf, length, flags, _, userData in
    withSession(userData) { $0.readBody(streamID: streamID, into: buf!, length: length, flags: flags!) }
}
