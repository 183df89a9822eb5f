import IO
import BillingAPI
import Foundation
import HTTP2
import ProtoWire
import RPC

/// billingctl: a command-line client for billingd. Its help is in Help.swift.

struct Usage: Error { var message: String }

/// Global options, then the command and its options.
struct Options {
    var addr = ProcessInfo.processInfo.environment["BILLING_ADDR"] ?? "127.0.0.1:50051"
    var tls = false
    var ca: String?
    var insecure = false
    /// Sent as `authorization: Bearer KEY` on every call.
    var apiKey = ProcessInfo.processInfo.environment["BILLING_API_KEY"].flatMap { $0.isEmpty ? nil : $0 }
    var timeout = 10.0
    var command = ""
    var positional: [String] = []
    var named: [String: String] = [:]
    var repeated: [String: [String]] = [:]

    init(_ args: [String]) throws {
        var i = 0
        func value(_ flag: String) throws -> String {
            guard i + 1 < args.count else { throw Usage(message: "\(flag) needs a value") }
            i += 1
            return args[i]
        }
        while i < args.count {
            let a = args[i]
            switch a {
            case "--addr": addr = try value(a)
            case "--tls": tls = true
            case "--json": named["json"] = "true"
            case "--follow", "--include-inactive", "--wait", "--allow-introductory-offer", "--subscription", "--test", "--revoke":
                named[String(a.dropFirst(2))] = "true"
            case "--ca": ca = try value(a); tls = true
            case "--insecure": insecure = true; tls = true
            case "--api-key": apiKey = try value(a)
            case "--timeout":
                guard let t = Double(try value(a)), t > 0 else { throw Usage(message: "--timeout needs a positive number of seconds") }
                timeout = t
            default:
                if command.isEmpty && !a.hasPrefix("-") {
                    command = a
                } else if a.hasPrefix("--") {
                    let key = String(a.dropFirst(2))
                    // A mistyped flag is named as such, before it is taken for one that needs a value.
                    guard Options.commandFlags.values.contains(where: { $0.contains(key) }) else {
                        throw Usage(message: "unknown flag \(a)")
                    }
                    let v = try value(a)
                    named[key] = v
                    repeated[key, default: []].append(v)
                } else {
                    positional.append(a)
                }
            }
            i += 1
        }
        if command.isEmpty { throw Usage(message: "no command") }
        if let known = Options.commandFlags[command] {
            for key in named.keys.sorted() where !known.contains(key) && key != "json" {
                throw Usage(message: "unknown flag --\(key) for \(command)")
            }
        }
    }

    /// The flags each command reads (besides the global ones parsed above).
    static let commandFlags: [String: Set<String>] = [
        "health": ["service"],
        "create-order": ["account", "product", "idempotency-key", "quantity"],
        "get-order": ["order-id"],
        "submit-receipt": ["order-id", "signed-transaction", "app-receipt", "transaction-id"],
        "restore": ["account", "app-receipt", "signed-transaction", "transaction-id"],
        "teststore": TestStoreCommand.flags.union(PlayCommands.flags),
        "play": PlayCommands.flags,
        "entitlements": ["account", "include-inactive"],
        "events": ["after", "account", "limit", "follow"],
        "history": ["account", "limit"],
        "transaction": ["transaction-id"],
        "notify": [],
        "demo": ["store", "bundle-id", "product"],
        "load": [
            "mix", "scenario", "connections", "concurrency", "requests", "duration", "rate", "max-errors", "store",
            "product", "bundle-id", "notify-addr",
        ],
        "admin": ["since", "environment", "days", "reason", "request-id", "storefront"],
        "webhooks": ["from"],
        "reconcile": ["since"],
        "lookup-order": [],
        "appstore": ["wait", "key-id", "issuer-id", "private-key", "bundle-id", "url", "environment"],
        "verify": ["kind", "root", "bundle-id", "environment", "app-apple-id", "now", "xcode-decode-only"],
        "offer": ["kind", "product", "offer", "order", "transaction-id", "bundle-id", "allow-introductory-offer"],
    ].merging(SupportCommands.flags) { a, _ in a }.merging(RevenueCommands.flags) { a, _ in a }

