/// What a commit changed that Revenue reads: transactions (by id) and subscriptions' renewal state (by original
/// transaction id); `all` when the store cannot say (Revenue reads everything again).
public struct RevenueChanges: Sendable, Equatable {
    public var transactionIDs: [String] = []
    public var originalTransactionIDs: [String] = []
    public var all = false

    public init(transactionIDs: [String] = [], originalTransactionIDs: [String] = [], all: Bool = false) {
        self.transactionIDs = transactionIDs
        self.originalTransactionIDs = originalTransactionIDs
        self.all = all
    }

    public var isEmpty: Bool { transactionIDs.isEmpty && originalTransactionIDs.isEmpty && !all }

    public static let everything = RevenueChanges(all: true)

    /// The NOTIFY payloads other replicas read: `t:` ids and `r:` ids, comma-separated, each under PostgreSQL's
    /// 8000 bytes (as many notices as that takes); `*` when an id holds a comma (or for `all`).
    public var payloads: [String] {
        if all || (transactionIDs + originalTransactionIDs).contains(where: { $0.contains(",") || $0.utf8.count > 1000 }) { return ["*"] }
        var out: [String] = [], current = ""
        for part in Set(transactionIDs).map({ "t:" + $0 }) + Set(originalTransactionIDs).map({ "r:" + $0 }) {
            if !current.isEmpty && current.utf8.count + part.utf8.count + 1 > 7900 {
                out.append(current)
                current = ""
            }
            current += current.isEmpty ? part : "," + part
        }
        if !current.isEmpty { out.append(current) }
        return out
    }

    public init(payload: String) {
        guard payload != "*" else {
            self.init(all: true)
            return
        }
        self.init()
        for part in payload.split(separator: ",") {
            if part.hasPrefix("t:") { transactionIDs.append(String(part.dropFirst(2))) }
            if part.hasPrefix("r:") { originalTransactionIDs.append(String(part.dropFirst(2))) }
        }
    }
}
