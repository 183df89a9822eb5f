"""Several billingd replicas on one PostgreSQL: money rules hold across replicas, and a database
outage answers STORAGE_UNAVAILABLE quickly and heals without a restart."""
import os
import subprocess
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from conftest import ROOT, Billingd, binary, postgres_database
from helpers import billing, error_info, pb

BUNDLE = "com.example.app"


def replicas(n, database, *flags):
    return [Billingd(*flags, database=database) for _ in range(n)]


def test_three_replicas_one_database():
    database = postgres_database()
    store = tempfile.mkdtemp(prefix="replica-store-")
    subprocess.run([binary("billingctl"), "teststore", "init", store], check=True, capture_output=True)
    nodes = replicas(3, database, "--dev", "--dev-store", store, "--bundle-id", BUNDLE)
    channels = [n.channel() for n in nodes]
    stubs = [billing(c) for c in channels]
    try:
        # One idempotency key through every replica at once: one order.
        def create(i):
            return stubs[i % 3].CreateOrder(pb.CreateOrderRequest(account_id="shared", product_id="com.example.premium",
                                                                  idempotency_key="checkout-1"), timeout=10).order.order_id
        with ThreadPoolExecutor(30) as pool:
            ids = set(pool.map(create, range(90)))
        assert len(ids) == 1

        # One signed transaction for 60 orders through all three replicas: credited exactly once.
        orders = [stubs[i % 3].CreateOrder(pb.CreateOrderRequest(account_id=f"acct-{i}", product_id="com.example.premium"),
                                           timeout=10).order.order_id for i in range(60)]
        jws = subprocess.run([binary("billingctl"), "teststore", "transaction", "--store", store, "--product", "com.example.premium",
                              "--transaction-id", "880001"], check=True, capture_output=True, text=True).stdout.strip()

        def submit(i):
            try:
                stubs[i % 3].SubmitReceipt(pb.SubmitReceiptRequest(order_id=orders[i], signed_transaction=jws), timeout=15)
                return "OK"
            except grpc.RpcError as e:
                return error_info(e).reason
        with ThreadPoolExecutor(60) as pool:
            results = list(pool.map(submit, range(60)))
        assert results.count("OK") == 1, results
        assert results.count("TRANSACTION_ALREADY_CLAIMED") == 59, results

        # Every replica agrees on every order.
        for oid in orders[:20]:
            views = [s.GetOrder(pb.GetOrderRequest(order_id=oid), timeout=5).order for s in stubs]
            assert views[0] == views[1] == views[2]
        completed = [o for o in orders if stubs[0].GetOrder(pb.GetOrderRequest(order_id=o), timeout=5).order.state
                     == pb.ORDER_STATE_COMPLETED]
        assert len(completed) == 1
        count = subprocess.run(["psql", database, "-tAc", "SELECT count(*) FROM transactions WHERE transaction_id = '880001'"],
                               capture_output=True, text=True).stdout.strip()
        assert count == "1"
        print(f"\n3 replicas: 90 CreateOrder with one key -> {len(ids)} order; 60 SubmitReceipt of one transaction -> "
              f"{results.count('OK')} OK, {results.count('TRANSACTION_ALREADY_CLAIMED')} TRANSACTION_ALREADY_CLAIMED")
    finally:
        for c in channels:
            c.close()
        for n in nodes:
            n.stop()


def pg(cmd):
    pg_dir = os.environ.get("BILLING_PG_DIR", "/tmp/billingd-pg")
    args = ["/usr/lib/postgresql/15/bin/pg_ctl", "-D", pg_dir, *cmd]
    if os.geteuid() == 0:
        args = ["runuser", "-u", "postgres", "--"] + args
    subprocess.run(args, check=True, capture_output=True, timeout=60)


