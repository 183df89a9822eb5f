public import Billing
import BillingAPI
import ProtoWire
public import RPC
import Synchronization

/// The audit trail: every Support call (and audited Admin call) written in its own transaction, refusals too;
/// ListAuditEntries.
extension SupportService {
    func makeAudit<M: ProtoMessage>(
        _ context: CallContext, _ message: String, _ request: M, account: String, target: String, reason: String = ""
    )
        -> Audit
    {
        Audit(
            operatorName: operatorName(context), method: context.method, accountID: Self.bounded(account), target: Self.redacted(Self.bounded(target)),
            reason: Self.bounded(reason), requestJSON: Self.redacted(requestJSON(message, request.encoded())))
    }

    /// Runs `body` in one database transaction with the call's audit entry (outcome OK) and answers its value;
    /// a refusal or a failure rolls both back, then the entry is written alone with the refusal as its outcome.
    /// `adjust` may rewrite the entry from the answer before it is written (erasure: the pseudonym, not the id).
    func run<R: ProtoMessage>(
        _ audit: Audit, _ context: CallContext, _ responder: Responder,
        adjust: (@Sendable (inout Audit, R) -> Void)? = nil, abandonable: Bool = true,
        _ body: @escaping @Sendable (any PurchaseLedger, Int64) throws(BillingError) -> R
    ) {
        let clock = self.clock
        store.write(
            abandoned: { abandonable && context.isExpired },
            { ledger throws(BillingError) in
                let now = clock.nowMilliseconds()
                let answer = try body(ledger, now)
                var entry = audit
                adjust?(&entry, answer)
                try ledger.appendAudit(entry.record(outcome: "OK", timeMs: now))
                return answer
            }
        ) { [self] result in
            switch result {
            case .success(let answer): responder.succeed(answer)
            case .failure(let error): refuse(error.rpcError, audit, responder)
            }
        }
    }

    /// Answers a refusal once its audit entry is written (or could not be: the refusal still answers, and the
    /// failure to audit is the caller's error only when the refusal is not already a storage failure).
    func refuse(_ error: RPCError, _ audit: Audit, _ responder: Responder) {
        let record = audit.record(outcome: Self.outcome(error), timeMs: clock.nowMilliseconds())
        store.write(abandoned: { false }, { ledger throws(BillingError) in try ledger.appendAudit(record) }) { _ in
            responder.fail(error)
        }
    }

    /// A call refused before it reached the service (UNAUTHENTICATED, PERMISSION_DENIED): its entry, under the
    /// presented key's name when it has one. Written after the refusal is answered.
    public func auditRefusal(_ context: CallContext, _ error: RPCError) {
        let (id, ms) = AuditID.make(clock.nowMilliseconds())
        let record = AuditRecord(
            auditID: id, timeMs: ms, operatorName: operatorName(context),
            method: context.method, accountID: "", target: "", reason: "", outcome: Self.outcome(error), requestJSON: "")
        store.write(abandoned: { false }, { ledger throws(BillingError) in try ledger.appendAudit(record) }) { [self] written in
            if case .failure(let e) = written { log("audit entry not written for refused \(record.method) by \(record.operatorName): \(e)") }
        }
    }

    /// The Admin calls that change something, with their request types: each is audited as a Support call is
    /// (`auditing`), its entry written once the call has its outcome, before the caller hears it.
    public static let auditedAdminMethods: [(method: String, request: String)] = [
        ("billing.admin.v1.Admin/Reconcile", "billing.admin.v1.ReconcileRequest"),
        ("billing.admin.v1.Admin/ExtendRenewalDate", "billing.admin.v1.ExtendRenewalDateRequest"),
        ("billing.admin.v1.Admin/ExtendRenewalDatesForAll", "billing.admin.v1.ExtendRenewalDatesForAllRequest"),
        ("billing.admin.v1.Admin/SetAppAccountToken", "billing.admin.v1.SetAppAccountTokenRequest"),
        ("billing.admin.v1.Admin/ReplayWebhooks", "billing.admin.v1.ReplayWebhooksRequest"),
        ("billing.admin.v1.Admin/RequestTestNotification", "billing.admin.v1.RequestTestNotificationRequest"),
    ]

    /// Whether calls of `method` are in the audit trail: every Support method, and the Admin methods that change something.
    public static func isAudited(_ method: String) -> Bool {
        method.hasPrefix("billing.v1.Support/") || auditedAdminMethods.contains { $0.method == method }
    }

