import JOSE
import Glibc

// Google's JSON into `GooglePlay` values: camelCase members, int64 as JSON strings (a bare number is taken too),
// google-datetime as RFC 3339, enums as their names. A member of the wrong type is `invalidAnswer`; a member
// billingd does not read is ignored.

extension GooglePlay.ProductPurchase {
    /// A ProductPurchase from Google's JSON.
    public init(json: [UInt8]) throws(GooglePlayAPIError) {
        let o = try GoogleJSON.object(json, "ProductPurchase")
        self.init(
            orderID: try o.string("orderId"), purchaseState: try o.int("purchaseState") ?? 0, consumptionState: try o.int("consumptionState") ?? 0,
            acknowledgementState: try o.int("acknowledgementState") ?? 0, purchaseTimeMillis: try o.int64("purchaseTimeMillis") ?? 0,
            purchaseType: try o.int("purchaseType"), quantity: try o.int("quantity") ?? 1, refundableQuantity: try o.int("refundableQuantity"),
            obfuscatedExternalAccountID: try o.string("obfuscatedExternalAccountId"),
            obfuscatedExternalProfileID: try o.string("obfuscatedExternalProfileId"), regionCode: try o.string("regionCode"),
            productID: try o.string("productId"), purchaseToken: try o.string("purchaseToken"), developerPayload: try o.string("developerPayload"),
            kind: try o.string("kind"))
    }
}

extension GooglePlay.SubscriptionPurchaseV2 {
    /// A SubscriptionPurchaseV2 from Google's JSON.
    public init(json: [UInt8]) throws(GooglePlayAPIError) {
        let o = try GoogleJSON.object(json, "SubscriptionPurchaseV2")
        var items: [GooglePlay.LineItem] = []
        for item in try o.objects("lineItems") {
            let plan = try item.object("autoRenewingPlan")
            let prepaid = try item.object("prepaidPlan")
            let offer = try item.object("offerDetails")
            let replacement = try item.object("itemReplacement")
            let phase = try item.object("offerPhase")
            guard let productID = try item.string("productId") else { throw .invalidAnswer("SubscriptionPurchaseV2: a line item without productId") }
            items.append(
                GooglePlay.LineItem(
                    productID: productID, expiryTimeMillis: try item.time("expiryTime"), autoRenewing: plan != nil,
                    autoRenewEnabled: try plan?.bool("autoRenewEnabled"), recurringPrice: try plan?.object("recurringPrice").map(GoogleJSON.money),
                    prepaid: prepaid != nil, allowExtendAfterTimeMillis: try prepaid?.time("allowExtendAfterTime"),
                    offerDetails: try offer.map { o throws(GooglePlayAPIError) in
                        GooglePlay.OfferDetails(basePlanID: try o.string("basePlanId"), offerID: try o.string("offerId"), offerTags: try o.strings("offerTags"))
                    },
                    latestSuccessfulOrderID: try item.string("latestSuccessfulOrderId"),
                    itemReplacement: try replacement.map { r throws(GooglePlayAPIError) in
                        GooglePlay.ItemReplacement(
                            productID: try r.string("productId"), basePlanID: try r.string("basePlanId"), offerID: try r.string("offerId"),
                            replacementMode: try r.string("replacementMode"))
                    },
                    deferredReplacementProductID: try item.object("deferredItemReplacement")?.string("productId")))
            items[items.count - 1].offerPhase = ["freeTrial", "introductoryPrice", "basePrice", "prorationPeriod"].first { phase?.has($0) == true }
        }
        let accounts = try o.object("externalAccountIdentifiers")
        var canceled: GooglePlay.CanceledStateContext?
        if let c = try o.object("canceledStateContext") {
            let user = try c.object("userInitiatedCancellation")
            let initiator: GooglePlay.CanceledStateContext.Initiator? = [.user, .system, .developer, .replacement].first { c.has($0.rawValue) }
            canceled = GooglePlay.CanceledStateContext(
                initiator: initiator, cancelTimeMillis: try user?.time("cancelTime"),
                cancelSurveyReason: try user?.object("cancelSurveyResult")?.string("reason"))
        }
        self.init(
            subscriptionState: GooglePlay.SubscriptionState(rawValue: try o.string("subscriptionState") ?? "SUBSCRIPTION_STATE_UNSPECIFIED"),
            lineItems: items, startTimeMillis: try o.time("startTime"), regionCode: try o.string("regionCode"),
            latestOrderID: try o.string("latestOrderId"), linkedPurchaseToken: try o.string("linkedPurchaseToken"),
            acknowledgementState: GooglePlay.AcknowledgementState(rawValue: try o.string("acknowledgementState") ?? "ACKNOWLEDGEMENT_STATE_UNSPECIFIED"),
            externalAccountIdentifiers: try accounts.map { a throws(GooglePlayAPIError) in
                GooglePlay.ExternalAccountIdentifiers(
                    externalAccountID: try a.string("externalAccountId"), obfuscatedExternalAccountID: try a.string("obfuscatedExternalAccountId"),
                    obfuscatedExternalProfileID: try a.string("obfuscatedExternalProfileId"))
            },
            isTestPurchase: o.has("testPurchase"), autoResumeTimeMillis: try o.object("pausedStateContext")?.time("autoResumeTime"),
            canceledStateContext: canceled, kind: try o.string("kind"))
    }
}

