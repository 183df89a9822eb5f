/// What a request must be before it is handed to libcurl: an absolute URL with an allowed scheme, a method
/// token, and fields without line breaks (a field with CR or LF could add headers of its own).
enum HTTPClientRequestCheck {
    static func problem(_ request: HTTPClientRequest, allowCleartext: Bool) -> String? {
        let url = request.url
        if url.hasPrefix("https://") {
            if url.count == 8 { return "URL has no host" }
        } else if url.hasPrefix("http://") {
            if !allowCleartext { return "http:// URLs are refused; use https://" }
            if url.count == 7 { return "URL has no host" }
        } else {
            return "URL must start with https://"
        }
        if url.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) { return "URL holds a space or a control character" }
        if request.method.isEmpty || !request.method.utf8.allSatisfy(isTokenByte) { return "method is not an HTTP token" }
        for field in request.headers {
            if field.name.isEmpty || !field.name.utf8.allSatisfy(isTokenByte) { return "header name is not an HTTP token" }
            if field.value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) { return "header \(field.name) holds a line break" }
        }
        if request.timeoutMilliseconds <= 0 { return "time-out must be positive" }
        return nil
    }

    /// RFC 9110 tchar.
    private static func isTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: "!#$%&'*+-.^_`|~".utf8.contains(b)
        }
    }
}
