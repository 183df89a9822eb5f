"""SQLite on a full disk: billingd's database lives on a 4 MiB tmpfs that a filler file fills up.
Writes must answer UNAVAILABLE / STORAGE_UNAVAILABLE (never crash, hang or acknowledge an unwritten
order), reads and Health keep working, and once the filler is deleted billingd writes again without a
restart. Every acknowledged order is in the file and `PRAGMA integrity_check` says ok afterwards.
Needs root (mount); skipped otherwise."""
import errno
import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from conftest import Billingd
from helpers import billing, error_info, pb

ACCOUNT = "disk-full"
HEADROOM = 384 * 1024
CYCLES = 3
WRITERS = 8


def fill(path):
    """Writes `path` until the file system says ENOSPC; answers the bytes written."""
    written = 0
    with open(path, "wb", buffering=0) as f:
        for chunk in (1 << 16, 1 << 12, 512):
            block = b"\xa5" * chunk
            for _ in range(100_000):
                try:
                    f.write(block)
                    written += chunk
                except OSError as e:
                    assert e.errno == errno.ENOSPC, e
                    break
    return written


@pytest.fixture
def tmpfs():
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    d = tempfile.mkdtemp(prefix="billingd-diskfull-")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", d], capture_output=True, text=True, timeout=10)
    if mounted.returncode != 0:
        os.rmdir(d)
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but mount -t tmpfs failed: {mounted.stderr.strip()}")
        pytest.skip(f"mount -t tmpfs failed: {mounted.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", d], timeout=10)
        shutil.rmtree(d, ignore_errors=True)


def test_disk_full_answers_unavailable_and_recovers(tmpfs):
    logdir = tempfile.mkdtemp(prefix="billingd-diskfull-log-")
    db = os.path.join(tmpfs, "billing.db")
    s = Billingd(db_dir=logdir, database=f"sqlite:{db}")  # the log stays off the small disk
    acknowledged = {}  # key -> order id
    failed_keys = []
    other = []
    lock = threading.Lock()
    stopped = False
    try:
        with s.channel() as ch:
            stub = billing(ch)
            health = health_pb2_grpc.HealthStub(ch)

            def create(key, timeout=5):
                t0 = time.monotonic()
                order = stub.CreateOrder(pb.CreateOrderRequest(account_id=ACCOUNT, product_id="com.example.premium",
                                                               idempotency_key=key), timeout=timeout).order
                assert time.monotonic() - t0 < timeout
                return order

            for i in range(50):
                acknowledged[f"before-{i}"] = create(f"before-{i}").order_id
            filler = os.path.join(tmpfs, "filler")
            summary = []
            for cycle in range(CYCLES):
                filled = fill(filler)
                assert filled > 0
                # Leave some room, so that the disk fills up in the middle of WAL growth and checkpoints,
                # under concurrent writers (group commits of several calls).
                os.truncate(filler, max(0, filled - HEADROOM))

                def drive(n):
                    refused = 0
                    for i in range(5_000):
                        key = f"c{cycle}-w{n}-{i}"
                        try:
                            oid = create(key).order_id
                            with lock:
                                acknowledged[key] = oid
                        except grpc.RpcError as e:
                            with lock:
                                if e.code() == grpc.StatusCode.UNAVAILABLE and error_info(e).reason == "STORAGE_UNAVAILABLE":
                                    failed_keys.append(key)
                                    refused += 1
                                    if refused >= 10:
                                        return
                                else:
                                    other.append((key, e.code(), e.details()))
                                    return
                before = len(acknowledged)
                with ThreadPoolExecutor(WRITERS) as pool:
                    list(pool.map(drive, range(WRITERS)))
                assert other == [], other
                assert s.proc.poll() is None, "billingd died on a full disk"
                written_while_filling = len(acknowledged) - before

                # Reads and health still answer while the disk is full.
                assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == \
                    health_pb2.HealthCheckResponse.SERVING
                for key in list(acknowledged)[:: max(1, len(acknowledged) // 40)]:
                    assert stub.GetOrder(pb.GetOrderRequest(order_id=acknowledged[key]), timeout=5).order.order_id == \
                        acknowledged[key]

                # Free the space: billingd writes again by itself.
                os.unlink(filler)
                recovered_after = None
                t0 = time.monotonic()
                for i in range(200):
                    key = f"c{cycle}-after-{i}"
                    try:
                        acknowledged[key] = create(key).order_id
                        recovered_after = time.monotonic() - t0
                        break
                    except grpc.RpcError as e:
                        assert e.code() == grpc.StatusCode.UNAVAILABLE and error_info(e).reason == "STORAGE_UNAVAILABLE", e
                        failed_keys.append(key)
                        time.sleep(0.05)
                assert recovered_after is not None, "no write succeeded within 10 s of freeing space"
                for i in range(1, 20):
                    acknowledged[f"c{cycle}-after-{i}"] = create(f"c{cycle}-after-{i}").order_id
                summary.append(f"cycle {cycle}: {written_while_filling} acknowledged while filling, "
                               f"writes again after {recovered_after:.2f} s")

            # A refused call retried with its key now gets exactly one order.
            for key in failed_keys:
                try:
                    oid = create(key).order_id
                except grpc.RpcError:
                    print("\nretry after recovery failed:", key, subprocess.run(["ls", "-la", tmpfs], capture_output=True, text=True).stdout,
                          subprocess.run(["df", tmpfs], capture_output=True, text=True).stdout)
                    print(open(s.log_path).read()[-3000:])
                    raise
                assert create(key).order_id == oid
                acknowledged[key] = oid

        assert s.stop() == 0
        stopped = True
        out = subprocess.run(["sqlite3", db, "PRAGMA integrity_check"], capture_output=True, text=True, timeout=60)
        assert out.stdout.strip() == "ok", out.stdout + out.stderr
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            rows = dict(c.execute("SELECT idempotency_key, order_id FROM orders WHERE account_id = ?", (ACCOUNT,)))
        missing = {k: v for k, v in acknowledged.items() if rows.get(k) != v}
        assert missing == {}, list(missing.items())[:5]
        assert len(rows) == len(acknowledged)
        print(f"\ndisk full: {'; '.join(summary)}; {len(failed_keys)} refused (STORAGE_UNAVAILABLE), each retried to one order; "
              f"{len(acknowledged)} acknowledged, all in the file; integrity_check ok")
    finally:
        if not stopped:
            s.stop()
        shutil.rmtree(logdir, ignore_errors=True)
