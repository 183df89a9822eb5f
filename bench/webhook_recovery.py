#!/usr/bin/env python3
"""The webhook recovery table: for each fault, the events pending when it struck, the events delivered after it,
the events lost (in the feed, never accepted by the receiver: must be 0) and the duplicates (accepted twice: the
at-least-once cost). Receiver: IntegrationTests/webhook_receiver.py (standardwebhooks-verified). Loopback only.

  BILLING_TEST_POSTGRES=postgres://... python3 bench/webhook_recovery.py --binary .build/release/billingd --ctl .build/release/billingctl
"""
import argparse
import json
import os
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "IntegrationTests"))
os.environ.setdefault("BILLINGD", "")
from webhook_receiver import Receiver, new_secret  # noqa: E402
import conftest  # noqa: E402
from conftest import Billingd  # noqa: E402


def load(ctl, node, n):
    out = subprocess.run([ctl, "--addr", node.address, "load", "--mix", "create=1", "--requests", str(n), "--concurrency", "16", "--json"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-300:]


def status(ctl, node):
    out = subprocess.run([ctl, "--addr", node.address, "webhooks", "status"], capture_output=True, text=True, timeout=20)
    return json.loads(out.stdout) if out.returncode == 0 else None


def newest(node):
    import grpc
    from billing.v1 import billing_pb2 as pb, billing_pb2_grpc as pbg
    stub = pbg.BillingStub(grpc.insecure_channel(node.address))
    cursors, after = [], 0
    while True:
        page = stub.ListEvents(pb.ListEventsRequest(after_cursor=after, limit=1000), timeout=30)
        if not page.events:
            return cursors
        cursors += [e.cursor for e in page.events]
        after = page.events[-1].cursor


def verdict(name, receiver, node, before_fault, pending):
    feed = newest(node)
    got = receiver.cursors()
    lost = len(set(feed) - set(got))
    dups = len(got) - len(set(got))
    order_ok = all(b > a or b in got[:i] for i, (a, b) in enumerate(zip(got, got[1:]), start=1))
    print(f"| {name} | {pending} | {len(got) - before_fault} | {lost} | {dups} | {'yes' if order_ok else 'NO'} |", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", default=".build/release/billingd")
    p.add_argument("--ctl", default=".build/release/billingctl")
    p.add_argument("--events", type=int, default=3000)
    a = p.parse_args()
    os.environ["BILLINGD"] = os.path.abspath(a.binary)
    n = a.events
    print("| fault | events pending at the fault | delivered after | lost | duplicates | in order |")
    print("| --- | --- | --- | --- | --- | --- |")

    def flags(r):
        return ["--dev", "--webhook-url", r.url, "--webhook-secret", r.secret, "--log-level", "warning"]

    # 1. Receiver down for 15 s while events commit.
    r = Receiver(new_secret())
    node = Billingd(*flags(r))
    load(a.ctl, node, n)
    r.wait_for(n, timeout=120)
    r.down()
    before = len(r.ids())
    load(a.ctl, node, n)
    time.sleep(15)
    r.up()
    r.wait_for(2 * n, timeout=300)
    verdict(f"receiver down 15 s ({n} events committed meanwhile)", r, node, before, n)
    node.stop()
    r.down()

    # 2. The receiver answers 500 to 6 attempts in a row.
    r = Receiver(new_secret())
    node = Billingd(*flags(r))
    r.fail_next = 6
    load(a.ctl, node, n)
    r.wait_for(n, timeout=300)
    verdict("HTTP 500 to 6 attempts in a row", r, node, 0, n)
    node.stop()
    r.down()

    # 3-4. kill -9 and SIGTERM of billingd in the middle of a backlog.
    for how in ("kill -9", "SIGTERM"):
        r = Receiver(new_secret())
        r.down()
        node = Billingd(*flags(r))
        load(a.ctl, node, n)
        r.up()
        r.wait_for(n // 3, timeout=60)
        before = len(r.ids())
        node.kill() if how == "kill -9" else node.stop()
        pending = n - len(set(r.cursors()))
        node.start()
        r.wait_for(n, timeout=300)
        time.sleep(0.5)
        verdict(f"billingd {how} mid-backlog, restarted", r, node, before, pending)
        node.stop()
        r.down()

    # 5. Two PostgreSQL replicas: kill -9 of the sending one mid-backlog; the other takes over.
    base = os.environ.get("BILLING_TEST_POSTGRES")
    if base:
        name = "bench_hook_" + uuid.uuid4().hex[:10]
        subprocess.run(["psql", base, "-qc", f"CREATE DATABASE {name}"], check=True, capture_output=True)
        database = base.rsplit("/", 1)[0] + "/" + name
        r = Receiver(new_secret())
        r.down()
        x = Billingd(*flags(r), database=database)
        y = Billingd(*flags(r), database=database)
        load(a.ctl, x, n)
        r.up()
        r.wait_for(n // 3, timeout=60)
        holder = subprocess.run(["psql", database, "-Atc", "SELECT holder FROM webhook_cursor"], capture_output=True, text=True).stdout.strip()
        victim, survivor = (x, y) if str(x.proc.pid) in holder.split("/") else (y, x)
        before = len(r.ids())
        victim.kill()
        t = time.time()
        pending = n - len(set(r.cursors()))
        r.wait_for(before + 1, timeout=60)
        took = time.time() - t
        r.wait_for(n, timeout=300)
        time.sleep(0.5)
        verdict(f"PostgreSQL, 2 replicas: kill -9 of the sender (takeover after {took:.1f} s)", r, survivor, before, pending)
        survivor.stop()
        r.down()


if __name__ == "__main__":
    main()
