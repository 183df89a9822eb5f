public import AppStore
public import Billing
import Dispatch

/// App Store Server Notifications v2: verifies a posted notification (the outer JWS, then every nested
/// signed transaction, renewal info and app transaction, with the chain, OID, date and app rules of proofs,
/// each for the notification's own environment and bundle id; a UUID; signed dates no further ahead than the
/// clock skew) and applies it through the store in one database transaction with its UUID record. Knows no
/// HTTP: the endpoint maps the outcome to a status.
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
            // The log gets what failed (the database's own error, with its code); Apple gets 503 and retries.
            case .failure(.infrastructure(let failure)): completion(.unavailable(detail: failure.detail), read)
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

    /// Verifies a signed app transaction (Get App Transaction Info's answer) with the proof rules (chain, marker
    /// OIDs, signature, bundle id), whatever its environment.
    public func verifyAppTransaction(_ signed: String) -> Result<AppTransactionPayload, BillingError> {
        switch verifier.verifyAppTransaction(signed) {
        case .success(let p): return .success(p)
        case .failure(.malformed(let d)), .failure(.environmentNotAllowed(let d)): return .failure(.receiptMalformed(detail: "app transaction: \(d)"))
        case .failure(.untrusted(let d)): return .failure(.receiptUntrusted(detail: "app transaction: \(d)"))
        case .failure(.wrongApp(let d)): return .failure(.wrongApp(detail: "app transaction: \(d)"))
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
        do throws(Refusal) {
            let nowMs = clock.nowMilliseconds()
            let header = try checkHeader(payload, nowMs: nowMs)
            summary = Summary(uuid: header.uuid, type: header.type, subtype: payload.subtype ?? "", environment: payload.environment ?? "")
            summary.signedTimeMs = header.signedTimeMs
            let environment = payload.environment.flatMap(AppStoreEnvironment.init(rawValue:))
            let transaction = try nestedTransaction(payload, nowMs: nowMs)
            summary.transactionID = transaction?.transactionID ?? ""
            let renewal = try nestedRenewal(payload, original: transaction?.originalTransactionID, nowMs: nowMs)
            try checkNestedAppTransaction(payload)
            let storeEnvironment: StoreEnvironment? =
                switch environment {
                case .production: .production
                case .sandbox: .sandbox
                case .xcode, .localTesting: .xcode
                case nil: nil
                }
            return .success(
                VerifiedNotification(
                    uuid: header.uuid, type: header.type, subtype: payload.subtype, signedTimeMs: header.signedTimeMs,
                    environment: storeEnvironment, accepted: environment.map(accepted.contains) ?? false,
                    transaction: transaction, renewal: renewal, signedPayload: signed))
        } catch {
            return .failure(error)
        }
    }

    /// A notification whose signature and app verified but whose environment is missing or unknown: recorded
    /// as ignored when its header is sound, refused otherwise. Its nested items are not read.
    private func verifyUnknownEnvironment(_ signed: String, _ summary: inout Summary) -> Result<VerifiedNotification, Refusal> {
        guard let p = NotificationPayload.decodeVerified(signed) else {
            return .failure(Refusal(reason: "RECEIPT_MALFORMED", detail: "signedPayload cannot be decoded"))
        }
        do throws(Refusal) {
            let header = try checkHeader(p, nowMs: clock.nowMilliseconds())
            summary = Summary(uuid: header.uuid, type: header.type, subtype: p.subtype ?? "", environment: p.environment ?? "")
            summary.signedTimeMs = header.signedTimeMs
            return .success(
                VerifiedNotification(
                    uuid: header.uuid, type: header.type, subtype: p.subtype, signedTimeMs: header.signedTimeMs,
                    environment: nil, accepted: false, transaction: nil, renewal: nil, signedPayload: signed))
        } catch {
            return .failure(error)
        }
    }

    // MARK: Checks

    /// What identifies and orders a notification, once checked.
    struct Header {
        var uuid: String
        var type: String
        var signedTimeMs: Int64
    }

    /// `notificationUUID` is a UUID; `notificationType` is present and short; `signedDate` is a sound time (it
    /// orders everything the notification carries, so a missing or absurd one is refused, never replaced by the clock).
    func checkHeader(_ p: NotificationPayload, nowMs: Int64) throws(Refusal) -> Header {
        guard let uuid = p.notificationUUID, Self.isUUID(uuid) else {
            throw Refusal(reason: "RECEIPT_MALFORMED", detail: "notificationUUID is missing or not a UUID (8-4-4-12 hexadecimal digits)")
        }
        guard let type = p.notificationType, !type.isEmpty, type.utf8.count <= 64 else {
            throw Refusal(reason: "RECEIPT_MALFORMED", detail: "the notification lacks notificationType")
        }
        // Lowercase, as Apple writes them: a redelivery in another case is the same notification.
        return Header(uuid: uuid.lowercased(), type: type, signedTimeMs: try signedTime(p.signedDate, "the notification", nowMs: nowMs))
    }

    /// `data.signedTransactionInfo`, verified, for the notification's environment and app.
    private func nestedTransaction(_ p: NotificationPayload, nowMs: Int64) throws(Refusal) -> StoreTransaction? {
        guard let jws = p.data?.signedTransactionInfo else { return nil }
        let what = "signedTransactionInfo"
        let payload: TransactionPayload
        switch verifier.verifyTransaction(jws) {
        case .success(let v): payload = v
        case .failure(let f): throw .from(f, what)
        }
        try checkEnvironment(payload.environment, what, of: p)
        try checkBundle(payload.bundleID, what, of: p)
        _ = try signedTime(payload.signedDate, what, nowMs: nowMs)
        guard var t = AppStoreProofVerifier.transaction(payload) else {
            throw Refusal(reason: "RECEIPT_MALFORMED", detail: "\(what) lacks transactionId, productId or purchaseDate")
        }
        if let kind = catalog?.product(t.productID)?.kind { t.productKind = kind }
        return t
    }

    /// `data.signedRenewalInfo`, verified, for the notification's environment (renewal info names no bundle id).
    private func nestedRenewal(_ p: NotificationPayload, original: String?, nowMs: Int64) throws(Refusal) -> RenewalFact? {
        guard let jws = p.data?.signedRenewalInfo else { return nil }
        let what = "signedRenewalInfo"
        let info: RenewalInfoPayload
        switch verifier.verifyRenewalInfo(jws) {
        case .success(let v): info = v
        case .failure(let f): throw .from(f, what)
        }
        try checkEnvironment(info.environment, what, of: p)
        let signedMs = try signedTime(info.signedDate, what, nowMs: nowMs)
        guard let original = info.originalTransactionID ?? original else {
            throw Refusal(reason: "RECEIPT_MALFORMED", detail: "\(what) lacks originalTransactionId")
        }
        return RenewalFact(
            originalTransactionID: original, autoRenew: info.autoRenewStatus.map { $0 != 0 },
            gracePeriodExpiresTimeMs: info.gracePeriodExpiresDate, signedTimeMs: signedMs,
            billingRetry: info.isInBillingRetryPeriod, autoRenewProductID: info.autoRenewProductID)
    }

    /// RESCIND_CONSENT's `appData.signedAppTransactionInfo`, when present: verified like any nested item (its
    /// receiptType is its environment); nothing applies it.
    private func checkNestedAppTransaction(_ p: NotificationPayload) throws(Refusal) {
        guard let jws = p.appData?.signedAppTransactionInfo else { return }
        let what = "signedAppTransactionInfo"
        switch verifier.verifyAppTransaction(jws) {
        case .success(let a):
            try checkEnvironment(a.receiptType, what, of: p)
            try checkBundle(a.bundleID, what, of: p)
        case .failure(let f): throw .from(f, what)
        }
    }

    /// A nested item speaks for the notification's own environment.
    func checkEnvironment(_ environment: String?, _ what: String, of p: NotificationPayload) throws(Refusal) {
        guard environment == p.environment else {
            throw Refusal(
                reason: "RECEIPT_MALFORMED",
                detail: "\(what): environment \(environment ?? "(none)") differs from the notification's \(p.environment ?? "(none)")")
        }
    }

    /// A nested item speaks for the notification's own app.
    func checkBundle(_ bundleID: String?, _ what: String, of p: NotificationPayload) throws(Refusal) {
        guard bundleID == p.bundleID else {
            throw Refusal(
                reason: "WRONG_APP", detail: "\(what): bundle id \(bundleID ?? "(none)") differs from the notification's \(p.bundleID ?? "(none)")")
        }
    }

    /// `signedMs` when it is a time after 1970 (present, representable) at most `policy.clockSkewMs` after `nowMs`.
    func signedTime(_ signedMs: Int64?, _ what: String, nowMs: Int64) throws(Refusal) -> Int64 {
        guard let signedMs, signedMs > 0 else {
            throw Refusal(reason: "RECEIPT_MALFORMED", detail: "\(what): signedDate is missing or not a time in milliseconds since 1970")
        }
        let (latest, overflow) = nowMs.addingReportingOverflow(max(0, policy.clockSkewMs))
        guard overflow || signedMs <= latest else {
            throw Refusal(
                reason: "RECEIPT_MALFORMED",
                detail: "\(what): signedDate \(signedMs) is more than the clock skew (\(policy.clockSkewMs) ms) after now (\(nowMs))")
        }
        return signedMs
    }

    /// 8-4-4-12 hexadecimal digits (either case), nothing else.
    static func isUUID(_ s: String) -> Bool {
        var count = 0
        for c in s.utf8 {
            switch count {
            case 8, 13, 18, 23:
                guard c == UInt8(ascii: "-") else { return false }
            default:
                let lower = c | 0x20
                guard (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || (lower >= UInt8(ascii: "a") && lower <= UInt8(ascii: "f")) else {
                    return false
                }
            }
            count += 1
            if count > 36 { return false }
        }
        return count == 36
    }
}
