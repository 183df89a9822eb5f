import Foundation
import GooglePlayAPI
import Testing

/// Answers as Google sends them, member for member from the discovery document's schemas (androidpublisher v3):
/// int64 as strings, google-datetime as RFC 3339, enums by name. `schemaCheck` holds each to the document itself.
enum Fixtures {
    static let product = #"""
        {"kind": "androidpublisher#productPurchase", "purchaseTimeMillis": "1764621786123", "purchaseState": 0,
         "consumptionState": 0, "developerPayload": "", "orderId": "GPA.3312-5545-1280-01234", "purchaseType": 0,
         "acknowledgementState": 0, "purchaseToken": "kdlaoemfnbvjdhstqprzyxwe.AO-J1Oabc", "productId": "coins100",
         "quantity": 3, "obfuscatedExternalAccountId": "ord_01J", "obfuscatedExternalProfileId": "profile-7",
         "regionCode": "US", "refundableQuantity": 3}
        """#
    static let pendingProduct = #"""
        {"kind": "androidpublisher#productPurchase", "purchaseTimeMillis": "1764621786000", "purchaseState": 2,
         "consumptionState": 0, "acknowledgementState": 0, "regionCode": "BR", "productId": "coins100"}
        """#
    static let subscription = #"""
        {"kind": "androidpublisher#subscriptionPurchaseV2", "regionCode": "US",
         "lineItems": [{"productId": "pro.monthly", "expiryTime": "2026-12-31T10:00:00.500Z",
           "autoRenewingPlan": {"autoRenewEnabled": true, "recurringPrice": {"currencyCode": "USD", "units": "9", "nanos": 990000000}},
           "offerDetails": {"basePlanId": "monthly", "offerId": "intro", "offerTags": ["spring", "promo"]},
           "latestSuccessfulOrderId": "GPA.1111-2222-3333-44444..1",
           "itemReplacement": {"productId": "pro.weekly", "basePlanId": "weekly", "replacementMode": "WITH_TIME_PRORATION"}}],
         "startTime": "2026-12-01T10:00:00Z", "subscriptionState": "SUBSCRIPTION_STATE_ACTIVE",
         "linkedPurchaseToken": "oldtoken.AO-J1Oxyz",
         "acknowledgementState": "ACKNOWLEDGEMENT_STATE_PENDING",
         "externalAccountIdentifiers": {"obfuscatedExternalAccountId": "ord_9", "obfuscatedExternalProfileId": "p9"},
         "testPurchase": {}}
        """#
    static let canceledSubscription = #"""
        {"kind": "androidpublisher#subscriptionPurchaseV2", "regionCode": "DE",
         "lineItems": [{"productId": "pro.yearly", "expiryTime": "2027-01-01T00:00:00.123456789+01:00",
           "autoRenewingPlan": {"autoRenewEnabled": false}, "offerDetails": {"basePlanId": "yearly"}}],
         "startTime": "2026-01-01T00:00:00.000Z", "subscriptionState": "SUBSCRIPTION_STATE_CANCELED",
         "acknowledgementState": "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED",
         "canceledStateContext": {"userInitiatedCancellation": {"cancelSurveyResult": {"reason": "CANCEL_SURVEY_REASON_COST_RELATED"},
           "cancelTime": "2026-06-01T12:00:00.000Z"}}}
        """#
    static let pausedPrepaid = #"""
        {"kind": "androidpublisher#subscriptionPurchaseV2",
         "lineItems": [{"productId": "pro.prepaid", "expiryTime": "2026-12-10T00:00:00Z",
           "prepaidPlan": {"allowExtendAfterTime": "2026-12-07T00:00:00Z"}, "offerDetails": {"basePlanId": "prepaid"}}],
         "subscriptionState": "SUBSCRIPTION_STATE_PAUSED", "acknowledgementState": "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED",
         "pausedStateContext": {"autoResumeTime": "2027-02-01T00:00:00Z"},
         "canceledStateContext": {"replacementCancellation": {}}}
        """#
    static let voided = #"""
        {"pageInfo": {"totalResults": 3, "resultPerPage": 2, "startIndex": 0},
         "tokenPagination": {"nextPageToken": "page-2"},
         "voidedPurchases": [
           {"kind": "androidpublisher#voidedPurchase", "purchaseToken": "tok1", "purchaseTimeMillis": "1764000000000",
            "voidedTimeMillis": "1764600000000", "orderId": "GPA.1234-1234-1234-12345", "voidedSource": 2, "voidedReason": 7},
           {"kind": "androidpublisher#voidedPurchase", "purchaseToken": "tok2", "purchaseTimeMillis": "1764000000001",
            "voidedTimeMillis": "1764600000001", "orderId": "GPA.1234-1234-1234-99999", "voidedSource": 0, "voidedReason": 1,
            "voidedQuantity": 2}]}
        """#
}

/// Checks `json` against a schema of the discovery document shipped with google-api-python-client: every member a
/// property of its schema, int64 members strings, int32 numbers, enums among the names, datetimes RFC 3339.
/// nil when the document is not installed (then the check is skipped).
func schemaCheck(_ schema: String, _ json: String) throws -> String? {
    let script = #"""
        import json, os, sys, datetime
        try:
            import googleapiclient
        except ImportError:
            print("SKIP"); sys.exit(0)
        doc = json.load(open(os.path.join(os.path.dirname(googleapiclient.__file__), "discovery_cache", "documents", "androidpublisher.v3.json")))
        S = doc["schemas"]
        def check(value, spec, where):
            if "$ref" in spec:
                sc = S[spec["$ref"]]
                assert isinstance(value, dict), where
                for k, v in value.items():
                    assert k in sc.get("properties", {}), "%s.%s is not in %s" % (where, k, spec["$ref"])
                    check(v, sc["properties"][k], where + "." + k)
                return
            t, f = spec.get("type"), spec.get("format")
            if t == "array":
                for i, v in enumerate(value): check(v, spec["items"], "%s[%d]" % (where, i))
            elif t == "string" and f in ("int64", "uint64"):
                assert isinstance(value, str) and int(value) is not None, where + " is not an int64 string"
            elif t == "string" and f == "google-datetime":
                datetime.datetime.fromisoformat(value.replace("Z", "+00:00")[:26] if "." not in value else value.split(".")[0] + "+00:00")
            elif t == "string":
                assert isinstance(value, str), where
                if "enum" in spec: assert value in spec["enum"], where + " is not one of the enum"
            elif t == "integer":
                assert isinstance(value, int) and not isinstance(value, bool), where + " is not an integer"
            elif t == "boolean":
                assert isinstance(value, bool), where
            elif t == "object":
                assert isinstance(value, dict), where
        try:
            check(json.loads(sys.stdin.read()), {"$ref": sys.argv[1]}, sys.argv[1])
            print("OK")
        except AssertionError as e:
            print("BAD " + str(e))
        """#
    let r = try run(["python3", "-c", script, schema], input: Array(json.utf8))
    let out = r.output.trimmingCharacters(in: .whitespacesAndNewlines)
    return out == "SKIP" ? nil : out
}

@Suite("Google's answers decoded exactly as sent")
struct DecodingTests {
    @Test(
        "the fixtures are Google's shapes (the discovery document's schemas)",
        arguments: [
            ("ProductPurchase", Fixtures.product), ("ProductPurchase", Fixtures.pendingProduct), ("SubscriptionPurchaseV2", Fixtures.subscription),
            ("SubscriptionPurchaseV2", Fixtures.canceledSubscription), ("SubscriptionPurchaseV2", Fixtures.pausedPrepaid),
            ("VoidedPurchasesListResponse", Fixtures.voided),
        ])
    func fixturesMatchTheSchemas(schema: String, json: String) throws {
        guard let verdict = try schemaCheck(schema, json) else { return }
        #expect(verdict == "OK")
    }

    @Test("ProductPurchase: int64 strings, purchaseType 0 = test, quantity, account ids")
    func product() throws {
        let p = try GooglePlay.ProductPurchase(json: Array(Fixtures.product.utf8))
        #expect(p.orderID == "GPA.3312-5545-1280-01234" && p.state == .purchased && p.purchaseTimeMillis == 1_764_621_786_123)
        #expect(p.isTest && p.purchaseType == 0 && p.quantity == 3 && p.refundableQuantity == 3)
        #expect(!p.isAcknowledged && !p.isConsumed)
        #expect(p.obfuscatedExternalAccountID == "ord_01J" && p.obfuscatedExternalProfileID == "profile-7" && p.regionCode == "US")
        #expect(p.productID == "coins100" && p.purchaseToken == "kdlaoemfnbvjdhstqprzyxwe.AO-J1Oabc" && p.kind == "androidpublisher#productPurchase")
        let pending = try GooglePlay.ProductPurchase(json: Array(Fixtures.pendingProduct.utf8))
        #expect(pending.state == .pending && pending.orderID == nil && pending.purchaseType == nil && !pending.isTest && pending.quantity == 1)
    }

    @Test("SubscriptionPurchaseV2: state, line items, money, times, offer, replacement, ids, testPurchase")
    func subscription() throws {
        let s = try GooglePlay.SubscriptionPurchaseV2(json: Array(Fixtures.subscription.utf8))
        #expect(s.subscriptionState == .active && s.acknowledgementState == .pending && !s.isAcknowledged)
        #expect(s.isTestPurchase && s.regionCode == "US" && s.linkedPurchaseToken == "oldtoken.AO-J1Oxyz")
        #expect(s.startTimeMillis == 1_796_119_200_000)
        #expect(s.latestOrderID == nil && s.orderID == "GPA.1111-2222-3333-44444..1")
        // The top-level latestOrderId of older answers (gone from the current reference) is read when no line item
        // names its latest order.
        let legacy = try GooglePlay.SubscriptionPurchaseV2(
            json: Array(#"{"latestOrderId": "GPA.9..0", "lineItems": [{"productId": "p"}], "subscriptionState": "SUBSCRIPTION_STATE_ACTIVE"}"#.utf8))
        #expect(legacy.latestOrderID == "GPA.9..0" && legacy.orderID == "GPA.9..0")
        #expect(s.externalAccountIdentifiers?.obfuscatedExternalAccountID == "ord_9")
        let item = try #require(s.lineItems.first)
        #expect(item.productID == "pro.monthly" && item.expiryTimeMillis == 1_798_711_200_500 && s.expiryTimeMillis == item.expiryTimeMillis)
        #expect(item.autoRenewing && item.autoRenewEnabled == true && !item.prepaid)
        #expect(item.recurringPrice == GooglePlay.Money(currencyCode: "USD", units: 9, nanos: 990_000_000) && item.recurringPrice?.micros == 9_990_000)
        #expect(item.offerDetails == GooglePlay.OfferDetails(basePlanID: "monthly", offerID: "intro", offerTags: ["spring", "promo"]))
        #expect(item.itemReplacement?.productID == "pro.weekly" && item.itemReplacement?.replacementMode == "WITH_TIME_PRORATION")

        let c = try GooglePlay.SubscriptionPurchaseV2(json: Array(Fixtures.canceledSubscription.utf8))
        #expect(c.subscriptionState == .canceled && c.isAcknowledged && !c.isTestPurchase && c.orderID == nil)
        #expect(c.canceledStateContext?.initiator == .user && c.canceledStateContext?.cancelSurveyReason == "CANCEL_SURVEY_REASON_COST_RELATED")
        #expect(c.canceledStateContext?.cancelTimeMillis == RFC3339.milliseconds("2026-06-01T12:00:00Z"))
        #expect(c.lineItems[0].expiryTimeMillis == RFC3339.milliseconds("2026-12-31T23:00:00.123Z"))
        #expect(c.lineItems[0].autoRenewEnabled == false && c.lineItems[0].recurringPrice == nil)

        let p = try GooglePlay.SubscriptionPurchaseV2(json: Array(Fixtures.pausedPrepaid.utf8))
        #expect(p.subscriptionState == .paused && p.autoResumeTimeMillis == RFC3339.milliseconds("2027-02-01T00:00:00Z"))
        #expect(p.lineItems[0].prepaid && !p.lineItems[0].autoRenewing && p.lineItems[0].allowExtendAfterTimeMillis != nil)
        #expect(p.canceledStateContext?.initiator == .replacement)
        let unknown = try GooglePlay.SubscriptionPurchaseV2(json: Array(#"{"subscriptionState": "SUBSCRIPTION_STATE_NEW_ONE", "lineItems": []}"#.utf8))
        #expect(unknown.subscriptionState.rawValue == "SUBSCRIPTION_STATE_NEW_ONE")
    }

    @Test("VoidedPurchasesListResponse: purchases, sources, reasons, quantity, next page token")
    func voided() throws {
        let page = try GooglePlay.VoidedPurchasesPage(json: Array(Fixtures.voided.utf8))
        #expect(page.nextPageToken == "page-2" && page.purchases.count == 2)
        #expect(
            page.purchases[0]
                == GooglePlay.VoidedPurchase(
                    purchaseToken: "tok1", orderID: "GPA.1234-1234-1234-12345", purchaseTimeMillis: 1_764_000_000_000, voidedTimeMillis: 1_764_600_000_000,
                    voidedSource: 2, voidedReason: 7))
        #expect(page.purchases[1].voidedQuantity == 2 && page.purchases[1].voidedReason == 1)
        let last = try GooglePlay.VoidedPurchasesPage(json: Array(#"{"pageInfo": {"totalResults": 0}}"#.utf8))
        #expect(last.purchases.isEmpty && last.nextPageToken == nil)
    }

    @Test(
        "wrong types are invalidAnswer",
        arguments: [
            #"{"purchaseTimeMillis": "soon"}"#, #"{"purchaseState": "0"}"#, #"{"quantity": 3000000000}"#, #"{"orderId": 5}"#, "[1]", "not json",
        ])
    func productTypes(json: String) {
        #expect(throws: GooglePlayAPIError.self) { try GooglePlay.ProductPurchase(json: Array(json.utf8)) }
    }

    @Test(
        "subscription refusals: a bad time, a line item without productId, a non-array lineItems",
        arguments: [
            #"{"startTime": "2026-13-01T00:00:00Z"}"#, #"{"lineItems": [{"expiryTime": "2026-12-01T00:00:00Z"}]}"#, #"{"lineItems": {}}"#,
            #"{"lineItems": [{"productId": "p", "expiryTime": "yesterday"}]}"#,
        ])
    func subscriptionTypes(json: String) {
        #expect(throws: GooglePlayAPIError.self) { try GooglePlay.SubscriptionPurchaseV2(json: Array(json.utf8)) }
    }

    @Test("RFC 3339: fractions, offsets, Z, and round trips of Google's own format")
    func rfc3339() {
        #expect(RFC3339.milliseconds("1970-01-01T00:00:00Z") == 0)
        #expect(RFC3339.milliseconds("2026-12-01T20:43:06.123Z") == 1_796_157_786_123)
        #expect(RFC3339.milliseconds("2026-12-01T21:43:06.1239+01:00") == 1_796_157_786_123)
        #expect(RFC3339.milliseconds("2026-12-01T20:43:06.1Z") == 1_796_157_786_100)
        #expect(RFC3339.format(milliseconds: 1_796_157_786_123) == "2026-12-01T20:43:06.123Z")
        for bad in ["", "2026-12-01", "2026-12-01T20:43:06", "2026-12-01T20:43:06.Z", "2026-12-01 20:43:06Z", "2026-12-01T20:43:06Zjunk"] {
            #expect(RFC3339.milliseconds(bad) == nil)
        }
    }
}
