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
        refundedQuantity = Int32(clamping: o.refundedQuantity)
        store = o.store.map { BillingAPI.Store($0) } ?? .unspecified
    }
}

extension BillingAPI.Store {
    init(_ s: Billing.Store) {
        switch s {
        case .appStore: self = .appStore
        case .googlePlay: self = .googlePlay
        case .grant: self = .grant
        }
    }
}

extension BillingAPI.Ownership {
    init(_ o: Billing.Ownership) {
        switch o {
        case .purchased: self = .purchased
        case .familyShared: self = .familyShared
        }
    }
}

extension BillingAPI.RevocationType {
    init(_ r: Billing.RevocationType) {
        switch r {
        case .unspecified: self = .unspecified
        case .refundFull: self = .refundFull
        case .refundProrated: self = .refundProrated
        case .familyRevoke: self = .familyRevoke
        }
    }
}

extension BillingAPI.EntitlementState {
    init(_ s: Billing.EntitlementState) {
        switch s {
        case .active: self = .active
        case .gracePeriod: self = .gracePeriod
        case .billingRetry: self = .billingRetry
        case .expired: self = .expired
        case .revoked: self = .revoked
        case .paused: self = .paused
        }
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
        store = BillingAPI.Store(t.store)
        ownership = BillingAPI.Ownership(t.ownership)
        priceMilliunits = t.price.priceMilliunits
        currency = t.price.currency
        storefront = t.price.storefront
        offerID = t.price.offerID
        offerType = t.price.offerType
        subscriptionGroupID = t.subscriptionGroupID
        upgraded = t.upgraded
        revocationType = BillingAPI.RevocationType(t.revocationType)
        revocationPercentage = Int32(clamping: t.revocationPercentage)
        revocationReason = Self.revocationReason(t.revocationReason)
    }

    /// Apple's revocationReason as text: 0 `OTHER`, 1 `APP_ISSUE`, another number as its decimal digits, none empty.
    static func revocationReason(_ reason: Int?) -> String {
        switch reason {
        case nil: ""
        case 0: "OTHER"
        case 1: "APP_ISSUE"
        case let n?: String(n)
        }
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
        state = BillingAPI.EntitlementState(e.state)
        ownership = BillingAPI.Ownership(e.ownership)
        store = BillingAPI.Store(e.store)
        subscriptionGroupID = e.subscriptionGroupID
        pendingProductID = e.pendingProductID
        grantID = e.grantID
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