extension GooglePlay.VoidedPurchasesPage {
    /// A VoidedPurchasesListResponse from Google's JSON.
    public init(json: [UInt8]) throws(GooglePlayAPIError) {
        let o = try GoogleJSON.object(json, "VoidedPurchasesListResponse")
        var purchases: [GooglePlay.VoidedPurchase] = []
        for v in try o.objects("voidedPurchases") {
            guard let token = try v.string("purchaseToken"), let voided = try v.int64("voidedTimeMillis") else {
                throw .invalidAnswer("VoidedPurchase without purchaseToken or voidedTimeMillis")
            }
            purchases.append(
                GooglePlay.VoidedPurchase(
                    purchaseToken: token, orderID: try v.string("orderId"), purchaseTimeMillis: try v.int64("purchaseTimeMillis"), voidedTimeMillis: voided,
                    voidedSource: try v.int("voidedSource") ?? 0, voidedReason: try v.int("voidedReason") ?? 0, voidedQuantity: try v.int("voidedQuantity"),
                    refundType: try v.int("refundType"), kind: try v.string("kind")))
        }
        let next = try o.object("tokenPagination")?.string("nextPageToken")
        self.init(purchases: purchases, nextPageToken: next?.isEmpty == false ? next : nil)
    }
}

/// A JSON object of Google's answer with typed, throwing member reads.
package struct GoogleJSON: Sendable {
    let members: JSONObject
    let schema: String

    /// The top-level object of an answer.
    package static func object(_ bytes: [UInt8], _ schema: String) throws(GooglePlayAPIError) -> GoogleJSON {
        guard let value = try? JSONReader.parse(bytes), case .object(let o) = value else { throw .invalidAnswer("\(schema): not a JSON object") }
        return GoogleJSON(members: o, schema: schema)
    }

    package func has(_ key: String) -> Bool { members[key] != nil && members[key] != .null }

    private func wrong(_ key: String, _ what: String) -> GooglePlayAPIError { .invalidAnswer("\(schema).\(key) is not \(what)") }

    package func string(_ key: String) throws(GooglePlayAPIError) -> String? {
        switch members[key] {
        case nil, .null?: return nil
        case .string(let s)?: return s
        default: throw wrong(key, "a string")
        }
    }

    /// An int64: a JSON string of digits, as Google sends them (a bare integer is taken too).
    package func int64(_ key: String) throws(GooglePlayAPIError) -> Int64? {
        switch members[key] {
        case nil, .null?: return nil
        case .integer(let n)?: return n
        case .string(let s)?:
            guard let n = Int64(s) else { throw wrong(key, "an int64 string") }
            return n
        default: throw wrong(key, "an int64")
        }
    }

    /// An int32: a JSON number, as Google sends them.
    package func int(_ key: String) throws(GooglePlayAPIError) -> Int? {
        switch members[key] {
        case nil, .null?: return nil
        case .integer(let n)?:
            guard let i = Int32(exactly: n) else { throw wrong(key, "an int32") }
            return Int(i)
        default: throw wrong(key, "an int32")
        }
    }

    package func bool(_ key: String) throws(GooglePlayAPIError) -> Bool? {
        switch members[key] {
        case nil, .null?: return nil
        case .bool(let b)?: return b
        default: throw wrong(key, "a boolean")
        }
    }

    /// A google-datetime (RFC 3339) as milliseconds since 1970.
    package func time(_ key: String) throws(GooglePlayAPIError) -> Int64? {
        guard let s = try string(key) else { return nil }
        guard let ms = RFC3339.milliseconds(s) else { throw wrong(key, "an RFC 3339 time") }
        return ms
    }

    package func object(_ key: String) throws(GooglePlayAPIError) -> GoogleJSON? {
        switch members[key] {
        case nil, .null?: return nil
        case .object(let o)?: return GoogleJSON(members: o, schema: schema + "." + key)
        default: throw wrong(key, "an object")
        }
    }

    package func objects(_ key: String) throws(GooglePlayAPIError) -> [GoogleJSON] {
        switch members[key] {
        case nil, .null?: return []
        case .array(let items)?:
            var out: [GoogleJSON] = []
            for item in items {
                guard case .object(let o) = item else { throw wrong(key, "an array of objects") }
                out.append(GoogleJSON(members: o, schema: schema + "." + key))
            }
            return out
        default: throw wrong(key, "an array")
        }
    }

    package func strings(_ key: String) throws(GooglePlayAPIError) -> [String] {
        switch members[key] {
        case nil, .null?: return []
        case .array(let items)?:
            var out: [String] = []
            for item in items {
                guard case .string(let s) = item else { throw wrong(key, "an array of strings") }
                out.append(s)
            }
            return out
        default: throw wrong(key, "an array")
        }
    }

    static func money(_ m: GoogleJSON) throws(GooglePlayAPIError) -> GooglePlay.Money {
        GooglePlay.Money(currencyCode: try m.string("currencyCode") ?? "", units: try m.int64("units") ?? 0, nanos: Int32(try m.int("nanos") ?? 0))
    }
}

