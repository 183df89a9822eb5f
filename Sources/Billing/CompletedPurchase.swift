/// What SubmitReceipt answers.
public struct CompletedPurchase: Sendable, Equatable {
    public var order: Order
    public var transaction: StoreTransaction
    /// This proof had already completed this order.
    public var alreadyProcessed: Bool

    public init(order: Order, transaction: StoreTransaction, alreadyProcessed: Bool) {
        self.order = order
        self.transaction = transaction
        self.alreadyProcessed = alreadyProcessed
    }
}
