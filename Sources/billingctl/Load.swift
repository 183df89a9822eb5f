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

/// `billingctl load`: a bounded load generator that counts grpc-status itself.
enum LoadCommand {
    enum Kind: String, CaseIterable, Sendable {
        case create, get, submit, receipt, restore, health
        /// SignOffer, PROMOTIONAL, for one of the orders opened first (billingd needs --offer-signing-key).
        case offer
        /// App Store notifications (REFUND, pre-signed, each a new UUID and transaction) posted over h2c to
        /// `--notify-addr`; not mixed with the gRPC kinds.
        case notify
        var method: String {
            switch self {
            case .create: "billing.v1.Billing/CreateOrder"
            case .get: "billing.v1.Billing/GetOrder"
            case .submit, .receipt: "billing.v1.Billing/SubmitReceipt"
            case .restore: "billing.v1.Billing/RestorePurchases"
            case .health: "grpc.health.v1.Health/Check"
            case .offer: "billing.v1.Billing/SignOffer"
            case .notify: "appstore/notifications"
            }
        }
    }

    struct Settings: Sendable {
        var weights: [(Kind, Int)] = [(.create, 1)]
        var connections = 4
        var concurrency = 64
        var requests: Int?
        var duration: Double?
        var rate: Double?
        var json = false
        var maxErrorPercent = 0.0
        var product = "com.example.premium"
        var bundle = "com.example.app"
        var store = "teststore"
        var deadlineSeconds = 10.0
        /// The notifications endpoint (`--notifications-listen`) for the notify scenario.
        var notifyAddr: String?
    }

    /// Shared, immutable inputs: pre-signed proofs and existing orders.
    final class Inputs: Sendable {
        let orderIDs: [String]
        let signed: [String]
        let receipts: [String]
        let restoreJWS: [String]
        /// Notification bodies for the notify scenario.
        let notifications: [[UInt8]]
        let nextProof = Atomic<Int>(0)
        init(orderIDs: [String], signed: [String], receipts: [String], restoreJWS: [String], notifications: [[UInt8]] = []) {
            self.notifications = notifications
            self.orderIDs = orderIDs
            self.signed = signed
            self.receipts = receipts
            self.restoreJWS = restoreJWS
        }
    }

    /// Counters every load thread shares.
    final class Shared: Sendable {
        let issued = Atomic<Int>(0)
        let stop = Atomic<Bool>(false)
        let completed = Atomic<Int>(0)
        let errors = Atomic<Int>(0)
    }

    /// What one thread measured.
    struct Tally: Sendable {
        var latenciesMicros: [UInt32] = []
        var byCode: [String: Int] = [:]
        var byReason: [String: Int] = [:]
        var byMethod: [String: Int] = [:]
        var transportErrors = 0
    }

