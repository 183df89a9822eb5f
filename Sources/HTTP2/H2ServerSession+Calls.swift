import RPC
import Synchronization

/// Calls: request DATA and its budget, the request's end, dispatch to the handlers under their deadlines,
/// and their answers and stream events coming back (from any thread, through the host).
extension H2ServerSession {
    /// Request DATA: an exchange's body, a bidirectional call's messages, or the message of a unary or
    /// server-streaming call, counted in the connection's budget.
    func data(streamID: Int32, bytes: UnsafeRawBufferPointer) {
        withStream(streamID) { data($0, bytes) }
    }

    private func data(_ stream: ServerStream, _ bytes: UnsafeRawBufferPointer) {
        guard stream.state.takesData else { return }
        if stream.state.isExchange {
            exchangeData(stream, bytes)
            return
        }
        if stream.route?.kind == .bidi {
            guard let receiver = stream.receiver else { return }
            if let error = stream.streamDeframer?.append(bytes, { receiver.onMessage($0) }) {
                act(stream, stream.state.fail(error))
                return
            }
            account(stream, stream.streamDeframer?.bufferedBytes ?? 0)
            return
        }
        if let error = stream.deframer.append(bytes) {
            act(stream, stream.state.fail(error))
            return
        }
        account(stream, stream.deframer.bufferedBytes)
    }

    /// Counts what `stream` holds now in the connection's budget; the stream that crosses it is refused.
    func account(_ stream: ServerStream, _ now: Int) {
        bufferedRequestBytes += now - stream.bufferedBytes
        stream.bufferedBytes = now
        let limit = shared.configuration.maxConnectionBufferBytes
        guard now > 0, bufferedRequestBytes > limit else { return }
        act(stream, stream.state.fail(.connectionBufferFull(limit: limit)))
        releaseBuffer(stream)
    }

    /// Drops the request bytes `stream` holds and takes them out of the budget.
    func releaseBuffer(_ stream: ServerStream) {
        if stream.bufferedBytes == 0 { return }
        if stream.state.isExchange {
            stream.exchange?.requestBody = []
        } else if stream.route?.kind == .bidi {
            stream.streamDeframer = nil
        } else {
            stream.deframer = MessageDeframer(maxMessageBytes: shared.configuration.maxMessageBytes)
        }
        bufferedRequestBytes -= stream.bufferedBytes
        stream.bufferedBytes = 0
    }

    /// The request ended (END_STREAM).
    func requestEnded(streamID: Int32) {
        withStream(streamID) { stream in
            act(stream, stream.state.requestEnd(atMessageBoundary: stream.streamDeframer?.isAtBoundary ?? true))
        }
    }

    /// nghttp2 closed the stream: a unary one is cleared and kept for the next call.
    func streamClosed(streamID: Int32) {
        if let last = lastStream, last._withUnsafeGuaranteedRef({ $0.id }) == streamID { lastStream = nil }
        guard let stream = streams.remove(streamID) else { return }
        abandon(stream)
        if stream.reusable && spareStreams.count < Self.maxSpareStreams {
            // Drop what the call held now (answer, handler, cancellation), not when the stream is reused.
            stream.clear()
            spareStreams.append(stream)
        }
        if draining && streams.isEmpty { output.outputPending() }
    }

    /// Ends what a closing stream still holds: its buffer, its timer, and a call still running (cancelled).
    func abandon(_ stream: ServerStream) {
        if let body = stream.bodyStream {
            body.cancel()  // the client went away before the end: the producer stops
            stream.exchange?.bodyStream = nil
        }
        releaseBuffer(stream)
        if let timer = stream.timerID {
            host.cancelTimer(timer)
            stream.timerID = nil
        }
        act(stream, stream.state.closed())
    }

    /// The stream's call object, ready to be given a call's fields: the one kept from its last call (or from
    /// the authentication check) when nothing else holds it, else a new one with the same cancellation.
    @inline(__always)
    func readyCall(_ stream: ServerStream) -> CallInfo {
        if !isKnownUniquelyReferenced(&stream.call) {
            stream.call = CallInfo(
                method: "", metadata: [], monotonicDeadline: 0, peer: peer,
                requestID: RequestID(prefix: shared.requestIDPrefix, number: 0),
                cancellation: stream.call?.cancellation ?? Cancellation(keepsNotes: shared.pipeline.keepsNotes),
                peerSubject: peerSubject)
        }
        return stream.call!
    }

    /// A new call's context (the authentication check may have made its call object).
    @inline(__always)
    private func begin(_ stream: ServerStream, deadline: UInt64) -> CallContext {
        let info = readyCall(stream)
        stream.requestNumber = shared.nextRequestNumber()
        info.prepare(method: stream.methodName, metadata: stream.head.metadata, monotonicDeadline: deadline, requestNumber: stream.requestNumber)
        return CallContext(info)
    }

