import Billing
import BillingAPI
import BillingService
import Glibc
import ProtoWire
import RPC
import Synchronization
import Testing
import TestSupport

/// Where BillingService's handlers run: the registration decides (`Execution`), and a proof whose
/// certificate chain is not verified yet is never checked on the calling (event-loop) thread.
@Suite("handler placement")
struct ServiceExecutionTests {
    /// A verifier that records the thread each check ran on and refuses every proof.
    final class ThreadRecordingVerifier: ProofVerifier {
        let chainCached: Bool
        let threads = Mutex<[UInt]>([])
        init(chainCached: Bool) { self.chainCached = chainCached }
        func verifySignedTransaction(_ jws: String) -> Result<StoreTransaction, BillingError> {
            threads.withLock { $0.append(UInt(pthread_self())) }
            return .failure(.receiptMalformed(detail: "test"))
        }
        func verifyAppReceipt(_ base64: String) -> Result<[StoreTransaction], BillingError> {
            threads.withLock { $0.append(UInt(pthread_self())) }
            return .failure(.receiptMalformed(detail: "test"))
        }
        func hasVerifiedChain(signedTransaction jws: String) -> Bool { chainCached }
    }

    /// Calls SubmitReceipt through the router as the transport would, from this thread; the thread the
    /// verifier ran on, and whether it is this one.
    func submit(_ proof: SubmitReceiptRequest.Proof, chainCached: Bool) -> (sameThread: Bool, code: StatusCode?) {
        let verifier = ThreadRecordingVerifier(chainCached: chainCached)
        let orders = OrderService(store: InMemoryOrderStore(), catalog: nil, clock: ManualClock(milliseconds: 1_700_000_000_000))
        var router = Router()
        BillingService(orders: orders, purchases: PurchaseEngine(orders: orders, verifier: verifier)).register(in: &router)
        guard case .unary(_, let handler) = router.resolve(path: "/billing.v1.Billing/SubmitReceipt") else { return (false, nil) }
        var request = SubmitReceiptRequest()
        request.orderID = "0190a5b8-7c00-7000-8000-000000000001"
        request.proof = proof
        var writer = ProtoWriter(capacity: request.encodedSize)
        request.encode(to: &writer)
        let bytes = writer.finish()
        let me = UInt(pthread_self())
        let result: Result<[UInt8], RPCError> = wait { done in
            handler(CallContext(method: "billing.v1.Billing/SubmitReceipt"), bytes, Responder { done($0) })
        }
        let code: StatusCode? = if case .failure(let e) = result { e.code } else { .ok }
        return (verifier.threads.withLock { $0 } == [me], code)
    }

    @Test("a signed transaction whose chain is cached is checked on the calling thread")
    func cachedOnLoop() {
        let r = submit(.signedTransaction("a.b.c"), chainCached: true)
        #expect(r.sameThread)
        #expect(r.code == .invalidArgument)
    }

    @Test("a signed transaction whose chain must be verified goes to the verification pool")
    func uncachedOffLoop() {
        let r = submit(.signedTransaction("a.b.c"), chainCached: false)
        #expect(!r.sameThread)
        #expect(r.code == .invalidArgument)
    }

    @Test("an app receipt is always verified on the pool")
    func receiptOffLoop() {
        let r = submit(.appReceipt("MIIB"), chainCached: true)
        #expect(!r.sameThread)
    }
}
