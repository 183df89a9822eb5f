#!/usr/bin/env python3
"""App Store notifications per core against OpenSSL's ES256 verify rate on the same core, in paired runs.

Each run: a fresh `billingd --dev --threads 1 --notifications-listen` (SQLite, durable) pinned to one CPU;
`billingctl load --mix notify` from the other CPU posts pre-signed REFUND notifications (each a new UUID and
transaction: two ES256 signatures, the outer JWS and the nested transaction, chains cached); server CPU per
notification is billingd's user+system time (/proc/PID/stat) over the count; then
`openssl speed -seconds S ecdsap256` on the server's CPU. The ratio is notifications per CPU-second over
openssl's verify/s. Loopback only; every load bounded (--requests, and billingctl's own 1 h cap).

    bench/notify_per_core.py [--runs 5] [--requests 20000] [--cpu 1] [--load-cpu 0] [--openssl-seconds 2]

Needs release builds (.build/release/billingd and billingctl)."""
import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def wait_port(port, proc, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"billingd exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("billingd did not listen")


def openssl_verify_rate(cpu, seconds):
    out = subprocess.run(["taskset", "-c", str(cpu), "openssl", "speed", "-seconds", str(seconds), "ecdsap256"],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"256 bits ecdsa \(nistp256\)\s+\S+s\s+\S+s\s+(\S+)\s+(\S+)", out)
    return float(m.group(2))


def one_run(args, store):
    work = tempfile.mkdtemp(prefix="notify-bench-")
    grpc_port, notify_port = free_port(), free_port()
    log = open(os.path.join(work, "billingd.log"), "wb")
    server = subprocess.Popen(
        ["taskset", "-c", str(args.cpu), os.path.join(ROOT, ".build/release/billingd"), "--dev", "--dev-store", store,
         "--threads", "1", "--listen", f"127.0.0.1:{grpc_port}", "--notifications-listen", f"127.0.0.1:{notify_port}",
         "--database", f"sqlite:{work}/billing.db"], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_port(notify_port, server)
        before = cpu_seconds(server.pid)
        load = subprocess.run(
            ["taskset", "-c", str(args.load_cpu), os.path.join(ROOT, ".build/release/billingctl"), "--addr",
             f"127.0.0.1:{grpc_port}", "load", "--mix", "notify", "--notify-addr", f"127.0.0.1:{notify_port}", "--store",
             store, "--requests", str(args.requests), "--connections", "4", "--concurrency", "64", "--json"],
            capture_output=True, text=True, timeout=600)
        used = cpu_seconds(server.pid) - before
        if load.returncode != 0:
            raise RuntimeError(f"load failed: {load.stdout[-500:]} {load.stderr[-500:]}")
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(work, ignore_errors=True)
    us = used / args.requests * 1e6
    verify = openssl_verify_rate(args.cpu, args.openssl_seconds)
    return us, 1e6 / us, verify, (1e6 / us) / verify


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--requests", type=int, default=20000)
    p.add_argument("--cpu", type=int, default=1)
    p.add_argument("--load-cpu", type=int, default=0)
    p.add_argument("--openssl-seconds", type=int, default=2)
    args = p.parse_args()
    store = tempfile.mkdtemp(prefix="notify-bench-store-")
    subprocess.run([os.path.join(ROOT, ".build/release/billingctl"), "teststore", "init", store], check=True,
                   capture_output=True)
    rows = []
    try:
        for i in range(min(args.runs, 50)):
            us, per_s, verify, ratio = one_run(args, store)
            rows.append(ratio)
            print(f"run {i + 1}: {us:.1f} us/notification, {per_s:,.0f}/CPU-s, openssl verify {verify:,.0f}/s, ratio {ratio:.3f}",
                  flush=True)
    finally:
        shutil.rmtree(store, ignore_errors=True)
    print(f"ratio min {min(rows):.3f} median {statistics.median(rows):.3f} max {max(rows):.3f} over {len(rows)} runs")


if __name__ == "__main__":
    main()
