#!/usr/bin/env python3
"""GetEntitlements and ListTransactions latency for one account holding 1,000 transactions, on a database that has
grown (a million transaction rows over 100,000 other accounts).

usage: bench/account_reads.py [--store sqlite|postgres] [--postgres URL]
                              [--filler-accounts 100000] [--filler-transactions 10 x accounts]
                              [--account heavy] [--heavy-transactions 1000] [--subscriptions 10] [--renewals 49]
                              [--concurrency 8] [--calls 5000] [--seconds 60] [--page-size 100]
                              [--server-cpu 1] [--client-cpu 0] [--log-level warning] [--keep] [--json]

1. The database. billingd (the same binary as below) starts once on a fresh database, which it creates and migrates,
   and is stopped by PID. The filler then goes in directly with SQL, with the column lists of
   Sources/Storage/Schema.swift and Ledger/SQLLedger.swift (`columns`, `entitlementColumns`): --filler-transactions rows
   (default 10 per account) over --filler-accounts accounts ("filler-NNNNNNN"), all bought in the past; per account
   a subscription of up to four transactions (original and renewals), one non-consumable, consumables for the rest,
   and its entitlement rows (the subscription's and the non-consumable's: one or two per account).
   Filler transactions carry no order (as restored purchases do). SQLite: python's sqlite3 in transactions of
   100,000 rows on the file billingd created, then a TRUNCATE checkpoint (no ANALYZE: billingd never runs one).
   PostgreSQL (--store postgres): a fresh database on the server of --postgres (default $BILLING_TEST_POSTGRES),
   filled with INSERT ... SELECT over generate_series, then ANALYZE (what autovacuum does after a bulk load);
   the database is dropped at the end unless --keep.
2. The heavy account, through the real API. billingd --dev (release build if present, else debug) starts on that
   database, pinned to --server-cpu with taskset, with its notifications endpoint; purchases and notifications are
   signed in Python (IntegrationTests/appstore_mint.py) by the dev test store billingd keeps in --dev-store.
   --subscriptions auto-renewable subscriptions, each bought by CreateOrder + SubmitReceipt (appAccountToken = the
   order id) and renewed --renewals times by DID_RENEW notifications (new transaction ids, same original, weekly
   periods, signedDate = purchase date, all in the past; the last period is current); the rest of
   --heavy-transactions are consumables, each bought by CreateOrder + SubmitReceipt. Then ListTransactions, paged,
   must give back exactly --heavy-transactions distinct transactions, newest purchase first, and GetEntitlements
   one entitlement per subscription.
3. The load, from --client-cpu (this process pins itself there first, as taskset does; every grpcio thread
   inherits it): --concurrency threads, each with its own channel (its own TCP connection), share a budget of
   --calls calls per method and stop at --seconds, whichever comes first:
     GetEntitlements(account, include_inactive=true)
     ListTransactions(account, limit=--page-size), the first page
     ListTransactions walks to the end: each thread reads the first page, then follows next_page_token to the last
       page; the latency of every following page (those with a page token) is recorded and counted against --calls.
   Each method gets an unrecorded warm-up of --warmup calls first. Latency is measured around the blocking stub call
   (so it includes grpcio's client-side work on one shared core); calls/s is recorded calls over the phase's wall
   time; server CPU per call comes from /proc/PID/stat.

Loopback only (127.0.0.1); every loop is bounded in calls and in time; the only process stopped is the billingd this
script started, by its PID. Prints a Markdown table and the exact command; --json prints one JSON object instead.
"""
import argparse
import http.client
import json
import math
import os
import random
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")
SECOND = 1000
HOUR = 3_600_000
DAY = 86_400_000
BUNDLE = "com.example.app"
ENV_NAME = "Sandbox"
ENV_CODE = 2  # StoreEnvironment.sandbox
SUB_PRODUCTS = [f"com.example.bench.sub{k}.weekly" for k in range(100)]
COINS = "com.example.bench.coins"
FILLER_SUB = "com.example.filler.monthly"
FILLER_UNLOCK = "com.example.filler.unlock"
FILLER_COINS = "com.example.filler.coins"
FILLER_SUB_LENGTH = 4  # transactions of a filler account's subscription (original + renewals)
FILLER_BASE = 2_000_000_000_000_000  # filler transaction ids: FILLER_BASE + account * FILLER_STRIDE + index
FILLER_STRIDE = 100_000
HEAVY_BASE = 3_000_000_000_000_000  # heavy subscription transactions: HEAVY_BASE + k * 10000 + period
HEAVY_COIN_BASE = 3_100_000_000_000_000

# SQLLedger.columns and SQLLedger.entitlementColumns (Sources/Storage/Ledger/SQLLedger.swift), in that order.
TX_COLUMNS = ("transaction_id, original_transaction_id, account_id, order_id, product_id, product_kind, purchase_time_ms, "
              "expires_time_ms, revocation_time_ms, quantity, environment, app_account_token, bundle_id, signed_time_ms, "
              "revocation_reason, store, ownership, upgraded, revocation_type, revocation_percentage, price_milliunits, "
              "currency, storefront, offer_id, offer_type, subscription_group_id")
