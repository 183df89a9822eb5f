import BillingAPI
import Foundation
import Testing

/// The golden cases of billing.admin.v1's support messages (renewal-date extensions, Set App Account Token, app
/// transactions) and the refund-history counts of ReconcileResponse: every field set, checked both ways.
let adminGoldenCases: [GoldenCase] = {
    let uuid = "0f8fad5b-d9cb-469f-a165-70867728950e"
    var reconcile = ReconcileResponse()
    reconcile.startTimeMs = 1_700_000_000_000; reconcile.endTimeMs = 1_700_003_600_000; reconcile.pages = 3; reconcile.applied = 2
    reconcile.duplicate = 1; reconcile.rejected = 1; reconcile.refundHistories = 7; reconcile.refundsApplied = 2
    var extend = ExtendRenewalDateRequest()
    extend.originalTransactionID = "2000000000000000"; extend.extendByDays = 90; extend.extendReasonCode = 3; extend.requestIdentifier = uuid
    var extended = ExtendRenewalDateResponse()
    extended.originalTransactionID = "2000000000000000"; extended.webOrderLineItemID = "2000000000000123"; extended.success = true
    extended.effectiveTimeMs = 1_731_536_000_000; extended.requestIdentifier = uuid; extended.environment = .production
    extended.accountID = "acct-42"; extended.currentExpiresTimeMs = 1_731_104_000_000
    var all = ExtendRenewalDatesForAllRequest()
    all.productID = "com.example.pro.monthly"; all.extendByDays = 1; all.extendReasonCode = 0; all.requestIdentifier = uuid
    all.storefrontCountryCodes = ["USA", "FRA"]; all.environment = .sandbox
    var allAnswer = ExtendRenewalDatesForAllResponse()
    allAnswer.requestIdentifier = uuid; allAnswer.environment = .sandbox
    var status = GetExtensionStatusRequest()
    status.productID = "com.example.pro.monthly"; status.requestIdentifier = uuid; status.environment = .production
    var statusAnswer = GetExtensionStatusResponse()
    statusAnswer.requestIdentifier = uuid; statusAnswer.complete = true; statusAnswer.completeTimeMs = 1_700_000_000_000
    statusAnswer.succeededCount = 30_000_000_000; statusAnswer.failedCount = 2
    var token = SetAppAccountTokenRequest()
    token.originalTransactionID = "2000000000000000"; token.orderID = uuid
    var tokenAnswer = SetAppAccountTokenResponse()
    var t1 = Transaction()
    t1.transactionID = "1"
    tokenAnswer.order = Golden.orderFull; tokenAnswer.transactions = [Golden.transactionFull, t1]; tokenAnswer.environment = .sandbox
    tokenAnswer.orderCompleted = true
    var app = GetAppTransactionRequest()
    app.transactionID = "2000000000000000"
    var appAnswer = GetAppTransactionResponse()
    appAnswer.environment = .production; appAnswer.bundleID = "com.example.app"; appAnswer.appAppleID = 1_234_567_890
    appAnswer.applicationVersion = "2.1"; appAnswer.originalApplicationVersion = "1.0"; appAnswer.originalPurchaseTimeMs = 1_600_000_000_000
    appAnswer.originalPlatform = "iOS"; appAnswer.appTransactionID = "704289572311323333"; appAnswer.signedAppTransaction = "eyJ.a.b"
    return [
        GoldenCase("admin_reconcile_response", reconcile),
        GoldenCase("admin_extend_request", extend),
        GoldenCase("admin_extend_response", extended),
        GoldenCase("admin_extend_all_request", all),
        GoldenCase("admin_extend_all_response", allAnswer),
        GoldenCase("admin_extension_status_request", status),
        GoldenCase("admin_extension_status_response", statusAnswer),
        GoldenCase("admin_set_token_request", token),
        GoldenCase("admin_set_token_response", tokenAnswer),
        GoldenCase("admin_app_transaction_request", app),
        GoldenCase("admin_app_transaction_response", appAnswer),
    ]
}()
