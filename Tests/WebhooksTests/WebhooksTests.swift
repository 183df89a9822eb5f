import Billing
import Crypto
import Foundation
import ProtoJSON
import Storage
import Testing

@testable import Webhooks
import Lifecycle

/// The webhook cursor's rules on the in-memory ledger and on a real SQLite file: lease, takeover, advance guarded by
/// holder and expected position, failures, replay.
@Suite("Webhook cursor rules")
struct WebhookRulesTests {
    static func stores() throws -> [any OrderStore] {
        let path = NSTemporaryDirectory() + "webhooks-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).db"
        return [InMemoryOrderStore(), try SQLiteOrderStore(path: path)]
    }

    func write<T: Sendable>(_ store: any OrderStore, _ body: @escaping @Sendable (any PurchaseLedger) throws(BillingError) -> T) throws -> T {
        try Blocking.wait { done in store.write(abandoned: { false }, body, completion: done) }.get()
    }

    @Test("One holder at a time; another takes over once the lease ran out; a moved position refuses the advance")
    func leaseAndAdvance() throws {
        for store in try Self.stores() {
            defer { store.close() }
            let a = try write(store) { l throws(BillingError) in try WebhookRules.lease(l, holder: "a", nowMs: 1_000, untilMs: 16_000) }
            #expect(a?.position == 0 && a?.holder == "a")
            #expect(try write(store) { l throws(BillingError) in try WebhookRules.lease(l, holder: "b", nowMs: 2_000, untilMs: 17_000) } == nil)
            #expect(
                try write(store) { l throws(BillingError) in
                    try WebhookRules.advance(l, holder: "a", from: 0, to: 5, nowMs: 3_000, untilMs: 18_000, delivered: true)
                })
            // b is refused while a's lease runs, even with the right position.
            #expect(
                try !write(store) { l throws(BillingError) in
                    try WebhookRules.advance(l, holder: "b", from: 5, to: 6, nowMs: 3_000, untilMs: 18_000, delivered: true)
                })
            #expect(try write(store) { l throws(BillingError) in try WebhookRules.failed(l, holder: "a", error: "HTTP 503", nowMs: 4_000, untilMs: 19_000) })
            let seen = try write(store) { l throws(BillingError) in try l.webhookCursor() }
            #expect(seen?.failures == 1 && seen?.lastError == "HTTP 503" && seen?.lastDeliveryMs == 3_000 && seen?.position == 5)
            // a stopped renewing: b takes over after 19 s and goes on from 5.
            let b = try write(store) { l throws(BillingError) in try WebhookRules.lease(l, holder: "b", nowMs: 19_001, untilMs: 34_000) }
            #expect(b?.position == 5 && b?.holder == "b")
            #expect(
                try !write(store) { l throws(BillingError) in
                    try WebhookRules.advance(l, holder: "a", from: 5, to: 6, nowMs: 19_002, untilMs: 34_000, delivered: true)
                })
            // An operator's replay moves the position under b: b's advance from the old position is refused.
            let replayed = try write(store) { l throws(BillingError) in try WebhookRules.replay(l, after: 2) }
            #expect(replayed.position == 2 && replayed.failures == 0)
            #expect(
                try !write(store) { l throws(BillingError) in
                    try WebhookRules.advance(l, holder: "b", from: 5, to: 6, nowMs: 19_003, untilMs: 34_000, delivered: true)
                })
            #expect(
                try write(store) { l throws(BillingError) in
                    try WebhookRules.advance(l, holder: "b", from: 2, to: 3, nowMs: 19_004, untilMs: 34_000, delivered: true)
                })
        }
    }
}

@Suite("Webhook message, secret and backoff")
struct WebhookMessageTests {
    @Test("The signature is v1, + base64 HMAC-SHA256 of id.timestamp.body under the secret's bytes (Standard Webhooks' example)")
    func standardWebhooksVector() throws {
        // The example of the Standard Webhooks specification's reference libraries.
        let secret = try WebhookSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        let signed = Array("msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{\"test\": 2432232314}".utf8)
        let signature = Data(Digest.hmacSHA256(key: secret.key, message: signed)).base64EncodedString()
        #expect(signature == "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    }

    @Test("Secrets: whsec_ and 24 to 64 bytes, else refused with a reason that does not repeat the secret")
    func secrets() {
        #expect(throws: WebhookConfigurationError.self) { try WebhookSecret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") }
        #expect(throws: WebhookConfigurationError.self) { try WebhookSecret("whsec_QUJD") }
        #expect(throws: WebhookConfigurationError.self) { try WebhookSecret("whsec_" + Data(count: 65).base64EncodedString()) }
        #expect((try? WebhookSecret("whsec_" + Data(count: 24).base64EncodedString()))?.key.count == 24)
        do {
            _ = try WebhookSecret("whsec_c2VjcmV0LXRoYXQtaXMtdG9vLXNob3J0")
        } catch {
            #expect(!error.description.contains("c2VjcmV0"))
        }
    }

    @Test("Event type names and the filter")
    func typeNames() throws {
        #expect(EventKind.orderCompleted.typeName == "ORDER_COMPLETED")
        #expect(EventKind.entitlementProductChanged.typeName == "ENTITLEMENT_PRODUCT_CHANGED")
        #expect(try WebhookConfiguration.events("ORDER_COMPLETED, EVENT_TYPE_ENTITLEMENT_REVOKED") == [.orderCompleted, .entitlementRevoked])
        #expect(throws: WebhookConfigurationError.self) { try WebhookConfiguration.events("ORDER_DELETED") }
    }

    @Test("RFC 3339 times in UTC with milliseconds")
    func times() {
        #expect(RFC3339.format(milliseconds: 0) == "1970-01-01T00:00:00.000Z")
        #expect(RFC3339.format(milliseconds: 1_796_156_446_123) == "2026-12-01T20:20:46.123Z")
    }

    @Test("Backoff doubles from the first wait to the longest, each wait within [w/2, w]")
    func backoff() {
        var b = Backoff(first: 1_000, longest: 600_000)
        var ceilings: [Int64] = []
        for _ in 0..<14 {
            let w = b.next()
            let ceiling = min(600_000, Int64(1_000) << Int64(b.failures - 1))
            #expect(w >= ceiling / 2 && w <= ceiling)
            ceilings.append(ceiling)
        }
        #expect(ceilings.prefix(4) == [1_000, 2_000, 4_000, 8_000])
        #expect(ceilings.last == 600_000)
        b.reset()
        #expect(b.next() <= 1_000)
    }
}