def test_outage_and_recovery():
    database = postgres_database()
    port = os.environ.get("BILLING_PG_PORT", "25432")
    pg_dir = os.environ.get("BILLING_PG_DIR", "/tmp/billingd-pg")
    node = Billingd(database=database)
    acknowledged, unavailable, other = [], [], []
    lock = threading.Lock()
    stop = threading.Event()

    def load(n):
        with grpc.insecure_channel(node.address) as ch:
            stub = billing(ch)
            i = 0
            while not stop.is_set() and i < 100_000:
                i += 1
                key = f"{n}-{i}"
                t0 = time.time()
                try:
                    order = stub.CreateOrder(pb.CreateOrderRequest(account_id=f"outage-{n}", product_id="p", idempotency_key=key),
                                             timeout=5).order
                    with lock:
                        acknowledged.append(order.order_id)
                except grpc.RpcError as e:
                    with lock:
                        if e.code() == grpc.StatusCode.UNAVAILABLE and error_info(e).reason == "STORAGE_UNAVAILABLE":
                            unavailable.append(time.time() - t0)
                        else:
                            other.append((e.code(), e.details()))
                    time.sleep(0.01)

    try:
        threads = [threading.Thread(target=load, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        before = len(acknowledged)
        pg(["-m", "immediate", "stop"])
        down_at = time.time()
        time.sleep(1.0)
        with grpc.insecure_channel(node.address) as ch:
            status = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5).status
        assert status == health_pb2.HealthCheckResponse.NOT_SERVING
        pg(["-l", f"{pg_dir}/server.log", "-w", "-t", "60", "-o",
            f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={pg_dir} -c max_connections=200", "start"])
        up_at = time.time()
        # Serving again within seconds, no restart.
        deadline = time.time() + 15
        while time.time() < deadline:
            with lock:
                if len(acknowledged) > before and acknowledged and time.time() - up_at > 0.5:
                    break
            time.sleep(0.1)
        recovered_after = time.time() - up_at
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join(timeout=30)
        with grpc.insecure_channel(node.address) as ch:
            assert health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5).status == \
                health_pb2.HealthCheckResponse.SERVING
            stub = billing(ch)
            missing = [o for o in acknowledged if stub.GetOrder(pb.GetOrderRequest(order_id=o), timeout=5).order.order_id != o]
        assert missing == []
        assert other == [], other[:5]
        assert unavailable, "the outage was never seen"
        assert max(unavailable) < 5.0
        print(f"\noutage: {len(acknowledged)} acknowledged, {len(acknowledged) - len(missing)} found after recovery, "
              f"{len(unavailable)} STORAGE_UNAVAILABLE (slowest {max(unavailable):.3f} s), down {up_at - down_at:.1f} s, "
              f"serving again {recovered_after:.1f} s after PostgreSQL came back")
    finally:
        stop.set()
        node.stop()


def test_libpq_notices_never_print_raw_lines():
    """A second billingd on a migrated database gets libpq NOTICEs (`... already exists, skipping`), and a terminated
    connection a FATAL: neither reaches stdout/stderr as a raw line, only JSON lines do."""
    import json
    database = postgres_database()
    base = os.environ["BILLING_TEST_POSTGRES"]
    name = database.rsplit("/", 1)[1]
    first = Billingd(database=database)
    second = Billingd(database=database)  # migrations already applied: libpq hears NOTICEs
    try:
        with second.channel() as ch:
            billing(ch).CreateOrder(pb.CreateOrderRequest(account_id="notices", product_id="p"), timeout=10)
        # The server ends every billingd connection: libpq hears a FATAL outside any query.
        subprocess.run(["psql", base, "-q", "-c",
                        f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' "
                        "AND application_name = 'billingd'"], check=True, capture_output=True)
        with second.channel() as ch:
            stub = billing(ch)
            deadline = time.time() + 15
            while True:
                try:
                    stub.CreateOrder(pb.CreateOrderRequest(account_id="notices", product_id="p"), timeout=5)
                    break
                except grpc.RpcError:
                    assert time.time() < deadline
                    time.sleep(0.1)
    finally:
        first.stop()
        second.stop()
    for node in (first, second):
        for line in node.log().splitlines():
            if line.strip():
                assert isinstance(json.loads(line), dict), line
        assert "NOTICE" not in node.log()
