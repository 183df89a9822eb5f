import Foundation

/// A Standard Webhooks signing secret: `whsec_` + base64 of 24 to 64 random bytes; the bytes are the HMAC key.
public struct WebhookSecret: Sendable, Equatable {
    public let key: [UInt8]

    /// Reads `text`; throws a one-line reason (never echoing the secret) when it is not such a secret.
    public init(_ text: String) throws(WebhookConfigurationError) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.hasPrefix("whsec_") else { throw .init("webhook-secret", "must start with whsec_ (Standard Webhooks)") }
        guard let bytes = Data(base64Encoded: String(trimmed.dropFirst(6))) else {
            throw .init("webhook-secret", "the part after whsec_ is not base64")
        }
        guard (24...64).contains(bytes.count) else {
            throw .init("webhook-secret", "must hold 24 to 64 bytes after whsec_ (it holds \(bytes.count))")
        }
        key = Array(bytes)
    }
}

/// A webhook flag that cannot be used; billingd refuses to start with it.
public struct WebhookConfigurationError: Error, Sendable, CustomStringConvertible {
    /// The flag without its dashes (`webhook-secret`).
    public let flag: String
    /// Why, in a few words that never repeat a secret.
    public let problem: String
    public init(_ flag: String, _ problem: String) {
        self.flag = flag
        self.problem = problem
    }
    public var description: String { "--\(flag): \(problem)" }
}
