import JOSE
import AppStore
public import AppStoreAPI
public import Billing

/// What billingd asks of the App Store Server API, in the billing domain's terms: environments tried in
/// order (production first, then sandbox when it is accepted), Apple's answers turned into `BillingError`s.
/// Every call blocks: run on a worker queue.
public final class AppStoreLink: Sendable {
    public let client: any AppStoreServerAPI
    /// The environments this billingd accepts, production first.
    public let environments: [AppStoreAPIEnvironment]
    /// Called with a line for the operator when Apple refuses our credentials or answers nonsense.
    private let warn: @Sendable (String) -> Void

    /// At most this many transaction ids per RestorePurchases.
    public static let maxTransactionIDs = 20

    public init(client: any AppStoreServerAPI, environments: [AppStoreAPIEnvironment], warn: @escaping @Sendable (String) -> Void = { _ in }) {
        self.client = client
        self.environments = AppStoreAPIEnvironment.allCases.filter { environments.contains($0) }
        self.warn = warn
    }

    /// At most this many signed transactions per RestorePurchases (every id's history together).
    public static let maxTransactions = 5000

    /// The signed history of the customer each id belongs to (every page), from the first accepted
    /// environment that knows the id. An id already in a history fetched for an earlier id is not fetched
    /// again (ids of one customer share one history). `expired` is checked between pages: a caller that gave
    /// up stops the fetching.
    public func signedHistory(transactionIDs: [String], expired: @escaping () -> Bool = { false }) -> Result<[String], BillingError> {
        signedHistories(transactionIDs: transactionIDs, expired: expired).map(\.signed)
    }

    /// `signedHistory`, with the customers it fetched: one transaction id per history and the environment that
    /// knew it (what refund-history reconciliation reads again later).
    public func signedHistories(
        transactionIDs: [String], expired: @escaping () -> Bool = { false }
    ) -> Result<(signed: [String], customers: [(transactionID: String, environment: StoreEnvironment)]), BillingError> {
        var seen = Set<String>()
        var covered = Set<String>()
        var all: [String] = []
        var customers: [(transactionID: String, environment: StoreEnvironment)] = []
        for id in transactionIDs where !covered.contains(id) {
            let found = firstEnvironment(knowing: id) { env throws(AppStoreAPIError) in
                (try client.fullHistory(id, in: env, maxTransactions: Self.maxTransactions - all.count, stop: expired), env)
            }
            switch found {
            case .success(let (list, env)):
                customers.append((id, Self.storeEnvironment(env)))
                for jws in list where seen.insert(jws).inserted {
                    all.append(jws)
                    if let tid = Self.transactionID(unverified: jws) { covered.insert(tid) }
                }
            case .failure(let e): return .failure(e)
            }
            if expired() { return .failure(.appStoreAPIUnavailable(detail: "the call's deadline passed while fetching history")) }
        }
        return .success((all, customers))
    }

    /// The API environment of a recorded one; nil for Xcode (StoreKit testing in Xcode has no server API).
    public static func apiEnvironment(_ e: StoreEnvironment) -> AppStoreAPIEnvironment? {
        switch e {
        case .production: .production
        case .sandbox: .sandbox
        case .xcode: nil
        }
    }

    public static func storeEnvironment(_ e: AppStoreAPIEnvironment) -> StoreEnvironment {
        e == .production ? .production : .sandbox
    }

    /// The transactionId a JWS claims, read without verification (only to skip fetching a history twice;
    /// everything used is verified later).
    static func transactionID(unverified jws: String) -> String? {
        guard let parsed = try? JWS.parse(jws), case .object(let o)? = try? JSONReader.parse(parsed.payload),
            case .string(let id)? = o["transactionId"]
        else { return nil }
        return id
    }

    /// Runs `body` in each accepted environment until one knows the transaction id (404 moves on).
    func firstEnvironment<T>(knowing id: String, _ body: (AppStoreAPIEnvironment) throws(AppStoreAPIError) -> T) -> Result<T, BillingError> {
        for env in environments {
            do {
                return .success(try body(env))
            } catch .notFound {
                continue
            } catch {
                return .failure(map(error, transactionID: id))
            }
        }
        return .failure(.appStoreTransactionUnknown(transactionID: id))
    }

    /// Apple's refusals in the domain's terms; credentials problems are logged for the operator.
    package func map(_ error: AppStoreAPIError, transactionID: String?) -> BillingError {
        switch error {
        case .unavailable(let detail): return .appStoreAPIUnavailable(detail: detail)
        case .notFound: return .appStoreTransactionUnknown(transactionID: transactionID ?? "")
        case .rejected(let status, let code, _) where status == 400 && transactionID != nil:
            // 4000006 invalid transaction id, and the like: the caller's input.
            return .invalidField(field: "transaction_ids", problem: "holds an id the App Store refuses (\(code))")
        case .tooLarge(let detail):
            return .invalidField(
                field: "transaction_ids", problem: "name a history too long to restore by id (\(detail)); restore with signed transactions or the app receipt")
        case .rejected, .malformedAnswer:
            warn(error.description)
            return .appStoreAPIUnavailable(detail: error.description)
        }
    }

    /// A transaction id as Apple writes them: digits, at most 32.
    public static func isTransactionID(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 32 && s.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }
}
