import CNGHTTP2

/// The nghttp2 set-up every session shares, written once: the callbacks table, the options, the session
/// itself (server or client, optionally on a `billing_h2_pool`) and the first SETTINGS with the windows.
/// `H2ServerSession` and `Client` differ only in the values they pass. Runs once per session, never per call.
enum NGHTTP2Setup {
    /// Which end of the connection the session plays.
    enum Role {
        case server
        case client
    }

    /// The session callbacks to install; nil ones stay unset (nghttp2's default).
    struct Callbacks {
        var onBeginHeaders: nghttp2_on_begin_headers_callback?
        var onHeader: nghttp2_on_header_callback?
        var onFrameRecv: nghttp2_on_frame_recv_callback?
        var onDataChunkRecv: nghttp2_on_data_chunk_recv_callback?
        var onStreamClose: nghttp2_on_stream_close_callback?
        var onFrameSend: nghttp2_on_frame_send_callback?
    }

    /// nghttp2 options (`nghttp2_option_set_*`); all off by default, as in a session made without options.
    struct Options {
        /// `nghttp2_option_set_no_http_messaging`: no HTTP semantics checks on fields and bodies.
        var noHTTPMessaging = false
        /// `nghttp2_option_set_no_rfc9113_leading_and_trailing_ws_validation`: field values with leading or
        /// trailing whitespace are delivered instead of failing the stream.
        var noLeadingAndTrailingWhitespaceValidation = false
        /// `nghttp2_option_set_no_closed_streams`: closed streams are not kept for priorities.
        var noClosedStreams = false
    }

    /// What the first SETTINGS frame announces beyond the stream window every session sets.
    struct Settings {
        /// SETTINGS_MAX_CONCURRENT_STREAMS, when announced.
        var maxConcurrentStreams: UInt32?
        /// SETTINGS_MAX_HEADER_LIST_SIZE, when announced.
        var maxHeaderListBytes: UInt32?
    }

    /// SETTINGS_INITIAL_WINDOW_SIZE of every session: what a peer may send on one stream before an update.
    static let streamWindow: UInt32 = 1 << 20
    /// The receive window of every session's connection (set locally; nghttp2 sends the WINDOW_UPDATE).
    static let connectionWindow: Int32 = 16 << 20

    /// A new nghttp2 session for `role`, its callbacks reaching `userData`, allocating from `pool` when given
    /// (otherwise from malloc), with the first SETTINGS and the connection window queued; nil when nghttp2
    /// cannot allocate it. The caller owns the session (`nghttp2_session_del`) and frees `pool` after it.
    static func makeSession(
        _ role: Role, callbacks: Callbacks, options: Options, settings: Settings,
        userData: UnsafeMutableRawPointer, pool: UnsafeMutablePointer<billing_h2_pool>? = nil
    ) -> OpaquePointer? {
        var table: OpaquePointer?
        guard nghttp2_session_callbacks_new(&table) == 0 else { return nil }
        defer { nghttp2_session_callbacks_del(table) }
        install(callbacks, on: table)
        var option: OpaquePointer?
        guard nghttp2_option_new(&option) == 0 else { return nil }
        defer { nghttp2_option_del(option) }
        if options.noHTTPMessaging { nghttp2_option_set_no_http_messaging(option, 1) }
        if options.noLeadingAndTrailingWhitespaceValidation { nghttp2_option_set_no_rfc9113_leading_and_trailing_ws_validation(option, 1) }
        if options.noClosedStreams { nghttp2_option_set_no_closed_streams(option, 1) }
        // nghttp2 copies the `nghttp2_mem` (its user data is the pool); a nil one means malloc.
        var session: OpaquePointer?
        switch (role, pool) {
        case (.server, let pool?): nghttp2_session_server_new3(&session, table, userData, option, &pool.pointee.mem)
        case (.server, nil): nghttp2_session_server_new2(&session, table, userData, option)
        case (.client, let pool?): nghttp2_session_client_new3(&session, table, userData, option, &pool.pointee.mem)
        case (.client, nil): nghttp2_session_client_new2(&session, table, userData, option)
        }
        guard let session else { return nil }
        submitSettings(settings, on: session)
        return session
    }

    /// Sets every callback of `callbacks` on nghttp2's table (setting nil is nghttp2's default).
    private static func install(_ callbacks: Callbacks, on table: OpaquePointer?) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(table, callbacks.onBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(table, callbacks.onHeader)
        nghttp2_session_callbacks_set_on_frame_recv_callback(table, callbacks.onFrameRecv)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(table, callbacks.onDataChunkRecv)
        nghttp2_session_callbacks_set_on_stream_close_callback(table, callbacks.onStreamClose)
        nghttp2_session_callbacks_set_on_frame_send_callback(table, callbacks.onFrameSend)
    }

    /// Queues the first SETTINGS (in identifier order: concurrent streams, stream window, header list) and
    /// raises the connection's receive window.
    private static func submitSettings(_ settings: Settings, on session: OpaquePointer) {
        var entries: [nghttp2_settings_entry] = []
        entries.reserveCapacity(3)
        if let streams = settings.maxConcurrentStreams {
            entries.append(nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: streams))
        }
        entries.append(nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: streamWindow))
        if let bytes = settings.maxHeaderListBytes {
            entries.append(nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: bytes))
        }
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
        nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, connectionWindow)
    }
}
