import CCurl

/// One exchange on a libcurl easy handle: the request's options, the answer as it arrives, and the one call
/// of its completion. Loop-confined with its `CurlEngine`.
final class CurlTransfer {
    let easy: UnsafeMutableRawPointer
    private var fields: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    private var completion: ((Result<HTTPClientResponse, HTTPClientError>) -> Void)?
    private let maxBytes: Int
    private var body: [UInt8] = []
    private var headers: [(name: String, value: String)] = []
    private var tooLarge = false

    init(
        _ request: HTTPClientRequest, configuration: HTTPClientConfiguration,
        completion: @escaping (Result<HTTPClientResponse, HTTPClientError>) -> Void
    ) throws(HTTPClientError) {
        guard let easy = curl_easy_init() else { throw .transport("curl_easy_init failed") }
        self.easy = easy
        self.completion = completion
        self.maxBytes = configuration.maxResponseBytes
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        try configure(request, configuration)
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(fields)
        errorBuffer.deallocate()
    }

    private func configure(_ request: HTTPClientRequest, _ configuration: HTTPClientConfiguration) throws(HTTPClientError) {
        var rc = CURLE_OK
        func set(_ code: CURLcode) { if rc == CURLE_OK { rc = code } }
        set(ccurl_easy_string(easy, CURLOPT_URL, request.url))
        set(ccurl_easy_string(easy, CURLOPT_PROTOCOLS_STR, configuration.allowCleartext ? "http,https" : "https"))
        set(ccurl_easy_long(easy, CURLOPT_NOSIGNAL, 1))
        set(ccurl_easy_long(easy, CURLOPT_FOLLOWLOCATION, 0))
        set(ccurl_easy_long(easy, CURLOPT_TIMEOUT_MS, request.timeoutMilliseconds))
        set(ccurl_easy_long(easy, CURLOPT_CONNECTTIMEOUT_MS, min(configuration.connectTimeoutMilliseconds, request.timeoutMilliseconds)))
        set(ccurl_easy_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS)))
        set(ccurl_easy_long(easy, CURLOPT_SSL_VERIFYPEER, 1))
        set(ccurl_easy_long(easy, CURLOPT_SSL_VERIFYHOST, 2))
        if let extra = configuration.extraCAPath {
            set(ccurl_easy_string(easy, CURLOPT_CAINFO, extra))
            if let directory = configuration.systemCADirectory { set(ccurl_easy_string(easy, CURLOPT_CAPATH, directory)) }
        } else {
            if let bundle = configuration.systemCABundle { set(ccurl_easy_string(easy, CURLOPT_CAINFO, bundle)) }
            if let directory = configuration.systemCADirectory { set(ccurl_easy_string(easy, CURLOPT_CAPATH, directory)) }
        }
        set(ccurl_easy_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer))
        let me = Unmanaged.passUnretained(self).toOpaque()
        set(ccurl_easy_write(easy, CURLOPT_WRITEFUNCTION, curlWriteCallback))
        set(ccurl_easy_pointer(easy, CURLOPT_WRITEDATA, me))
        set(ccurl_easy_write(easy, CURLOPT_HEADERFUNCTION, curlHeaderCallback))
        set(ccurl_easy_pointer(easy, CURLOPT_HEADERDATA, me))

        switch request.method {
        case "GET" where request.body.isEmpty:
            set(ccurl_easy_long(easy, CURLOPT_HTTPGET, 1))
        case "HEAD":
            set(ccurl_easy_long(easy, CURLOPT_NOBODY, 1))
        default:
            if request.method != "POST" { set(ccurl_easy_string(easy, CURLOPT_CUSTOMREQUEST, request.method)) }
            if request.method == "POST" || !request.body.isEmpty {
                set(ccurl_easy_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count)))
                // COPYPOSTFIELDS copies the bytes: the request may go away before libcurl sends them.
                request.body.withUnsafeBytes { bytes in
                    let base = bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
                    set(ccurl_easy_pointer(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: base)))
                }
            }
        }

        var names = Set<String>()
        for field in request.headers {
            names.insert(field.name.lowercased())
            fields = curl_slist_append(fields, "\(field.name): \(field.value)")
        }
        // libcurl would add these on its own: no form content type, no 100-continue round trip.
        if !names.contains("content-type") { fields = curl_slist_append(fields, "Content-Type:") }
        fields = curl_slist_append(fields, "Expect:")
        if !names.contains("user-agent") { fields = curl_slist_append(fields, "User-Agent: \(configuration.userAgent)") }
        set(ccurl_easy_list(easy, CURLOPT_HTTPHEADER, fields))
        if rc != CURLE_OK { throw .invalidRequest(String(cString: curl_easy_strerror(rc))) }
    }

    // MARK: Arriving answer

    fileprivate func received(_ bytes: UnsafeRawBufferPointer) -> Int {
        if body.count + bytes.count > maxBytes {
            tooLarge = true
            return 0  // libcurl ends the transfer with CURLE_WRITE_ERROR
        }
        body.append(contentsOf: bytes)
        return bytes.count
    }

    fileprivate func receivedHeader(_ bytes: UnsafeRawBufferPointer) -> Int {
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x0A || bytes[end - 1] == 0x0D { end -= 1 }
        // Bytes, not Characters: "\r\n" is one Character.
        let line = Substring(decoding: UnsafeRawBufferPointer(rebasing: bytes[0..<end]), as: UTF8.self)
        if line.hasPrefix("HTTP/") {
            headers.removeAll()  // a new answer (after 100 Continue): only the final one counts
        } else if let colon = line.firstIndex(of: ":") {
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingSpaces()
            headers.append((name, value))
        }
        return bytes.count
    }

    // MARK: The end

    /// Answers the completion from libcurl's result.
    func finish(code: CURLcode) {
        guard let completion else { return }
        self.completion = nil
        completion(result(code))
    }

    /// Answers `shutdown`.
    func abandon() {
        guard let completion else { return }
        self.completion = nil
        completion(.failure(.shutdown))
    }

    private func result(_ code: CURLcode) -> Result<HTTPClientResponse, HTTPClientError> {
        if code == CURLE_OK {
            var status = 0
            _ = ccurl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
            var version = 0
            _ = ccurl_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
            return .success(
                HTTPClientResponse(status: status, headers: headers, body: body, httpVersion: version == Int(CURL_HTTP_VERSION_2_0) ? 2 : 1))
        }
        if tooLarge { return .failure(.responseTooLarge(limit: maxBytes)) }
        let detail = errorBuffer.pointee != 0 ? String(cString: errorBuffer) : String(cString: curl_easy_strerror(code))
        switch code {
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT: return .failure(.invalidRequest(detail))
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: return .failure(.resolve(detail))
        case CURLE_COULDNT_CONNECT: return .failure(.connect(detail))
        case CURLE_OPERATION_TIMEDOUT: return .failure(.timeout)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM,
            CURLE_SSL_CIPHER, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS:
            return .failure(.tls(detail))
        default: return .failure(.transport(detail))
        }
    }
}

extension Substring {
    fileprivate func trimmingSpaces() -> String {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}

private func curlWriteCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ me: UnsafeMutableRawPointer?) -> Int {
    guard let me else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(me).takeUnretainedValue()
    return transfer.received(UnsafeRawBufferPointer(start: data, count: size * count))
}

private func curlHeaderCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ me: UnsafeMutableRawPointer?) -> Int {
    guard let me else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(me).takeUnretainedValue()
    return transfer.receivedHeader(UnsafeRawBufferPointer(start: data, count: size * count))
}
