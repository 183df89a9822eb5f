import Daemon
import Foundation
import Testing

/// Flags, their twins and their checks, from the one flag table (`Configuration.flagTable`).
@Suite("billingd's flags")
struct ConfigurationTests {
    func parse(_ args: [String], _ env: [String: String] = [:]) throws(Configuration.Invalid) -> Configuration {
        try Configuration.parse(args, environment: env)
    }

    func refusal(_ args: [String], _ env: [String: String] = [:]) -> Configuration.Invalid? {
        do {
            _ = try parse(args, env)
            return nil
        } catch {
            return error
        }
    }

    @Test("no flags: the defaults")
    func defaults() throws {
        let c = try parse([])
        #expect(c == Configuration())
        #expect(c.store.database == .sqlite(path: "billing.db"))
        #expect(c.server.listen == "127.0.0.1:50051")
        #expect(c.server.protocols == ["grpc", "connect", "grpc-web"])
    }

    @Test("a flag beats its twin; a twin alone is used; --flag=value and --flag value are the same")
    func twins() throws {
        #expect(try parse(["--max-in-flight", "7"], ["BILLING_MAX_IN_FLIGHT": "5"]).limits.maxInFlight == 7)
        #expect(try parse([], ["BILLING_MAX_IN_FLIGHT": "5"]).limits.maxInFlight == 5)
        #expect(try parse(["--max-in-flight=9"]).limits.maxInFlight == 9)
        #expect(try parse([], ["BILLING_DEV": "yes"]).dev)
        #expect(try !parse(["--dev=false"]).dev)
        #expect(try parse(["--dev"]).dev)
    }

    @Test("repeatable flags add up; their twin is a list")
    func repeatable() throws {
        #expect(try parse(["--bundle-id", "a.b", "--bundle-id", "c.d"]).purchases.bundleIDs == ["a.b", "c.d"])
        #expect(try parse([], ["BILLING_BUNDLE_ID": "a.b, c.d"]).purchases.bundleIDs == ["a.b", "c.d"])
    }

    @Test("refusals name the flag: unknown, twice, no value, a bad value, a stray argument")
    func refusals() {
        #expect(refusal(["--nope"]) == Configuration.Invalid(flag: "nope", problem: "unknown flag (see billingd --help)"))
        #expect(refusal(["--listen", "a:1", "--listen", "b:2"]) == Configuration.Invalid(flag: "listen", problem: "given twice"))
        #expect(refusal(["--listen"]) == Configuration.Invalid(flag: "listen", problem: "needs a value"))
        #expect(refusal(["--threads", "0"])?.flag == "threads")
        #expect(refusal(["--dev=maybe"]) == Configuration.Invalid(flag: "dev", problem: "'maybe' is not true or false"))
        #expect(refusal(["listen"])?.problem == "unexpected argument; flags start with --")
        #expect(refusal(["--listen", "nowhere"]) == Configuration.Invalid(flag: "listen", problem: "'nowhere' is not HOST:PORT"))
        #expect(refusal(["--max-in-flight", "x"])?.description == "billingd: --max-in-flight: 'x' is not a whole number from 1 to 10000000")
    }

    @Test("--database is read once into its kind; the log's form hides a PostgreSQL URL")
    func database() throws {
        #expect(try parse(["--database", "sqlite:/tmp/x.db"]).store.database == .sqlite(path: "/tmp/x.db"))
        #expect(try parse(["--database", "sqlite:///tmp/x.db"]).store.database == .sqlite(path: "/tmp/x.db"))
        let pg = try parse(["--database", "postgres://u:secret@h:5432/db"]).store.database
        #expect(pg == .postgres(url: "postgres://u:secret@h:5432/db"))
        #expect(pg.description == "postgres")
        #expect(!pg.isSQLite)
        #expect(refusal(["--database", "sqlite:"]) == Configuration.Invalid(flag: "database", problem: "sqlite: needs a file path"))
        #expect(refusal(["--database", "mysql://h/db"])?.flag == "database")
    }

    @Test("flags that go together are checked together, whatever their order")
    func together() {
        #expect(refusal(["--tls-cert", "/etc/passwd"]) == Configuration.Invalid(flag: "tls-key", problem: "--tls-cert and --tls-key go together"))
        #expect(refusal(["--tls-client-ca", "/etc/passwd"])?.flag == "tls-client-ca")
        #expect(refusal(["--webhook-secret", "whsec_x"]) == Configuration.Invalid(flag: "webhook-secret", problem: "needs --webhook-url"))
        #expect(refusal(["--rtdn-certs", "/etc/passwd"]) == Configuration.Invalid(flag: "rtdn-certs", problem: "needs --rtdn-audience"))
        // A check that reads another flag (http:// only with --dev) sees it wherever it is on the line.
        #expect(refusal(["--google-play-api-url", "http://127.0.0.1:1"])?.flag == "google-play-api-url")
        #expect(refusal(["--google-play-api-url", "http://127.0.0.1:1", "--dev"]) == nil)
    }

    @Test("--help lists every flag of the table once, with its placeholder")
    func usage() {
        let text = Configuration.usage
        for flag in ["listen", "database", "bundle-id", "dev", "webhook-url", "commission", "offer-signing-issuer-id", "rtdn-certs"] {
            #expect(text.components(separatedBy: "  --\(flag) ").count + text.components(separatedBy: "  --\(flag)\n").count - 2 == 1, "\(flag)")
        }
        #expect(text.contains("--bundle-id ID"))
        #expect(text.contains("--listen HOST:PORT"))
        #expect(!text.contains("--help"))
    }
}
