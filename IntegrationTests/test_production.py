"""Operations: mutual TLS, API keys, limits, metrics (promtool), readiness, and SIGTERM under load."""
import hashlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time
import urllib.request
import uuid

import grpc
import h2.config
import h2.connection
import h2.events
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from conftest import Billingd, binary, free_port
from helpers import billing, error_info, expect_error, pb


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki():
    d = tempfile.mkdtemp(prefix="pki-")

    def ca(name):
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                "-subj", f"/CN={name}", "-keyout", f"{d}/{name}.key", "-out", f"{d}/{name}.pem")

    def issue(name, ca_name, san=None):
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", f"/CN={name}/O=billing-tests",
                "-keyout", f"{d}/{name}.key", "-out", f"{d}/{name}.csr")
        ext = f"{d}/{name}.ext"
        with open(ext, "w") as f:
            f.write(f"subjectAltName={san}\n" if san else "basicConstraints=CA:FALSE\n")
        openssl("x509", "-req", "-in", f"{d}/{name}.csr", "-CA", f"{d}/{ca_name}.pem", "-CAkey", f"{d}/{ca_name}.key",
                "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", f"{d}/{name}.pem")

    ca("server-ca")
    ca("client-ca")
    ca("other-ca")
    issue("server", "server-ca", san="DNS:localhost,IP:127.0.0.1")
    issue("checkout-backend", "client-ca")
    issue("stranger", "other-ca")
    return d


def read(path):
    return open(path, "rb").read()


def test_mutual_tls(pki):
    s = Billingd("--tls-cert", f"{pki}/server.pem", "--tls-key", f"{pki}/server.key", "--tls-client-ca", f"{pki}/client-ca.pem")
    opts = [("grpc.ssl_target_name_override", "localhost")]
    try:
        good = grpc.ssl_channel_credentials(read(f"{pki}/server-ca.pem"), read(f"{pki}/checkout-backend.key"),
                                            read(f"{pki}/checkout-backend.pem"))
        with grpc.secure_channel(s.address, good, options=opts) as ch:
            order = billing(ch).CreateOrder(pb.CreateOrderRequest(account_id="mtls", product_id="p"), timeout=10).order
            assert order.order_id
        for creds in [grpc.ssl_channel_credentials(read(f"{pki}/server-ca.pem")),
                      grpc.ssl_channel_credentials(read(f"{pki}/server-ca.pem"), read(f"{pki}/stranger.key"), read(f"{pki}/stranger.pem"))]:
            with grpc.secure_channel(s.address, creds, options=opts) as ch:
                expect_error(lambda: billing(ch).CreateOrder(pb.CreateOrderRequest(account_id="x", product_id="p"), timeout=5),
                             grpc.StatusCode.UNAVAILABLE)
        with grpc.secure_channel(s.address, good, options=opts) as ch:
            assert health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5).status == \
                health_pb2.HealthCheckResponse.SERVING
    finally:
        s.stop()
    assert "CN=checkout-backend" in s.log()


