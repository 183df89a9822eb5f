import ProtoWire
import RPC

/// gRPC-Web's body (grpc/grpc doc/PROTOCOL-WEB.md): the gRPC length-prefixed messages, then one frame with
/// flag 0x80 holding the trailers as HTTP/1 header lines; `-text` is the base64 of the same bytes.
enum GRPCWeb {
    /// The one request message of a unary call from its body (already base64-decoded for `-text`), and
    /// whether it is compressed (flag 1: with the request's `grpc-encoding`).
    static func requestMessage(_ body: [UInt8], maxMessageBytes: Int) throws(RPCError) -> (message: [UInt8], compressed: Bool) {
        guard body.count >= MessageFraming.prefixSize else {
            throw RPCError(code: .internal, message: "the body is not a length-prefixed gRPC-Web message")
        }
        guard body[0] & 0x80 == 0 else { throw RPCError(code: .internal, message: "the body holds a trailer frame") }
        let length = Int(body[1]) << 24 | Int(body[2]) << 16 | Int(body[3]) << 8 | Int(body[4])
        guard length <= maxMessageBytes else { throw .messageTooLarge(size: length, limit: maxMessageBytes) }
        guard body.count == MessageFraming.prefixSize + length else {
            throw RPCError(code: .internal, message: "the body is not exactly one length-prefixed message")
        }
        return (Array(body[MessageFraming.prefixSize...]), body[0] & 1 == 1)
    }

    /// Decodes a `-text` body: base64 (padded chunks may follow one another, as streaming clients send them).
    static func decodeText(_ body: [UInt8]) -> [UInt8]? {
        var out: [UInt8] = []
        var start = 0
        var i = 0
        // Split after each run of padding: every chunk is valid base64 on its own.
        while i < body.count {
            if body[i] == UInt8(ascii: "=") {
                var end = i
                while end < body.count && body[end] == UInt8(ascii: "=") { end += 1 }
                guard let part = body[start..<end].withUnsafeBytes({ Base64.decode($0) }) else { return nil }
                out += part
                start = end
                i = end
                continue
            }
            i += 1
        }
        if start < body.count {
            guard let part = body[start...].withUnsafeBytes({ Base64.decode($0) }) else { return nil }
            out += part
        }
        return out
    }

    /// The trailer frame for `error` (nil: OK).
    static func trailerFrame(_ error: RPCError?) -> [UInt8] {
        var text = ""
        for (name, value) in error.map(GRPCHeaders.statusFields) ?? [("grpc-status", "0")] { text += name + ":" + value + "\r\n" }
        let bytes = Array(text.utf8)
        let n = bytes.count
        return [0x80, UInt8(truncatingIfNeeded: n >> 24), UInt8(truncatingIfNeeded: n >> 16), UInt8(truncatingIfNeeded: n >> 8), UInt8(truncatingIfNeeded: n)]
            + bytes
    }
}
