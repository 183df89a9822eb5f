import Billing

/// Why a job's savepoint is rolled back, in either store: the database failed, or the job's body threw an answer.
enum JobFailure: Error {
    /// The database failed. SQLite answers the job STORAGE_UNAVAILABLE; PostgreSQL first retries the batch when the
    /// failure is a lost connection or a retryable conflict, and reruns a job that met a lock held elsewhere.
    case storage(StorageError)
    /// The body threw something other than a database failure (a refusal, `abandoned`): answered as it is, after COMMIT.
    case answered(BillingError)

    /// Sorts what a ledger body threw: the `StorageError` a ledger call met comes back as itself.
    init(_ error: BillingError) {
        if case .infrastructure(.storage(let cause)) = error, let storage = cause as? StorageError {
            self = .storage(storage)
        } else {
            self = .answered(error)
        }
    }
}

extension BillingError {
    /// A database failure as the domain sees it: `InfrastructureFailure.storage`, carrying the error whole.
    static func storage(_ error: StorageError) -> BillingError { .infrastructure(.storage(cause: error)) }
}