ENT_COLUMNS = ("account_id, entitlement_key, product_id, product_kind, original_transaction_id, latest_transaction_id, "
               "purchase_time_ms, expires_time_ms, revocation_time_ms, grace_period_expires_ms, auto_renew, environment, "
               "order_id, ended, upgraded, billing_retry, ownership, store, subscription_group_id, pending_product_id")


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def now_ms():
    return int(time.time() * 1000)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"billingd exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {seconds} s")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / TICK


def billingd_binary():
    for kind in ("release", "debug"):
        path = os.path.join(ROOT, ".build", kind, "billingd")
        if os.path.exists(path):
            return path, kind
    sys.exit("no .build/release/billingd or .build/debug/billingd: build it first")


class Server:
    """One billingd process of ours; stopped by its PID only."""

    def __init__(self, binary, database, log_path, *, cpu=None, dev_store=None, notifications_port=None, log_level="warning"):
        self.port = free_port()
        self.notifications_port = notifications_port
        argv = [binary, "--listen", f"127.0.0.1:{self.port}", "--database", database, "--log-level", log_level]
        if dev_store:
            argv += ["--dev", "--dev-store", dev_store, "--bundle-id", BUNDLE, "--environments", "sandbox"]
        if notifications_port:
            argv += ["--notifications-listen", f"127.0.0.1:{notifications_port}"]
        if cpu is not None and shutil.which("taskset"):
            argv = ["taskset", "-c", str(cpu)] + argv  # taskset execs billingd: the PID is billingd's
        self.argv = argv
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_port(self.port, self.proc)
            if notifications_port:
                wait_port(notifications_port, self.proc)
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


# --- 1. the filler ---------------------------------------------------------------------------------------------------

def filler_plan(transactions, accounts):
    per, extra = divmod(transactions, accounts)
    if per + 1 >= FILLER_STRIDE:
        sys.exit(f"at most {FILLER_STRIDE - 1} filler transactions per account")
    if per < 1:
        sys.exit("--filler-transactions must be at least --filler-accounts")
    return per, extra


def coin_step(transactions, accounts):
    """Filler consumables: index j is bought j steps after the account's start, all within 300 days."""
    per, _ = filler_plan(transactions, accounts)
    return 300 * DAY // (per + 1)


def filler_rows(transactions, accounts, now):
    """(transaction rows, entitlement rows), account by account: what the PostgreSQL SQL below writes too."""
    per, extra = filler_plan(transactions, accounts)
    step = coin_step(transactions, accounts)
    for a in range(accounts):
        n = per + (1 if a < extra else 0)
        account = f"filler-{a:07d}"
        start = now - 400 * DAY + (a % 1000) * HOUR
        txs, ents = [], []
        original = str(FILLER_BASE + a * FILLER_STRIDE)
        subs = min(FILLER_SUB_LENGTH, n)
        for j in range(n):
            tid = str(FILLER_BASE + a * FILLER_STRIDE + j)
            if j < FILLER_SUB_LENGTH:
                purchase = start + j * 30 * DAY
                txs.append((tid, original, account, None, FILLER_SUB, "auto_renewable_subscription", purchase, purchase + 30 * DAY, 0,
                            1, ENV_CODE, None, BUNDLE, purchase, None, 1, 1, 0, 0, 0, 4990, "USD", "USA", "", "", "21000002"))
            elif j == FILLER_SUB_LENGTH:
                purchase = start + 5 * DAY
                txs.append((tid, tid, account, None, FILLER_UNLOCK, "non_consumable", purchase, 0, 0,
                            1, ENV_CODE, None, BUNDLE, purchase, None, 1, 1, 0, 0, 0, 9990, "USD", "USA", "", "", ""))
                ents.append((account, "p:" + FILLER_UNLOCK, FILLER_UNLOCK, "non_consumable", tid, tid, purchase, 0, 0, 0, 0, ENV_CODE,
                             None, 0, 0, 0, 1, 1, "", ""))
            else:
                purchase = start + j * step + 1
                txs.append((tid, tid, account, None, FILLER_COINS, "consumable", purchase, 0, 0,
                            1, ENV_CODE, None, BUNDLE, purchase, None, 1, 1, 0, 0, 0, 990, "USD", "USA", "", "", ""))
        latest = subs - 1
        purchase = start + latest * 30 * DAY
        ents.append((account, "s:" + original, FILLER_SUB, "auto_renewable_subscription", original, str(FILLER_BASE + a * FILLER_STRIDE + latest),
                     purchase, purchase + 30 * DAY, 0, 0, 1, ENV_CODE, None, 0, 0, 0, 1, 1, "21000002", ""))
        yield txs, ents


def check_columns(columns_of, table, listed):
    """Every listed column exists; the table's other columns (none expected) have defaults or are nullable."""
    have = columns_of(table)
    names = [c.strip() for c in listed.split(",")]
    missing = [c for c in names if c not in have]
    if missing:
        sys.exit(f"{table}: columns {missing} are not in the migrated schema: update bench/account_reads.py")
    unlisted = [c for c in have if c not in names]
    if unlisted:
        log(f"note: {table} has columns this script does not fill (left to their defaults): {unlisted}")


