import BillingAPI
import ProtoWire
import RPC

/// Proto3 JSON mapping for what billingctl prints: lowerCamelCase names, int64 as strings, enums by name.
enum JSON {
    /// `s` as a JSON string literal (`JSONString.quote`).
    static func quote(_ s: String) -> String { JSONString.quote(s) }

    static func object(_ fields: [(String, String?)], indent: Int = 0) -> String {
        let pad = String(repeating: "  ", count: indent + 1)
        let present = fields.compactMap { k, v in v.map { "\(pad)\(quote(k)): \($0)" } }
        if present.isEmpty { return "{}" }
        return "{\n" + present.joined(separator: ",\n") + "\n" + String(repeating: "  ", count: indent) + "}"
    }

    static func order(_ o: Order, indent: Int = 0) -> String { object(orderFields(o), indent: indent) }

    static func orderFields(_ o: Order) -> [(String, String?)] {
        [
            ("orderId", o.orderID.isEmpty ? nil : quote(o.orderID)),
            ("accountId", o.accountID.isEmpty ? nil : quote(o.accountID)),
            ("productId", o.productID.isEmpty ? nil : quote(o.productID)),
            ("state", quote(o.state.description)),
            ("createTimeMs", quote(String(o.createTimeMs))),
            ("updateTimeMs", quote(String(o.updateTimeMs))),
            ("transactionId", o.transactionID.isEmpty ? nil : quote(o.transactionID)),
            ("environment", o.environment == .unspecified ? nil : quote(o.environment.description)),
            ("quantity", o.quantity == 0 ? nil : String(o.quantity)),
            ("refundedQuantity", o.refundedQuantity == 0 ? nil : String(o.refundedQuantity)),
            ("store", o.store == .unspecified ? nil : quote(o.store.description)),
        ]
    }

    static func error(_ e: RPCError) -> String {
        var metadata: String?
        if !e.metadata.isEmpty {
            metadata = object(e.metadata.keys.sorted().map { ($0, quote(e.metadata[$0]!)) }, indent: 1)
        }
        return object([
            ("code", quote(e.code.description)), ("message", quote(e.message)),
            ("reason", e.reason.map(quote)), ("metadata", metadata),
        ])
    }
}

extension JSON {
    static func transaction(_ t: Transaction, indent: Int) -> String { object(transactionFields(t), indent: indent) }

    static func transactionFields(_ t: Transaction) -> [(String, String?)] {
        func text(_ s: String) -> String? { s.isEmpty ? nil : quote(s) }
        return [
            ("transactionId", quote(t.transactionID)), ("originalTransactionId", quote(t.originalTransactionID)),
            ("productId", quote(t.productID)), ("productType", quote(t.productType.description)),
            ("purchaseTimeMs", quote(String(t.purchaseTimeMs))),
            ("expiresTimeMs", t.expiresTimeMs == 0 ? nil : quote(String(t.expiresTimeMs))),
            ("revocationTimeMs", t.revocationTimeMs == 0 ? nil : quote(String(t.revocationTimeMs))),
            ("quantity", t.quantity == 0 ? nil : String(t.quantity)), ("environment", quote(t.environment.description)),
            ("appAccountToken", text(t.appAccountToken)), ("bundleId", quote(t.bundleID)),
            ("store", t.store == .unspecified ? nil : quote(t.store.description)),
            ("ownership", t.ownership == .unspecified ? nil : quote(t.ownership.description)),
            ("priceMilliunits", t.priceMilliunits == 0 ? nil : quote(String(t.priceMilliunits))), ("currency", text(t.currency)),
            ("storefront", text(t.storefront)), ("offerId", text(t.offerID)), ("offerType", text(t.offerType)),
            ("subscriptionGroupId", text(t.subscriptionGroupID)), ("upgraded", t.upgraded ? "true" : nil),
            ("revocationType", t.revocationType == .unspecified ? nil : quote(t.revocationType.description)),
            ("revocationPercentage", t.revocationPercentage == 0 ? nil : String(t.revocationPercentage)),
            ("revocationReason", text(t.revocationReason)),
        ]
    }

    static func submitResponse(_ r: SubmitReceiptResponse) -> String {
        object([
            ("order", r.order.map { order($0, indent: 1) }), ("transaction", r.transaction.map { transaction($0, indent: 1) }),
            ("alreadyProcessed", r.alreadyProcessed ? "true" : nil),
        ])
    }

    static func entitlement(_ e: Entitlement, indent: Int) -> String { object(entitlementFields(e), indent: indent) }

    static func entitlementFields(_ e: Entitlement) -> [(String, String?)] {
        [
            ("productId", quote(e.productID)), ("productType", quote(e.productType.description)),
            ("originalTransactionId", quote(e.originalTransactionID)), ("latestTransactionId", quote(e.latestTransactionID)),
            ("purchaseTimeMs", quote(String(e.purchaseTimeMs))), ("expiresTimeMs", e.expiresTimeMs == 0 ? nil : quote(String(e.expiresTimeMs))),
            ("active", e.active ? "true" : "false"), ("orderId", e.orderID.isEmpty ? nil : quote(e.orderID)),
            ("revocationTimeMs", e.revocationTimeMs == 0 ? nil : quote(String(e.revocationTimeMs))),
            ("gracePeriodExpiresTimeMs", e.gracePeriodExpiresTimeMs == 0 ? nil : quote(String(e.gracePeriodExpiresTimeMs))),
            ("autoRenew", e.autoRenew ? "true" : nil),
            ("environment", e.environment.rawValue == 0 ? nil : quote(e.environment.description)),
            ("state", e.state == .unspecified ? nil : quote(e.state.description)),
            ("ownership", e.ownership == .unspecified ? nil : quote(e.ownership.description)),
            ("store", e.store == .unspecified ? nil : quote(e.store.description)),
            ("subscriptionGroupId", e.subscriptionGroupID.isEmpty ? nil : quote(e.subscriptionGroupID)),
            ("pendingProductId", e.pendingProductID.isEmpty ? nil : quote(e.pendingProductID)),
        ]
    }

    /// One event on one line (for `events`, one line each).
    static func event(_ e: Event) -> String {
        line([
            ("cursor", quote(String(e.cursor))), ("type", quote(e.type.description)), ("timeMs", quote(String(e.timeMs))),
            ("accountId", quote(e.accountID)), ("cause", quote(e.cause)),
            ("notificationUuid", e.notificationUUID.isEmpty ? nil : quote(e.notificationUUID)),
            ("transactionId", e.transactionID.isEmpty ? nil : quote(e.transactionID)),
            ("order", e.order.map { line(orderFields($0)) }),
            ("entitlement", e.entitlement.map { line(entitlementFields($0)) }),
        ])
    }

    /// An object on one line.
    static func line(_ fields: [(String, String?)]) -> String {
        "{" + fields.compactMap { k, v in v.map { "\(quote(k)): \($0)" } }.joined(separator: ", ") + "}"
    }

    static func restoreResponse(_ r: RestorePurchasesResponse) -> String {
        let items = r.entitlements.map { "    " + entitlement($0, indent: 2) }
        return "{\n  \"entitlements\": [" + (items.isEmpty ? "]" : "\n" + items.joined(separator: ",\n") + "\n  ]") + "\n}"
    }
}
