import HTTP2
import ProtoJSON
import ProtoWire
import RPC
import Synchronization

/// Connect and gRPC-Web calls, each through the port's one `CallPipeline` (request id, the interceptors, the
/// deadline rule, the in-flight count, the call record) and the codec of its protocol for the bytes: the same
/// steps, in the same order, as a gRPC call in the HTTP/2 session.
struct HTTPCalls: Sendable {
    let pipeline: CallPipeline
    let registry: Registry
    let maxMessageBytes: Int
    let cors: CORS

    func handle(_ request: HTTPRequest, codec: any HTTPCallCodec, _ respond: @escaping @Sendable (HTTPResponse) -> Void) {
        let origin = request.header("origin")
        // One clock for the call: CLOCK_MONOTONIC, that of the loops' timers and of gRPC calls' deadlines.
        let started = CallClock.now()
        let number = pipeline.nextRequestNumber()
        let path = request.path
        let methodName = path.hasPrefix("/") ? String(path.dropFirst()) : path
        let route = pipeline.resolve(path: path)
        let cancellation = Cancellation(keepsNotes: pipeline.keepsNotes)
        let pipeline = self.pipeline
        let record: @Sendable (RPCError?) -> Void = { error in
            guard pipeline.observes else { return }
            pipeline.observe(
                CallRecord(
                    method: methodName, knownMethod: route != nil, code: error?.code ?? .ok, reason: error?.reason,
                    durationNanoseconds: CallClock.now() &- started, peer: request.peer,
                    requestIDPrefix: pipeline.requestIDPrefix, requestNumber: number, notes: cancellation.noted, peerSubject: nil,
                    wireProtocol: codec.wireProtocol.rawValue))
        }
        let cors = self.cors
        let answer: @Sendable (Result<[UInt8], RPCError>) -> Void = { result in
            switch result {
            case .success(let message):
                do throws(RPCError) {
                    respond(cors.decorate(try codec.answer(message), origin: origin))
                    record(nil)
                } catch {
                    respond(cors.decorate(codec.error(error), origin: origin))
                    record(error)
                }
            case .failure(let error):
                respond(cors.decorate(codec.error(error), origin: origin))
                record(error)
            }
        }
        // The call's context: its metadata are the request's header fields but the transport's own.
        let metadata = request.headers.filter { !Self.isTransportField($0.name) }
        let isStream: Bool
        if case .serverStreaming = route { isStream = true } else { isStream = false }
        let asked: Int64?
        do throws(RPCError) {
            asked = try codec.timeout(request)
        } catch {
            return answer(.failure(error))
        }
        // The port's deadline rule. A timer runs for a timeout the client asked (the cap alone is the context's
        // deadline, which handlers stop at, as over gRPC; the HTTP request's own time-out bounds the rest).
        var deadline: UInt64 = 0
        var timeout: Int64?
        switch pipeline.deadline(asked: asked, streaming: isStream) {
        case .none: break
        case .cap(let nanos):
            deadline = started &+ UInt64(max(0, nanos))
            if asked != nil { timeout = nanos }
        case .timer(let nanos):
            deadline = started &+ UInt64(max(0, nanos))
            timeout = nanos
        }
        let context = CallContext(
            CallInfo(
                method: methodName, metadata: metadata, monotonicDeadline: deadline, peer: request.peer,
                requestID: RequestID(prefix: pipeline.requestIDPrefix, number: number), cancellation: cancellation, peerSubject: nil))
        if let refusal = pipeline.refusal(for: context) { return answer(.failure(refusal)) }
        if case .serverStreaming(_, let handler) = route {
            return stream(
                request, codec: codec, context: context, timeout: timeout, handler: handler,
                respond: { respond(cors.decorate($0, origin: origin)) }, record: record)
        }
        guard case .unary(_, let handler) = route else {
            if route == nil { return answer(.failure(.unimplemented(methodName))) }
            return answer(.failure(RPCError(code: .unimplemented, message: "\(methodName) is bidirectional: call it over gRPC")))
        }
        guard codec.servesUnary else {
            return answer(.failure(RPCError(code: .unimplemented, message: "\(methodName) is unary: use application/proto or application/json")))
        }
        let message: [UInt8]
        do throws(RPCError) {
            message = try codec.decode(request, limit: maxMessageBytes)
        } catch {
            return answer(.failure(error))
        }
        let admission = pipeline.admission
        guard admission.enter() else { return answer(.failure(.overloaded)) }
        // The asked timeout is a timer on the request's loop, as a gRPC call's is; the first of the handler's answer
        // and the timer wins. Without a timeout only the handler answers (a Responder answers once): no timer, no race.
        guard let timeout, let timers = request.timers else {
            return handler(
                context, message,
                Responder { result in
                    admission.leave()
                    answer(result.map { Array($0.dropFirst(MessageFraming.prefixSize)) })
                })
        }
        let once = Atomic<Bool>(false)
        let timer = CallTimer()
        let finish: @Sendable (Result<[UInt8], RPCError>) -> Void = { result in
            guard once.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
            timer.cancel()
            admission.leave()
            answer(result)
        }
        timer.arm(
            timers.schedule(afterNanoseconds: timeout) {
                cancellation.cancel()
                finish(.failure(.deadlineExceeded))
            })
        handler(context, message, Responder { result in finish(result.map { Array($0.dropFirst(MessageFraming.prefixSize)) }) })
    }

