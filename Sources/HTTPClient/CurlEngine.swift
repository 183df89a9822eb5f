import CCurl
import CSystem
import Glibc
import IO

/// The loop side of `HTTPClient`: one libcurl multi handle whose sockets and timer live on the client's loop
/// (libcurl's `multi_socket` interface). Loop-confined: reached only through `LoopBound`.
final class CurlEngine {
    private let loop: EventLoop
    private let configuration: HTTPClientConfiguration
    private var multi: UnsafeMutableRawPointer?
    private var transfers: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    private var sockets: [Int32: CurlSocket] = [:]
    private var timer: Int?

    init(loop: EventLoop, configuration: HTTPClientConfiguration) throws(HTTPClientError) {
        self.loop = loop
        self.configuration = configuration
        guard let multi = curl_multi_init() else { throw .transport("curl_multi_init failed") }
        self.multi = multi
        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = ccurl_multi_socket_callback(multi, curlSocketCallback)
        _ = ccurl_multi_pointer(multi, CURLMOPT_SOCKETDATA, me)
        _ = ccurl_multi_timer_callback(multi, curlTimerCallback)
        _ = ccurl_multi_pointer(multi, CURLMOPT_TIMERDATA, me)
        _ = ccurl_multi_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, configuration.maxConnections)
        _ = ccurl_multi_long(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX)
    }

    /// Starts one exchange; `completion` runs on this loop once it ends.
    func start(_ request: HTTPClientRequest, completion: @escaping (Result<HTTPClientResponse, HTTPClientError>) -> Void) {
        loop.assertInEventLoop("CurlEngine.start")
        guard let multi else {
            completion(.failure(.shutdown))
            return
        }
        let transfer: CurlTransfer
        do {
            transfer = try CurlTransfer(request, configuration: configuration, completion: completion)
        } catch {
            completion(.failure(error))
            return
        }
        transfers[transfer.easy] = transfer
        let rc = curl_multi_add_handle(multi, transfer.easy)
        if rc != CURLM_OK {
            transfers[transfer.easy] = nil
            transfer.finish(code: CURLE_FAILED_INIT)
        }
    }

    /// Fails every open exchange with `shutdown` and frees libcurl's state.
    func close() {
        loop.assertInEventLoop("CurlEngine.close")
        guard let multi else { return }
        for (easy, transfer) in transfers {
            curl_multi_remove_handle(multi, easy)
            transfer.abandon()
        }
        transfers.removeAll()
        if let timer { loop.cancelTimer(timer) }
        timer = nil
        curl_multi_cleanup(multi)
        self.multi = nil
        for fd in sockets.keys { loop.deregister(fd) }
        sockets.removeAll()
    }

    // MARK: libcurl's requests (called back from inside curl_multi_* on this loop)

    /// libcurl wants `fd` watched for `what` (CURL_POLL_IN / OUT / INOUT), or no more (CURL_POLL_REMOVE).
    fileprivate func watch(_ fd: Int32, _ what: Int32) {
        if what == CURL_POLL_REMOVE {
            if sockets.removeValue(forKey: fd) != nil { loop.deregister(fd) }
            return
        }
        var events: UInt32 = 0
        if what & CURL_POLL_IN != 0 { events |= EPOLLIN.rawValue }
        if what & CURL_POLL_OUT != 0 { events |= EPOLLOUT.rawValue }
        if sockets[fd] != nil {
            loop.modify(fd, events: events)
        } else {
            let socket = CurlSocket(fd: fd, engine: self)
            sockets[fd] = socket
            loop.register(fd, socket, events: events)
        }
    }

    /// libcurl wants to be called after `milliseconds` (-1: no timer). Never acted on inside the callback.
    fileprivate func setTimer(_ milliseconds: Int) {
        if let timer { loop.cancelTimer(timer) }
        timer = nil
        guard milliseconds >= 0 else { return }
        timer = loop.schedule(afterNanoseconds: Int64(milliseconds) * 1_000_000) { [unowned self] in
            self.timer = nil
            self.act(on: -1, flags: 0)  // CURL_SOCKET_TIMEOUT
        }
    }

    /// Tells libcurl that `fd` is ready (or its timer is due, fd -1), then ends what finished.
    func act(on fd: Int32, flags: Int32) {
        guard let multi else { return }
        var running: Int32 = 0
        _ = curl_multi_socket_action(multi, fd, flags, &running)
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = ccurl_message_result(message)
            curl_multi_remove_handle(multi, easy)
            transfers.removeValue(forKey: easy)?.finish(code: code)
        }
    }
}

/// One socket libcurl asked the loop to watch.
final class CurlSocket: EventHandler {
    let fd: Int32
    unowned let engine: CurlEngine

    init(fd: Int32, engine: CurlEngine) {
        self.fd = fd
        self.engine = engine
    }

    func handle(events: UInt32) {
        var flags: Int32 = 0
        if events & EPOLLIN.rawValue != 0 { flags |= CURL_CSELECT_IN }
        if events & EPOLLOUT.rawValue != 0 { flags |= CURL_CSELECT_OUT }
        if events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 { flags |= CURL_CSELECT_ERR }
        engine.act(on: fd, flags: flags)
    }
}

private func curlSocketCallback(
    _ easy: UnsafeMutableRawPointer?, _ fd: curl_socket_t, _ what: Int32, _ engine: UnsafeMutableRawPointer?,
    _ socketData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let engine else { return -1 }
    Unmanaged<CurlEngine>.fromOpaque(engine).takeUnretainedValue().watch(fd, what)
    return 0
}

private func curlTimerCallback(_ multi: UnsafeMutableRawPointer?, _ milliseconds: Int, _ engine: UnsafeMutableRawPointer?) -> Int32 {
    guard let engine else { return -1 }
    Unmanaged<CurlEngine>.fromOpaque(engine).takeUnretainedValue().setTimer(milliseconds)
    return 0
}
