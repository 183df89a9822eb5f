/// A failure of something billing depends on, never of the caller's request: retry later. What failed travels as
/// itself (a store's own error, with its typed SQL code); descriptions say only what the caller may read.
public enum InfrastructureFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The order database failed or cannot be reached (STORAGE_UNAVAILABLE). `cause` is the store's own error, whole
    /// (Storage's `StorageError`: a SQLite result code, a PostgreSQL SQLSTATE, a lost connection); for the log only.
    case storage(cause: any StoreFailure)
    /// More work waits for the database than the store queues (`--max-in-flight`): OVERLOADED.
    case overloaded
    /// The App Store Server API did not answer, answered 5xx or rate-limited us after every retry, or refused our
    /// credentials (APPSTORE_API_UNAVAILABLE); `detail` is for the log only.
    case appStoreAPI(detail: String)
    /// The Play Developer API (or its token endpoint) did not answer, answered 5xx or rate-limited us after every
    /// retry, or refused our service account (GOOGLE_PLAY_UNAVAILABLE); `detail` is for the log only.
    case googlePlayAPI(detail: String)

    public var description: String {
        switch self {
        case .storage: "the order database is unavailable; retry"
        case .overloaded: "the order database has too much work queued; retry later"
        case .appStoreAPI: "the App Store Server API is unavailable; retry later"
        case .googlePlayAPI: "the Google Play Developer API is unavailable; retry later"
        }
    }

    /// What happened, for the log (never for the caller): the store's error or Apple's answer.
    public var detail: String {
        switch self {
        case .storage(let cause): cause.description
        case .overloaded: description
        case .appStoreAPI(let detail): detail
        case .googlePlayAPI(let detail): detail
        }
    }

    public static func == (a: InfrastructureFailure, b: InfrastructureFailure) -> Bool {
        switch (a, b) {
        case (.storage(let x), .storage(let y)): x.isSame(as: y)
        case (.overloaded, .overloaded): true
        case (.appStoreAPI(let x), .appStoreAPI(let y)): x == y
        case (.googlePlayAPI(let x), .googlePlayAPI(let y)): x == y
        default: false
        }
    }
}

/// The error a store throws when its database fails (Storage's `StorageError`); carried whole by
/// `InfrastructureFailure.storage`, so the store that made it reads its typed code back without parsing a string.
public protocol StoreFailure: Error, Sendable, CustomStringConvertible {
    /// Whether `other` is the same failure (keeps `BillingError` equatable).
    func isSame(as other: any StoreFailure) -> Bool
}

extension StoreFailure where Self: Equatable {
    public func isSame(as other: any StoreFailure) -> Bool { (other as? Self) == self }
}

/// A storage failure known only by its message (`BillingError.storageUnavailable(detail:)`).
struct DescribedStoreFailure: StoreFailure, Equatable {
    let description: String
}
