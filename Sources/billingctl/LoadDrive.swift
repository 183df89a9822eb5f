import IO
import AppStore
import BillingAPI
import Foundation
import Glibc
import HTTP2
import ProtoWire
import RPC
import Synchronization
import Lifecycle

/// Driving the load: each connection's loop of calls in flight, bounded in count and time.
extension LoadCommand {
    struct Pending {
        let kind: Kind
        let startedAt: UInt64
        /// For submit/receipt flows: the proof to send once CreateOrder answers.
        let proof: Int?
    }

    /// Runs one connection's share of the load; when connecting fails or the connection drops, counts a
    /// transport error and connects again after an exponential backoff (50 ms doubling up to 1 s), until the
    /// run stops or connecting has failed for `giveUpSeconds` in a row.
    static func drive(
        connection index: Int, s: Settings, options: Options, inputs: Inputs, inFlight: Int, shared: Shared,
        start: UInt64, tally: inout Tally
    ) throws {
        var backoffMs = 50
        var lastError = ""
        var failingSince: UInt64?
        while !shared.stop.load(ordering: .relaxed) {
            do {
                let client: Client
                do {
                    if let addr = s.notifyAddr {
                        client = try Client(address: addr, tls: nil, timeoutSeconds: Int(options.timeout.rounded(.up)))
                    } else {
                        client = try options.client()
                    }
                } catch {
                    let since = failingSince ?? Monotonic.nanos()
                    failingSince = since
                    if Monotonic.nanos() - since > UInt64(giveUpSeconds * 1e9) {
                        tally.transportErrors += 1
                        FileHandle.standardError.write(Data("billingctl load: connection \(index): \(error); giving up\n".utf8))
                        return
                    }
                    throw error
                }
                failingSince = nil
                backoffMs = 50
                try drive(
                    client: client, connection: index, s: s, inputs: inputs, inFlight: inFlight, shared: shared,
                    start: start, tally: &tally)
                return
            } catch {
                tally.transportErrors += 1
                let text = "\(error)"
                if text != lastError {
                    FileHandle.standardError.write(Data("billingctl load: connection \(index): \(text); retrying\n".utf8))
                    lastError = text
                }
            }
            // Sleep in short steps so a stop (deadline, --requests reached) is seen promptly.
            let until = Monotonic.nanos() + UInt64(backoffMs) * 1_000_000
            while Monotonic.nanos() < until && !shared.stop.load(ordering: .relaxed) { usleep(10_000) }
            backoffMs = min(backoffMs * 2, 1000)
        }
    }

    /// How long one connection keeps trying to connect before it gives up.
    static let giveUpSeconds = 10.0