    /// The command word of an argument list (the first word that is neither a global flag nor its value); nil
    /// when there is none. Usage errors and `--help` use it before, or without, a full parse.
    static func commandWord(_ args: [String]) -> String? {
        var i = 0
        while i < args.count {
            let a = args[i]
            if ["--addr", "--ca", "--api-key", "--timeout"].contains(a) {
                i += 2
                continue
            }
            if !a.hasPrefix("-") { return a }
            i += 1
        }
        return nil
    }

    func client() throws -> Client {
        let context = tls ? try TLSContext(clientCAPath: ca, insecure: insecure) : nil
        let client = try Client(address: addr, tls: context, timeoutSeconds: Int(timeout.rounded(.up)))
        if let apiKey { client.metadata = [("authorization", "Bearer " + apiKey)] }
        return client
    }
}

func call<Response: ProtoMessage>(
    _ options: Options, _ method: String, _ request: some ProtoMessage,
    _ type: Response.Type, client existing: Client? = nil
) throws -> Response {
    let answer: UnaryResponse
    do {
        let client = try existing ?? options.client()
        answer = try client.unary(method, message: request.encoded(), timeoutNanoseconds: Int64(options.timeout * 1e9))
    } catch let error as SocketError {
        throw Hinted(error: error, hint: options.tls ? nil : tlsHint(error))
    }
    // Every gRPC answer carries grpc-status; without one the peer is something else (another port of billingd, a web server).
    if !(answer.headers + answer.trailers).contains(where: { $0.name == "grpc-status" }) && answer.resetCode == nil {
        let status = answer.httpStatus == 0 ? "no HTTP status" : "HTTP status \(answer.httpStatus)"
        FileHandle.standardError.write(Data("billingctl: the peer at \(options.addr) did not answer gRPC (\(status), no grpc-status): wrong port?\n".utf8))
        exit(1)
    }
    if let error = answer.error {
        FileHandle.standardError.write(Data((JSON.error(error) + "\n").utf8))
        exit(1)
    }
    if let reset = answer.resetCode {
        FileHandle.standardError.write(Data("billingctl: the server reset the call (HTTP/2 error \(reset))\n".utf8))
        exit(1)
    }
    return try Response(decoding: answer.message)
}

/// A connection error with advice for the usual mistake behind it.
struct Hinted: Error, CustomStringConvertible {
    var error: SocketError
    var hint: String?
    var description: String { hint.map { "\(error) (\($0))" } ?? "\(error)" }
}

/// A plaintext client that a TLS port hangs up on (reset, broken pipe, or TLS bytes where HTTP/2 frames belong).
func tlsHint(_ error: SocketError) -> String? {
    switch error {
    case .system(_, let err) where err == ECONNRESET || err == EPIPE: "is this a TLS port? try --tls"
    case .protocolError: "is this a TLS port? try --tls"
    default: nil
    }
}

/// `billingctl help [COMMAND]`, or `--help` / `-h` anywhere: the help asked for, on stdout.
func printHelp(_ args: [String]) throws {
    var command = Options.commandWord(args)
    if command == "help" {
        let rest = args.drop(while: { $0 != "help" }).dropFirst().filter { !$0.hasPrefix("-") }
        guard rest.count <= 1 else { throw Usage(message: "help takes one command") }
        command = rest.first
    }
    guard let command else { return print(Help.full) }
    guard let text = Help.topic(command) else { throw Usage(message: "no command '\(command)'") }
    print(text)
}

