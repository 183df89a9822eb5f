public import Billing
import ProtoWire

/// ListTransactions' `page_token`: where the previous page ended (its last transaction's purchase time and
/// id), as unpadded base64url of `<purchase time ms>:<transaction id>`. Opaque to callers; it names no
/// account, so a token only positions a read of the account the request names.
public enum PageToken {
    /// The longest transaction id a token carries (a transaction id, never a purchase token).
    public static let maxTransactionIDBytes = 128
    /// Longer tokens are malformed before any decoding: base64 of the longest cursor.
    static let maxTokenBytes = (20 + 1 + maxTransactionIDBytes + 2) / 3 * 4

    /// The token that continues after `cursor`.
    public static func encode(_ cursor: HistoryCursor) -> String { base64URL("\(cursor.purchaseTimeMs):\(cursor.transactionID)") }

    /// Unpadded base64url of `text`: the form of every page token billingd makes (ListAuditEntries' too).
    static func base64URL(_ text: String) -> String {
        var url = Array(Base64.encode(Array(text.utf8)).utf8)
        for i in url.indices {
            if url[i] == UInt8(ascii: "+") { url[i] = UInt8(ascii: "-") } else if url[i] == UInt8(ascii: "/") { url[i] = UInt8(ascii: "_") }
        }
        return String(decoding: url, as: UTF8.self)
    }

    /// The cursor a token names; nil unless it is exactly what `encode` makes of some cursor (a purchase time
    /// in decimal, a transaction id of 1 to 128 bytes of UTF-8 without control characters).
    public static func decode(_ token: String) -> HistoryCursor? {
        guard !token.isEmpty, token.utf8.count <= maxTokenBytes, let bytes = Base64.decode(token),
            let colon = bytes.firstIndex(of: UInt8(ascii: ":"))
        else { return nil }
        guard let ms = Int64(String(decoding: bytes[..<colon], as: UTF8.self)),
            let id = String(validating: bytes[(colon + 1)...], as: UTF8.self), !id.isEmpty,
            id.utf8.count <= maxTransactionIDBytes, !id.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        else { return nil }
        let cursor = HistoryCursor(purchaseTimeMs: ms, transactionID: id)
        // One token per cursor: padding, the standard alphabet, leading zeros or stray bits are refused.
        return encode(cursor) == token ? cursor : nil
    }
}
