public import AppStoreAPI
public import Billing

/// What billingd asks of the App Store Server API, in the billing domain's terms: environments tried in
/// order (production first, then sandbox when it is accepted), Apple's answers turned into `BillingError`s.
/// Every call blocks: run on a worker queue.
public final class AppStoreLink: Sendable {
    public let client: AppStoreAPIClient
    /// The environments this billingd accepts, production first.
    public let environments: [AppStoreAPIEnvironment]
    /// Called with a line for the operator when Apple refuses our credentials or answers nonsense.
    private let warn: @Sendable (String) -> Void

    /// At most this many transaction ids per RestorePurchases.
    public static let maxTransactionIDs = 20

    public init(client: AppStoreAPIClient, environments: [AppStoreAPIEnvironment], warn: @escaping @Sendable (String) -> Void = { _ in }) {
        self.client = client
        self.environments = AppStoreAPIEnvironment.allCases.filter { environments.contains($0) }
        self.warn = warn
    }

    /// The signed history of the customer each id belongs to (every page), from the first accepted
    /// environment that knows the id; duplicates across ids removed.
    public func signedHistory(transactionIDs: [String]) -> Result<[String], BillingError> {
        var seen = Set<String>()
        var all: [String] = []
        for id in transactionIDs {
            let found = firstEnvironment(knowing: id) { env throws(AppStoreAPIError) in try client.fullHistory(id, in: env) }
            switch found {
            case .success(let list):
                for jws in list where seen.insert(jws).inserted { all.append(jws) }
            case .failure(let e): return .failure(e)
            }
        }
        return .success(all)
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
        return .failure(.transactionNotFound(detail: "the App Store knows no transaction \(id)"))
    }

    /// Apple's refusals in the domain's terms; credentials problems are logged for the operator.
    func map(_ error: AppStoreAPIError, transactionID: String?) -> BillingError {
        switch error {
        case .unavailable(let detail): return .appStoreAPIUnavailable(detail: detail)
        case .notFound: return .transactionNotFound(detail: "the App Store knows no transaction \(transactionID ?? "")")
        case .rejected(let status, let code, _) where status == 400 && transactionID != nil:
            // 4000006 invalid transaction id, and the like: the caller's input.
            return .invalidField(field: "transaction_ids", problem: "holds an id the App Store refuses (\(code))")
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
