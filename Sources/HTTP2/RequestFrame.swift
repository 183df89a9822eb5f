package import CNGHTTP2

/// What a frame a server received means for its request stream; shared by every nghttp2 server session.
package enum RequestFrame {
    /// The request's headers are complete (`endStream`: and it has no body).
    case headers(stream: Int32, endStream: Bool)
    /// The request ended (its last DATA frame, or trailers).
    case ended(stream: Int32)
    /// A second HEADERS frame (trailers) that does not end the request: malformed (RFC 9113 8.1).
    case trailersWithoutEnd(stream: Int32)

    /// Reads a received frame; nil for frames that do not move a request along.
    package init?(_ frame: UnsafePointer<nghttp2_frame>) {
        let id = frame.pointee.hd.stream_id
        let endStream = frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        switch UInt32(frame.pointee.hd.type) {
        case NGHTTP2_HEADERS.rawValue where frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST:
            self = .headers(stream: id, endStream: endStream)
        case NGHTTP2_HEADERS.rawValue where endStream, NGHTTP2_DATA.rawValue where endStream:
            self = .ended(stream: id)  // trailers from the client end its request too
        case NGHTTP2_HEADERS.rawValue:
            self = .trailersWithoutEnd(stream: id)
        default:
            return nil
        }
    }
}