def fill_sqlite(path, transactions, accounts, now, batch=100_000):
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute("PRAGMA cache_size=-262144")

    def columns_of(table):
        return [r[1] for r in con.execute(f"PRAGMA table_info({table})")]

    check_columns(columns_of, "transactions", TX_COLUMNS)
    check_columns(columns_of, "entitlements", ENT_COLUMNS)
    tx_sql = f"INSERT INTO transactions ({TX_COLUMNS}) VALUES ({', '.join('?' * 26)})"
    ent_sql = f"INSERT INTO entitlements ({ENT_COLUMNS}) VALUES ({', '.join('?' * 20)})"
    txs, ents, done = [], [], 0

    def flush():
        con.execute("BEGIN")
        con.executemany(tx_sql, txs)
        con.executemany(ent_sql, ents)
        con.execute("COMMIT")

    for t, e in filler_rows(transactions, accounts, now):
        txs += t
        ents += e
        if len(txs) >= batch:
            flush()
            done += len(txs)
            log(f"  filler: {done:,} transactions")
            txs, ents = [], []
    if txs:
        flush()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    counts = {t: con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("transactions", "entitlements")}
    con.close()
    return counts


def psql(url, sql, *, fetch=False):
    out = subprocess.run(["psql", url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-At", "-c", sql], check=True, capture_output=True,
                         text=True, timeout=3600)
    return out.stdout.strip() if fetch else None


def fill_postgres(url, transactions, accounts, now):
    def columns_of(table):
        return psql(url, f"SELECT column_name FROM information_schema.columns WHERE table_name = '{table}' ORDER BY ordinal_position",
                    fetch=True).split("\n")

    check_columns(columns_of, "transactions", TX_COLUMNS)
    check_columns(columns_of, "entitlements", ENT_COLUMNS)
    per, extra = filler_plan(transactions, accounts)
    # Row g: account g % A, index g / A within it (the same rows as filler_rows, in another order).
    n = f"({per} + CASE WHEN a < {extra} THEN 1 ELSE 0 END)"
    start = f"({now} - 400::bigint * {DAY} + (a % 1000) * {HOUR}::bigint)"
    tid = f"({FILLER_BASE}::bigint + a * {FILLER_STRIDE} + j)::text"
    latest = f"LEAST({FILLER_SUB_LENGTH}, {n}) - 1"
    sub_purchase = f"{start} + j * 30::bigint * {DAY}"
    tx_sql = f"""
        INSERT INTO transactions ({TX_COLUMNS})
        SELECT {tid},
               CASE WHEN j < {FILLER_SUB_LENGTH} THEN ({FILLER_BASE}::bigint + a * {FILLER_STRIDE})::text ELSE {tid} END,
               'filler-' || lpad(a::text, 7, '0'), NULL,
               CASE WHEN j < {FILLER_SUB_LENGTH} THEN '{FILLER_SUB}' WHEN j = {FILLER_SUB_LENGTH} THEN '{FILLER_UNLOCK}' ELSE '{FILLER_COINS}' END,
               CASE WHEN j < {FILLER_SUB_LENGTH} THEN 'auto_renewable_subscription' WHEN j = {FILLER_SUB_LENGTH} THEN 'non_consumable'
                    ELSE 'consumable' END,
               p, CASE WHEN j < {FILLER_SUB_LENGTH} THEN p + 30::bigint * {DAY} ELSE 0 END, 0,
               1, {ENV_CODE}, NULL, '{BUNDLE}', p, NULL, 1, 1, 0, 0, 0,
               CASE WHEN j < {FILLER_SUB_LENGTH} THEN 4990 WHEN j = {FILLER_SUB_LENGTH} THEN 9990 ELSE 990 END, 'USD', 'USA', '', '',
               CASE WHEN j < {FILLER_SUB_LENGTH} THEN '21000002' ELSE '' END
        FROM (SELECT a, j,
                     CASE WHEN j < {FILLER_SUB_LENGTH} THEN {sub_purchase}
                          WHEN j = {FILLER_SUB_LENGTH} THEN {start} + 5::bigint * {DAY}
                          ELSE {start} + j * {coin_step(transactions, accounts)}::bigint + 1 END AS p
              FROM (SELECT g % {accounts} AS a, g / {accounts} AS j FROM generate_series(0, {transactions - 1}::bigint) g) r) s
    """
    sub_ent = f"""
        INSERT INTO entitlements ({ENT_COLUMNS})
        SELECT 'filler-' || lpad(a::text, 7, '0'), 's:' || ({FILLER_BASE}::bigint + a * {FILLER_STRIDE})::text, '{FILLER_SUB}',
               'auto_renewable_subscription', ({FILLER_BASE}::bigint + a * {FILLER_STRIDE})::text, ({FILLER_BASE}::bigint + a * {FILLER_STRIDE} + l)::text,
               p, p + 30::bigint * {DAY}, 0, 0, 1, {ENV_CODE}, NULL, 0, 0, 0, 1, 1, '21000002', ''
        FROM (SELECT a, l, {start} + l * 30::bigint * {DAY} AS p
              FROM (SELECT a, {latest} AS l FROM generate_series(0, {accounts - 1}::bigint) a) r) s
    """
    unlock_ent = f"""
        INSERT INTO entitlements ({ENT_COLUMNS})
        SELECT 'filler-' || lpad(a::text, 7, '0'), 'p:{FILLER_UNLOCK}', '{FILLER_UNLOCK}', 'non_consumable',
               ({FILLER_BASE}::bigint + a * {FILLER_STRIDE} + {FILLER_SUB_LENGTH})::text, ({FILLER_BASE}::bigint + a * {FILLER_STRIDE} + {FILLER_SUB_LENGTH})::text,
               {start} + 5::bigint * {DAY}, 0, 0, 0, 0, {ENV_CODE}, NULL, 0, 0, 0, 1, 1, '', ''
        FROM generate_series(0, {accounts - 1}::bigint) a WHERE {n} > {FILLER_SUB_LENGTH}
    """
    log("  filler: INSERT ... SELECT generate_series (transactions)")
    psql(url, tx_sql)
    log("  filler: entitlements")
    psql(url, sub_ent)
    psql(url, unlock_ent)
    psql(url, "ANALYZE transactions; ANALYZE entitlements")
    return {t: int(psql(url, f"SELECT COUNT(*) FROM {t}", fetch=True)) for t in ("transactions", "entitlements")}


# --- 2. the heavy account --------------------------------------------------------------------------------------------

def import_clients(work):
    """grpcio stubs from schemas/ (as IntegrationTests/conftest.py makes them, into our own directory), then
    IntegrationTests' helpers and appstore_mint."""
    from grpc_tools import protoc
    gen = os.path.join(work, "gen")
    os.makedirs(gen, exist_ok=True)
    rc = protoc.main(["protoc", f"-I{ROOT}/schemas", f"--python_out={gen}", f"--grpc_python_out={gen}", "billing/v1/billing.proto"])
    if rc != 0:
        sys.exit("protoc failed")
    sys.path.insert(0, gen)
    sys.path.insert(1, os.path.join(ROOT, "IntegrationTests"))
    import grpc  # noqa: F401
    import appstore_mint
    import helpers
    return helpers, appstore_mint


def post_notification(port, data):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", "/appstore/notifications", body=data, headers={"content-type": "application/json"})
        r = conn.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, raw.decode(errors="replace")
    finally:
        conn.close()


def build_heavy(args, server, store_dir, helpers, mint):
    """The heavy account's transactions through CreateOrder + SubmitReceipt and DID_RENEW notifications."""
    import grpc
    pb = helpers.pb
    signer = mint.Signer(store_dir)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    stub = helpers.billing(channel)
    account = args.account
    periods = args.renewals + 1
    coins = args.heavy_transactions - args.subscriptions * periods
    period = 7 * DAY
    now = now_ms()
    expected = {}  # transaction id -> purchase ms

    def buy(t):
        order = stub.CreateOrder(pb.CreateOrderRequest(account_id=account, product_id=t["productId"], quantity=t["quantity"]),
                                 timeout=10).order
        t["appAccountToken"] = order.order_id
        done = stub.SubmitReceipt(pb.SubmitReceiptRequest(order_id=order.order_id, signed_transaction=signer.sign(t)), timeout=10)
        if done.order.state != pb.ORDER_STATE_COMPLETED or done.order.transaction_id != t["transactionId"]:
            raise RuntimeError(f"SubmitReceipt did not complete {t['transactionId']}: {done}")
        expected[t["transactionId"]] = t["purchaseDate"]
        return order.order_id

    def sub_tx(k, i, token):
        # Period i of subscription k: the last period (i = periods - 1) began k + 1 minutes ago and is current.
        purchase = now - (periods - 1 - i) * period - (k + 1) * 60 * SECOND
        t = mint.transaction(str(HEAVY_BASE + k * 10000 + i), SUB_PRODUCTS[k], original=str(HEAVY_BASE + k * 10000),
                             purchase_ms=purchase, expires_ms=purchase + period, signed_ms=purchase, token=token,
                             environment=ENV_NAME, price=2990, currency="USD", storefront="USA", group=f"2100{k:04d}")
        t["originalPurchaseDate"] = now - (periods - 1) * period - (k + 1) * 60 * SECOND
        return t

    started = time.perf_counter()
    tokens = [buy(sub_tx(k, 0, None)) for k in range(args.subscriptions)]
    log(f"  heavy: {args.subscriptions} subscriptions bought")
    posted = 0
    for i in range(1, periods):  # in time order, as the App Store would send them
        for k in range(args.subscriptions):
            t = sub_tx(k, i, tokens[k])
            assert t["signedDate"] <= now_ms()
            renewal = mint.renewal(t["originalTransactionId"], t["productId"], auto_renew=True, signed_ms=t["signedDate"],
                                   environment=ENV_NAME)
            payload = mint.notification(signer, "DID_RENEW", signed_ms=t["signedDate"], tx=t, renewal_info=renewal,
                                        environment=ENV_NAME)
            got = post_notification(server.notifications_port, mint.body(payload))
            if got != (200, {"result": "applied"}):
                raise RuntimeError(f"DID_RENEW {t['transactionId']}: {got}")
            expected[t["transactionId"]] = t["purchaseDate"]
            posted += 1
    log(f"  heavy: {posted} DID_RENEW notifications applied")
    span = periods * period
    for c in range(coins):
        purchase = now - span + (c * span) // max(1, coins) + 17 * SECOND  # spread over the subscriptions' span, in the past
        purchase = min(purchase, now - 10 * SECOND)
        buy(mint.transaction(str(HEAVY_COIN_BASE + c), COINS, product_type="Consumable", purchase_ms=purchase, signed_ms=purchase,
                             quantity=1, environment=ENV_NAME, price=990, currency="USD", storefront="USA"))
    log(f"  heavy: {coins} consumables bought ({time.perf_counter() - started:.1f} s for the account)")

    # The check: paging gives back exactly what was bought, newest purchase first, each once.
    seen, token, pages = [], "", 0
    while True:
        r = stub.ListTransactions(pb.ListTransactionsRequest(account_id=account, limit=args.page_size, page_token=token), timeout=30)
        seen += [(t.transaction_id, t.purchase_time_ms) for t in r.transactions]
        pages += 1
        token = r.next_page_token
        if not token or pages > args.heavy_transactions + 1:
            break
    ids = [s[0] for s in seen]
    problems = []
    if len(ids) != args.heavy_transactions:
        problems.append(f"ListTransactions paged {len(ids)} transactions, expected {args.heavy_transactions}")
    if len(set(ids)) != len(ids):
        problems.append("ListTransactions repeated a transaction")
    if set(ids) != set(expected):
        problems.append(f"ListTransactions' ids differ from those bought ({len(set(ids) ^ set(expected))} differ)")
    if any(seen[i][1] < seen[i + 1][1] for i in range(len(seen) - 1)):
        problems.append("ListTransactions is not newest purchase first")
    if any(expected.get(tid) != ms for tid, ms in seen):
        problems.append("a purchase time differs from the one signed")
    ents = stub.GetEntitlements(pb.GetEntitlementsRequest(account_id=account, include_inactive=True), timeout=30).entitlements
    if len(ents) != args.subscriptions:
        problems.append(f"GetEntitlements: {len(ents)} entitlements, expected {args.subscriptions}")
    active = sum(1 for e in ents if e.active)
    channel.close()
    if problems:
        raise RuntimeError("; ".join(problems))
    return {"transactions": len(ids), "pages": pages, "entitlements": len(ents), "active_entitlements": active,
            "subscriptions": args.subscriptions, "renewal_notifications": posted, "consumables": coins}


# --- 3. the load -----------------------------------------------------------------------------------------------------

def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))  # nearest rank
    return sorted_values[index]


