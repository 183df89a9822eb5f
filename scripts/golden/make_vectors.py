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
            "billing/v1/billing.proto", "grpc/health/v1/health.proto", "google/rpc/status.proto",
            "google/rpc/error_details.proto", "wiretest.proto"]
    if protoc.main(args) != 0:
        sys.exit("protoc failed")


def main():
    out_path = sys.argv[1]
    gen = tempfile.mkdtemp()
    compile_protos(gen)
    sys.path.insert(0, gen)
    from billing.v1 import billing_pb2 as b
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
