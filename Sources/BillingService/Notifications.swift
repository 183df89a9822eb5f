public import AppStore
public import Billing
import Dispatch

/// App Store Server Notifications v2: verifies a posted notification (the outer JWS, then every nested
/// signed transaction and renewal info, with the chain, OID, date and app rules of proofs) and applies it
/// through the store in one database transaction with its UUID record. Knows no HTTP: the endpoint maps
/// the outcome to a status.
public final class NotificationProcessor: Sendable {
    /// What became of one delivery.
    public enum Outcome: Sendable, Equatable {
        /// Durable: applied, a duplicate, or recorded as ignored (HTTP 200).
        case done(NotificationResult)
        /// The body or a signature cannot be trusted; nothing was recorded (HTTP 400 with the reason).
        case rejected(reason: String, detail: String)
        /// The database failed; nothing was recorded (HTTP 503, Apple retries).
        case unavailable(detail: String)
    }

    /// The notification as far as it was read, for logs and metrics (never the payload).
    public struct Summary: Sendable, Equatable {
        public var uuid = ""
        public var type = ""
        public var subtype = ""
        public var environment = ""
        /// The transaction the notification names (after verification), when it names one.
        public var transactionID = ""
        /// Its signedDate (ms), once verified.
        public var signedTimeMs: Int64 = 0
    }

    private let verifier: SignedDataVerifier
    private let accepted: Set<AppStoreEnvironment>
    private let store: any OrderStore
    private let catalog: Catalog?
    private let policy: PurchaseEngine.Policy
    private let clock: any WallClock

    /// `settings` are the proof verifier's (roots, bundle ids, app id); every environment is verified so that
    /// one not in `settings.environments` can be answered 200 and recorded as ignored.
    /// Called after each durable outcome (applied, duplicate, ignored), off the caller's path: CONSUMPTION_REQUEST answers.
    private let afterCommit: @Sendable (Summary, NotificationResult) -> Void

    public init(
        settings: VerifierSettings, store: any OrderStore, catalog: Catalog?,
        policy: PurchaseEngine.Policy = PurchaseEngine.Policy(), clock: any WallClock = SystemClock(),
        afterCommit: @escaping @Sendable (Summary, NotificationResult) -> Void = { _, _ in }
    ) {
        self.afterCommit = afterCommit
        self.policy = policy
        accepted = settings.environments
        var all = settings
        all.environments = [.production, .sandbox, .xcode, .localTesting]
        verifier = SignedDataVerifier(settings: all)
        self.store = store
        self.catalog = catalog
        self.clock = clock
    }

    /// Verifies and applies one delivery's body; answers once, after the commit is durable.
    public func process(body: [UInt8], completion: @escaping @Sendable (Outcome, Summary) -> Void) {
        guard let signed = NotificationEnvelope.signedPayload(from: body) else {
            return completion(.rejected(reason: "RECEIPT_MALFORMED", detail: "the body is not {\"signedPayload\": \"<JWS>\"}"), Summary())
        }
        process(signedPayload: signed, completion: completion)
    }

    /// Verifies and applies one signed notification (from a delivery, or from the App Store Server API's
    /// notification history); answers once, after the commit is durable.
    public func process(signedPayload signed: String, completion: @escaping @Sendable (Outcome, Summary) -> Void) {
        var summary = Summary()
        let verified: VerifiedNotification
        switch verify(signed: signed, &summary) {
        case .failure(let failure):
            return completion(.rejected(reason: failure.reason, detail: failure.detail), summary)
        case .success(let n):
            verified = n
        }
        let read = summary
        store.apply(verified, nowMs: clock.nowMilliseconds(), catalog: catalog, policy: policy) { result in
            switch result {
            case .success(let r):
                completion(.done(r), read)
                self.afterCommit(read, r)
            case .failure(let e): completion(.unavailable(detail: e.description), read)
            }
        }
    }

    /// Verifies a signed notification without applying it: its UUID and type (a TEST notification's status).
    public func verifyOnly(signedPayload: String) -> Result<Summary, BillingError> {
        var summary = Summary()
        switch verify(signed: signedPayload, &summary) {
        case .success: return .success(summary)
        case .failure(let f):
            return .failure(
                f.reason == "WRONG_APP"
                    ? .wrongApp(detail: f.detail)
                    : f.reason == "RECEIPT_MALFORMED"
                        ? .receiptMalformed(detail: f.detail) : .receiptUntrusted(detail: f.detail))
        }
    }

