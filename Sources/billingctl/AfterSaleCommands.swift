import IO
import AppStore
import BillingAPI
import Foundation
import HTTP2
import ProtoWire
import RPC

/// `billingctl entitlements`, `events` and `notify`, and `teststore notification`: following the money after the sale.
enum AfterSaleCommands {
    static func entitlements(_ options: Options) throws {
        guard let account = options.positional.first ?? options.named["account"] else { throw Usage(message: "entitlements needs an ACCOUNT") }
        var req = GetEntitlementsRequest()
        req.accountID = account
        req.includeInactive = options.named["include-inactive"].map { $0 != "false" } ?? false
        let r = try call(options, "billing.v1.Billing/GetEntitlements", req, GetEntitlementsResponse.self)
        var wrapped = RestorePurchasesResponse()
        wrapped.entitlements = r.entitlements
        print(JSON.restoreResponse(wrapped))
    }

    /// ListEvents pages from `--after` (one JSON line per event); `--follow` then streams with WatchEvents.
    static func events(_ options: Options) throws {
        guard let after = UInt64(options.named["after"] ?? "0") else { throw Usage(message: "--after takes a cursor") }
        let account = options.named["account"] ?? ""
        if options.named["follow"] != nil {
            return try follow(options, after: after, account: account)
        }
        guard let limit = Int32(options.named["limit"] ?? "100"), limit > 0 else { throw Usage(message: "--limit takes a positive number") }
        var req = ListEventsRequest()
        req.afterCursor = after
        req.limit = limit
        req.accountID = account
        let r = try call(options, "billing.v1.Billing/ListEvents", req, ListEventsResponse.self)
        for e in r.events { print(JSON.event(e)) }
        FileHandle.standardError.write(Data("{\"nextCursor\": \"\(r.nextCursor)\"}\n".utf8))
    }

    static func follow(_ options: Options, after: UInt64, account: String) throws {
        var req = WatchEventsRequest()
        req.afterCursor = after
        req.accountID = account
        let client = try options.client()
        client.setReceiveTimeout(milliseconds: 1000)
        let id = try client.start("billing.v1.Billing/WatchEvents", body: MessageFraming.frame(req.encoded()))
        var buffer: [UInt8] = []
        while true {
            _ = try client.poll()
            buffer += client.takeData(id)
            while buffer.count >= 5 {
                let size = Int(buffer[1]) << 24 | Int(buffer[2]) << 16 | Int(buffer[3]) << 8 | Int(buffer[4])
                guard buffer.count >= 5 + size else { break }
                let event = try Event(decoding: Array(buffer[5..<(5 + size)]))
                buffer.removeFirst(5 + size)
                print(JSON.event(event))
                fflush(nil)
            }
            if client.isDone(id) {
                let answer = client.finish(id)
                if let error = answer.error {
                    FileHandle.standardError.write(Data((JSON.error(error) + "\n").utf8))
                    exit(1)
                }
                return
            }
        }
    }

    /// Posts a notification body (a file, or - for standard input) to the endpoint, over h2c or TLS.
    static func notify(_ options: Options) throws {
        guard options.positional.count == 2 else { throw Usage(message: "notify needs URL and FILE (or - for standard input)") }
        let url = options.positional[0], source = options.positional[1]
        let body: Data
        if source == "-" {
            body = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let d = FileManager.default.contents(atPath: source) else { throw Usage(message: "cannot read \(source)") }
            body = d
        }
        let secure: Bool
        var rest: Substring
        if url.hasPrefix("https://") {
            secure = true
            rest = url.dropFirst("https://".count)
        } else if url.hasPrefix("http://") {
            secure = false
            rest = url.dropFirst("http://".count)
        } else {
            throw Usage(message: "notify needs an http:// or https:// URL")
        }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        var address = String(rest[..<slash])
        let path = rest[slash...].isEmpty ? "/" : String(rest[slash...])
        rest = Substring(address)
        if !address.contains(":") || address.hasSuffix("]") { address += secure ? ":443" : ":80" }
        let context = secure ? try TLSContext(clientCAPath: options.ca, insecure: options.insecure) : nil
        let client = try Client(address: address, tls: context, timeoutSeconds: Int(options.timeout.rounded(.up)))
        let id = try client.start(String(path.dropFirst()), body: [UInt8](body), contentType: "application/json")
        try client.run { client.isDone(id) }
        let answer = client.finish(id)
        let text = String(decoding: answer.body, as: UTF8.self)
        print(JSON.object([("status", String(answer.httpStatus)), ("body", JSON.quote(text))]))
        if answer.httpStatus != 200 { exit(1) }
    }
}
