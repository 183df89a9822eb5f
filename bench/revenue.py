#!/usr/bin/env python3
"""billing.v1.Revenue on a grown table: GetRevenueSeries (365 daily points, each metric; grouped by product),
GetRevenueSummary and ExportTransactions of a million rows (rows/s, billingd's peak RSS), on SQLite (and PostgreSQL
with --postgres URL).

    bench/revenue.py [--binary .build/release/billingd] [--transactions 1000000] [--accounts 100000] [--runs 20]
                     [--postgres postgres://postgres@127.0.0.1:26111/billing [--postgres-only]] [--keep DIR]

The table: --accounts accounts, about 60% of the rows in auto-renewable chains (weekly, monthly, yearly; App Store
and Google Play; USD, EUR, JPY, GBP, and CHF without a rate; trials, refunds, grace), the rest one-time purchases,
over the two years before 2026-11-01, written straight into the migrated schema (as bench/account_reads.py does),
then billingd restarted on it. Calls are made one at a time over gRPC (grpcio) from this process; latencies are
wall-clock per call, p50 and p99 over --runs calls each. Loopback only; every loop is bounded by --runs."""
import argparse
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DAY = 86_400_000
END = 1_793_491_200_000      # 2026-11-01T00:00:00Z
START = END - 730 * DAY
TX_COLUMNS = ("transaction_id, original_transaction_id, account_id, order_id, product_id, product_kind, purchase_time_ms, "
              "expires_time_ms, revocation_time_ms, quantity, environment, app_account_token, bundle_id, signed_time_ms, "
              "revocation_reason, store, ownership, upgraded, revocation_type, revocation_percentage, price_milliunits, currency, "
              "storefront, offer_id, offer_type, subscription_group_id, purchase_token")


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def stubs(work):
    from grpc_tools import protoc
    out = os.path.join(work, "gen")
    os.makedirs(out, exist_ok=True)
    if protoc.main(["protoc", f"-I{ROOT}/schemas", f"--python_out={out}", f"--grpc_python_out={out}", "billing/v1/billing.proto"]) != 0:
        sys.exit("protoc failed")
    sys.path.insert(0, out)


def rates_file(path):
    rng = random.Random(7)
    rate = {"USD": 1.08, "JPY": 160.0, "GBP": 0.85}
    lines = []
    day = START // DAY - 10
    while day <= END // DAY + 5:
        if (day + 3) % 7 < 5:  # weekdays (1970-01-01 was a Thursday)
            for k in rate:
                rate[k] *= 1 + rng.uniform(-0.003, 0.003)
            y, m, d = time.gmtime(day * 86400)[:3]
            lines.append(f"{y:04d}-{m:02d}-{d:02d},{rate['USD']:.4f},{rate['JPY']:.2f},{rate['GBP']:.5f},")
        day += 1
    with open(path, "w") as f:
        f.write("Date,USD,JPY,GBP,\n" + "\n".join(reversed(lines)) + "\n")


