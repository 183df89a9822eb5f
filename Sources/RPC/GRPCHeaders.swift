import ProtoWire

/// Parsing and formatting of gRPC's header values.
public enum GRPCHeaders {
    /// `grpc-timeout`: 1 to 8 ASCII digits and a unit (H, M, S, m, u, n), as nanoseconds.
    public static func parseTimeout(_ value: String) -> Int64? {
        let utf8 = Array(value.utf8)
        guard utf8.count >= 2, utf8.count <= 9 else { return nil }
        var amount: Int64 = 0
        for c in utf8.dropLast() {
            guard c >= 0x30, c <= 0x39 else { return nil }
            amount = amount * 10 + Int64(c - 0x30)
        }
        let perUnit: Int64
        switch utf8.last! {
        case UInt8(ascii: "H"): perUnit = 3_600_000_000_000
        case UInt8(ascii: "M"): perUnit = 60_000_000_000
        case UInt8(ascii: "S"): perUnit = 1_000_000_000
        case UInt8(ascii: "m"): perUnit = 1_000_000
        case UInt8(ascii: "u"): perUnit = 1_000
        case UInt8(ascii: "n"): perUnit = 1
        default: return nil
        }
        let (product, overflow) = amount.multipliedReportingOverflow(by: perUnit)
        return overflow ? Int64.max : product
    }

    /// Formats a timeout for `grpc-timeout` (at most 8 digits).
    public static func formatTimeout(nanoseconds: Int64) -> String {
        let units: [(Int64, String)] = [(1, "n"), (1_000, "u"), (1_000_000, "m"), (1_000_000_000, "S"), (60_000_000_000, "M"), (3_600_000_000_000, "H")]
        for (size, unit) in units {
            let amount = (nanoseconds + size - 1) / size
            if amount < 100_000_000 { return "\(max(amount, 1))\(unit)" }
        }
        return "99999999H"
    }

    /// The fields that carry `error` as a gRPC status: `grpc-status`, `grpc-message` and, for service errors,
    /// `grpc-status-details-bin` (their `google.rpc.Status` with ErrorInfo, base64). The one encoding of a status for
    /// gRPC's trailers (and trailers-only answers) on HTTP/2 and for gRPC-Web's headers and trailer frame.
    public static func statusFields(_ error: RPCError) -> [(String, String)] {
        var fields = [("grpc-status", String(error.code.rawValue)), ("grpc-message", grpcMessage(error.message))]
        if let rich = error.richStatus { fields.append(("grpc-status-details-bin", Base64.encode(rich.encoded()))) }
        return fields
    }

    /// The most of a status message sent back, in UTF-8 bytes before percent-encoding.
    public static let maxMessageBytes = 1024

    /// `message` cut to `maxBytes` UTF-8 bytes on a character boundary (with `…` when cut), so a
    /// status never echoes unbounded input.
    public static func capped(_ message: String, maxBytes: Int = maxMessageBytes) -> String {
        guard message.utf8.count > maxBytes else { return message }
        let ellipsis = "…"
        var out = ""
        var used = ellipsis.utf8.count
        for ch in message {
            let n = ch.utf8.count
            guard used + n <= maxBytes else { break }
            out.append(ch)
            used += n
        }
        return out + ellipsis
    }

    /// The `grpc-message` value: the capped message, percent-encoded.
    public static func grpcMessage(_ message: String) -> String { percentEncode(capped(message)) }

    /// `grpc-message`: percent-encodes bytes outside printable ASCII and `%`.
    public static func percentEncode(_ s: String) -> String {
        var out = [UInt8]()
        out.reserveCapacity(s.utf8.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for b in s.utf8 {
            if b >= 0x20, b <= 0x7E, b != UInt8(ascii: "%") {
                out.append(b)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 15)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Reverses `percentEncode`, leaving malformed escapes as they are.
    public static func percentDecode(_ s: String) -> String {
        let bytes = Array(s.utf8)
        var out = [UInt8]()
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count, let h = hexValue(bytes[i + 1]), let l = hexValue(bytes[i + 2]) {
                out.append(h << 4 | l)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x41...0x46: c - 0x41 + 10
        case 0x61...0x66: c - 0x61 + 10
        default: nil
        }
    }

    /// True for `application/grpc` and `application/grpc+proto` (any case, optionally with `;params`); other codecs
    /// (`application/grpc+json`) are false: billingd speaks protobuf only (docs/ERRORS.md).
    public static func isGRPCContentType(_ value: String) -> Bool {
        if value == "application/grpc" || value == "application/grpc+proto" { return true }
        let lower = value.lowercased()
        guard lower.hasPrefix("application/grpc") else { return false }
        let rest = lower.dropFirst("application/grpc".count)
        guard let first = rest.first else { return true }
        if first == ";" { return true }
        if rest.hasPrefix("+proto") { return rest.count == 6 || rest.dropFirst(6).first == ";" }
        return false
    }
}