    static func parse(_ o: Options) throws -> Settings {
        var s = Settings()
        if let mix = o.named["mix"] ?? o.named["scenario"] {
            var weights: [(Kind, Int)] = []
            for part in mix.split(separator: ",") {
                let kv = part.split(separator: "=")
                guard let kind = Kind(rawValue: String(kv[0])) else {
                    throw Usage(message: "scenario \(kv[0]) is not one of \(Kind.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                let w = kv.count > 1 ? Int(kv[1]) ?? 0 : 1
                guard w > 0 else { throw Usage(message: "--mix weights are positive whole numbers") }
                weights.append((kind, w))
            }
            s.weights = weights
        }
        func int(_ name: String) throws -> Int? {
            guard let v = o.named[name] else { return nil }
            guard let n = Int(v), n > 0 else { throw Usage(message: "--\(name) needs a positive whole number") }
            return n
        }
        func double(_ name: String) throws -> Double? {
            guard let v = o.named[name] else { return nil }
            guard let d = Double(v), d > 0 else { throw Usage(message: "--\(name) needs a positive number") }
            return d
        }
        s.connections = try int("connections") ?? s.connections
        s.concurrency = max(try int("concurrency") ?? s.concurrency, s.connections)
        s.requests = try int("requests")
        s.duration = try double("duration")
        s.rate = try double("rate")
        if let e = o.named["max-errors"] {
            guard let p = Double(e.hasSuffix("%") ? String(e.dropLast()) : e), p >= 0 else { throw Usage(message: "--max-errors takes a percentage") }
            s.maxErrorPercent = p
        }
        s.json = o.named["json"] == "true" || CommandLine.arguments.contains("--json")
        s.product = o.named["product"] ?? s.product
        s.bundle = o.named["bundle-id"] ?? s.bundle
        s.store = o.named["store"] ?? s.store
        s.notifyAddr = o.named["notify-addr"]
        if s.weights.contains(where: { $0.0 == .notify }) {
            guard s.weights.count == 1 else { throw Usage(message: "the notify scenario is not mixed with the gRPC ones") }
            guard s.notifyAddr != nil else { throw Usage(message: "the notify scenario needs --notify-addr HOST:PORT (billingd --notifications-listen)") }
        }
        if s.requests == nil && s.duration == nil { s.requests = 10_000 }
        // Every loop is bounded: at most 10 million calls and one hour.
        s.requests = min(s.requests ?? 10_000_000, 10_000_000)
        s.duration = min(s.duration ?? 3600, 3600)
        return s
    }

    static func run(_ options: Options) throws {
        let s = try parse(options)
        let inputs = try prepare(s, options)
        let shared = Shared()
        let tallies = Mutex<[Tally]>([])
        let perConnection = max(1, s.concurrency / s.connections)
        let start = Monotonic.nanos()
        let group = DispatchGroup()
        for c in 0..<s.connections {
            group.enter()
            Thread.detachNewThread {
                var tally = Tally()
                defer {
                    tallies.withLock { $0.append(tally) }
                    group.leave()
                }
                do {
                    try drive(
                        connection: c, s: s, options: options, inputs: inputs, inFlight: perConnection, shared: shared,
                        start: start, tally: &tally)
                } catch {
                    tally.transportErrors += 1
                    FileHandle.standardError.write(Data("billingctl load: connection \(c): \(error)\n".utf8))
                }
            }
        }
        let interactive = isatty(1) == 1 && !s.json
        let deadline = start + UInt64(s.duration! * 1e9)
        while group.wait(timeout: .now() + 1) == .timedOut {
            if Monotonic.nanos() >= deadline { shared.stop.store(true, ordering: .relaxed) }
            if interactive {
                let t = Double(Monotonic.nanos() - start) / 1e9
                let n = shared.completed.load(ordering: .relaxed)
                print(
                    String(
                        format: "\r  %6.1f s  %10d calls  %9.0f calls/s  %d errors   ", t, n, Double(n) / t,
                        shared.errors.load(ordering: .relaxed)), terminator: "")
                fflush(nil)
            }
        }
        if interactive { print("") }
        let elapsed = Double(Monotonic.nanos() - start) / 1e9
        let report = Report(tallies.withLock { $0 }, elapsed: elapsed, settings: s)
        print(s.json ? report.json : report.table)
        if report.errorPercent > s.maxErrorPercent {
            FileHandle.standardError.write(
                Data(
                    String(
                        format: "billingctl load: %.3f%% errors, above --max-errors %.3f%%\n",
                        report.errorPercent, s.maxErrorPercent
                    ).utf8))
            exit(1)
        }
    }

    /// Pre-signs what the scenarios need (so signing is not measured) and opens orders for `get`.
    static func prepare(_ s: Settings, _ options: Options) throws -> Inputs {
        let kinds = Set(s.weights.map(\.0))
        let budget = min(s.requests ?? 50_000, 200_000)
        var orderIDs: [String] = []
        if kinds.contains(.get) || kinds.contains(.offer) {
            let client = try options.client()
            for i in 0..<100 {
                var req = CreateOrderRequest()
                req.accountID = "load-get-\(i)"
                req.productID = s.product
                let r = try client.unary(Kind.create.method, message: req.encoded(), timeoutNanoseconds: 10_000_000_000)
                guard r.code == .ok, let order = try CreateOrderResponse(decoding: r.message).order else {
                    throw Usage(message: "could not open orders for the get scenario: \(r.code) \(r.statusMessage)")
                }
                orderIDs.append(order.orderID)
            }
        }
        var signed: [String] = [], receipts: [String] = [], restore: [String] = []
        var notifications: [[UInt8]] = []
        if kinds.contains(.notify) {
            let store = try TestStore.open(directory: s.store, create: false)
            let base = UInt64.random(in: 1_000_000_000_000...9_000_000_000_000) * 100
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            for i in 0..<budget {
                var t = TestStore.Transaction(
                    transactionID: String(base + UInt64(i)), productID: s.product, bundleID: s.bundle,
                    environment: "Xcode", purchaseDate: now - 60_000)
                t.revocationDate = now
                t.revocationReason = 0
                var n = TestStore.Notification(type: "REFUND", signedDate: now, bundleID: s.bundle)
                n.transaction = t
                notifications.append(Array(TestStore.notificationBody(try store.signedNotification(n)).utf8))
            }
        }
        let needsStore = kinds.contains(.submit) || kinds.contains(.receipt) || kinds.contains(.restore)
        if needsStore {
            let store = try TestStore.open(directory: s.store, create: false)
            let base = UInt64.random(in: 1_000_000_000_000...9_000_000_000_000) * 100
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            for i in 0..<(kinds.contains(.submit) ? budget : 0) {
                var t = TestStore.Transaction(
                    transactionID: String(base + UInt64(i)), productID: s.product, bundleID: s.bundle,
                    environment: "Xcode", purchaseDate: now)
                t.signedDate = now
                signed.append(try store.signedTransaction(t))
            }
            for i in 0..<(kinds.contains(.receipt) ? min(budget, 20_000) : 0) {
                var p = AppReceipt.InAppPurchase()
                p.productID = s.product
                p.transactionID = String(base + 50_000_000 + UInt64(i))
                p.purchaseDate = now
                p.quantity = 1
                receipts.append(try store.appReceipt(bundleID: s.bundle, inApp: [p]))
            }
            for i in 0..<(kinds.contains(.restore) ? 100 : 0) {
                let t = TestStore.Transaction(
                    transactionID: String(base + 90_000_000 + UInt64(i)), productID: s.product,
                    bundleID: s.bundle, environment: "Xcode", purchaseDate: now)
                restore.append(try store.signedTransaction(t))
            }
        }
        return Inputs(orderIDs: orderIDs, signed: signed, receipts: receipts, restoreJWS: restore, notifications: notifications)
    }

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

    /// The merged result: calls/s, latency percentiles, errors by code and reason.
    struct Report {
        let calls: Int
        let elapsed: Double
        let percentiles: [(String, Double)]
        let maxMs: Double
        let byCode: [String: Int]
        let byReason: [String: Int]
        let byMethod: [String: Int]
        let errorPercent: Double
        let settings: Settings

        init(_ tallies: [Tally], elapsed: Double, settings: Settings) {
            var all: [UInt32] = []
            var codes: [String: Int] = [:], reasons: [String: Int] = [:], methods: [String: Int] = [:]
            for t in tallies {
                all += t.latenciesMicros
                for (k, v) in t.byCode { codes[k, default: 0] += v }
                for (k, v) in t.byReason { reasons[k, default: 0] += v }
                for (k, v) in t.byMethod { methods[k, default: 0] += v }
                if t.transportErrors > 0 { codes["TRANSPORT", default: 0] += t.transportErrors }
            }
            all.sort()
            func p(_ q: Double) -> Double {
                guard !all.isEmpty else { return 0 }
                return Double(all[min(all.count - 1, Int(Double(all.count) * q))]) / 1000
            }
            calls = all.count
            self.elapsed = elapsed
            percentiles = [("p50", p(0.5)), ("p90", p(0.9)), ("p99", p(0.99)), ("p99.9", p(0.999))]
            maxMs = Double(all.last ?? 0) / 1000
            byCode = codes
            byReason = reasons
            byMethod = methods
            let bad = codes.filter { $0.key != "OK" }.values.reduce(0, +)
            errorPercent = calls == 0 ? (bad > 0 ? 100 : 0) : Double(bad) * 100 / Double(calls)
            self.settings = settings
        }

        var table: String {
            var out = String(
                format: "%d calls in %.2f s: %.0f calls/s (%d connections, %d in flight%@)\n", calls, elapsed,
                Double(calls) / elapsed, settings.connections, settings.concurrency,
                settings.rate.map { String(format: ", open loop at %.0f/s", $0) } ?? "")
            out += "latency ms: " + percentiles.map { String(format: "%@ %.3f", $0.0, $0.1) }.joined(separator: "  ")
            out += String(format: "  max %.3f\n", maxMs)
            out += "by method: " + byMethod.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + "\n"
            out += "by code: " + byCode.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + "\n"
            if !byReason.isEmpty {
                out += "errors by reason: " + byReason.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + "\n"
            }
            out += String(format: "errors: %.3f%%", errorPercent)
            return out
        }

        var json: String {
            func dict(_ d: [String: Int]) -> String {
                "{" + d.sorted { $0.key < $1.key }.map { "\(JSON.quote($0.key)): \($0.value)" }.joined(separator: ", ") + "}"
            }
            var fields = [
                "\"calls\": \(calls)", String(format: "\"seconds\": %.3f", elapsed), String(format: "\"calls_per_second\": %.1f", Double(calls) / elapsed),
                "\"connections\": \(settings.connections)", "\"concurrency\": \(settings.concurrency)",
            ]
            for (name, v) in percentiles { fields.append(String(format: "\"%@_ms\": %.3f", name.replacingOccurrences(of: ".", with: "_"), v)) }
            fields.append(String(format: "\"max_ms\": %.3f", maxMs))
            fields.append("\"by_method\": \(dict(byMethod))")
            fields.append("\"by_code\": \(dict(byCode))")
            fields.append("\"errors_by_reason\": \(dict(byReason))")
            fields.append(String(format: "\"error_percent\": %.4f", errorPercent))
            return "{" + fields.joined(separator: ", ") + "}"
        }
    }
}

enum Monotonic {
    static func nanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
