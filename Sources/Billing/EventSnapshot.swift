/// The text form of the order and entitlement snapshots an event keeps: length-prefixed fields, so
/// no value (product ids come from signed data) can break the framing.
public enum EventSnapshot {
    /// Each field as its UTF-8 length in decimal, a colon, and its bytes (the format `Writer` writes field by field).
    static func join(_ fields: [String]) -> String {
        var w = Writer(capacity: fields.reduce(0) { $0 + $1.utf8.count + 4 })
        for f in fields { w.text(f) }
        return w.string
    }

    /// `n` (not negative) in decimal, most significant digit first (reversing a slice of `out` afterwards cost
    /// about 400 instructions a number).
    static func appendDecimal(_ n: Int, to out: inout [UInt8]) {
        appendDigits(UInt64(max(0, n)), count: digitCount(UInt64(max(0, n))), to: &out)
    }

    @inline(__always)
    static func digitCount(_ n: UInt64) -> Int {
        var digits = 1
        var rest = n
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        return digits
    }

    @inline(__always)
    static func appendDigits(_ n: UInt64, count: Int, to out: inout [UInt8]) {
        var divisor: UInt64 = 1
        for _ in 1..<count { divisor *= 10 }
        var rest = n
        while divisor > 0 {
            out.append(UInt8(ascii: "0") + UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }

    /// `join`'s format written field by field: numbers go in as their decimal digits without a `String` each
    /// (the order's snapshot, written with every CreateOrder, cost about 10,000 instructions through `join`).
    struct Writer {
        private var out: [UInt8]

        init(capacity: Int) {
            out = []
            out.reserveCapacity(capacity)
        }

        mutating func text(_ value: String) {
            var value = value
            value.withUTF8 { bytes in
                appendDecimal(bytes.count, to: &out)
                out.append(UInt8(ascii: ":"))
                out.append(contentsOf: bytes)
            }
        }

        /// The field `String(value)` would give, negative numbers included.
        mutating func int(_ value: Int64) {
            let digits = digitCount(value.magnitude)
            appendDecimal(digits + (value < 0 ? 1 : 0), to: &out)
            out.append(UInt8(ascii: ":"))
            if value < 0 { out.append(UInt8(ascii: "-")) }
            appendDigits(value.magnitude, count: digits, to: &out)
        }

        var string: String { String(decoding: out, as: UTF8.self) }
    }

    static func split(_ text: String) -> [String]? {
        var fields: [String] = []
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {
            var n = 0
            while i < bytes.count, bytes[i] != UInt8(ascii: ":") {
                guard bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9"), n < 1 << 24 else { return nil }
                n = n * 10 + Int(bytes[i] - UInt8(ascii: "0"))
                i += 1
            }
            i += 1
            guard i + n <= bytes.count else { return nil }
            fields.append(String(decoding: bytes[i..<(i + n)], as: UTF8.self))
            i += n
        }
        return fields
    }

    public static func encode(_ o: Order) -> String {
        var w = Writer(capacity: 96 + o.id.utf8.count + o.accountID.utf8.count + o.productID.utf8.count)
        w.text(o.id)
        w.text(o.accountID)
        w.text(o.productID)
        w.int(Int64(o.quantity))
        w.int(Int64(o.state.rawValue))
        w.text(o.idempotencyKey ?? "")
        w.int(o.createTimeMs)
        w.int(o.updateTimeMs)
        w.text(o.transactionID ?? "")
        w.int(Int64(o.environment?.rawValue ?? 0))
        w.int(Int64(o.refundedQuantity))
        w.int(Int64(o.store?.rawValue ?? 0))
        return w.string
    }

    /// Snapshots written before schema step 7 have the first 10 fields.
    public static func decodeOrder(_ text: String) -> Order? {
        guard let f = split(text), f.count == 10 || f.count >= 12, let q = Int(f[3]),
            let s = Int(f[4]).flatMap(OrderState.init(rawValue:)), let c = Int64(f[6]), let u = Int64(f[7]), let e = Int(f[9])
        else { return nil }
        let refunded = f.count >= 12 ? Int(f[10]) ?? 0 : (s == .refunded ? q : 0)
        let store = f.count >= 12 ? Int(f[11]).flatMap(Store.init(rawValue:)) : (f[8].isEmpty ? nil : .appStore)
        return Order(
            id: f[0], accountID: f[1], productID: f[2], quantity: q, state: s, idempotencyKey: f[5].isEmpty ? nil : f[5],
            createTimeMs: c, updateTimeMs: u, transactionID: f[8].isEmpty ? nil : f[8],
            environment: StoreEnvironment(rawValue: e), refundedQuantity: refunded, store: store)
    }

    public static func encode(_ e: Entitlement) -> String {
        var w = Writer(capacity: 160 + e.productID.utf8.count + e.subscriptionGroupID.utf8.count + e.pendingProductID.utf8.count)
        w.text(e.productID)
        w.text(e.productKind.rawValue)
        w.text(e.originalTransactionID)
        w.text(e.latestTransactionID)
        w.int(e.purchaseTimeMs)
        w.int(e.expiresTimeMs)
        w.int(e.active ? 1 : 0)
        w.text(e.orderID ?? "")
        w.int(e.revocationTimeMs)
        w.int(e.gracePeriodExpiresTimeMs)
        w.int(e.autoRenew ? 1 : 0)
        w.int(Int64(e.environment?.rawValue ?? 0))
        w.int(Int64(e.state.rawValue))
        w.int(Int64(e.ownership.rawValue))
        w.int(Int64(e.store.rawValue))
        w.text(e.subscriptionGroupID)
        w.text(e.pendingProductID)
        return w.string
    }

    /// Snapshots written before schema step 7 have the first 12 fields; their state is derived from `active`.
    public static func decodeEntitlement(_ text: String) -> Entitlement? {
        guard let f = split(text), f.count == 12 || f.count >= 17, let kind = ProductKind(rawValue: f[1]), let p = Int64(f[4]),
            let x = Int64(f[5]), let r = Int64(f[8]), let g = Int64(f[9]), let env = Int(f[11])
        else { return nil }
        var e = Entitlement(
            productID: f[0], productKind: kind, originalTransactionID: f[2], latestTransactionID: f[3],
            purchaseTimeMs: p, expiresTimeMs: x, active: f[6] == "1", orderID: f[7].isEmpty ? nil : f[7],
            revocationTimeMs: r, gracePeriodExpiresTimeMs: g, autoRenew: f[10] == "1",
            environment: StoreEnvironment(rawValue: env))
        if f.count >= 17 {
            e.state = Int(f[12]).flatMap(EntitlementState.init(rawValue:)) ?? (e.active ? .active : .expired)
            e.ownership = Int(f[13]).flatMap(Ownership.init(rawValue:)) ?? .purchased
            e.store = Int(f[14]).flatMap(Store.init(rawValue:)) ?? .appStore
            e.subscriptionGroupID = f[15]
            e.pendingProductID = f[16]
        } else {
            e.state = r > 0 ? .revoked : e.active ? .active : .expired
        }
        return e
    }
}
