package import Billing
package import Daemon
import Logging
import Glibc

/// billingd assembled in memory: the App the flags describe (its handlers, interceptors, keys, limits, metrics,
/// Connect gateway), on a store of the test's (an `InMemoryOrderStore` by default), called over every protocol
/// through `client` (no port bound, no thread of its own for the calls; the App's workers are not started).
package final class InMemoryApp {
    package let app: App
    package let store: any OrderStore
    package let client: PipelineClient

    package init(_ arguments: [String] = [], store: any OrderStore = InMemoryOrderStore()) throws {
        var configuration = try Configuration.parse(arguments, environment: [:])
        configuration.observability.logLevel = .error
        self.store = store
        // Logs to /dev/null: a test reads records, not lines.
        let logger = Logger(level: .error, output: open("/dev/null", O_WRONLY))
        app = try App(configuration: configuration, logger: logger, store: store)
        client = PipelineClient(serving: app.portConfiguration)
    }
}