func run() throws {
    let args = Array(CommandLine.arguments.dropFirst())
    if Options.commandWord(args) == "help" || args.contains("--help") || args.contains("-h") { return try printHelp(args) }
    if args.first == "proto-json" { return try ProtoJSONCommand.run(Array(args.dropFirst())) }
    let options = try Options(args)
    switch options.command {
    case "health":
        let r = try call(
            options, "grpc.health.v1.Health/Check", HealthCheckRequest(service: options.named["service"] ?? ""),
            HealthCheckResponse.self)
        print(JSON.object([("status", JSON.quote(r.status.description))]))
    case "create-order":
        var req = CreateOrderRequest()
        guard let account = options.named["account"], let product = options.named["product"] else {
            throw Usage(message: "create-order needs --account and --product")
        }
        req.accountID = account
        req.productID = product
        req.idempotencyKey = options.named["idempotency-key"] ?? ""
        if let q = options.named["quantity"] {
            guard let n = Int32(q) else { throw Usage(message: "--quantity needs a number") }
            req.quantity = n
        }
        let r = try call(options, "billing.v1.Billing/CreateOrder", req, CreateOrderResponse.self)
        print(JSON.object([("order", r.order.map { JSON.order($0, indent: 1) })]))
    case "get-order":
        guard let id = options.positional.first ?? options.named["order-id"] else { throw Usage(message: "get-order needs an ORDER_ID") }
        let r = try call(options, "billing.v1.Billing/GetOrder", GetOrderRequest(orderID: id), GetOrderResponse.self)
        print(JSON.object([("order", r.order.map { JSON.order($0, indent: 1) })]))
    case "submit-receipt":
        guard let id = options.positional.first ?? options.named["order-id"] else { throw Usage(message: "submit-receipt needs an ORDER_ID") }
        var req = SubmitReceiptRequest()
        req.orderID = id
        if let jws = options.named["signed-transaction"] {
            req.proof = .signedTransaction(try readValue(jws))
        } else if let receipt = options.named["app-receipt"] {
            req.proof = .appReceipt(try readValue(receipt))
        } else {
            throw Usage(message: "submit-receipt needs --signed-transaction or --app-receipt")
        }
        req.transactionID = options.named["transaction-id"] ?? ""
        let r = try call(options, "billing.v1.Billing/SubmitReceipt", req, SubmitReceiptResponse.self)
        print(JSON.submitResponse(r))
    case "restore":
        guard let account = options.named["account"] else { throw Usage(message: "restore needs --account") }
        var req = RestorePurchasesRequest()
        req.accountID = account
        if let receipt = options.named["app-receipt"] { req.appReceipt = try readValue(receipt) }
        for jws in options.repeated["signed-transaction"] ?? [] { req.signedTransactions.append(try readValue(jws)) }
        req.transactionIDs = options.repeated["transaction-id"] ?? []
        let r = try call(options, "billing.v1.Billing/RestorePurchases", req, RestorePurchasesResponse.self)
        print(JSON.restoreResponse(r))
    case "entitlements":
        try AfterSaleCommands.entitlements(options)
    case "events":
        try AfterSaleCommands.events(options)
    case "notify":
        try AfterSaleCommands.notify(options)
    case "history":
        try TransactionCommands.history(options)
    case "transaction":
        try TransactionCommands.transaction(options)
    case "teststore":
        try TestStoreCommand.run(options)
    case "demo":
        try Demo.run(options)
    case "verify":
        try VerifyCommand.run(options)
    case "load":
        try LoadCommand.run(options)
    case "admin":
        try AppStoreCommands.admin(options)
    case "reconcile", "lookup-order":
        // Short forms of `admin reconcile` and `admin lookup-order`.
        var o = options
        o.positional.insert(options.command, at: 0)
        try AppStoreCommands.admin(o)
    case "appstore":
        try AppStoreCommands.appStore(options)
    case "offer":
        try OfferCommands.run(options)
    case "webhooks":
        try WebhookCommands.run(options)
    case "play":
        try PlayCommands.verify(options)
    case "customer", "grant", "transfer", "refund", "audit":
        try SupportCommands.run(options)
    case "revenue":
        try RevenueCommands.run(options)
    default:
        throw Usage(message: "unknown command '\(options.command)'")
    }
}

/// A flag value, or the contents of a file when written `@PATH`.
func readValue(_ value: String) throws -> String {
    guard value.hasPrefix("@") else { return value }
    let path = String(value.dropFirst())
    guard let data = FileManager.default.contents(atPath: path) else { throw Usage(message: "cannot read \(path)") }
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

do {
    try run()
} catch let u as Usage {
    // One line: what was wrong, and the help to read (never the whole help).
    let command = Options.commandWord(Array(CommandLine.arguments.dropFirst()))
    FileHandle.standardError.write(Data((Help.errorLine(u.message, command: command == "help" ? nil : command) + "\n").utf8))
    exit(2)
} catch {
    FileHandle.standardError.write(Data("billingctl: \(error)\n".utf8))
    exit(1)
}