/// RFC 3339 date-times (`2026-12-01T20:43:06.123Z`, `...T20:43:06+01:00`, up to nanoseconds) as milliseconds.
public enum RFC3339 {
    /// Milliseconds since 1970, or nil when `text` is not an RFC 3339 date-time.
    public static func milliseconds(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        func digits(_ at: Int, _ count: Int) -> Int? {
            guard at + count <= b.count else { return nil }
            var n = 0
            for c in b[at..<(at + count)] {
                guard (48...57).contains(c) else { return nil }
                n = n * 10 + Int(c - 48)
            }
            return n
        }
        guard b.count >= 20, let year = digits(0, 4), b[4] == UInt8(ascii: "-"), let month = digits(5, 2), b[7] == UInt8(ascii: "-"),
            let day = digits(8, 2), b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t"), let hour = digits(11, 2),
            b[13] == UInt8(ascii: ":"), let minute = digits(14, 2), b[16] == UInt8(ascii: ":"), let second = digits(17, 2),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var i = 19
        var millis = 0
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            var scale = 100
            let start = i
            while i < b.count, (48...57).contains(b[i]) {
                millis += Int(b[i] - 48) * scale
                scale /= 10
                i += 1
            }
            guard i > start else { return nil }
        }
        var offset = 0
        guard i < b.count else { return nil }
        if b[i] == UInt8(ascii: "Z") || b[i] == UInt8(ascii: "z") {
            i += 1
        } else if b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
            guard let h = digits(i + 1, 2), i + 3 < b.count, b[i + 3] == UInt8(ascii: ":"), let m = digits(i + 4, 2), h < 24, m < 60 else { return nil }
            offset = (h * 60 + m) * 60 * (b[i] == UInt8(ascii: "+") ? 1 : -1)
            i += 6
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        var t = tm()
        t.tm_year = Int32(year - 1900)
        t.tm_mon = Int32(month - 1)
        t.tm_mday = Int32(day)
        t.tm_hour = Int32(hour)
        t.tm_min = Int32(minute)
        t.tm_sec = Int32(min(second, 59))
        let seconds = Int64(timegm(&t)) - Int64(offset)
        return seconds * 1000 + Int64(millis)
    }

    /// `ms` as Google writes a google-datetime: UTC, milliseconds, `Z`.
    public static func format(milliseconds ms: Int64) -> String {
        var seconds = time_t(ms >= 0 ? ms / 1000 : (ms - 999) / 1000)
        var t = tm()
        gmtime_r(&seconds, &t)
        func pad(_ n: Int32, _ width: Int) -> String {
            let s = String(n)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        let frac = Int32(((ms % 1000) + 1000) % 1000)
        return "\(pad(t.tm_year + 1900, 4))-\(pad(t.tm_mon + 1, 2))-\(pad(t.tm_mday, 2))T\(pad(t.tm_hour, 2)):\(pad(t.tm_min, 2)):"
            + "\(pad(t.tm_sec, 2)).\(pad(frac, 3))Z"
    }
}

/// Percent-encoding of one URL path segment or form value: everything but RFC 3986's unreserved characters, so an
/// id can never change the path (a `/`, `?`, `#` or `:` in a token stays inside its segment).
public enum PathSegment {
    private static let hex = Array("0123456789ABCDEF".utf8)

    public static func encode(_ s: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        for b in s.utf8 {
            let unreserved =
                (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x2D || b == 0x2E || b == 0x5F || b == 0x7E
            if unreserved {
                out.append(b)
            } else {
                out += [0x25, hex[Int(b >> 4)], hex[Int(b & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