    /// A bidirectional call starts at its headers: the handler gets a writer and returns its receiver.
    func startBidi(_ stream: ServerStream) {
        // Dispatched at its headers (`finished` gives the slot back); counted, not limited, as before.
        shared.admission.enterUnchecked()
        guard let handler = stream.route?.bidi else { return }
        stream.capDeadline = 0
        var deadline: UInt64 = 0
        let id = stream.id
        // A streaming call: no cap; a grpc-timeout that cannot be read is ignored (no deadline).
        if case .timer(let nanos) = CallRules.deadline(
            timeout: stream.head.timeout, streaming: true, capNanoseconds: shared.pipeline.maxDeadlineNanoseconds)
        {
            deadline = CallRules.deadline(from: host.now(), after: nanos)
            stream.timerID = host.schedule(afterNanoseconds: nanos) { [self] in
                guard let s = self.stream(id) else { return }
                s.timerID = nil
                self.act(s, s.state.deadline())
            }
        }
        let context = begin(stream, deadline: deadline)
        let writer = StreamWriter(cancellation: context.cancellation) { [self] event in
            if self.host.inHost {
                self.streamEvent(streamID: id, event)
            } else {
                self.host.execute { self.streamEvent(streamID: id, event) }
            }
        }
        stream.receiver = handler(context, writer)
    }

    /// The complete request goes to its handler, under the deadline `CallRules` decides.
    func dispatch(_ stream: ServerStream) {
        let message: [UInt8]
        switch stream.deframer.finish() {
        case .success(let m): message = m
        case .failure(let error):
            act(stream, stream.state.fail(error))
            return
        }
        // The handler owns the message now; the budget counts only what waits for more bytes.
        releaseBuffer(stream)
        // Fields read one by one: a copy of the whole configuration retained and released every reference in it.
        let streaming = stream.state.isStreaming
        let rule = CallRules.deadline(timeout: stream.head.timeout, streaming: streaming, capNanoseconds: shared.pipeline.maxDeadlineNanoseconds)
        if case .malformed(let error) = rule {
            act(stream, stream.state.fail(error))
            return
        }
        // The slot is the port's, shared with Connect and gRPC-Web; given back at the stream's end (`finished`, as
        // `handedOver` marks it dispatched).
        guard shared.admission.enter() else {
            act(stream, stream.state.fail(.overloaded))
            return
        }
        stream.state.handedOver()
        stream.capDeadline = 0
        var deadline: UInt64 = 0
        switch rule {
        case .none, .malformed:
            break
        case .cap(let cap):
            // The cap alone: the once-a-second sweep enforces it, no timer per call. Counted from the request's
            // headers (read then: no clock read here), as the cap before dispatch was.
            deadline = CallRules.deadline(from: stream.startedAt, after: cap)
            stream.capDeadline = deadline
        case .timer(let nanos):
            deadline = CallRules.deadline(from: host.now(), after: nanos)
            let id = stream.id
            stream.timerID = host.schedule(afterNanoseconds: nanos) { [self] in
                guard let s = self.stream(id) else { return }
                s.timerID = nil
                s.cancellation?.cancel()
                self.act(s, s.state.deadline())
            }
        }
        let id = stream.id
        guard let route = stream.route else { return }
        // The context is made in the call's argument list: bound to a local first, it was copied once and
        // destroyed twice (about 450 instructions a call).
        if let handler = route.unary {
            if !isKnownUniquelyReferenced(&stream.responder) { stream.responder = Responder(sink: self, id: id) }
            // The storage of the stream's last answer lent for this one's bytes.
            stream.responder!.rearm(id: id, spare: &stream.body)
            // Lent, not retained: the stream keeps its responder through the call.
            Unmanaged.passUnretained(stream.responder!)._withUnsafeGuaranteedRef { responder in
                handler(begin(stream, deadline: deadline), message, responder)
            }
        } else if let handler = route.serverStreaming {
            let context = begin(stream, deadline: deadline)
            let writer = StreamWriter(cancellation: context.cancellation) { [self] event in
                self.host.execute { self.streamEvent(streamID: id, event) }
            }
            stream.writer = writer
            handler(context, message, writer)
        }
    }

    /// A unary call's answer (`ResponseSink`), from any thread.
    func deliver(id: Int32, _ result: Result<[UInt8], RPCError>) {
        // Answered on this thread (Health, cached reads): submit now; nghttp2 allows it inside callbacks.
        if host.inHost {
            complete(streamID: id, result)
        } else {
            host.execute { self.complete(streamID: id, result) }
        }
    }

    private func complete(streamID: Int32, _ result: Result<[UInt8], RPCError>) {
        checkHost()
        guard !closed else { return }
        withStream(streamID) { complete($0, result) }
    }

    private func complete(_ stream: ServerStream, _ result: Result<[UInt8], RPCError>) {
        switch result {
        case .success(let framed):
            let action = stream.state.succeed()
            guard case .submitHeaders = action else { return }
            if let timer = stream.timerID {
                host.cancelTimer(timer)
                stream.timerID = nil
            }
            stream.body = framed
            stream.bodyOffset = 0
            act(stream, action)
            shared.finished(stream: stream, code: .ok, reason: nil, peer: peer, peerSubject: peerSubject)
        case .failure(let error):
            act(stream, stream.state.fail(error))
        }
    }

    /// A streaming call's message or end, on the host's thread.
    private func streamEvent(streamID: Int32, _ event: StreamWriter.Event) {
        guard !closed, let stream = stream(streamID) else { return }
        switch event {
        case .message(let framed):
            guard stream.state.sendsMessages else { return }
            if stream.bodyOffset == stream.body.count {
                stream.body = framed
                stream.bodyOffset = 0
            } else {
                stream.body.append(contentsOf: framed)
            }
            act(stream, stream.state.message())
        case .finish(let error):
            act(stream, stream.state.finish(error))
        case .abort(let error):
            let unsent = stream.body.count - stream.bodyOffset
            if unsent > 0 { stream.writer?.consumed(unsent) }
            stream.body = []
            stream.bodyOffset = 0
            act(stream, stream.state.abort(error))
        }
    }
}