def run_load(args, server, helpers, name, warmup):
    """--concurrency threads, each its own channel; a shared budget of --calls recorded calls; --seconds bound."""
    import grpc
    pb = helpers.pb
    account = args.account
    budget = {"left": warmup if warmup else args.calls}
    lock = threading.Lock()
    latencies, errors, walks, per_page = [], [], [], {}
    deadline_box = {}

    def take():
        with lock:
            if budget["left"] <= 0:
                return False
            budget["left"] -= 1
            return True

    def worker(channel, ready, go):
        stub = helpers.billing(channel)
        support = helpers.pb_grpc.SupportStub(channel)
        rng = random.Random(threading.get_ident())
        mine, mine_pages, mine_walks, mine_errors = [], {}, [], []
        ready.set()
        go.wait()
        deadline = deadline_box["at"]
        try:
            while time.monotonic() < deadline:
                if name == "walk":
                    # One walk: the first page (not recorded), then every following page, each taken from the budget.
                    r = stub.ListTransactions(pb.ListTransactionsRequest(account_id=account, limit=args.page_size), timeout=30)
                    token, page, walk_start = r.next_page_token, 1, time.perf_counter_ns()
                    stopped = False
                    while token:
                        if time.monotonic() >= deadline or not take():
                            stopped = True
                            break
                        page += 1
                        t0 = time.perf_counter_ns()
                        r = stub.ListTransactions(pb.ListTransactionsRequest(account_id=account, limit=args.page_size, page_token=token),
                                                  timeout=30)
                        elapsed = time.perf_counter_ns() - t0
                        mine.append(elapsed)
                        mine_pages.setdefault(page, []).append(elapsed)
                        token = r.next_page_token
                    if stopped:
                        break
                    mine_walks.append(time.perf_counter_ns() - walk_start)
                    continue
                if not take():
                    break
                if name in SUPPORT_PHASES:
                    request = support_request(name, args, rng, order_id)
                    t0 = time.perf_counter_ns()
                    r = getattr(support, SUPPORT_PHASES[name][0])(request, timeout=30)
                    mine.append(time.perf_counter_ns() - t0)
                    problem = support_check(name, r, args)
                    if problem:
                        mine_errors.append(problem)
                    continue
                t0 = time.perf_counter_ns()
                if name == "entitlements":
                    r = stub.GetEntitlements(pb.GetEntitlementsRequest(account_id=account, include_inactive=True), timeout=30)
                    count = len(r.entitlements)
                    expect = args.subscriptions
                else:
                    r = stub.ListTransactions(pb.ListTransactionsRequest(account_id=account, limit=args.page_size), timeout=30)
                    count = len(r.transactions)
                    expect = min(args.page_size or 100, args.heavy_transactions)
                mine.append(time.perf_counter_ns() - t0)
                if count != expect:
                    mine_errors.append(f"{count} items, expected {expect}")
        except grpc.RpcError as e:
            mine_errors.append(f"{e.code()}: {e.details()}")
        with lock:
            latencies.extend(mine)
            errors.extend(mine_errors)
            walks.extend(mine_walks)
            for k, v in mine_pages.items():
                per_page.setdefault(k, []).extend(v)

    channels = [grpc.insecure_channel(f"127.0.0.1:{server.port}", options=[("grpc.use_local_subchannel_pool", 1)])
                for _ in range(args.concurrency)]
    order_id = None
    if name == "find_order":
        # One order of a filler account, to find by its id (filler transactions carry none).
        order_id = helpers.billing(channels[0]).CreateOrder(pb.CreateOrderRequest(account_id="filler-0000001", product_id=FILLER_COINS),
                                                            timeout=30).order.order_id
    for ch in channels:
        grpc.channel_ready_future(ch).result(timeout=10)
    go = threading.Event()
    threads, readies = [], []
    for ch in channels:
        ready = threading.Event()
        th = threading.Thread(target=worker, args=(ch, ready, go), daemon=True)
        th.start()
        threads.append(th)
        readies.append(ready)
    for r in readies:
        r.wait(10)
    cpu_before = cpu_seconds(server.pid)
    started = time.perf_counter()
    deadline_box["at"] = time.monotonic() + args.seconds
    go.set()
    for th in threads:
        th.join(args.seconds + 120)
    wall = time.perf_counter() - started
    cpu_used = cpu_seconds(server.pid) - cpu_before
    for ch in channels:
        ch.close()
    if warmup:
        return None
    lat = sorted(latencies)
    ms = [x / 1e6 for x in lat]
    result = {
        "calls": len(lat), "errors": len(errors), "error_samples": errors[:5], "seconds": round(wall, 3),
        "stopped_by_time": len(lat) < args.calls, "calls_per_s": round(len(lat) / wall, 1) if wall else 0,
        "p50_ms": round(percentile(ms, 0.50), 3), "p90_ms": round(percentile(ms, 0.90), 3),
        "p99_ms": round(percentile(ms, 0.99), 3), "max_ms": round(ms[-1], 3) if ms else None,
        "server_cpu_us_per_call": round(cpu_used * 1e6 / len(lat), 1) if lat else None,
    }
    if name == "walk":
        result["pages_per_walk"] = max(per_page) if per_page else 0
        result["p50_ms_by_page"] = {str(k): round(percentile(sorted(x / 1e6 for x in v), 0.5), 3) for k, v in sorted(per_page.items())}
        w = sorted(x / 1e6 for x in walks)
        result["complete_walks"] = len(w)
        result["walk_following_pages_p50_ms"] = round(percentile(w, 0.5), 3) if w else None
        result["walk_following_pages_p99_ms"] = round(percentile(w, 0.99), 3) if w else None
        result["server_cpu_note"] = "includes the unrecorded first page of each walk"
    return result


