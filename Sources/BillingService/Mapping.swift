import Billing
import BillingAPI

extension BillingAPI.Order {
    /// The wire form of a domain order.
    init(_ o: Billing.Order) {
        self.init()
        orderID = o.id
        accountID = o.accountID
        productID = o.productID
        state = OrderState(rawValue: Int32(o.state.rawValue))
        createTimeMs = o.createTimeMs
        updateTimeMs = o.updateTimeMs
        transactionID = o.transactionID ?? ""
        environment = o.environment.map { Environment(rawValue: Int32($0.rawValue)) } ?? .unspecified
        quantity = Int32(clamping: o.quantity)
    }
}