def test_api_keys(tmp_path):
    keys = {"keys": [
        {"name": "checkout-backend", "sha256": hashlib.sha256(b"k-checkout").hexdigest(), "methods": ["billing.v1.Billing/*"]},
        {"name": "support-console", "sha256": hashlib.sha256(b"k-support").hexdigest(), "methods": ["billing.v1.Billing/GetOrder"]},
    ]}
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(keys))
    s = Billingd("--api-keys", str(path))
    try:
        with s.channel() as ch:
            stub = billing(ch)
            req = pb.CreateOrderRequest(account_id="keys", product_id="p")
            expect_error(lambda: stub.CreateOrder(req, timeout=5), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
            expect_error(lambda: stub.CreateOrder(req, timeout=5, metadata=[("authorization", "Bearer wrong")]),
                         grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
            expect_error(lambda: stub.CreateOrder(req, timeout=5, metadata=[("authorization", "k-checkout")]),
                         grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
            order = stub.CreateOrder(req, timeout=5, metadata=[("authorization", "Bearer k-checkout")]).order
            expect_error(lambda: stub.CreateOrder(req, timeout=5, metadata=[("authorization", "Bearer k-support")]),
                         grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
            got = stub.GetOrder(pb.GetOrderRequest(order_id=order.order_id), timeout=5, metadata=[("authorization", "Bearer k-support")])
            assert got.order.order_id == order.order_id
            # Health needs no key (Kubernetes probes).
            assert health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5).status == \
                health_pb2.HealthCheckResponse.SERVING
    finally:
        s.stop()
    log = s.log()  # after stop: the logger has flushed
    assert "k-checkout" not in log and "k-support" not in log  # keys are never logged
    assert '"api_key":"checkout-backend"' in log
    # A bad key file stops billingd at start with one line.
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"keys": [{"name": "x", "sha256": "k-in-clear", "methods": ["*"]}]}))
    p = subprocess.run([s.proc.args[0], "--api-keys", str(bad)], capture_output=True, text=True, timeout=30, cwd=str(tmp_path))
    assert p.returncode == 2 and "--api-keys" in p.stderr


def test_api_keys_empty_and_misspelt(tmp_path):
    def start(path):
        return subprocess.run([binary("billingd"), "--api-keys", str(path)], capture_output=True, text=True, timeout=30, cwd=str(tmp_path))

    # An empty file (or /dev/null) says so, not "cannot read".
    for empty in ["/dev/null", tmp_path / "empty.json"]:
        if empty != "/dev/null":
            empty.write_text("\n")
        p = start(empty)
        assert p.returncode == 2 and "is empty" in p.stderr and "cannot read" not in p.stderr, p.stderr
    # A misspelt method is refused at start, on one line naming the method and the file.
    digest = hashlib.sha256(b"k").hexdigest()
    typo = tmp_path / "typo.json"
    typo.write_text(json.dumps({"keys": [{"name": "support", "sha256": digest, "methods": ["billing.v1.Billing/GetOrdr"]}]}))
    p = start(typo)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert "billing.v1.Billing/GetOrdr" in lines[0] and str(typo) in lines[0] and "billing.v1.Billing/*" in lines[0]
    wrong_service = tmp_path / "service.json"
    wrong_service.write_text(json.dumps({"keys": [{"name": "s", "sha256": digest, "methods": ["billing.v2.Billing/*"]}]}))
    assert start(wrong_service).returncode == 2
    # Wildcards and full names still start.
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"keys": [{"name": "s", "sha256": digest, "methods": [
        "billing.v1.Billing/*", "billing.admin.v1.Admin/*", "billing.v1.Billing/GetOrder", "*"]}]}))
    s = Billingd("--api-keys", str(good))
    try:
        with s.channel() as ch:
            got = billing(ch).CreateOrder(pb.CreateOrderRequest(account_id="keys", product_id="p"), timeout=5,
                                          metadata=[("authorization", "Bearer k")])
            assert got.order.order_id
    finally:
        s.stop()


def preface(address):
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=5)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    return sock, conn


def closed_within(sock, seconds):
    sock.settimeout(seconds)
    deadline = time.time() + seconds
    try:
        while time.time() < deadline:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, socket.timeout, OSError):
        return time.time() < deadline
    return False


def still_serving(s):
    with s.channel() as ch:
        assert billing(ch).CreateOrder(pb.CreateOrderRequest(account_id="still", product_id="p"), timeout=5).order.order_id


def open_connections(metrics_address):
    text = urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=5).read().decode()
    return int(float(next(l.split()[1] for l in text.splitlines() if l.startswith("billingd_connections "))))


