import CNGHTTP2
import RPC

/// Plain HTTP exchanges on an HTTP/2 session: a request that is not a gRPC call, on a server with an
/// `HTTPService` (the side ports), is one body in and one answer out, with the same limits as HTTP/1.1.
extension H2ServerSession {
    /// Judges an exchange's header block: limits and the service's precheck decide the answer now, which
    /// goes out once the request has ended (its body is read and dropped meanwhile, within the request
    /// timeout: a client still sending is not cut off mid-request); otherwise the body is read for the handler.
    func exchangeVerdict(_ stream: ServerStream, _ http: HTTPService) -> StreamState.Verdict {
        if stream.head.tooLarge {
            stream.response = .headersTooLarge
        } else if draining {
            stream.response = .shuttingDown
        } else {
            let request = exchangeRequest(stream)
            if let early = http.early(request, headerBytes: stream.head.headerBytes) {
                stream.response = early
            } else {
                stream.exchangeState.request = request  // built once, for the precheck and the handler
            }
        }
        stream.capDeadline = stream.startedAt &+ http.requestTimeoutNanoseconds
        return .route(.exchange)
    }

    /// The request as the service sees it (the body is added at dispatch).
    func exchangeRequest(_ stream: ServerStream) -> HTTPRequest {
        var headers = stream.head.metadata
        if !stream.head.contentType.isEmpty { headers.append(("content-type", stream.head.contentType)) }
        // Read into the head as gRPC's deadline, it is gRPC-Web's too: the service must see it.
        if !stream.head.timeout.isEmpty { headers.append(("grpc-timeout", stream.head.timeout)) }
        // Searched as bytes: a Character search walks grapheme boundaries (about 8,000 instructions for a method's path).
        var full = stream.head.path
        let query = full.withUTF8 { $0.firstIndex(of: UInt8(ascii: "?")) }
        let path = query.map { String(full.utf8.prefix($0))! } ?? full
        var request = HTTPRequest(method: stream.head.method, path: path, headers: headers, body: [], peer: peer, httpVersion: "HTTP/2")
        request.timers = RequestTimers(host: host)
        return request
    }

    /// A chunk of an exchange's body: kept within the service's limit (over it: 413 at once) and the
    /// connection's buffer budget.
    func exchangeData(_ stream: ServerStream, _ bytes: UnsafeRawBufferPointer) {
        guard let http = shared.configuration.http, stream.response == nil else { return }  // answered already: dropped
        let state = stream.exchangeState
        if state.requestBody.count + bytes.count > http.maxBodyBytes {
            stream.response = .tooLarge
            act(stream, stream.state.respond())
            return
        }
        state.requestBody.append(contentsOf: bytes)
        account(stream, state.requestBody.count)
    }

    /// The whole request goes to the service; its answer comes back on the host's thread.
    func dispatchExchange(_ stream: ServerStream) {
        guard let http = shared.configuration.http, stream.response == nil else {
            act(stream, stream.state.respond())
            return
        }
        let state = stream.exchangeState
        var request = state.request ?? exchangeRequest(stream)
        state.request = nil
        request.body = state.requestBody
        releaseBuffer(stream)
        stream.state.handedOver()
        let cap = shared.pipeline.maxDeadlineNanoseconds
        stream.capDeadline = cap > 0 ? host.now() &+ UInt64(cap) : 0
        let id = stream.id
        http.handler(request) { [self] response in
            if self.host.inHost {
                self.completeExchange(streamID: id, response)
            } else {
                self.host.execute { self.completeExchange(streamID: id, response) }
            }
        }
    }

    private func completeExchange(streamID: Int32, _ response: HTTPResponse) {
        checkHost()
        guard !closed, let stream = stream(streamID) else { return }
        stream.response = response
        act(stream, stream.state.succeed())
    }

    /// Submits the response the stream holds: status, content type and length, the extra fields, then the
    /// body and END_STREAM (no body for HEAD).
    func submitResponse(_ stream: ServerStream) {
        guard let session, let response = stream.response else { return }
        stream.response = nil
        if response.stream == nil, response.headers.isEmpty, response.status == 200, !response.body.isEmpty, stream.head.method != "HEAD",
            let common = Self.okHeaders(response.contentType)
        {
            // The usual RPC answer: a block laid out once (over HTTP/2 the body's end is END_STREAM; no content-length).
            stream.body = response.body
            stream.bodyOffset = 0
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readBodyCallback)
            nghttp2_submit_response(session, stream.id, common.nva, common.count, &provider)
            return
        }
        var fields: [(String, String)] = [(":status", String(response.status)), ("content-type", response.contentType)]
        if response.stream == nil { fields.append(("content-length", String(response.body.count))) }
        for (name, value) in response.headers {
            let lower = name.lowercased()
            switch lower {
            case "content-type", "content-length", "connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection":
                continue
            default:
                fields.append((lower, value))
            }
        }
        let headers = HeaderList(fields)
        if let body = response.stream {
            stream.exchangeState.bodyStream = body
            let id = stream.id
            body.attach { [self] in
                host.execute {
                    guard let s = self.stream(id), s.bodyStream === body, let session = self.session else { return }
                    nghttp2_session_resume_data(session, id)
                    self.output.outputPending()
                }
            }
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readBodyCallback)
            nghttp2_submit_response(session, stream.id, headers.nva, headers.count, &provider)
            return
        }
        if response.body.isEmpty || stream.head.method == "HEAD" {
            nghttp2_submit_response(session, stream.id, headers.nva, headers.count, nil)
            return
        }
        stream.body = response.body
        stream.bodyOffset = 0
        var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readBodyCallback)
        nghttp2_submit_response(session, stream.id, headers.nva, headers.count, &provider)
    }
}

extension H2ServerSession {
    private static let okProto = HeaderList([(":status", "200"), ("content-type", "application/proto")], lasting: true)
    private static let okJSON = HeaderList([(":status", "200"), ("content-type", "application/json")], lasting: true)
    private static let okGRPCWebProto = HeaderList([(":status", "200"), ("content-type", "application/grpc-web+proto")], lasting: true)

    /// The header block of a 200 answer of a common RPC content type, laid out once.
    static func okHeaders(_ contentType: String) -> HeaderList? {
        switch contentType {
        case "application/proto": okProto
        case "application/json": okJSON
        case "application/grpc-web+proto": okGRPCWebProto
        default: nil
        }
    }
}

extension HTTPResponse {
    /// The server's own answer to an exchange that ends with `error` (its body too large for the connection's
    /// budget, its deadline, shutting down).
    static func answering(_ error: RPCError, dispatched: Bool) -> HTTPResponse {
        switch error.code {
        case .deadlineExceeded: dispatched ? .plain(504, "the handler did not answer in time") : .requestTimeout
        case .resourceExhausted: .tooLarge
        case .unavailable: .shuttingDown
        default: .plain(500, error.message)
        }
    }
}
