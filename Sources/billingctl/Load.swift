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
}

enum Monotonic {
    static func nanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