    /// A server-streaming call: status 200 and a body written as the handler sends (the codec frames each message
    /// and the end). Messages the peer has not taken count against the writer's budget until the transport takes
    /// them, so a stalled reader is ended as over gRPC.
    private func stream(
        _ request: HTTPRequest, codec: any HTTPCallCodec, context: CallContext, timeout: Int64?,
        handler: @escaping ServerStreamingHandler, respond: @escaping @Sendable (HTTPResponse) -> Void,
        record: @escaping @Sendable (RPCError?) -> Void
    ) {
        guard let contentType = codec.streamContentType else {
            let error = RPCError(code: .unimplemented, message: "\(context.method) streams: use application/connect+proto or +json")
            respond(codec.error(error))
            return record(error)
        }
        let admission = pipeline.admission
        let body = HTTPBodyStream()
        let once = Atomic<Bool>(false)
        let timer = CallTimer()
        let done: @Sendable (RPCError?) -> Void = { error in
            guard once.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
            timer.cancel()
            admission.leave()
            record(error)
        }
        let message: [UInt8]
        do throws(RPCError) {
            message = try codec.decode(request, limit: maxMessageBytes)
        } catch {
            respond(HTTPResponse(status: 200, contentType: contentType, body: codec.streamEnd(error)))
            return record(error)
        }
        guard admission.enter() else {
            respond(HTTPResponse(status: 200, contentType: contentType, body: codec.streamEnd(.overloaded)))
            return record(.overloaded)
        }
        let cancellation = context.cancellation
        let writer = StreamWriter(cancellation: cancellation) { event in
            switch event {
            case .message(let framed):
                guard let bytes = codec.streamMessage(Array(framed.dropFirst(MessageFraming.prefixSize))) else { return }
                body.write(bytes, credit: framed.count)
            case .finish(let error):
                body.finish(last: codec.streamEnd(error))
                done(error)
            case .abort(let error):
                body.finish(last: codec.streamEnd(error), dropPending: true)
                done(error)
            }
        }
        body.onTaken { writer.consumed($0) }
        body.onCancel {
            cancellation.cancel()
            done(.cancelled)
        }
        if let timeout, let timers = request.timers {
            timer.arm(
                timers.schedule(afterNanoseconds: timeout) {
                    cancellation.cancel()
                    writer.abort(.deadlineExceeded)
                })
        }
        respond(HTTPResponse(status: 200, contentType: contentType, stream: body))
        handler(context, message, writer)
    }

    /// Header fields that belong to the transport, not to the call's metadata (a switch: no hashing per field).
    static func isTransportField(_ name: String) -> Bool {
        // Every transport field is 2 to 24 bytes long and starts with one of these letters: most metadata fields are
        // decided without a String comparison.
        guard let first = name.utf8.first, name.utf8.count >= 2, name.utf8.count <= 24,
            first == UInt8(ascii: "c") || first == UInt8(ascii: "a") || first == UInt8(ascii: "g") || first == UInt8(ascii: "h")
                || first == UInt8(ascii: "k") || first == UInt8(ascii: "t") || first == UInt8(ascii: "u") || first == UInt8(ascii: "o")
                || first == UInt8(ascii: "x")
        else { return false }
        return switch name {
        case "content-type", "content-length", "content-encoding", "accept-encoding", "connect-protocol-version",
            "connect-timeout-ms", "connect-accept-encoding", "connect-content-encoding", "grpc-timeout", "grpc-encoding",
            "grpc-accept-encoding", "host", "connection", "keep-alive", "te", "transfer-encoding", "upgrade", "origin",
            "x-grpc-web", "x-user-agent", "user-agent", "accept":
            true
        default:
            false
        }
    }
}

/// A call's deadline timer, armed once it is scheduled and cancelled when the call ends first (from any thread).
final class CallTimer: Sendable {
    private let timer = Mutex<RequestTimer?>(nil)
    private let ended = Atomic<Bool>(false)

    func arm(_ t: RequestTimer) {
        timer.withLock { $0 = t }
        if ended.load(ordering: .acquiring) { cancel() }
    }

    func cancel() {
        ended.store(true, ordering: .releasing)
        timer.withLock { t -> RequestTimer? in
            defer { t = nil }
            return t
        }?.cancel()
    }
}