def rows(transactions, accounts, seed=11):
    """The grown table's rows, account by account."""
    rng = random.Random(seed)
    per = transactions / accounts
    n = 0
    for a in range(accounts):
        account = f"rev-{a:07d}"
        want = int(per) + (1 if rng.random() < per - int(per) else 0)
        subs = int(want * 0.6)
        store = 1 if a % 5 < 3 else 2
        currency = ["USD", "USD", "EUR", "JPY", "GBP", "CHF"][a % 6]
        mult = 150 if currency == "JPY" else 1
        if subs:
            product, days, price = [("pro.weekly", 7, 1990), ("pro.monthly", 30, 4990), ("pro.yearly", 365, 39990)][a % 3]
            step = days * DAY
            t = START + rng.randrange(0, 730 * DAY - subs * min(step, 30 * DAY)) if subs * step < 730 * DAY else START
            original = f"{a:07d}00"
            for j in range(subs):
                tid = f"{a:07d}{j:02d}"
                trial = j == 0 and a % 4 == 0
                rev, rtype, pct = 0, 0, 0
                if j == subs - 1 and a % 17 == 0:
                    rev, rtype, pct = t + DAY, 2, 50000
                yield (tid, original, account, None, product, "auto_renewable_subscription", t, t + (7 * DAY if trial else step), rev, 1,
                       1, None, "com.example.app", t, None, store, 1, 0, rtype, pct, 0 if trial else price * mult, currency, "USA",
                       "", "INTRODUCTORY_OFFER" if trial else "", "g1", "")
                t += 7 * DAY if trial else step
                n += 1
        for j in range(subs, want):
            t = START + rng.randrange(0, 730 * DAY)
            rev, rtype = (t + 2 * DAY, 1) if rng.random() < 0.03 else (0, 0)
            tid = f"{a:07d}{j:02d}"
            yield (tid, tid, account, None, "coins.100", "consumable", t, 0, rev, 1, 1, None, "com.example.app", t, None, store, 1, 0,
                   rtype, 0, 990 * mult, currency, "DEU", "", "", "", "")
            n += 1


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, database, work, rates):
        self.binary, self.database, self.work, self.rates = binary, database, work, rates
        self.port = free_port()
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            [self.binary, "--listen", f"127.0.0.1:{self.port}", "--database", self.database, "--exchange-rates", self.rates,
             "--log-level", "warning"], stdout=open(os.path.join(self.work, "billingd.log"), "ab"), stderr=subprocess.STDOUT)
        for _ in range(300):
            if self.proc.poll() is not None:
                sys.exit(f"billingd exited: {open(os.path.join(self.work, 'billingd.log')).read()[-1500:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        sys.exit("billingd did not listen within 30 s")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def status(self, field):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) // 1024  # MiB
        return 0


def fill(database, work, transactions, accounts):
    t0 = time.time()
    if database.startswith("sqlite:"):
        con = sqlite3.connect(database[len("sqlite:"):], isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
        sql = f"INSERT INTO transactions ({TX_COLUMNS}) VALUES ({', '.join('?' * 27)})"
        batch, done = [], 0
        for r in rows(transactions, accounts):
            batch.append(r)
            if len(batch) == 100_000:
                con.execute("BEGIN")
                con.executemany(sql, batch)
                con.execute("COMMIT")
                done += len(batch)
                batch = []
                log(f"  {done:,} rows")
        if batch:
            con.execute("BEGIN")
            con.executemany(sql, batch)
            con.execute("COMMIT")
        con.execute("ANALYZE")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        count = con.execute("SELECT COUNT(*) FROM transactions").fetchone()[0]
        con.close()
    else:
        import csv
        path = os.path.join(work, "rows.csv")
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            for r in rows(transactions, accounts):
                w.writerow(["\\N" if v is None else v for v in r])
        subprocess.run(["psql", database, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c",
                        f"\\copy transactions ({TX_COLUMNS}) FROM '{path}' WITH (FORMAT csv, NULL '\\N')"], check=True)
        subprocess.run(["psql", database, "-X", "-q", "-c", "ANALYZE transactions"], check=True)
        count = int(subprocess.run(["psql", database, "-X", "-At", "-c", "SELECT COUNT(*) FROM transactions"], check=True,
                                   capture_output=True, text=True).stdout)
    log(f"  filled {count:,} transactions in {time.time() - t0:.0f} s")
    return count


def percentile(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


def measure(name, call, runs):
    call()  # warm
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        call()
        times.append((time.perf_counter() - t) * 1000)
    return name, percentile(times, 50), percentile(times, 99)


def bench(database, args, work, label):
    import grpc
    from billing.v1 import billing_pb2 as pb
    from billing.v1 import billing_pb2_grpc as pb_grpc
    rates = os.path.join(work, "rates.csv")
    rates_file(rates)
    server = Server(args.binary, database, work, rates)
    server.start()
    server.stop()
    count = fill(database, work, args.transactions, args.accounts)
    server.start()
    results = []
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}", options=[("grpc.max_receive_message_length", 64 << 20)]) as ch:
            revenue = pb_grpc.RevenueStub(ch)
            # The export first, on a fresh process: its peak RSS is the export's.
            t = time.perf_counter()
            rows_seen, size, peak = 0, 0, 0
            for chunk in revenue.ExportTransactions(pb.ExportTransactionsRequest(start_time_ms=0, end_time_ms=END + 400 * DAY),
                                                    timeout=600):
                rows_seen += chunk.data.count(b"\n")
                size += len(chunk.data)
                if rows_seen % 20_000 < 300:
                    peak = max(peak, server.status("RssAnon"))
            seconds = time.perf_counter() - t
            rows_seen -= 1  # the header
            hwm = server.status("VmHWM")
            log(f"  export: {rows_seen:,} rows, {size / 2**20:.0f} MiB in {seconds:.1f} s = {rows_seen / seconds:,.0f} rows/s; "
                f"peak RSS {hwm} MiB (anonymous memory, sampled: {peak} MiB; the rest is the database file mapped by SQLite's mmap)")
            results.append(("ExportTransactions (all rows)", f"{rows_seen / seconds:,.0f} rows/s",
                            f"peak RSS {hwm} MiB, anonymous {peak} MiB"))
            t = time.perf_counter()
            revenue.GetRevenueSeries(pb.GetRevenueSeriesRequest(metric=pb.REVENUE_METRIC_GROSS, start_time_ms=END - 365 * DAY,
                                                                end_time_ms=END, granularity=pb.GRANULARITY_DAY), timeout=120)
            first = (time.perf_counter() - t) * 1000
            log(f"  first GetRevenueSeries (reads the environment whole): {first:.0f} ms; RSS after: {server.status('RssAnon')} MiB anonymous")
            results.append(("first call after start (reads the table whole)", f"{first:.0f} ms", f"anonymous RSS after {server.status('RssAnon')} MiB"))
            year = (END - 365 * DAY, END)
            for metric in [v.number for v in pb.RevenueMetric.DESCRIPTOR.values if v.number]:
                req = pb.GetRevenueSeriesRequest(metric=metric, start_time_ms=year[0], end_time_ms=year[1], granularity=pb.GRANULARITY_DAY)
                name, p50, p99 = measure(pb.RevenueMetric.Name(metric), lambda: revenue.GetRevenueSeries(req, timeout=60), args.runs)
                log(f"  {name}: p50 {p50:.0f} ms, p99 {p99:.0f} ms")
                results.append((f"GetRevenueSeries {name}, 365 days", f"p50 {p50:.0f} ms", f"p99 {p99:.0f} ms"))
            for metric in (pb.REVENUE_METRIC_GROSS, pb.REVENUE_METRIC_MRR):
                req = pb.GetRevenueSeriesRequest(metric=metric, start_time_ms=year[0], end_time_ms=year[1], granularity=pb.GRANULARITY_DAY,
                                                 group_by=pb.REVENUE_DIMENSION_PRODUCT)
                name, p50, p99 = measure(pb.RevenueMetric.Name(metric), lambda: revenue.GetRevenueSeries(req, timeout=60), args.runs)
                log(f"  {name} by product: p50 {p50:.0f} ms, p99 {p99:.0f} ms")
                results.append((f"GetRevenueSeries {name} by product, 365 days", f"p50 {p50:.0f} ms", f"p99 {p99:.0f} ms"))
            name, p50, p99 = measure("summary", lambda: revenue.GetRevenueSummary(pb.GetRevenueSummaryRequest(as_of_time_ms=END), timeout=60),
                                     args.runs)
            log(f"  GetRevenueSummary: p50 {p50:.0f} ms, p99 {p99:.0f} ms")
            results.append(("GetRevenueSummary", f"p50 {p50:.0f} ms", f"p99 {p99:.0f} ms"))
            results.append(("billingd peak RSS after all", f"{server.status('VmHWM')} MiB", ""))
    finally:
        server.stop()
    print(f"\n{label}: {count:,} transactions over {args.accounts:,} accounts\n")
    print("| call | | |\n| --- | --- | --- |")
    for r in results:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", default=os.path.join(ROOT, ".build/release/billingd"))
    p.add_argument("--transactions", type=int, default=1_000_000)
    p.add_argument("--accounts", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--postgres", help="also on PostgreSQL: a server URL whose database may be created and dropped")
    p.add_argument("--keep", help="keep the work folder here")
    p.add_argument("--postgres-only", action="store_true", help="with --postgres: skip the SQLite run")
    args = p.parse_args()
    if args.runs < 1 or args.runs > 1000:
        sys.exit("--runs: 1 to 1000")
    work = args.keep or tempfile.mkdtemp(prefix="bench-revenue-")
    os.makedirs(work, exist_ok=True)
    stubs(work)
    try:
        if not args.postgres_only:
            bench(f"sqlite:{work}/billing.db", args, work, "SQLite")
        if args.postgres:
            name = f"bench_revenue_{os.getpid()}"
            subprocess.run(["psql", args.postgres, "-X", "-q", "-c", f"CREATE DATABASE {name}"], check=True)
            url = args.postgres.rsplit("/", 1)[0] + "/" + name
            try:
                bench(url, args, work, "PostgreSQL")
            finally:
                subprocess.run(["psql", args.postgres, "-X", "-q", "-c", f"DROP DATABASE IF EXISTS {name}"], check=False)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