def test_max_connections():
    mport = free_port()
    s = Billingd("--max-connections", "2", "--metrics-listen", f"127.0.0.1:{mport}")
    try:
        # The fixture's readiness probe is a connection too: wait until billingd has seen it close, or it
        # would still count against the limit when the two below connect (the cause of an old flake).
        deadline = time.time() + 5
        while open_connections(f"127.0.0.1:{mport}") != 0 and time.time() < deadline:
            time.sleep(0.02)
        assert open_connections(f"127.0.0.1:{mport}") == 0
        a, _ = preface(s.address)
        b, _ = preface(s.address)
        time.sleep(0.2)
        c, _ = preface(s.address)
        assert closed_within(c, 3)
        a.close()
        b.close()
        time.sleep(0.3)
        still_serving(s)
    finally:
        s.stop()


def test_header_list_limit():
    s = Billingd("--max-header-list-bytes", "4096")
    try:
        with s.channel() as ch:
            stub = billing(ch)
            expect_error(lambda: stub.CreateOrder(pb.CreateOrderRequest(account_id="h", product_id="p"), timeout=5,
                                                  metadata=[("x-padding", "a" * 8000)]), None)
        still_serving(s)
    finally:
        s.stop()


def test_in_flight_cap():
    s = Billingd("--max-in-flight", "1")
    try:
        results = []
        lock = threading.Lock()
        with s.channel() as ch:
            stub = billing(ch)

            def one(i):
                try:
                    stub.CreateOrder(pb.CreateOrderRequest(account_id=f"f{i}", product_id="p"), timeout=10)
                    r = "OK"
                except grpc.RpcError as e:
                    r = error_info(e).reason
                with lock:
                    results.append(r)
            threads = [threading.Thread(target=one, args=(i,)) for i in range(64)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert set(results) <= {"OK", "OVERLOADED"}
        assert "OVERLOADED" in results and "OK" in results
        still_serving(s)
    finally:
        s.stop()


def test_deadline_cap():
    s = Billingd("--max-deadline", "0.3")
    try:
        still_serving(s)
        # Hold SQLite's write lock from another process: CreateOrder waits, and the cap ends it.
        db = sqlite3.connect(os.path.join(s.dir, "billing.db"), timeout=1)
        db.execute("BEGIN EXCLUSIVE")
        try:
            with s.channel() as ch:
                t0 = time.time()
                expect_error(lambda: billing(ch).CreateOrder(pb.CreateOrderRequest(account_id="slow", product_id="p"), timeout=30),
                             grpc.StatusCode.DEADLINE_EXCEEDED)
                assert time.time() - t0 < 3
        finally:
            db.rollback()
            db.close()
        time.sleep(0.5)
        still_serving(s)
    finally:
        s.stop()


def test_idle_timeout():
    s = Billingd("--idle-timeout", "1")
    try:
        sock, conn = preface(s.address)
        t0 = time.time()
        assert closed_within(sock, 5)
        assert time.time() - t0 >= 0.9
        still_serving(s)
    finally:
        s.stop()


def promtool():
    path = shutil.which("promtool")
    if not path:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool missing (scripts/deps test installs Debian's prometheus)")
        pytest.skip("promtool not installed")
    return path


def test_metrics_scrape_and_promtool():
    port = free_port()
    s = Billingd("--metrics-listen", f"127.0.0.1:{port}")
    try:
        with s.channel() as ch:
            stub = billing(ch)
            order = stub.CreateOrder(pb.CreateOrderRequest(account_id="m", product_id="p"), timeout=5).order
            stub.GetOrder(pb.GetOrderRequest(order_id=order.order_id), timeout=5)
            expect_error(lambda: stub.GetOrder(pb.GetOrderRequest(order_id=str(uuid.uuid4())), timeout=5), grpc.StatusCode.NOT_FOUND)
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        for needle in ['billingd_rpc_calls_total{method="billing.v1.Billing/CreateOrder",code="OK"} 1',
                       'billingd_rpc_errors_total{method="billing.v1.Billing/GetOrder",reason="ORDER_NOT_FOUND"} 1',
                       'billingd_rpc_duration_seconds_bucket{method="billing.v1.Billing/GetOrder",le="+Inf"} 2',
                       "billingd_rpc_in_flight 0", "billingd_connections", 'billingd_db_duration_seconds_count{op="create_order"} 1',
                       'billingd_build_info{version="']:
            assert needle in text, needle
        p = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True)
        assert p.returncode == 0, p.stdout + p.stderr
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).status == 200
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5).status == 200
    finally:
        s.stop()


