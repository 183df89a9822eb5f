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
        environment = o.environment.map { Environment($0) } ?? .unspecified
        quantity = Int32(clamping: o.quantity)
    }
}

extension BillingAPI.Environment {
    init(_ e: StoreEnvironment) {
        switch e {
        case .production: self = .production
        case .sandbox: self = .sandbox
        case .xcode: self = .xcode
        }
    }
}

extension BillingAPI.ProductType {
    init(_ k: ProductKind?) {
        switch k {
        case .consumable: self = .consumable
        case .nonConsumable: self = .nonConsumable
        case .autoRenewableSubscription: self = .autoRenewableSubscription
        case .nonRenewingSubscription: self = .nonRenewingSubscription
        case nil: self = .unspecified
        }
    }
}

extension BillingAPI.Transaction {
    init(_ t: StoreTransaction, catalog: Catalog?) {
        self.init()
        transactionID = t.transactionID
        originalTransactionID = t.originalTransactionID
        productID = t.productID
        productType = ProductType(PurchaseRules.kind(of: t, catalog: catalog))
        purchaseTimeMs = t.purchaseTimeMs
        expiresTimeMs = t.expiresTimeMs
        revocationTimeMs = t.revocationTimeMs
        quantity = Int32(clamping: t.quantity)
        environment = Environment(t.environment)
        appAccountToken = t.appAccountToken ?? ""
        bundleID = t.bundleID
    }
}

extension BillingAPI.Entitlement {
    init(_ e: Billing.Entitlement) {
        self.init()
        productID = e.productID
        productType = ProductType(e.productKind)
        originalTransactionID = e.originalTransactionID
        latestTransactionID = e.latestTransactionID
        purchaseTimeMs = e.purchaseTimeMs
        expiresTimeMs = e.expiresTimeMs
        active = e.active
        orderID = e.orderID ?? ""
        revocationTimeMs = e.revocationTimeMs
        gracePeriodExpiresTimeMs = e.gracePeriodExpiresTimeMs
        autoRenew = e.autoRenew
        environment = e.environment.map { Environment($0) } ?? .unspecified
    }
}

extension BillingAPI.Event {
    init(_ e: EventRecord) {
        self.init()
        cursor = e.cursor
        type = EventType(rawValue: Int32(e.kind.rawValue))
        timeMs = e.timeMs
        accountID = e.accountID
        order = e.order.map { BillingAPI.Order($0) }
        entitlement = e.entitlement.map { BillingAPI.Entitlement($0) }
        cause = e.cause
        notificationUUID = e.notificationUUID ?? ""
        transactionID = e.transactionID ?? ""
    }
}