    /// `handler` with its audit entry: the operator, the method, the request in JSON (emails removed), and the
    /// outcome, written before the answer is delivered (a caller that saw the answer finds the entry).
    public func auditing(_ requestType: String, _ handler: @escaping UnaryHandler) -> UnaryHandler {
        { [self] context, bytes, responder in
            let json = Self.redacted(requestJSON(requestType, bytes))
            let name = operatorName(context)
            let audited = Responder { [self] result in
                let outcome: String
                switch result {
                case .success: outcome = "OK"
                case .failure(let error): outcome = Self.outcome(error)
                }
                let (id, ms) = AuditID.make(clock.nowMilliseconds())
                let record = AuditRecord(
                    auditID: id, timeMs: ms, operatorName: name, method: context.method, accountID: Self.bounded(Self.accountNamed(json)),
                    target: "", reason: Self.bounded(Self.fieldNamed("reason", json)), outcome: outcome, requestJSON: json)
                store.write(abandoned: { false }, { ledger throws(BillingError) in try ledger.appendAudit(record) }) { [self] written in
                    if case .failure(let error) = written {
                        log("audit entry not written for \(record.method) by \(record.operatorName) (outcome \(outcome)): \(error)")
                    }
                    switch result {
                    case .success(let framed): responder.succeed(framed: framed)
                    case .failure(let error): responder.fail(error)
                    }
                }
            }
            handler(context, bytes, audited)
        }
    }

    /// The `accountId` member of a request's JSON, when it has one.
    static func accountNamed(_ json: String) -> String { fieldNamed("accountId", json) }

    /// A top-level string member of the request's canonical JSON (`"name":"value"`, no escapes), or "".
    static func fieldNamed(_ name: String, _ json: String) -> String {
        let key = Array("\"\(name)\":\"".utf8), bytes = Array(json.utf8)
        guard bytes.count > key.count else { return "" }
        for i in 0...(bytes.count - key.count) where bytes[i..<(i + key.count)].elementsEqual(key) {
            var j = i + key.count
            var value: [UInt8] = []
            while j < bytes.count, bytes[j] != UInt8(ascii: "\""), bytes[j] != UInt8(ascii: "\\") {
                value.append(bytes[j])
                j += 1
            }
            return j < bytes.count && bytes[j] == UInt8(ascii: "\"") ? String(decoding: value, as: UTF8.self) : ""
        }
        return ""
    }

    /// "OK", the ErrorInfo reason, else the status code's name.
    static func outcome(_ error: RPCError) -> String {
        if let reason = error.reason, !reason.isEmpty { return reason }
        return error.code.description
    }

    func listAuditEntries(_ context: CallContext, _ request: ListAuditEntriesRequest, _ responder: Responder) {
        let audit = makeAudit(context, "billing.v1.ListAuditEntriesRequest", request, account: request.accountID, target: request.operatorName)
        for (field, value) in [("account_id", request.accountID), ("operator", request.operatorName), ("method", request.method)] {
            do throws(BillingError) {
                try OrderService.checkText(value, field: field, max: Limits.filter, required: false)
            } catch {
                return refuse(error.rpcError, audit, responder)
            }
        }
        guard request.limit >= 0 else {
            return refuse(BillingError.invalidField(field: "limit", problem: "must not be negative (0 means 100)").rpcError, audit, responder)
        }
        guard request.sinceTimeMs >= 0, request.untilTimeMs >= 0 else {
            return refuse(BillingError.invalidField(field: "since_time_ms", problem: "must not be negative").rpcError, audit, responder)
        }
        var after: AuditCursor?
        if !request.pageToken.isEmpty {
            guard let cursor = AuditPageToken.decode(request.pageToken) else {
                return refuse(
                    BillingError.invalidField(field: "page_token", problem: "is not a token ListAuditEntries made").rpcError, audit, responder)
            }
            after = cursor
        }
        let limit = request.limit == 0 ? 100 : min(Int(request.limit), 1000)
        let filter = AuditFilter(
            accountID: request.accountID, operatorName: request.operatorName, method: request.method, sinceTimeMs: request.sinceTimeMs,
            untilTimeMs: request.untilTimeMs)
        let start = after
        run(audit, context, responder) { ledger, _ throws(BillingError) in
            // One more than the page: whether another page follows, without an empty last page.
            let rows = try ledger.auditEntries(filter, after: start, limit: limit + 1)
            var response = ListAuditEntriesResponse()
            response.entries = rows.prefix(limit).map { e in
                var out = AuditEntry()
                out.auditID = e.auditID
                out.timeMs = e.timeMs
                out.operatorName = e.operatorName
                out.method = e.method
                out.accountID = e.accountID
                out.target = e.target
                out.reason = e.reason
                out.outcome = e.outcome
                out.requestJSON = e.requestJSON
                return out
            }
            if rows.count > limit, let last = rows.prefix(limit).last {
                response.nextPageToken = AuditPageToken.encode(AuditCursor(timeMs: last.timeMs, auditID: last.auditID))
            }
            return response
        }
    }
}
