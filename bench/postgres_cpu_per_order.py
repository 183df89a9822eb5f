#!/usr/bin/env python3
"""PostgreSQL's CPU per durable CreateOrder: billingd binaries run in turn on fresh databases, the same load each.

usage: bench/postgres_cpu_per_order.py [--orders 200000] [--runs 3] BINARY [BINARY ...]

For each run and binary: a new database on BILLING_TEST_POSTGRES (dropped after), billingd (--threads 1,
--log-level info) pinned to CPU 1, 2,000 CreateOrders to warm up, then --orders CreateOrders from h2load
(-c 16 -m 16, pinned to CPU 0, as bench/order_table_scale.py sends them). Prints calls/s, the CPU of every
postgres process on the machine over the load (utime + stime from /proc, so the server must be otherwise
idle), and billingd's own CPU, both per order. Loopback only; the load is bounded by -n and a timeout.
"""
import argparse
import os
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import order_table_scale as scale  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def postgres_ticks():
    """utime + stime of every process named postgres."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                head, rest = f.read().rsplit(")", 1)
            if not head.split("(", 1)[1].startswith("postgres"):
                continue
            parts = rest.split()
            total += int(parts[11]) + int(parts[12])
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass
    return total


def run(binary, orders, url, body):
    name = "billing_cpu_" + uuid.uuid4().hex[:8]
    subprocess.run(["psql", url, "-q", "-c", f"CREATE DATABASE {name}"], check=True)
    database = url.rsplit("/", 1)[0] + "/" + name
    load = argparse.Namespace(client_cpu=0, connections=16, streams=16)
    port = scale.free_port()
    server = subprocess.Popen(["taskset", "-c", "1", binary, "--listen", f"127.0.0.1:{port}", "--threads", "1",
                               "--log-level", "info", "--database", database],
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        time.sleep(1.0)
        scale.h2load(load, port, body, 2000)
        pg0, bd0 = postgres_ticks(), scale.cpu_seconds(server.pid)
        rps, ok = scale.h2load(load, port, body, orders)
        pg, bd = (postgres_ticks() - pg0) / TICK, scale.cpu_seconds(server.pid) - bd0
    finally:
        server.terminate()
        server.wait(timeout=60)
        subprocess.run(["psql", url, "-q", "-c", f"DROP DATABASE {name}"], capture_output=True)
    return rps, pg * 1e6 / orders, bd * 1e6 / orders, orders - ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--orders", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("binaries", nargs="+")
    args = ap.parse_args()
    url = os.environ.get("BILLING_TEST_POSTGRES") or sys.exit("set BILLING_TEST_POSTGRES (a server URL; databases are created)")
    body = os.path.join(os.environ.get("BENCH_DIR", "/var/tmp"), f"create-{uuid.uuid4().hex[:8]}.bin")
    with open(body, "wb") as f:
        f.write(scale.frame(scale.field(1, "bench-account") + scale.field(2, "com.example.premium")))
    print("| run | binary | CreateOrder/s | PostgreSQL us/order | billingd us/order | non-2xx |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    try:
        for r in range(1, args.runs + 1):
            for binary in args.binaries:
                rps, pg, bd, bad = run(binary, args.orders, url, body)
                print(f"| {r} | {binary} | {rps:,.0f} | {pg:.1f} | {bd:.1f} | {bad} |", flush=True)
    finally:
        os.remove(body)


if __name__ == "__main__":
    main()