    struct Refusal: Error {
        var reason: String
        var detail: String
        static func from(_ f: VerificationFailure, _ what: String) -> Refusal {
            switch f {
            case .malformed(let d): Refusal(reason: "RECEIPT_MALFORMED", detail: "\(what): \(d)")
            case .untrusted(let d): Refusal(reason: "RECEIPT_UNTRUSTED", detail: "\(what): \(d)")
            case .wrongApp(let d): Refusal(reason: "WRONG_APP", detail: "\(what): \(d)")
            case .environmentNotAllowed(let d): Refusal(reason: "RECEIPT_MALFORMED", detail: "\(what): \(d)")
            }
        }
    }

    func verify(signed: String, _ summary: inout Summary) -> Result<VerifiedNotification, Refusal> {
        let payload: NotificationPayload
        switch verifier.verifyNotification(signed) {
        case .success(let p): payload = p
        case .failure(.environmentNotAllowed):
            // Signed by Apple, but for no environment billingd knows: keep it as ignored below.
            return verifyUnknownEnvironment(signed, &summary)
        case .failure(let f): return .failure(.from(f, "signedPayload"))
        }
        guard let uuid = payload.notificationUUID, !uuid.isEmpty, uuid.utf8.count <= 64,
            let type = payload.notificationType, !type.isEmpty, type.utf8.count <= 64
        else {
            return .failure(Refusal(reason: "RECEIPT_MALFORMED", detail: "the notification lacks notificationUUID or notificationType"))
        }
        summary = Summary(uuid: uuid, type: type, subtype: payload.subtype ?? "", environment: payload.environment ?? "")
        summary.signedTimeMs = payload.signedDate ?? 0
        let environment = payload.environment.flatMap(AppStoreEnvironment.init(rawValue:))
        var transaction: StoreTransaction?
        var renewal: RenewalFact?
        if let jws = payload.data?.signedTransactionInfo {
            switch verifier.verifyTransaction(jws) {
            case .success(let p):
                guard var t = AppStoreProofVerifier.transaction(p) else {
                    return .failure(Refusal(reason: "RECEIPT_MALFORMED", detail: "signedTransactionInfo lacks transactionId, productId or purchaseDate"))
                }
                if let kind = catalog?.product(t.productID)?.kind { t.productKind = kind }
                transaction = t
                summary.transactionID = t.transactionID
            case .failure(let f): return .failure(.from(f, "signedTransactionInfo"))
            }
        }
        if let jws = payload.data?.signedRenewalInfo {
            switch verifier.verifyRenewalInfo(jws) {
            case .success(let p):
                guard let original = p.originalTransactionID ?? transaction?.originalTransactionID else {
                    return .failure(Refusal(reason: "RECEIPT_MALFORMED", detail: "signedRenewalInfo lacks originalTransactionId"))
                }
                renewal = RenewalFact(
                    originalTransactionID: original, autoRenew: p.autoRenewStatus.map { $0 != 0 },
                    gracePeriodExpiresTimeMs: p.gracePeriodExpiresDate, signedTimeMs: p.signedDate ?? payload.signedDate ?? 0)
            case .failure(let f): return .failure(.from(f, "signedRenewalInfo"))
            }
        }
        let storeEnvironment: StoreEnvironment? =
            switch environment {
            case .production: .production
            case .sandbox: .sandbox
            case .xcode, .localTesting: .xcode
            case nil: nil
            }
        return .success(
            VerifiedNotification(
                uuid: uuid, type: type, subtype: payload.subtype, signedTimeMs: payload.signedDate ?? clock.nowMilliseconds(),
                environment: storeEnvironment, accepted: environment.map(accepted.contains) ?? false,
                transaction: transaction, renewal: renewal, signedPayload: signed))
    }

    /// A notification whose signature and app verified but whose environment is missing or unknown: recorded
    /// as ignored when it has a UUID, refused otherwise.
    private func verifyUnknownEnvironment(_ signed: String, _ summary: inout Summary) -> Result<VerifiedNotification, Refusal> {
        guard let p = NotificationPayload.decodeVerified(signed) else {
            return .failure(Refusal(reason: "RECEIPT_MALFORMED", detail: "signedPayload cannot be decoded"))
        }
        guard let uuid = p.notificationUUID, !uuid.isEmpty, uuid.utf8.count <= 64, let type = p.notificationType, type.utf8.count <= 64 else {
            return .failure(Refusal(reason: "RECEIPT_MALFORMED", detail: "the notification lacks notificationUUID or notificationType"))
        }
        summary = Summary(uuid: uuid, type: type, subtype: p.subtype ?? "", environment: p.environment ?? "")
        return .success(
            VerifiedNotification(
                uuid: uuid, type: type, subtype: p.subtype, signedTimeMs: p.signedDate ?? clock.nowMilliseconds(),
                environment: nil, accepted: false, transaction: nil, renewal: nil, signedPayload: signed))
    }
}
