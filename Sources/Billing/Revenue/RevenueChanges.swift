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

    /// The NOTIFY payload other replicas read: `t:` ids and `r:` ids, comma-separated, or `*` (PostgreSQL allows
    /// 8000 bytes).
    public var payload: String {
        if all { return "*" }
        let text = (transactionIDs.map { "t:" + $0 } + originalTransactionIDs.map { "r:" + $0 }).joined(separator: ",")
        return text.utf8.count > 7900 || transactionIDs.contains(where: { $0.contains(",") })
            || originalTransactionIDs.contains(where: { $0.contains(",") }) ? "*" : text
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