# --- support (--support) ---------------------------------------------------------------------------------------------

# phase: (Support method, what it is, for the table)
SUPPORT_PHASES = {
    "find_account": ("FindCustomers", "FindCustomers by account id (a filler account, at random)"),
    "find_transaction": ("FindCustomers", "FindCustomers by transaction id (a filler renewal, at random)"),
    "find_original": ("FindCustomers", "FindCustomers by original transaction id (a filler subscription, at random)"),
    "find_order": ("FindCustomers", "FindCustomers by order id"),
    "find_heavy": ("FindCustomers", "FindCustomers by the heavy account's id (1,000 transactions)"),
    "customer": ("GetCustomer", "GetCustomer (a filler account, at random)"),
    "customer_heavy": ("GetCustomer", "GetCustomer (the heavy account)"),
    "explain_heavy": ("ExplainAccess", "ExplainAccess (the heavy account, every product)"),
    "grant": ("GrantEntitlement", "GrantEntitlement (a filler account, at random; one write and its audit entry)"),
}


def support_request(name, args, rng, order_id):
    import billing.v1.billing_pb2 as pb
    a = rng.randrange(args.filler_accounts)
    account = f"filler-{a:07d}"
    if name == "find_account":
        return pb.FindCustomersRequest(query=account)
    if name == "find_transaction":
        return pb.FindCustomersRequest(query=str(FILLER_BASE + a * FILLER_STRIDE + 1))
    if name == "find_original":
        return pb.FindCustomersRequest(query=str(FILLER_BASE + a * FILLER_STRIDE))
    if name == "find_order":
        return pb.FindCustomersRequest(query=order_id)
    if name == "find_heavy":
        return pb.FindCustomersRequest(query=args.account)
    if name == "customer":
        return pb.GetCustomerRequest(account_id=account)
    if name == "customer_heavy":
        return pb.GetCustomerRequest(account_id=args.account)
    if name == "explain_heavy":
        return pb.ExplainAccessRequest(account_id=args.account)
    return pb.GrantEntitlementRequest(account_id=account, product_id="com.example.bench.grant", duration_seconds=86400,
                                      reason="bench: a day of access")


