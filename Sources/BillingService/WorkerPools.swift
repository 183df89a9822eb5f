public import RPC

/// The worker pools handlers are registered on when they may not run on an event loop: made by whoever
/// assembles the services (billingd's App makes one set and hands it to every service), not process globals.
public struct WorkerPools: Sendable {
    /// Proofs that need a certificate chain verified, app receipts (PKCS#7, RSA, ASN.1: a millisecond or
    /// more each), restores.
    public let verification: WorkerPool
    /// Calls that wait on the App Store Server API (restores by id, the admin service); the client bounds
    /// how many are in flight.
    public let appStore: WorkerPool
    /// Calls that wait on the Play Developer API (Google Play proofs, refunds); the client bounds how many are
    /// in flight.
    public let googlePlay: WorkerPool
    /// Revenue's reports and exports (RevenueService bounds how many run at once).
    public let revenue: WorkerPool
    /// Calls that wait on the store alone (the webhook admin calls).
    public let store: WorkerPool

    public init() {
        verification = WorkerPool(name: "billing.verification")
        appStore = WorkerPool(name: "billing.appstore")
        googlePlay = WorkerPool(name: "billing.googleplay")
        revenue = WorkerPool(name: "billing.revenue")
        store = WorkerPool(name: "billing.store")
    }
}
