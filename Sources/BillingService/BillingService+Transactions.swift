import Billing
import BillingAPI
import RPC

/// ListTransactions and GetTransaction read what the store recorded (no proof, no store API call).
extension BillingService {
    /// ListTransactions' page size: 0 asks for this many.
    static let defaultPageSize = 100
    /// ListTransactions' largest page; a larger limit is cut to it.
    static let maxPageSize = 1000
    /// GetTransaction's longest id: App Store and Google Play order ids are short, but a Google Play purchase token,
    /// which it also takes, is often 150 to 250 characters; 512 bytes holds any Google has documented or sent.
    public static let maxLookupIDBytes = 512

    func listTransactions(_ context: CallContext, _ request: ListTransactionsRequest, _ responder: Responder) {
        if let refusal = Self.checkAccount(request.accountID, context) { return answer(refusal, context, responder) }
        guard request.limit >= 0 else {
            return answer(.invalidField(field: "limit", problem: "must not be negative (0 means 100)"), context, responder)
        }
        let limit = request.limit == 0 ? Self.defaultPageSize : min(Int(request.limit), Self.maxPageSize)
        var after: HistoryCursor?
        if !request.pageToken.isEmpty {
            guard let cursor = PageToken.decode(request.pageToken) else {
                return answer(.invalidField(field: "page_token", problem: "is not a token from ListTransactions"), context, responder)
            }
            after = cursor
        }
        let catalog = orders.catalog
        // One more than the page: whether another page follows, without a second read.
        orders.store.history(accountID: request.accountID, after: after, limit: limit + 1) { [self] result in
            switch result {
            case .success(var page):
                var response = ListTransactionsResponse()
                if page.count > limit {
                    page.removeLast(page.count - limit)
                    if let last = page.last?.transaction {
                        response.nextPageToken = PageToken.encode(
                            HistoryCursor(purchaseTimeMs: last.purchaseTimeMs, transactionID: last.transactionID))
                    }
                }
                response.transactions = page.map { BillingAPI.Transaction($0.transaction, catalog: catalog) }
                responder.succeed(response)
            case .failure(let error): answer(error, context, responder)
            }
        }
    }

    func getTransaction(_ context: CallContext, _ request: GetTransactionRequest, _ responder: Responder) {
        let id = request.transactionID
        do throws(BillingError) {
            try OrderService.checkText(id, field: "transaction_id", max: Self.maxLookupIDBytes, required: true)
        } catch {
            return answer(error, context, responder)
        }
        context.note("transaction_id", id)
        let catalog = orders.catalog
        orders.store.lookup(transactionID: id) { [self] result in
            switch result {
            case .success(let found?):
                var response = GetTransactionResponse()
                response.transaction = BillingAPI.Transaction(found.owned.transaction, catalog: catalog)
                response.accountID = found.owned.accountID
                response.order = found.order.map { BillingAPI.Order($0) }
                if !found.owned.accountID.isEmpty { context.note("account_id", found.owned.accountID) }
                if let order = found.order { context.note("order_id", order.id) }
                responder.succeed(response)
            case .success(nil): answer(.transactionUnknown(transactionID: id), context, responder)
            case .failure(let error): answer(error, context, responder)
            }
        }
    }
}