def support_check(name, r, args):
    """What each answer must hold (a bench that measured empty answers would measure nothing)."""
    if name.startswith("find"):
        return None if len(r.matches) == 1 else f"{name}: {len(r.matches)} matches"
    if name.startswith("customer"):
        want = args.heavy_transactions if name == "customer_heavy" else None
        got = r.customer.transactions
        return None if got > 0 and (want is None or got == want) else f"{name}: {got} transactions"
    if name == "explain_heavy":
        return None if len(r.facts) == args.subscriptions else f"{name}: {len(r.facts)} facts"
    return None if r.grant.grant_id.startswith("grant_") else f"{name}: no grant"


# --- main ------------------------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--postgres", default=os.environ.get("BILLING_TEST_POSTGRES"), help="server URL (a database is created)")
    ap.add_argument("--filler-accounts", type=int, default=100_000)
    ap.add_argument("--filler-transactions", type=int, help="default: 10 per filler account (1,000,000)")
    ap.add_argument("--account", default="heavy")
    ap.add_argument("--heavy-transactions", type=int, default=1000)
    ap.add_argument("--subscriptions", type=int, default=10)
    ap.add_argument("--renewals", type=int, default=49, help="DID_RENEW per subscription (each subscription: 1 + this many)")
    ap.add_argument("--concurrency", type=int, default=8, help="client threads, each with its own channel")
    ap.add_argument("--calls", type=int, default=5000, help="recorded calls per method")
    ap.add_argument("--warmup", type=int, default=200, help="unrecorded calls per method first")
    ap.add_argument("--seconds", type=float, default=60, help="time bound per method")
    ap.add_argument("--page-size", type=int, default=100, help="ListTransactions limit")
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--log-level", default="warning", help="billingd's --log-level")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (and the PostgreSQL database)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    ap.add_argument("--support", action="store_true", help="also load billing.v1.Support: FindCustomers by each id kind, "
                                                            "GetCustomer, ExplainAccess, GrantEntitlement")
    ap.add_argument("--phases", help="comma-separated phases to run (default all): entitlements, first, walk, and with "
                                     "--support " + ", ".join(SUPPORT_PHASES))
    args = ap.parse_args()
    if args.filler_transactions is None:
        args.filler_transactions = 10 * args.filler_accounts
    if args.subscriptions > len(SUB_PRODUCTS) or args.subscriptions < 1:
        sys.exit(f"--subscriptions: 1 to {len(SUB_PRODUCTS)}")
    if args.heavy_transactions - args.subscriptions * (args.renewals + 1) < 0:
        sys.exit("--heavy-transactions is less than --subscriptions x (--renewals + 1)")
    if not 1 <= args.page_size <= 1000:
        sys.exit("--page-size: 1 to 1000")
    filler_plan(args.filler_transactions, args.filler_accounts)

    command = " ".join(["cd", shlex.quote(ROOT), "&&", "python3", "bench/account_reads.py"] + [shlex.quote(a) for a in sys.argv[1:]])
    pinned = False
    if hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {args.client_cpu})  # before grpcio starts a thread: all of them stay on this CPU
            pinned = True
        except OSError as e:
            log(f"note: cannot pin the client to CPU {args.client_cpu}: {e}")
    binary, build = billingd_binary()
    work = tempfile.mkdtemp(prefix="billingd-account-reads-", dir=os.environ.get("BENCH_DIR", "/var/tmp"))
    helpers, mint = import_clients(work)
    store_dir = os.path.join(work, "teststore")
    pg_name = None
    server = None
    report = {"command": command, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "store": args.store,
              "billingd": f".build/{build}/billingd", "server_cpu": args.server_cpu if shutil.which("taskset") else None,
              "client_cpu": args.client_cpu if pinned else None, "cores": os.cpu_count(), "concurrency": args.concurrency,
              "calls_per_method": args.calls, "seconds_bound": args.seconds, "page_size": args.page_size, "work_dir": work}
    try:
        # 1. the database
        if args.store == "sqlite":
            path = os.path.join(work, "billing.db")
            database = f"sqlite:{path}"
        else:
            if not args.postgres:
                sys.exit("--store postgres needs --postgres URL or BILLING_TEST_POSTGRES")
            pg_name = "billing_reads_" + uuid.uuid4().hex[:8]
            psql(args.postgres, f"CREATE DATABASE {pg_name}")
            database = args.postgres.rsplit("/", 1)[0] + "/" + pg_name
            report["postgres_database"] = pg_name
        log(f"1. migrating {database} with {binary}")
        Server(binary, database, os.path.join(work, "migrate.log"), log_level=args.log_level).stop()
        started = time.perf_counter()
        log(f"1. filler: {args.filler_transactions:,} transactions over {args.filler_accounts:,} accounts")
        if args.store == "sqlite":
            counts = fill_sqlite(path, args.filler_transactions, args.filler_accounts, now_ms())
            counts["file_mb"] = round(os.path.getsize(path) / 1e6, 1)
        else:
            counts = fill_postgres(database, args.filler_transactions, args.filler_accounts, now_ms())
            counts["database_mb"] = round(int(psql(database, f"SELECT pg_database_size('{pg_name}')", fetch=True)) / 1e6, 1)
        counts["fill_seconds"] = round(time.perf_counter() - started, 1)
        report["filler"] = dict(counts, accounts=args.filler_accounts)
        log(f"   {counts}")

        # 2. the heavy account
        server = Server(binary, database, os.path.join(work, "billingd.log"), cpu=args.server_cpu, dev_store=store_dir,
                        notifications_port=free_port(), log_level=args.log_level)
        report["server_argv"] = shlex.join(server.argv)
        log(f"2. billingd PID {server.pid}: {report['server_argv']}")
        report["heavy"] = build_heavy(args, server, store_dir, helpers, mint)
        log(f"   {report['heavy']}")

        # 3. the load
        names = {"entitlements": "GetEntitlements(include_inactive)", "first": f"ListTransactions first page (limit {args.page_size})",
                 "walk": f"ListTransactions following pages (token, limit {args.page_size})"}
        report["results"] = {}
        report["loadavg_before"] = [round(x, 2) for x in os.getloadavg()]
        phases = ["entitlements", "first", "walk"] + (list(SUPPORT_PHASES) if args.support else [])
        if args.phases:
            unknown = set(args.phases.split(",")) - set(phases)
            if unknown:
                sys.exit(f"--phases: unknown {sorted(unknown)}")
            phases = [p for p in phases if p in args.phases.split(",")]
        names.update({k: v[1] for k, v in SUPPORT_PHASES.items()})
        for name in phases:
            log(f"3. {names[name]}: warm-up {args.warmup}, then {args.calls} calls, {args.concurrency} threads, {args.seconds:g} s bound")
            if args.warmup:
                run_load(args, server, helpers, name, args.warmup)
            result = run_load(args, server, helpers, name, 0)
            report["results"][name] = result
            log(f"   {result}")
        report["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        if server is not None:
            code = server.stop()
            if code not in (0, None):
                log(f"note: billingd exited with {code}; its log: {os.path.join(work, 'billingd.log')}")
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
            if pg_name:
                try:
                    psql(args.postgres, f"DROP DATABASE IF EXISTS {pg_name}")
                except subprocess.CalledProcessError as e:
                    log(f"note: could not drop {pg_name}: {e.stderr}")

    if args.json:
        print(json.dumps(report, indent=2))
        return
    f = report["filler"]
    print(f"account_reads: {args.store}, {f['transactions']:,} transaction rows and {f['entitlements']:,} entitlement rows in all "
          f"({args.filler_accounts:,} filler accounts + '{args.account}'), '{args.account}' holds {report['heavy']['transactions']:,} "
          f"transactions ({args.subscriptions} subscriptions x {args.renewals + 1} periods + {report['heavy']['consumables']} consumables), "
          f"{report['heavy']['entitlements']} entitlements")
    print(f"billingd {report['billingd']} pinned to CPU {report['server_cpu']}; grpcio client on CPU {report['client_cpu']}, "
          f"{args.concurrency} threads each with its own channel; {report['cores']} cores; "
          f"load average (1, 5, 15 min) {report['loadavg_before']} before the load, {report['loadavg_after']} after\n")
    print("| method | calls | errors | p50 ms | p90 ms | p99 ms | max ms | calls/s | server µs CPU/call |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, r in report["results"].items():
        flag = " (time bound)" if r["stopped_by_time"] else ""
        print(f"| {names[name]} | {r['calls']:,}{flag} | {r['errors']} | {r['p50_ms']:.2f} | {r['p90_ms']:.2f} | {r['p99_ms']:.2f} | "
              f"{r['max_ms']:.2f} | {r['calls_per_s']:,.0f} | {r['server_cpu_us_per_call']} |")
    walk = report["results"].get("walk")
    # (The Support rows, with --support, are in the table above.)
    if walk:
        print(f"\nfollowing pages, p50 ms by page number: " + ", ".join(f"{k}: {v:.2f}" for k, v in walk["p50_ms_by_page"].items()))
    if walk and walk["walk_following_pages_p50_ms"] is not None:
        print(f"a whole walk's following pages ({walk['pages_per_walk'] - 1} pages): p50 {walk['walk_following_pages_p50_ms']:.1f} ms, "
              f"p99 {walk['walk_following_pages_p99_ms']:.1f} ms ({walk['complete_walks']} walks; the server CPU per call of this "
              f"row includes each walk's unrecorded first page)")
    errors = [s for r in report["results"].values() for s in r["error_samples"]]
    if errors:
        print("errors: " + "; ".join(errors))
    print(f"\ncommand: {command}")
    if any(r["errors"] for r in report["results"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
