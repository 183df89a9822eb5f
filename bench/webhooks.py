#!/usr/bin/env python3
"""Webhook delivery on a grown database: latency from commit to the receiver (p50/p99) under a steady CreateOrder
rate, and throughput draining a backlog, to a local receiver that verifies every request with `standardwebhooks`.

The SQLite file is first grown with --rows orders (billingctl load, webhooks off); the sender then starts at the
newest event, so the figures are those of a deployment with a million rows behind it. Loopback only; every load
loop is bounded in count and time.

  python3 bench/webhooks.py --binary .build/release/billingd --ctl .build/release/billingctl --rows 1000000
"""
import argparse
import json
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "IntegrationTests"))
from webhook_receiver import Receiver, new_secret  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(binary, db, port, *flags):
    log = open(db + ".log", "ab")
    proc = subprocess.Popen([binary, "--listen", f"127.0.0.1:{port}", "--database", f"sqlite:{db}", "--log-level", "warning", *flags],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("billingd did not start")


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)


def load(ctl, port, requests, concurrency, rate=None, duration=None):
    args = [ctl, "--addr", f"127.0.0.1:{port}", "load", "--mix", "create=1", "--requests", str(requests),
            "--concurrency", str(concurrency), "--json"]
    if rate:
        args += ["--rate", str(rate)]
    if duration:
        args += ["--duration", str(duration)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"load failed: {out.stderr[-500:]}")
    return json.loads(out.stdout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", default=".build/release/billingd")
    p.add_argument("--ctl", default=".build/release/billingctl")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--rate", type=int, default=500, help="CreateOrder/s during the latency run")
    p.add_argument("--seconds", type=int, default=20)
    p.add_argument("--backlog", type=int, default=20_000)
    a = p.parse_args()

    work = tempfile.mkdtemp(prefix="bench-webhooks-")
    db = os.path.join(work, "billing.db")
    port = free_port()
    try:
        if a.rows:
            proc = start(a.binary, db, port, "--dev")
            t = time.time()
            load(a.ctl, port, a.rows, 64)
            stop(proc)
            print(f"grown to {a.rows} orders in {time.time() - t:.0f} s", flush=True)
        newest = sqlite3.connect(db).execute("SELECT COALESCE(MAX(rowid), 0) FROM events").fetchone()[0]
        con = sqlite3.connect(db)
        con.execute("INSERT OR REPLACE INTO webhook_cursor (id, delivered_cursor) VALUES (1, ?)", (newest,))
        con.commit()
        con.close()

        receiver = Receiver(new_secret())
        arrivals = []
        lock = threading.Lock()
        original = receiver.accepted

        proc = start(a.binary, db, port, "--dev", "--webhook-url", receiver.url, "--webhook-secret", receiver.secret)
        try:
            # Latency: a steady rate; arrival time minus the event's own time (its commit, to the millisecond).
            load(a.ctl, port, a.rate * a.seconds, 16, rate=a.rate, duration=a.seconds + 30)
            expected = a.rate * a.seconds
            if not receiver.wait_for(expected, timeout=120):
                raise SystemExit(f"only {len(receiver.ids())} of {expected} delivered")
            lat = sorted((t - int(payload["data"]["timeMs"]) / 1000) * 1000 for _, payload, t, _ in receiver.accepted)
            p50 = lat[len(lat) // 2]
            p99 = lat[int(len(lat) * 0.99)]
            print(f"latency from commit at {a.rate}/s over {a.seconds} s ({len(lat)} events): p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {lat[-1]:.1f} ms", flush=True)

            # Throughput: the receiver down while a backlog commits, then up; time to drain it.
            done_before = len(receiver.ids())
            receiver.down()
            load(a.ctl, port, a.backlog, 32)
            time.sleep(1)
            receiver.up()
            if not receiver.wait_for(done_before + a.backlog, timeout=600):
                raise SystemExit(f"backlog not drained: {len(receiver.ids()) - done_before} of {a.backlog}")
            # From the first backlog event's arrival (the sender's backoff wait after the outage left out).
            times = [t for _, _, t, _ in receiver.accepted[done_before:]]
            took = times[-1] - times[0]
            print(f"backlog of {a.backlog} events drained in {took:.1f} s: {(a.backlog - 1) / took:.0f} events/s", flush=True)
            cursors = receiver.cursors()
            assert cursors == sorted(cursors), "out of order"
            assert receiver.bad_signatures == 0
        finally:
            stop(proc)
            receiver.down()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