def test_every_reason_is_its_own_metric_label():
    """billingd_rpc_errors_total{reason} takes its reasons from the error table, so that each reason docs/ERRORS.md
    lists is counted under its name when produced, never as OTHER (CURSOR_OUT_OF_RANGE, OFFER_SIGNING_NOT_CONFIGURED
    and NOT_PURCHASED_BY_ACCOUNT were OTHER before)."""
    port = free_port()
    s = Billingd("--metrics-listen", f"127.0.0.1:{port}")
    try:
        with s.channel() as ch:
            stub = billing(ch)
            expect_error(lambda: stub.ListEvents(pb.ListEventsRequest(after_cursor=10 ** 9, limit=1), timeout=5),
                         grpc.StatusCode.OUT_OF_RANGE, "CURSOR_OUT_OF_RANGE")
            order = stub.CreateOrder(pb.CreateOrderRequest(account_id="m", product_id="p"), timeout=5).order
            expect_error(lambda: stub.SignOffer(pb.SignOfferRequest(
                kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL, product_id="p", offer_id="o", order_id=order.order_id), timeout=5),
                grpc.StatusCode.FAILED_PRECONDITION, "OFFER_SIGNING_NOT_CONFIGURED")
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        for needle in ['billingd_rpc_errors_total{method="billing.v1.Billing/ListEvents",reason="CURSOR_OUT_OF_RANGE"} 1',
                       'billingd_rpc_errors_total{method="billing.v1.Billing/SignOffer",reason="OFFER_SIGNING_NOT_CONFIGURED"} 1']:
            assert needle in text, [l for l in text.splitlines() if "errors_total" in l]
        assert 'reason="OTHER"' not in text
    finally:
        s.stop()


def test_sigterm_under_load_loses_nothing():
    s = Billingd("--shutdown-grace", "10")
    started, ok, unavailable, lost = [0], [0], [0], []
    lock = threading.Lock()
    stop = threading.Event()

    def load(n):
        with grpc.insecure_channel(s.address) as ch:
            stub = billing(ch)
            i = 0
            while not stop.is_set() and i < 100_000:
                i += 1
                with lock:
                    started[0] += 1
                try:
                    stub.CreateOrder(pb.CreateOrderRequest(account_id=f"term-{n}", product_id="p", idempotency_key=f"{n}-{i}"),
                                     timeout=10)
                    with lock:
                        ok[0] += 1
                except grpc.RpcError as e:
                    with lock:
                        if e.code() == grpc.StatusCode.UNAVAILABLE:
                            unavailable[0] += 1
                        else:
                            lost.append((e.code(), e.details()))
                    if e.code() == grpc.StatusCode.UNAVAILABLE:
                        return

    threads = [threading.Thread(target=load, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    s.proc.send_signal(signal.SIGTERM)
    code = s.proc.wait(timeout=30)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert code == 0
    assert lost == [], lost[:5]
    assert ok[0] > 100
    log = s.log()
    stopped = [json.loads(l) for l in log.splitlines() if '"msg":"stopped"' in l][-1]
    assert stopped.get("calls.OK", 0) >= ok[0]
    print(f"\nSIGTERM under load: {started[0]} calls started, {ok[0]} OK, {unavailable[0]} UNAVAILABLE, {len(lost)} lost; "
          f"server answered {stopped.get('calls.OK', 0)} OK")
