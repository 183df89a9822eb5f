"""kill -9 during a CreateOrder load, then a restart: every order whose OK reached a client is there."""
import threading
import time

import grpc

from conftest import Billingd
from helpers import billing, pb


def test_kill_9_loses_no_acknowledged_order():
    s = Billingd()
    acknowledged = []
    lock = threading.Lock()
    stop = threading.Event()

    def worker(n):
        with grpc.insecure_channel(s.address) as ch:
            stub = billing(ch)
            i = 0
            while not stop.is_set() and i < 50_000:
                i += 1
                try:
                    order = stub.CreateOrder(pb.CreateOrderRequest(account_id=f"k9-{n}", product_id="p",
                                                                   idempotency_key=f"{n}-{i}"), timeout=2).order
                except grpc.RpcError:
                    continue  # the server died mid-call: not acknowledged
                with lock:
                    acknowledged.append((order.order_id, n, i))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    deadline = time.time() + 10
    while time.time() < deadline and len(acknowledged) < 2000:
        time.sleep(0.05)
    s.kill()
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert len(acknowledged) > 0
    s.start()
    try:
        with grpc.insecure_channel(s.address) as ch:
            stub = billing(ch)
            missing = [oid for oid, _, _ in acknowledged
                       if stub.GetOrder(pb.GetOrderRequest(order_id=oid), timeout=5).order.order_id != oid]
            assert missing == []
            # Retrying with the same idempotency key after the crash answers the same order.
            oid, n, i = acknowledged[-1]
            again = stub.CreateOrder(pb.CreateOrderRequest(account_id=f"k9-{n}", product_id="p",
                                                           idempotency_key=f"{n}-{i}"), timeout=5).order
            assert again.order_id == oid
        print(f"kill -9: {len(acknowledged)} acknowledged, {len(acknowledged) - len(missing)} found after restart")
    finally:
        s.stop()
