import Logging
import Foundation
import Glibc

/// billingd's entry point: parse, start, wait for SIGTERM/SIGINT (SIGHUP: reload the API keys), drain, exit.
public enum Daemon {
    public static func main() -> Never {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.contains("--help") || arguments.contains("-h") {
            print(Configuration.usage)
            exit(0)
        }
        if arguments.contains("--version") {
            print("billingd \(version)")
            exit(0)
        }
        var configuration: Configuration
        do {
            configuration = try Configuration.parse(arguments, environment: ProcessInfo.processInfo.environment)
        } catch {
            FileHandle.standardError.write(Data((error.description + "\n").utf8))
            exit(2)
        }

        // Signals are taken by sigwait on this thread; block them before any other thread starts.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGHUP)
        pthread_sigmask(SIG_BLOCK, &set, nil)
        signal(SIGPIPE, SIG_IGN)

        // Connections are file descriptors: take the whole hard limit, and keep --max-connections under it.
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)

        let usable = Int(clamping: limit.rlim_cur) - 128
        if usable > 0 && configuration.limits.maxConnections > usable { configuration.limits.maxConnections = usable }
        let logger = Logger(level: configuration.observability.logLevel)
        let app: App
        do {
            app = try App(configuration: configuration, logger: logger)
            try app.start()
        } catch {
            FileHandle.standardError.write(Data((error.description + "\n").utf8))
            exit(2)
        }
        logger.flush()
        var received: Int32 = 0
        while true {
            sigwait(&set, &received)
            guard received == SIGHUP else { break }
            // SIGHUP reads --api-keys and --exchange-rates again (key rotation, new rates, without a restart).
            logger.log(.info, "signal", [("signal", .string("SIGHUP"))])
            app.reloadKeys()
            app.reloadExchangeRates()
            logger.flush()
        }
        logger.log(.info, "signal", [("signal", .string(received == SIGTERM ? "SIGTERM" : "SIGINT"))])
        app.stop()
        exit(0)
    }

    public static let version = "0.1.0"
}
