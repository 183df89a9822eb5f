import Foundation
public import Billing

/// The `--webhook-*` flags, checked.
public struct WebhookConfiguration: Sendable, Equatable {
    public var url: String
    public var secret: WebhookSecret
    /// nil: every event type.
    public var events: Set<EventKind>?
    /// `--webhook-ca`: a CA bundle trusted besides the system's.
    public var caPath: String?
    /// `--dev`: an `http://` URL is allowed.
    public var allowCleartext = false
    /// One attempt must be answered within this (CONFIG.md: 10 s).
    public var attemptTimeoutMilliseconds = 10_000
    /// Retry back-off: the first wait, doubled per failure up to the longest (CONFIG.md: 1 s to 10 min), with jitter.
    public var firstRetryMilliseconds: Int64 = 1_000
    public var longestRetryMilliseconds: Int64 = 600_000
    /// How long a replica's lease lasts without renewal; another replica takes over after it.
    public var leaseMilliseconds: Int64 = 15_000
    /// Events read from the feed at a time.
    public var batch = 100

    public init(
        url: String, secret: WebhookSecret, events: Set<EventKind>? = nil, caPath: String? = nil, allowCleartext: Bool = false
    )
        throws(WebhookConfigurationError)
    {
        if url.hasPrefix("http://") {
            guard allowCleartext else { throw .init("webhook-url", "must be https:// (http:// only with --dev)") }
        } else if !url.hasPrefix("https://") {
            throw .init("webhook-url", "must be an https:// URL")
        }
        guard !url.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }), url.split(separator: "/", omittingEmptySubsequences: false).count >= 3,
            !url.split(separator: "/", omittingEmptySubsequences: false)[2].isEmpty
        else { throw .init("webhook-url", "is not a URL: \(url.prefix(200))") }
        self.url = url
        self.secret = secret
        self.events = events
        self.caPath = caPath
        self.allowCleartext = allowCleartext
    }

    /// `--webhook-events`: comma-separated type names (`ORDER_COMPLETED`, with or without `EVENT_TYPE_`).
    public static func events(_ list: String) throws(WebhookConfigurationError) -> Set<EventKind> {
        var kinds = Set<EventKind>()
        for raw in list.split(separator: ",") {
            var name = String(raw).trimmingCharacters(in: .whitespaces).uppercased()
            if name.hasPrefix("EVENT_TYPE_") { name.removeFirst(11) }
            guard let kind = EventKind.allCases.first(where: { $0.typeName == name }) else {
                throw .init("webhook-events", "unknown event type \(name.prefix(60)) (known: \(EventKind.allCases.map(\.typeName).joined(separator: ",")))")
            }
            kinds.insert(kind)
        }
        guard !kinds.isEmpty else { throw .init("webhook-events", "is empty") }
        return kinds
    }
}

extension EventKind {
    /// The EventType name without `EVENT_TYPE_` (`ORDER_COMPLETED`), as webhook bodies and `--webhook-events` spell it.
    public var typeName: String {
        var out = ""
        for c in String(describing: self) {
            if c.isUppercase { out += "_" }
            out += c.uppercased()
        }
        return out
    }
}
