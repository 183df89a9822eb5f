import CNGHTTP2
import RPC

/// Answers going out: statuses and trailers submitted to nghttp2 (their fields from `GRPCStatusFields`),
/// and the DATA source that feeds it a stream's queued answer bytes.
extension H2ServerSession {
    /// A trailers-only answer with grpc-status, grpc-message and, for service errors, ErrorInfo.
    func submitStatus(_ stream: ServerStream, _ error: RPCError) {
        guard let session else { return }
        let headers = HeaderList(GRPCStatusFields.trailersOnly(error))
        nghttp2_submit_response(session, stream.id, headers.nva, headers.count, nil)
        if stream.startedAt == 0 { stream.startedAt = host.now() }
        shared.finished(stream: stream, code: error.code, reason: error.reason, peer: peer, peerSubject: peerSubject)
    }

    /// A plain HTTP error for requests that are not gRPC at all (wrong method or content type).
    func submitHTTP(_ stream: ServerStream, status: String, message: String) {
        guard let session else { return }
        let headers = HeaderList(GRPCStatusFields.notGRPC(status: status, message: message))
        nghttp2_submit_response(session, stream.id, headers.nva, headers.count, nil)
    }

    /// Trailers for the end of a stream that already sent headers.
    func submitTrailers(_ stream: ServerStream, _ error: RPCError?, session: OpaquePointer) {
        guard let error else {
            nghttp2_submit_trailer(session, stream.id, HeaderList.okTrailers.nva, HeaderList.okTrailers.count)
            return
        }
        let trailers = HeaderList(GRPCStatusFields.trailers(error))
        nghttp2_submit_trailer(session, stream.id, trailers.nva, trailers.count)
    }

    /// After our END_STREAM, a client still sending learns it may stop.
    func sentEndStream(streamID: Int32) {
        guard let session, withStream(streamID, { !$0.state.requestEnded }) == true else { return }
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, UInt32(NGHTTP2_NO_ERROR.rawValue))
    }

    /// nghttp2's DATA source: copies the stream's queued answer bytes; once they are all taken, `StreamState`
    /// says whether more may come, nghttp2 must wait, or the trailers (or END_STREAM) end the stream.
    func readBody(
        streamID: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int,
        flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        guard let session,
            let n = withStream(streamID, { readBody($0, into: buffer, length: length, flags: flags, session: session) })
        else {
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        return n
    }

    private func readBody(
        _ stream: ServerStream, into buffer: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>,
        session: OpaquePointer
    ) -> Int {
        if let body = stream.bodyStream {
            // A body written while it is sent: what is there now, deferred until more comes, EOF at its end.
            let (bytes, ended) = body.take(max: length)
            if !bytes.isEmpty {
                bytes.withUnsafeBytes { UnsafeMutableRawPointer(buffer).copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
            }
            if ended {
                flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
                return bytes.count
            }
            return bytes.isEmpty ? Int(NGHTTP2_ERR_DEFERRED.rawValue) : bytes.count
        }
        let n = min(length, stream.body.count - stream.bodyOffset)
        if n > 0 {
            stream.body.withUnsafeBytes { raw in
                UnsafeMutableRawPointer(buffer).copyMemory(from: raw.baseAddress! + stream.bodyOffset, byteCount: n)
            }
            stream.bodyOffset += n
            stream.writer?.consumed(n)
        }
        guard stream.bodyOffset == stream.body.count else { return n }
        switch stream.state.bodyDrained(tookBytes: n > 0) {
        case .more:
            return n
        case .wait:
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        case .trailers(let error):
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue | NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
            submitTrailers(stream, error, session: session)
            stream.dropBody()
            return n
        case .end:
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            stream.body = []
            return n
        }
    }
}
