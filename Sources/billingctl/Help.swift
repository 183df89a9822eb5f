/// billingctl's help: the whole of it (`billingctl help`), and each command's own part
/// (`billingctl help COMMAND`, `billingctl COMMAND --help`).
///
/// A usage error prints one line, what was wrong and where its help is, never the whole text.
enum Help {
    /// The global options, before any command.
    static let header = """
        usage: billingctl [--addr HOST:PORT] [--tls [--ca PATH | --insecure]] [--api-key KEY] [--timeout SECONDS] COMMAND [options]
               billingctl help [COMMAND]    this text, or one command's
        """

    /// How values, addresses, keys, answers and exit statuses work for every command.
    static let footer = """
        Values given as @PATH are read from that file. The test store lives in --store (default ./teststore).
        The address defaults to $BILLING_ADDR or 127.0.0.1:50051; the API key (sent as authorization: Bearer KEY on
        every call) to $BILLING_API_KEY. With --tls the server's certificate must name the host dialed. Answers print as JSON on stdout;
        errors print as JSON on stderr with exit status 1 (2 for usage errors).
        """

    /// Each command's usage lines, in the order the whole help lists them; a command may have several names.
    static let topics: [(names: [String], text: String)] = [
        (["health"], "  health [--service NAME]                         grpc.health.v1.Health/Check"),
        (
            ["create-order"],
            """
              create-order --account ID --product ID [--idempotency-key K] [--quantity N]
                    CreateOrder: a PENDING order; its orderId goes to StoreKit as the purchase's appAccountToken
            """
        ),
        (["get-order"], "  get-order ORDER_ID                               GetOrder"),
        (
            ["submit-receipt"],
            """
              submit-receipt ORDER_ID (--signed-transaction JWS | --app-receipt BASE64) [--transaction-id ID]
                    SubmitReceipt: the App Store's proof pays the order (--transaction-id picks an app receipt's record)
            """
        ),
        (
            ["restore"],
            """
              restore --account ID [--app-receipt BASE64] [--signed-transaction JWS ...] [--transaction-id ID ...]
                    RestorePurchases: what the account owns, from the proofs given; --transaction-id (any transaction id of
                    a purchase, repeatable) has billingd fetch the signed history from the App Store Server API (billingd
                    needs --appstore-api-* credentials; otherwise FAILED_PRECONDITION APPSTORE_API_NOT_CONFIGURED)
            """
        ),
        (
            ["teststore"],
            """
              teststore init [DIR]                            make a local CA (root, intermediate, leaf with Apple's marker OIDs)
              teststore receipt [--bundle-id ID] [--receipt-type Xcode|ProductionSandbox|Production]
                    --purchase PRODUCT:TRANSACTION_ID[:PURCHASE_MS[:EXPIRES_MS]] ... [--store DIR]
            \(TestStoreCommand.usage)
            """
        ),
        (["entitlements"], "  entitlements ACCOUNT [--include-inactive]         GetEntitlements, from the service's own records"),
        (
            ["events"],
            """
              events [--after CURSOR] [--account ID] [--limit N] [--follow]   ListEvents, one JSON line each; --follow streams
                    (WatchEvents) until interrupted; the next cursor goes to stderr
            """
        ),
        (
            ["history"],
            """
              history ACCOUNT [--limit N] [--json]               ListTransactions, newest purchase first, every page (at most N
                    lines): purchase time, transaction id, product, price, ownership, revocation, tab-separated
            """
        ),
        (
            ["transaction"],
            """
              transaction ID                                     GetTransaction: a transaction (or an original transaction's
                    newest), its account and order
            """
        ),
        (["notify"], "  notify URL FILE|-                                  POST an App Store notification body (HTTP/2; https:// for TLS)"),
        (["offer"], OfferCommands.usage),
        (["proto-json"], ProtoJSONCommand.usage),
        (
            ["demo"],
            "  demo [--store DIR] [--bundle-id ID] [--product ID]   CreateOrder -> signed purchase -> SubmitReceipt -> retry -> Restore"
        ),
        (
            ["load"],
            """
              load [--mix create=5,get=3,submit=1,receipt=1,restore=1,health=1,offer=1] [--connections N] [--concurrency N]
                    [--requests N] [--duration S] [--rate PER_SECOND] [--max-errors PERCENT] [--json] [--store DIR]
                    [--mix notify --notify-addr HOST:PORT]   pre-signed REFUND notifications over h2c, each new (durable)
                    bounded load (at most 10M calls, 1 h); counts grpc-status itself; exit 1 above --max-errors (default 0);
                    a connection that fails is retried with backoff (up to 1 s), for at most 10 s of failures in a row
            """
        ),
        (["reconcile", "lookup-order"], "  reconcile [--since MS], lookup-order ORDER_ID     short for the admin commands below"),
        (
            ["admin"],
            """
              admin reconcile [--since MS] | lookup-order ORDER_ID | test-notification [--environment sandbox|production]
                    | test-notification-status TOKEN [--environment E]      billing.admin.v1.Admin on billingd
            \(AppStoreCommands.supportUsage)
            """
        ),
        (["webhooks"], WebhookCommands.usage),
        (["customer", "grant", "transfer", "refund", "audit"], SupportCommands.usage),
        (["revenue"], RevenueCommands.usage),
        (["play"], PlayCommands.usage),
        (
            ["appstore"],
            """
              appstore test-notification [--environment E] [--wait]   RequestTestNotification through billingd; --wait polls
                    GetTestNotificationStatus until Apple reports a send attempt (up to --timeout)
              appstore transaction|history|statuses|lookup ID --key-id ID --issuer-id UUID --private-key PATH --bundle-id ID
                    [--url URL] [--ca PATH] [--environment sandbox|production]   the App Store Server API called directly;
                    signed items printed decoded, NOT verified
            """
        ),
        (
            ["verify"],
            """
              verify FILE|- [--kind transaction|renewal|notification|app-transaction|receipt] --root PATH ... [--bundle-id ID]
                    [--environment sandbox,production,xcode] [--app-apple-id N] [--now MS]   offline verdict (exit 3 when refused)
            """
        ),
    ]

    /// Everything: the global options, every command, and the rules they share.
    static var full: String {
        ([header, "", "commands:"] + topics.map(\.text) + [footer]).joined(separator: "\n")
    }

    /// One command's help, with a pointer to the global options; nil for a name that is not a command.
    static func topic(_ command: String) -> String? {
        guard let entry = topics.first(where: { $0.names.contains(command) }) else { return nil }
        var lines = ["usage: billingctl [global options] " + entry.text.drop(while: { $0 == " " })]
        // The short forms are explained by the commands they stand for.
        if entry.names.contains("reconcile"), let admin = topics.first(where: { $0.names == ["admin"] }) { lines.append(admin.text) }
        lines.append("(global options, @PATH values, exit statuses: billingctl help)")
        return lines.joined(separator: "\n")
    }

    /// The one line a usage error prints: what was wrong, and which help to read.
    static func errorLine(_ message: String, command: String?) -> String {
        let helpCommand = command.flatMap { topic($0) == nil ? nil : "billingctl help \($0)" } ?? "billingctl help"
        return "billingctl: \(message) (see '\(helpCommand)')"
    }
}
