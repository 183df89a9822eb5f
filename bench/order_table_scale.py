#!/usr/bin/env python3
"""Durable CreateOrder as the order table grows to a million rows, band by band, beside the
one-insert-per-commit ceiling of the same disk.

usage: bench/order_table_scale.py [--store sqlite|postgres] [--rows 1000000] [--band 100000]
                                  [--connections 16] [--streams 16] [--server-cpu 1] [--client-cpu 0]
                                  [--billingd PATH]

billingd (release build, --threads 1; --billingd names another binary, e.g. a build of an earlier commit) is pinned to --server-cpu; h2load (nghttp2-client) is pinned to
--client-cpu and sends CreateOrder in bands of --band calls (h2load -n BAND -c CONNECTIONS -m STREAMS).
Per band: calls/s, server CPU microseconds per call (from /proc/PID/stat), and non-2xx answers.
The ceiling: SQLite WAL synchronous=FULL, one INSERT of an order row per COMMIT, measured on a fresh
file and on one already holding --rows rows, in the same directory; PostgreSQL: pgbench with one INSERT
per transaction (-c 8 -j 2), on an empty and on a --rows table. Loopback only; every load is bounded by -n
and by a timeout. Prints a Markdown table.
"""
import argparse
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")


def frame(message: bytes) -> bytes:
    return b"\x00" + len(message).to_bytes(4, "big") + message


def field(number: int, text: str) -> bytes:
    raw = text.encode()
    return bytes([number << 3 | 2, len(raw)]) + raw


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / TICK


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def h2load(args, port, body, n):
    out = subprocess.run(
        ["taskset", "-c", str(args.client_cpu), "h2load", "-n", str(n), "-c", str(args.connections), "-m", str(args.streams),
         "-t", "1", "-d", body, "-H", "content-type: application/grpc", "-H", "te: trailers",
         f"http://127.0.0.1:{port}/billing.v1.Billing/CreateOrder"],
        capture_output=True, text=True, timeout=900).stdout
    rps = float(re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", out).group(1))
    ok = int(re.search(r"status codes: (\d+) 2xx", out).group(1))
    return rps, ok


def sqlite_ceiling(directory, prefill, n=3000):
    """One INSERT per COMMIT, WAL + synchronous=FULL, after `prefill` rows (written in one transaction)."""
    path = os.path.join(directory, f"ceiling-{prefill}.db")
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("CREATE TABLE orders (id TEXT PRIMARY KEY, account TEXT NOT NULL, product TEXT NOT NULL, quantity INTEGER NOT NULL,"
                " state INTEGER NOT NULL, created_ms INTEGER NOT NULL)")
    if prefill:
        con.execute("BEGIN")
        con.executemany("INSERT INTO orders VALUES (?, 'bench', 'com.example.premium', 1, 1, 0)",
                        ((str(uuid.uuid4()),) for _ in range(prefill)))
        con.execute("COMMIT")
    start = time.perf_counter()
    for _ in range(n):
        con.execute("INSERT INTO orders VALUES (?, 'bench', 'com.example.premium', 1, 1, 0)", (str(uuid.uuid4()),))
    rate = n / (time.perf_counter() - start)
    con.close()
    for suffix in ("", "-wal", "-shm"):
        try:
            os.remove(path + suffix)
        except FileNotFoundError:
            pass
    return rate


def pg_ceiling(url, prefill, seconds=10):
    """pgbench: one INSERT per transaction, 8 clients, after `prefill` rows."""
    subprocess.run(["psql", url, "-q", "-c", "DROP TABLE IF EXISTS ceiling; CREATE TABLE ceiling (id uuid PRIMARY KEY, "
                    "account text NOT NULL, product text NOT NULL, quantity int NOT NULL, state int NOT NULL, created_ms bigint NOT NULL)"],
                   check=True)
    if prefill:
        subprocess.run(["psql", url, "-q", "-c", f"INSERT INTO ceiling SELECT gen_random_uuid(), 'bench', 'p', 1, 1, 0 "
                        f"FROM generate_series(1, {prefill})"], check=True)
    script = tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False)
    script.write("INSERT INTO ceiling VALUES (gen_random_uuid(), 'bench', 'com.example.premium', 1, 1, 0);\n")
    script.close()
    out = subprocess.run(["taskset", "-c", "0", "pgbench", "-n", "-f", script.name, "-c", "8", "-j", "2", "-T", str(seconds), url],
                         capture_output=True, text=True, timeout=seconds + 60).stdout
    os.remove(script.name)
    return float(re.search(r"tps = ([\d.]+)", out).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--band", type=int, default=100_000)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--log-level", default="info", help="billingd's --log-level (info: one log line per call, as deployed)")
    ap.add_argument("--postgres", default=os.environ.get("BILLING_TEST_POSTGRES"), help="server URL (a database is created)")
    ap.add_argument("--billingd", default=os.path.join(ROOT, ".build/release/billingd"), help="the billingd binary")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="billingd-scale-", dir=os.environ.get("BENCH_DIR", "/var/tmp"))
    body = os.path.join(work, "create.bin")
    with open(body, "wb") as f:
        f.write(frame(field(1, "bench-account") + field(2, "com.example.premium")))
    if args.store == "sqlite":
        database = f"sqlite:{work}/billing.db"
    else:
        if not args.postgres:
            sys.exit("--store postgres needs --postgres URL or BILLING_TEST_POSTGRES")
        name = "billing_scale_" + uuid.uuid4().hex[:8]
        subprocess.run(["psql", args.postgres, "-q", "-c", f"CREATE DATABASE {name}"], check=True)
        database = args.postgres.rsplit("/", 1)[0] + "/" + name

    port = free_port()
    server = subprocess.Popen(["taskset", "-c", str(args.server_cpu), args.billingd,
                               "--listen", f"127.0.0.1:{port}", "--threads", "1", "--log-level", args.log_level,
                               "--database", database], stdout=subprocess.DEVNULL,
                              stderr=subprocess.STDOUT)
    try:
        time.sleep(1.0)
        h2load(args, port, body, 2000)  # warm up
        rows = 2000
        print(f"| band (orders in table) | CreateOrder/s | server us/call | non-2xx |")
        print(f"| --- | ---: | ---: | ---: |")
        results = []
        while rows < args.rows:
            n = min(args.band, args.rows - rows)
            before = cpu_seconds(server.pid)
            rps, ok = h2load(args, port, body, n)
            used = cpu_seconds(server.pid) - before
            results.append((rows, rows + n, rps, used * 1e6 / n, n - ok))
            print(f"| {rows:,}-{rows + n:,} | {rps:,.0f} | {used * 1e6 / n:.1f} | {n - ok} |", flush=True)
            rows += n
    finally:
        server.terminate()
        server.wait(timeout=60)
    if args.store == "sqlite":
        empty, full = sqlite_ceiling(work, 0), sqlite_ceiling(work, args.rows)
        label = "SQLite one INSERT per COMMIT (WAL, FULL)"
    else:
        empty, full = pg_ceiling(database, 0), pg_ceiling(database, args.rows)
        label = "pgbench one INSERT per transaction (-c 8)"
    print(f"\nceiling, {label}: {empty:,.0f}/s on an empty table, {full:,.0f}/s at {args.rows:,} rows")
    worst = min(r[2] for r in results)
    print(f"slowest band: {worst:,.0f}/s = {worst / min(empty, full):.2f}x the lower ceiling; "
          f"last band {results[-1][2]:,.0f}/s = {results[-1][2] / full:.2f}x the ceiling at {args.rows:,} rows")


if __name__ == "__main__":
    main()
