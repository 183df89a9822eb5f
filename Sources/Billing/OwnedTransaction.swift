/// A transaction as the store keeps it: who owns it and which order it paid, if any.
public struct OwnedTransaction: Sendable, Equatable {
    public var transaction: StoreTransaction
    public var accountID: String
    public var orderID: String?

    public init(transaction: StoreTransaction, accountID: String, orderID: String?) {
        self.transaction = transaction
        self.accountID = accountID
        self.orderID = orderID
    }
}
