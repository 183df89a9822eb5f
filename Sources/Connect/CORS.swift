import HTTP2

/// CORS for browsers that call the port from another origin (`--cors-origins`; `*` allows any, empty: no CORS
/// headers at all): a precheck of its own, before any protocol looks at the request.
struct CORS: Sendable {
    let origins: [String]

    /// The origin to echo when `origin` may call, else nil.
    func allowed(_ origin: String?) -> String? {
        guard let origin, !origins.isEmpty else { return nil }
        if origins.contains("*") { return origin }
        return origins.contains(origin) ? origin : nil
    }

    /// The answer to an `OPTIONS` preflight: 204 with the allowed method and headers, or 403.
    func preflight(_ request: HTTPRequest) -> HTTPResponse {
        guard let origin = allowed(request.header("origin")), request.header("access-control-request-method") != nil else {
            return HTTPResponse(status: 403, text: "CORS: origin not allowed (--cors-origins)\n")
        }
        var headers: [(String, String)] = [
            ("Access-Control-Allow-Origin", origin), ("Vary", "Origin"), ("Access-Control-Allow-Methods", "POST"),
            ("Access-Control-Max-Age", "7200"),
        ]
        if let asked = request.header("access-control-request-headers") { headers.append(("Access-Control-Allow-Headers", asked)) }
        return HTTPResponse(status: 204, headers: headers)
    }

    /// `response` with the CORS headers an allowed `origin` needs to read it.
    func decorate(_ response: HTTPResponse, origin: String?) -> HTTPResponse {
        guard let origin = allowed(origin) else { return response }
        var r = response
        r.headers += [
            ("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
            ("Access-Control-Expose-Headers", "grpc-status, grpc-message, grpc-status-details-bin, content-type"),
        ]
        return r
    }
}
