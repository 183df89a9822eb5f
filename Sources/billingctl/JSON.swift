import BillingAPI
import RPC

/// Proto3 JSON mapping for what billingctl prints: lowerCamelCase names, int64 as strings, enums by name.
enum JSON {
    static func quote(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    static func object(_ fields: [(String, String?)], indent: Int = 0) -> String {
        let pad = String(repeating: "  ", count: indent + 1)
        let present = fields.compactMap { k, v in v.map { "\(pad)\(quote(k)): \($0)" } }
        if present.isEmpty { return "{}" }
        return "{\n" + present.joined(separator: ",\n") + "\n" + String(repeating: "  ", count: indent) + "}"
    }

    static func order(_ o: Order, indent: Int = 0) -> String {
        object([
            ("orderId", o.orderID.isEmpty ? nil : quote(o.orderID)),
            ("accountId", o.accountID.isEmpty ? nil : quote(o.accountID)),
            ("productId", o.productID.isEmpty ? nil : quote(o.productID)),
            ("state", quote(o.state.description)),
            ("createTimeMs", quote(String(o.createTimeMs))),
            ("updateTimeMs", quote(String(o.updateTimeMs))),
            ("transactionId", o.transactionID.isEmpty ? nil : quote(o.transactionID)),
            ("environment", o.environment == .unspecified ? nil : quote(o.environment.description)),
            ("quantity", o.quantity == 0 ? nil : String(o.quantity)),
        ], indent: indent)
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
