import Dispatch
import Glibc
import ProtoWire
import RPC
import Lifecycle
import Synchronization
import Testing

/// The RPC core's policy: where handlers run, and interceptors that see every call.
@Suite("router policy")
struct RouterTests {
    final class Seen: Sendable {
        let threads = Mutex<[Bool]>([])  // true: ran on the calling thread
        let order = Mutex<[String]>([])
        let records = Mutex<[String]>([])
    }

    private func call(_ router: Router, _ path: String, _ bytes: [UInt8], _ context: CallContext = CallContext(method: "m")) -> Result<[UInt8], RPCError> {
        guard case .unary(_, let handler) = router.resolve(path: path) else { return .failure(.unimplemented(path)) }
        let answer: Result<[UInt8], RPCError>? = Blocking.wait(timeout: .seconds(5)) { done in
            handler(context, bytes, Responder { done($0) })
        }
        return answer ?? .failure(RPCError(code: .deadlineExceeded, message: "no answer"))
    }

    @Test("a handler registered .loop runs on the caller's thread; .pool on a worker")
    func execution() {
        let seen = Seen()
        let pool = WorkerPool(name: "test.workers")
        var router = Router()
        let caller = UInt(pthread_self())
        router.register("t.T/Loop", WireProbe.self) { _, _, responder in
            seen.threads.withLock { $0.append(UInt(pthread_self()) == caller) }
            responder.succeed(framed: [])
        }
        router.register("t.T/Pool", WireProbe.self, on: .pool(pool)) { _, _, responder in
            seen.threads.withLock { $0.append(UInt(pthread_self()) == caller) }
            responder.succeed(framed: [])
        }
        #expect((try? call(router, "/t.T/Loop", []).get()) == [])
        #expect((try? call(router, "/t.T/Pool", []).get()) == [])
        #expect(seen.threads.withLock { $0 } == [true, false])
    }

    @Test("the place can depend on the request; undecodable requests are refused before any pool")
    func perRequest() {
        let seen = Seen()
        let pool = WorkerPool(name: "test.workers")
        var router = Router()
        let caller = UInt(pthread_self())
        router.register("t.T/M", WireProbe.self, on: { $0.s == "slow" ? .pool(pool) : .loop }) { _, _, responder in
            seen.threads.withLock { $0.append(UInt(pthread_self()) == caller) }
            responder.succeed(framed: [])
        }
        var fast = ProtoWriter(capacity: 8), slow = ProtoWriter(capacity: 8)
        fast.string(1, "fast")
        slow.string(1, "slow")
        _ = call(router, "/t.T/M", fast.finish())
        _ = call(router, "/t.T/M", slow.finish())
        #expect(seen.threads.withLock { $0 } == [true, false])
        if case .failure(let e) = call(router, "/t.T/M", [0x0A, 0x05]) { #expect(e.code == .invalidArgument) } else { Issue.record("decoded garbage") }
        #expect(seen.threads.withLock { $0.count } == 2)
    }

    @Test("interceptors run in order, the first refusal wins, and every end is observed")
    func interceptors() {
        let seen = Seen()
        var router = Router()
        #expect(!router.authenticates && router.callObserver == nil)
        router.intercept(
            ServerInterceptor(
                accept: { context in
                    seen.order.withLock { $0.append("a:" + context.method) }
                    return context.metadata("authorization") == nil ? RPCError(code: .unauthenticated, message: "no key") : nil
                }, finished: { record in seen.records.withLock { $0.append("a:\(record.method)") } }))
        router.authenticate { context in
            seen.order.withLock { $0.append("b:" + context.method) }
            return nil
        }
        router.intercept(ServerInterceptor(finished: { record in seen.records.withLock { $0.append("c:\(record.code)") } }))
        #expect(router.authenticates && router.callObserver != nil)
        // An unknown method is seen like any other: the refusal comes before routing.
        #expect(router.refusal(for: CallContext(method: "no.Such/Method"))?.code == .unauthenticated)
        #expect(router.refusal(for: CallContext(method: "x", metadata: [("authorization", "k")])) == nil)
        #expect(seen.order.withLock { $0 } == ["a:no.Such/Method", "a:x", "b:x"])
        router.callObserver?(
            CallRecord(
                method: "x", knownMethod: false, code: .unimplemented, reason: nil, durationNanoseconds: 0,
                peer: "", requestIDPrefix: "p", requestNumber: 1, notes: [], peerSubject: nil))
        #expect(seen.records.withLock { $0 } == ["a:x", "c:UNIMPLEMENTED"])
    }
}
