"""A stock grpcio client (stubs from schemas/ via grpcio-tools) against billingd."""
import json
import os
import tempfile
import uuid

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from helpers import billing, error_info, expect_error, pb


def test_health_check(server):
    with server.channel() as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        assert stub.Check(health_pb2.HealthCheckRequest(), timeout=5).status == health_pb2.HealthCheckResponse.SERVING
        assert stub.Check(health_pb2.HealthCheckRequest(service="billing.v1.Billing"), timeout=5).status == \
            health_pb2.HealthCheckResponse.SERVING
        expect_error(lambda: stub.Check(health_pb2.HealthCheckRequest(service="nope"), timeout=5), grpc.StatusCode.NOT_FOUND)


def test_create_and_get(server):
    with server.channel() as ch:
        stub = billing(ch)
        created = stub.CreateOrder(pb.CreateOrderRequest(account_id="acct-1", product_id="com.example.premium",
                                                         quantity=2), timeout=5).order
        assert str(uuid.UUID(created.order_id)) == created.order_id
        assert uuid.UUID(created.order_id).version == 7
        assert created.state == pb.ORDER_STATE_PENDING
        assert created.account_id == "acct-1" and created.product_id == "com.example.premium"
        assert created.quantity == 2
        assert created.create_time_ms > 1_600_000_000_000 and created.update_time_ms == created.create_time_ms
        assert created.transaction_id == "" and created.environment == pb.ENVIRONMENT_UNSPECIFIED
        got = stub.GetOrder(pb.GetOrderRequest(order_id=created.order_id), timeout=5).order
        assert got == created
        # Upper-case ids (as StoreKit prints appAccountToken) find the same order.
        assert stub.GetOrder(pb.GetOrderRequest(order_id=created.order_id.upper()), timeout=5).order == created


def test_quantity_zero_means_one(server):
    with server.channel() as ch:
        order = billing(ch).CreateOrder(pb.CreateOrderRequest(account_id="a", product_id="p"), timeout=5).order
        assert order.quantity == 1


def test_idempotency(server):
    with server.channel() as ch:
        stub = billing(ch)
        req = pb.CreateOrderRequest(account_id="acct-idem", product_id="p", idempotency_key="checkout-1")
        first = stub.CreateOrder(req, timeout=5).order
        assert stub.CreateOrder(req, timeout=5).order == first
        # Same key for another account is another order.
        other = stub.CreateOrder(pb.CreateOrderRequest(account_id="acct-other", product_id="p",
                                                       idempotency_key="checkout-1"), timeout=5).order
        assert other.order_id != first.order_id
        info = expect_error(lambda: stub.CreateOrder(pb.CreateOrderRequest(
            account_id="acct-idem", product_id="q", idempotency_key="checkout-1"), timeout=5),
            grpc.StatusCode.FAILED_PRECONDITION, "IDEMPOTENCY_KEY_REUSED")
        assert "checkout-1" not in info.metadata.values()  # facts only: the key itself is not echoed


