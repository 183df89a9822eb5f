@testable import AppStoreHTTP
import Testing

@Suite("App Store Server API client URLs")
struct AppStoreAPIClientTests {
    @Test("base URLs: https with and without port and path prefix; anything else refused")
    func urls() {
        let apple = BaseURL("https://api.storekit.itunes.apple.com")!
        #expect(apple.host == "api.storekit.itunes.apple.com" && apple.port == 443 && apple.tls && apple.prefix == "")
        #expect(apple.authority == "api.storekit.itunes.apple.com")
        let local = BaseURL("https://127.0.0.1:8443/proxy/")!
        #expect(local.address == "127.0.0.1:8443" && local.prefix == "/proxy" && local.authority == "127.0.0.1:8443")
        #expect(BaseURL("ftp://x") == nil)
        #expect(BaseURL("https://") == nil)
        #expect(BaseURL("https://host:99999") == nil)
    }

    @Test("ids become one path segment whatever they hold")
    func segments() {
        #expect(AppStoreAPIClient.segment("2000000123456789") == "2000000123456789")
        #expect(AppStoreAPIClient.segment("../x?y=1") == "..%2Fx%3Fy%3D1")
        #expect(AppStoreAPIClient.segment("é") == "%C3%A9")
    }
}
