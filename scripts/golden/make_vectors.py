#!/usr/bin/env python3
"""Writes golden protobuf vectors with Python protobuf, an encoder independent of billingd's.

Usage: make_vectors.py OUT.json   (the Swift tests read Tests/ProtoWireTests/golden.json)
Each vector names a case that Tests/ProtoWireTests/GoldenTests.swift builds the same way.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def compile_protos(out):
    from grpc_tools import protoc
    import grpc_tools
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    args = ["protoc", f"-I{ROOT}/schemas", f"-I{ROOT}/scripts/golden", f"-I{include}", f"--python_out={out}",
            "billing/v1/billing.proto", "billing/admin/v1/admin.proto", "grpc/health/v1/health.proto", "google/rpc/status.proto",
            "google/rpc/error_details.proto", "wiretest.proto"]
    if protoc.main(args) != 0:
        sys.exit("protoc failed")


def main():
    out_path = sys.argv[1]
    gen = tempfile.mkdtemp()
    compile_protos(gen)
    sys.path.insert(0, gen)
    from billing.v1 import billing_pb2 as b
    from billing.admin.v1 import admin_pb2 as a
    from google.rpc import status_pb2, error_details_pb2
    import wiretest_pb2 as w
    # grpc.health.v1 clashes with the grpc package; load it by path.
    import importlib.util
    spec = importlib.util.spec_from_file_location("health_pb2", os.path.join(gen, "grpc/health/v1/health_pb2.py"))
    h = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(h)

    vectors = {}

    def add(name, msg):
        vectors[name] = msg.SerializeToString(deterministic=True).hex()

    add("create_order_request", b.CreateOrderRequest(account_id="acct-42", product_id="com.example.premium",
                                                     idempotency_key="key-1", quantity=3))
    add("create_order_request_unicode", b.CreateOrderRequest(account_id="\u00fcser-\u6f22\u5b57-\U0001F600", product_id="p"))
    add("create_order_request_negative_quantity", b.CreateOrderRequest(account_id="a", product_id="p", quantity=-1))
    add("empty", b.CreateOrderRequest())
    order = b.Order(order_id="0f8fad5b-d9cb-469f-a165-70867728950e", account_id="acct-42", product_id="com.example.premium",
                    state=b.ORDER_STATE_COMPLETED, create_time_ms=1700000000123, update_time_ms=1700000000456,
                    transaction_id="2000000123456789", environment=b.ENVIRONMENT_SANDBOX, quantity=1)
    add("order", order)
    add("create_order_response", b.CreateOrderResponse(order=order))
    add("get_order_response_empty_order", b.GetOrderResponse(order=b.Order()))
    add("get_order_request", b.GetOrderRequest(order_id="0f8fad5b-d9cb-469f-a165-70867728950e"))
    add("transaction", b.Transaction(transaction_id="2000000000000001", original_transaction_id="2000000000000000",
                                     product_id="com.example.pro.monthly", product_type=b.PRODUCT_TYPE_AUTO_RENEWABLE_SUBSCRIPTION,
                                     purchase_time_ms=1700000000000, expires_time_ms=1702592000000, revocation_time_ms=0,
                                     quantity=1, environment=b.ENVIRONMENT_PRODUCTION,
                                     app_account_token="0f8fad5b-d9cb-469f-a165-70867728950e", bundle_id="com.example.app"))
    add("submit_receipt_request_jws", b.SubmitReceiptRequest(order_id="o", signed_transaction="eyJ.a.b", sandbox=True))
    add("submit_receipt_request_receipt", b.SubmitReceiptRequest(order_id="o", app_receipt="MIIT", transaction_id="1"))
    add("submit_receipt_request_empty_oneof", b.SubmitReceiptRequest(order_id="o", signed_transaction=""))
    add("submit_receipt_response", b.SubmitReceiptResponse(order=order, transaction=b.Transaction(transaction_id="1"),
                                                           already_processed=True))
    add("restore_request", b.RestorePurchasesRequest(account_id="acct", app_receipt="MIIT",
                                                     signed_transactions=["a.b.c", "", "d.e.f"]))
    add("restore_response", b.RestorePurchasesResponse(entitlements=[
        b.Entitlement(product_id="com.example.premium", product_type=b.PRODUCT_TYPE_NON_CONSUMABLE,
                      original_transaction_id="1", latest_transaction_id="1", purchase_time_ms=1, active=True,
                      order_id="0f8fad5b-d9cb-469f-a165-70867728950e"),
        b.Entitlement(product_id="sub", product_type=b.PRODUCT_TYPE_AUTO_RENEWABLE_SUBSCRIPTION,
                      expires_time_ms=99, active=False)]))
    # Every field added with the subscription model, Google Play and the support RPCs.
    order_full = b.Order(order_id="0f8fad5b-d9cb-469f-a165-70867728950e", account_id="acct-42", product_id="com.example.coins",
                         state=b.ORDER_STATE_COMPLETED, create_time_ms=1700000000123, update_time_ms=1700000000456,
                         transaction_id="GPA.1234-5678-9012-34567", environment=b.ENVIRONMENT_PRODUCTION, quantity=5,
                         refunded_quantity=2, store=b.STORE_GOOGLE_PLAY)
    add("order_full", order_full)
    tx_full = b.Transaction(transaction_id="2000000000000002", original_transaction_id="2000000000000000",
                            product_id="com.example.pro.yearly", product_type=b.PRODUCT_TYPE_AUTO_RENEWABLE_SUBSCRIPTION,
                            purchase_time_ms=1700000000000, expires_time_ms=1731536000000, revocation_time_ms=1700000500000,
                            quantity=1, environment=b.ENVIRONMENT_SANDBOX, app_account_token="0f8fad5b-d9cb-469f-a165-70867728950e",
                            bundle_id="com.example.app", store=b.STORE_APP_STORE, ownership=b.OWNERSHIP_FAMILY_SHARED,
                            price_milliunits=49990, currency="EUR", storefront="DEU", offer_id="intro-1",
                            offer_type="INTRODUCTORY_OFFER", subscription_group_id="21000001", upgraded=True,
                            revocation_type=b.REVOCATION_TYPE_REFUND_PRORATED, revocation_percentage=33333,
                            revocation_reason="APP_ISSUE")
    add("transaction_full", tx_full)
    ent_full = b.Entitlement(product_id="com.example.pro.yearly", product_type=b.PRODUCT_TYPE_AUTO_RENEWABLE_SUBSCRIPTION,
                             original_transaction_id="2000000000000000", latest_transaction_id="2000000000000002",
                             purchase_time_ms=1700000000000, expires_time_ms=1731536000000, active=True,
                             order_id="0f8fad5b-d9cb-469f-a165-70867728950e", grace_period_expires_time_ms=1731968000000,
                             auto_renew=True, environment=b.ENVIRONMENT_PRODUCTION, state=b.ENTITLEMENT_STATE_GRACE_PERIOD,
                             ownership=b.OWNERSHIP_PURCHASED, store=b.STORE_APP_STORE, subscription_group_id="21000001",
                             pending_product_id="com.example.pro.monthly")
    add("entitlement_full", ent_full)
    gp = b.GooglePlayPurchase(package_name="com.example.android", product_id="com.example.coins",
                              purchase_token="opaque-token.AO-J1Oy")
    add("google_play_purchase", gp)
    add("submit_receipt_request_google_play", b.SubmitReceiptRequest(order_id="o", google_play=gp, transaction_id="GPA.1",
                                                                     sandbox=True))
    add("submit_receipt_request_empty_google_play", b.SubmitReceiptRequest(order_id="o", google_play=b.GooglePlayPurchase()))
    add("restore_request_google_play", b.RestorePurchasesRequest(
        account_id="acct", signed_transactions=["a.b.c"], transaction_ids=["2000000000000001"],
        google_play_purchases=[gp, b.GooglePlayPurchase(), b.GooglePlayPurchase(purchase_token="t2")]))
    add("event_partially_refunded", b.Event(cursor=42, type=b.EVENT_TYPE_ORDER_PARTIALLY_REFUNDED, time_ms=1700000000999,
                                            account_id="acct-42", order=order_full, cause="notification:REFUND",
                                            transaction_id="GPA.1234-5678-9012-34567"))
    add("list_transactions_request", b.ListTransactionsRequest(account_id="acct-42", limit=1000, page_token="MTcwMDowMDE"))
    add("list_transactions_response", b.ListTransactionsResponse(transactions=[tx_full, b.Transaction(transaction_id="1")],
                                                                 next_page_token="MTcwMDowMDE"))
    add("get_transaction_request", b.GetTransactionRequest(transaction_id="2000000000000000"))
    add("get_transaction_response", b.GetTransactionResponse(transaction=tx_full, account_id="acct-42", order=order_full))
    add("get_transaction_response_unowned", b.GetTransactionResponse(transaction=b.Transaction(transaction_id="1")))
    add("sign_offer_request", b.SignOfferRequest(kind=b.OFFER_SIGNATURE_KIND_INTRODUCTORY_ELIGIBILITY, bundle_id="com.example.app",
                                                 product_id="com.example.pro.monthly", offer_id="winback-1",
                                                 order_id="0f8fad5b-d9cb-469f-a165-70867728950e", transaction_id="2000000000000001",
                                                 allow_introductory_offer=True))
    add("sign_offer_response", b.SignOfferResponse(compact_jws="eyJ.a.b", key_id="ABC123DEFG",
                                                   nonce="5f3c1b9e-0000-4000-8000-000000000001", timestamp_ms=1700000000000,
                                                   signature="MEUCIQ=="))
    # billing.admin.v1: the support calls (renewal-date extensions, Set App Account Token, app transactions).
    add("admin_reconcile_response", a.ReconcileResponse(start_time_ms=1700000000000, end_time_ms=1700003600000, pages=3,
                                                        applied=2, duplicate=1, ignored=0, rejected=1, refund_histories=7,
                                                        refunds_applied=2))
    add("admin_extend_request", a.ExtendRenewalDateRequest(original_transaction_id="2000000000000000", extend_by_days=90,
                                                           extend_reason_code=3,
                                                           request_identifier="0f8fad5b-d9cb-469f-a165-70867728950e"))
    add("admin_extend_response", a.ExtendRenewalDateResponse(
        original_transaction_id="2000000000000000", web_order_line_item_id="2000000000000123", success=True,
        effective_time_ms=1731536000000, request_identifier="0f8fad5b-d9cb-469f-a165-70867728950e",
        environment=b.ENVIRONMENT_PRODUCTION, account_id="acct-42", current_expires_time_ms=1731104000000))
    add("admin_extend_all_request", a.ExtendRenewalDatesForAllRequest(
        product_id="com.example.pro.monthly", extend_by_days=1, extend_reason_code=0,
        request_identifier="0f8fad5b-d9cb-469f-a165-70867728950e", storefront_country_codes=["USA", "FRA"],
        environment=b.ENVIRONMENT_SANDBOX))
    add("admin_extend_all_response", a.ExtendRenewalDatesForAllResponse(
        request_identifier="0f8fad5b-d9cb-469f-a165-70867728950e", environment=b.ENVIRONMENT_SANDBOX))
    add("admin_extension_status_request", a.GetExtensionStatusRequest(
        product_id="com.example.pro.monthly", request_identifier="0f8fad5b-d9cb-469f-a165-70867728950e",
        environment=b.ENVIRONMENT_PRODUCTION))
    add("admin_extension_status_response", a.GetExtensionStatusResponse(
        request_identifier="0f8fad5b-d9cb-469f-a165-70867728950e", complete=True, complete_time_ms=1700000000000,
        succeeded_count=30000000000, failed_count=2))
    add("admin_set_token_request", a.SetAppAccountTokenRequest(original_transaction_id="2000000000000000",
                                                               order_id="0f8fad5b-d9cb-469f-a165-70867728950e"))
    add("admin_set_token_response", a.SetAppAccountTokenResponse(order=order_full, transactions=[tx_full, b.Transaction(transaction_id="1")],
                                                                 environment=b.ENVIRONMENT_SANDBOX, order_completed=True))
    add("admin_app_transaction_request", a.GetAppTransactionRequest(transaction_id="2000000000000000"))
    add("admin_app_transaction_response", a.GetAppTransactionResponse(
        environment=b.ENVIRONMENT_PRODUCTION, bundle_id="com.example.app", app_apple_id=1234567890, application_version="2.1",
        original_application_version="1.0", original_purchase_time_ms=1600000000000, original_platform="iOS",
        app_transaction_id="704289572311323333", signed_app_transaction="eyJ.a.b"))
    add("health_request", h.HealthCheckRequest(service="billing.v1.Billing"))
    add("health_response", h.HealthCheckResponse(status=h.HealthCheckResponse.NOT_SERVING))
    info = error_details_pb2.ErrorInfo(reason="INVALID_FIELD", domain="billing.v1",
                                       metadata={"field": "account_id", "a": "1", "z": "\u00e9"})
    add("error_info", info)
    st = status_pb2.Status(code=3, message="account_id is required")
    # Any.Pack serializes without deterministic map order; pack by hand so the bytes are canonical.
    st.details.add(type_url="type.googleapis.com/google.rpc.ErrorInfo", value=info.SerializeToString(deterministic=True))
    add("status", st)
    add("wire_all", w.All(i32=-5, i64=-(1 << 40), u32=4000000000, u64=(1 << 64) - 1, s32=-64, s64=-(1 << 62),
                          f32=0xDEADBEEF, f64=0x0123456789ABCDEF, sf32=-2, sf64=-(1 << 50), b=True, s="h\u00e9llo",
                          by=bytes(range(256)), d=3.141592653589793, f=1.5, inner=w.Inner(name="in", value=7),
                          packed=[1, -1, 300, 0, 2147483647], inners=[w.Inner(name="x"), w.Inner(value=-1)],
                          labels={"b": "2", "a": "1"}, names=["one", "", "three"]))
    add("wire_extremes", w.All(i32=-2147483648, i64=-(1 << 63), u32=1, u64=1 << 63, s32=2147483647, s64=(1 << 63) - 1,
                               sf32=-2147483648, sf64=(1 << 63) - 1, d=-0.0))
    add("create_order_request_future", w.CreateOrderRequestFuture(
        account_id="acct-42", product_id="com.example.premium", idempotency_key="key-1", quantity=3,
        unknown_fixed64=7, unknown_fixed32=9, unknown_varint=(1 << 63), unknown_bytes=b"\x00\x01",
        unknown_message=w.Inner(name="future")))

    with open(out_path, "w") as f:
        json.dump({"generator": "python protobuf " + __import__("google.protobuf").protobuf.__version__,
                   "vectors": vectors}, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