@pytest.mark.parametrize("req,field", [
    (dict(product_id="p"), "account_id"),
    (dict(account_id="a" * 129, product_id="p"), "account_id"),
    (dict(account_id="a"), "product_id"),
    (dict(account_id="a", product_id="p", idempotency_key="k" * 129), "idempotency_key"),
    (dict(account_id="a", product_id="p", quantity=-3), "quantity"),
])
def test_invalid_field(server, req, field):
    with server.channel() as ch:
        info = expect_error(lambda: billing(ch).CreateOrder(pb.CreateOrderRequest(**req), timeout=5),
                            grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
        assert info.metadata["field"] == field


def test_get_order_errors(server):
    with server.channel() as ch:
        stub = billing(ch)
        info = expect_error(lambda: stub.GetOrder(pb.GetOrderRequest(order_id=""), timeout=5),
                            grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
        assert info.metadata["field"] == "order_id"
        expect_error(lambda: stub.GetOrder(pb.GetOrderRequest(order_id="not-a-uuid"), timeout=5),
                     grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
        missing = str(uuid.uuid4())
        info = expect_error(lambda: stub.GetOrder(pb.GetOrderRequest(order_id=missing), timeout=5),
                            grpc.StatusCode.NOT_FOUND, "ORDER_NOT_FOUND")
        assert info.metadata["order_id"] == missing


def test_product_not_found_with_catalog(fresh):
    catalog = os.path.join(tempfile.mkdtemp(), "catalog.json")
    with open(catalog, "w") as f:
        json.dump({"products": [{"id": "com.example.premium", "type": "non_consumable"}]}, f)
    s = fresh("--catalog", catalog)
    with s.channel() as ch:
        stub = billing(ch)
        stub.CreateOrder(pb.CreateOrderRequest(account_id="a", product_id="com.example.premium"), timeout=5)
        info = expect_error(lambda: stub.CreateOrder(pb.CreateOrderRequest(account_id="a", product_id="com.example.x"),
                                                     timeout=5), grpc.StatusCode.NOT_FOUND, "PRODUCT_NOT_FOUND")
        assert info.metadata["product_id"] == "com.example.x"


def test_message_size_limit(fresh):
    s = fresh("--max-message-bytes", "1024")
    with s.channel() as ch:
        stub = billing(ch)
        info = expect_error(lambda: stub.CreateOrder(pb.CreateOrderRequest(account_id="a" * 2000, product_id="p"),
                                                     timeout=5), grpc.StatusCode.RESOURCE_EXHAUSTED, "MESSAGE_TOO_LARGE")
        assert info.metadata["limit"] == "1024"
        # Just under the limit is fine (then INVALID_FIELD for the long account, not a size error).
        expect_error(lambda: stub.CreateOrder(pb.CreateOrderRequest(account_id="a" * 1000, product_id="p"), timeout=5),
                     grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
        assert stub.CreateOrder(pb.CreateOrderRequest(account_id="a", product_id="p"), timeout=5).order.order_id


def test_default_limit_is_4_mib(server):
    with server.channel(), grpc.insecure_channel(server.address, options=[
            ("grpc.max_send_message_length", 8 << 20)]) as ch:
        expect_error(lambda: billing(ch).CreateOrder(pb.CreateOrderRequest(account_id="a" * (4 << 20), product_id="p"),
                                                     timeout=10), grpc.StatusCode.RESOURCE_EXHAUSTED, "MESSAGE_TOO_LARGE")


def test_proofs_refused_without_bundle_id(server):
    with server.channel() as ch:
        stub = billing(ch)
        order = stub.CreateOrder(pb.CreateOrderRequest(account_id="a", product_id="p"), timeout=5).order
        expect_error(lambda: stub.SubmitReceipt(pb.SubmitReceiptRequest(order_id=order.order_id, signed_transaction="a.b.c"),
                                                timeout=5), grpc.StatusCode.INVALID_ARGUMENT, "WRONG_APP")


def test_unknown_method(server):
    with server.channel() as ch:
        call = ch.unary_unary("/billing.v1.Billing/Refund", request_serializer=lambda b: b,
                              response_deserializer=lambda b: b)
        expect_error(lambda: call(b"", timeout=5), grpc.StatusCode.UNIMPLEMENTED)


def test_undecodable_request(server):
    with server.channel() as ch:
        call = ch.unary_unary("/billing.v1.Billing/CreateOrder", request_serializer=lambda b: b,
                              response_deserializer=lambda b: b)
        expect_error(lambda: call(b"\x0a\x05ab", timeout=5), grpc.StatusCode.INVALID_ARGUMENT)


def test_concurrent_clients(server):
    from concurrent.futures import ThreadPoolExecutor
    with server.channel() as ch:
        stub = billing(ch)

        def create(i):
            return stub.CreateOrder(pb.CreateOrderRequest(account_id=f"c-{i % 10}", product_id="p",
                                                          idempotency_key=f"k-{i % 25}"), timeout=10).order.order_id
        with ThreadPoolExecutor(16) as pool:
            ids = list(pool.map(create, range(400)))
        by_key = {}
        for i, oid in enumerate(ids):
            by_key.setdefault((i % 10, i % 25), set()).add(oid)
        assert all(len(v) == 1 for v in by_key.values())
        assert len(set(ids)) == len(by_key)


def test_health_watch_streams_until_drain():
    from conftest import Billingd
    s = Billingd()
    try:
        ch = s.channel()
        stub = health_pb2_grpc.HealthStub(ch)
        stream = stub.Watch(health_pb2.HealthCheckRequest(), timeout=30)
        assert next(stream).status == health_pb2.HealthCheckResponse.SERVING
        unknown = stub.Watch(health_pb2.HealthCheckRequest(service="nope"), timeout=30)
        assert next(unknown).status == health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
        unknown.cancel()
        # A second watcher that leaves early does not disturb the first.
        other = stub.Watch(health_pb2.HealthCheckRequest(service="billing.v1.Billing"), timeout=30)
        assert next(other).status == health_pb2.HealthCheckResponse.SERVING
        other.cancel()
        import signal as _signal
        s.proc.send_signal(_signal.SIGTERM)
        assert next(stream).status == health_pb2.HealthCheckResponse.NOT_SERVING
        rest = list(stream)  # the stream ends cleanly when billingd drains
        assert rest == []
        assert s.proc.wait(timeout=30) == 0
        ch.close()
    finally:
        s.stop()


def test_health_watch_deadline(server):
    with server.channel() as ch:
        stream = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(), timeout=0.5)
        assert next(stream).status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as e:
            next(stream)
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


def test_orders_expire_after_ttl(fresh):
    s = fresh("--order-ttl", "1")
    with s.channel() as ch:
        stub = billing(ch)
        order = stub.CreateOrder(pb.CreateOrderRequest(account_id="ttl", product_id="p"), timeout=5).order
        assert order.state == pb.ORDER_STATE_PENDING
        import time as _time
        deadline = _time.time() + 10
        state = order.state
        while _time.time() < deadline and state == pb.ORDER_STATE_PENDING:
            _time.sleep(0.2)
            state = stub.GetOrder(pb.GetOrderRequest(order_id=order.order_id), timeout=5).order.state
        assert state == pb.ORDER_STATE_EXPIRED
        got = stub.GetOrder(pb.GetOrderRequest(order_id=order.order_id), timeout=5).order
        assert got.update_time_ms > got.create_time_ms
