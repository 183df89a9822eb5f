package import HTTP2

/// What `--notifications-listen` serves: App Store Server Notifications at `/appstore/notifications` and, with
/// `--rtdn-audience`, Google Play's push deliveries at `/googleplay/rtdn` (404 without it); one front, two endpoints.
package struct NotificationRoutes: Sendable {
    let appStore: NotificationEndpoint
    let rtdn: RTDNEndpoint?

    package init(appStore: NotificationEndpoint, rtdn: RTDNEndpoint?) {
        self.appStore = appStore
        self.rtdn = rtdn
    }

    /// The largest body either endpoint takes; larger ones get 413 from the front before any byte is buffered.
    package static let maxBodyBytes = NotificationEndpoint.maxBodyBytes

    package func precheck(_ request: HTTPRequest) -> HTTPResponse? {
        guard request.path == RTDNEndpoint.path else { return appStore.precheck(request) }
        guard let rtdn else { return NotificationEndpoint.json(404, ["error": "NOT_FOUND"]) }
        return rtdn.precheck(request)
    }

    package func handle(_ request: HTTPRequest, _ respond: @escaping @Sendable (HTTPResponse) -> Void) {
        if request.path == RTDNEndpoint.path, let rtdn { return rtdn.handle(request, respond) }
        appStore.handle(request, respond)
    }
}