    static func drive(
        client: Client, connection index: Int, s: Settings, inputs: Inputs, inFlight: Int, shared: Shared,
        start: UInt64, tally: inout Tally
    ) throws {
        client.setReceiveTimeout(milliseconds: 50)
        var pending: [Int32: Pending] = [:]
        var rng = SystemRandomNumberGenerator()
        let totalWeight = s.weights.reduce(0) { $0 + $1.1 }
        let perThreadRate = s.rate.map { $0 / Double(s.connections) }
        var nextStart = start
        tally.latenciesMicros.reserveCapacity(min(s.requests ?? 100_000, 2_000_000) / s.connections + 16)

        func pick() -> Kind {
            var r = Int.random(in: 0..<totalWeight, using: &rng)
            for (k, w) in s.weights {
                if r < w { return k }
                r -= w
            }
            return s.weights[0].0
        }

        func begin(_ kind: Kind, at startedAt: UInt64) throws {
            var body: [UInt8]
            var followUp: Int? = nil
            switch kind {
            case .create:
                var r = CreateOrderRequest(); r.accountID = "load-\(index)"; r.productID = s.product
                body = r.encoded()
            case .get:
                let id = inputs.orderIDs[Int.random(in: 0..<inputs.orderIDs.count, using: &rng)]
                body = GetOrderRequest(orderID: id).encoded()
            case .health:
                body = HealthCheckRequest().encoded()
            case .offer:
                var r = SignOfferRequest()
                r.kind = .promotional
                r.bundleID = s.bundle
                r.productID = s.product
                r.offerID = "load-offer"
                r.orderID = inputs.orderIDs[Int.random(in: 0..<inputs.orderIDs.count, using: &rng)]
                body = r.encoded()
            case .submit, .receipt:
                // First the order; the proof goes when it is open.
                let n = inputs.nextProof.add(1, ordering: .relaxed).newValue - 1
                let pool = kind == .submit ? inputs.signed.count : inputs.receipts.count
                guard n < pool else {
                    shared.stop.store(true, ordering: .relaxed)
                    return
                }
                var r = CreateOrderRequest(); r.accountID = "load-\(index)"; r.productID = s.product
                body = r.encoded()
                followUp = n
            case .notify:
                let n = inputs.nextProof.add(1, ordering: .relaxed).newValue - 1
                guard n < inputs.notifications.count else {
                    shared.stop.store(true, ordering: .relaxed)
                    return
                }
                let id = try client.start(kind.method, body: inputs.notifications[n], contentType: "application/json")
                pending[id] = Pending(kind: kind, startedAt: startedAt, proof: nil)
                return
            case .restore:
                var r = RestorePurchasesRequest()
                let i = Int.random(in: 0..<inputs.restoreJWS.count, using: &rng)
                r.accountID = "load-restore-\(i)"
                r.signedTransactions = [inputs.restoreJWS[i]]
                body = r.encoded()
            }
            let method = followUp != nil ? Kind.create.method : kind.method
            let id = try client.start(
                method, body: MessageFraming.frame(body),
                timeoutNanoseconds: Int64(s.deadlineSeconds * 1e9))
            pending[id] = Pending(kind: kind, startedAt: startedAt, proof: followUp)
        }

        func submitProof(_ p: Pending, orderID: String) throws {
            var r = SubmitReceiptRequest()
            r.orderID = orderID
            r.proof = p.kind == .submit ? .signedTransaction(inputs.signed[p.proof!]) : .appReceipt(inputs.receipts[p.proof!])
            let id = try client.start(
                Kind.submit.method, body: MessageFraming.frame(r.encoded()),
                timeoutNanoseconds: Int64(s.deadlineSeconds * 1e9))
            pending[id] = Pending(kind: p.kind, startedAt: Monotonic.nanos(), proof: nil)
        }

        func record(_ method: String, _ r: UnaryResponse, since: UInt64) {
            let micros = (Monotonic.nanos() &- since) / 1000
            tally.latenciesMicros.append(UInt32(min(micros, UInt64(UInt32.max))))
            // Notifications answer in HTTP statuses, gRPC calls in grpc-status.
            let http = method == Kind.notify.method
            let ok = r.resetCode == nil && (http ? r.httpStatus == 200 : r.code == .ok)
            let code = r.resetCode != nil ? "RESET" : http ? (ok ? "OK" : "HTTP_\(r.httpStatus)") : r.code.description
            tally.byCode[code, default: 0] += 1
            tally.byMethod[method, default: 0] += 1
            if !ok {
                shared.errors.add(1, ordering: .relaxed)
                if let reason = r.details?.errorInfo?.reason { tally.byReason[reason, default: 0] += 1 }
            }
            shared.completed.add(1, ordering: .relaxed)
        }

        while true {
            let stopping = shared.stop.load(ordering: .relaxed)
            // Start calls: closed loop keeps `inFlight` busy; open loop starts on schedule.
            while !stopping && pending.count < inFlight {
                let now = Monotonic.nanos()
                if perThreadRate != nil, nextStart > now { break }
                guard shared.issued.add(1, ordering: .relaxed).newValue <= s.requests! else {
                    shared.stop.store(true, ordering: .relaxed)
                    break
                }
                let scheduled = perThreadRate == nil ? now : nextStart
                if let rate = perThreadRate { nextStart &+= UInt64(1e9 / rate) }
                try begin(pick(), at: scheduled)
            }
            if pending.isEmpty {
                if shared.stop.load(ordering: .relaxed) { return }
                if perThreadRate != nil { usleep(200) }
                continue
            }
            for id in try client.poll() {
                guard let p = pending.removeValue(forKey: id) else { continue }
                let r = client.finish(id)
                if let proof = p.proof {
                    // CreateOrder of a submit/receipt flow answered: record it, then send the proof.
                    record(Kind.create.method, r, since: p.startedAt)
                    if r.code == .ok, let order = try? CreateOrderResponse(decoding: r.message).order {
                        try submitProof(Pending(kind: p.kind, startedAt: 0, proof: proof), orderID: order.orderID)
                    }
                } else {
                    record(p.kind.method, r, since: p.startedAt)
                }
            }
        }
    }
}
