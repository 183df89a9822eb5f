import Billing
import BillingService
import Crypto
import Foundation
import ProtoJSON

/// One event as Standard Webhooks sends it: the body (`{"type", "timestamp", "data"}`, data the Event in canonical
/// proto3 JSON) and, per attempt, the signed headers.
struct WebhookMessage {
    let id: String
    let body: [UInt8]

    init(_ event: EventRecord, registry: ProtoJSON.Registry) throws(ProtoJSONError) {
        id = "evt_\(event.cursor)"
        let data = try registry.toJSON("billing.v1.Event", binary: EventEncoding.encoded(event))
        var body = Array("{\"type\":\"\(event.kind.typeName)\",\"timestamp\":\"\(RFC3339.format(milliseconds: event.timeMs))\",\"data\":".utf8)
        body += data
        body.append(UInt8(ascii: "}"))
        self.body = body
    }

    /// The headers of one attempt made at `nowSeconds`: `webhook-signature` is `v1,` + base64 of
    /// HMAC-SHA256(`id.timestamp.body`) under the secret's bytes.
    func headers(secret: WebhookSecret, nowSeconds: Int64) -> [(name: String, value: String)] {
        let timestamp = String(nowSeconds)
        let signed = Array("\(id).\(timestamp).".utf8) + body
        let signature = Data(Digest.hmacSHA256(key: secret.key, message: signed)).base64EncodedString()
        return [
            ("content-type", "application/json"), ("webhook-id", id), ("webhook-timestamp", timestamp), ("webhook-signature", "v1," + signature),
        ]
    }
}

/// RFC 3339 UTC with milliseconds: `2026-12-01T20:30:46.123Z`.
enum RFC3339 {
    static func format(milliseconds: Int64) -> String {
        var seconds = time_t(milliseconds.floorDiv(1000))
        let ms = Int(milliseconds - Int64(seconds) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let millis = ms < 10 ? "00\(ms)" : ms < 100 ? "0\(ms)" : "\(ms)"
        return
            "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(millis)Z"
    }
}

extension Int64 {
    fileprivate func floorDiv(_ d: Int64) -> Int64 { self >= 0 ? self / d : -((-self + d - 1) / d) }
}
