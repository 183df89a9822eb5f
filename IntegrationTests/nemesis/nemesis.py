#!/usr/bin/env python3
"""Nemesis, first cut: 3 billingd replicas on one PostgreSQL of its own, clients recording every operation
(invoke / ok / fail / unknown), a nemesis injecting faults, and a checker over the history and the final
database. Not collected by pytest (no test_ prefix); run it alone, as root, under the shared lock:

    flock /tmp/swift-build.lock python3 IntegrationTests/nemesis/nemesis.py --seconds 180 [--faults kill,pause,drop,blackhole,delay,reset]

Faults: kill (kill -9 a replica, restart it 0.5-2 s later), pause (SIGSTOP the postmaster and every backend,
SIGCONT 1-4 s later), and through a fault-injecting TCP proxy between each replica and PostgreSQL: drop (close
every connection, refuse new ones), blackhole (accept, forward nothing), delay (200-800 ms per chunk), reset
(RST every connection once). Operations: CreateOrder with idempotency keys; SubmitReceipt of minted StoreKit 2
JWS, some shared between orders of different accounts (TRANSACTION_ALREADY_CLAIMED). Timeouts and UNAVAILABLE
are unknown and retried as ERRORS.md allows (same key / same proof) until a definite answer or the retry budget.
Exit status 0 when the verdict is VALID."""
import argparse
import json
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from conftest import Billingd, binary, free_port  # noqa: E402  (also generates the stubs)
import appstore_mint as mint  # noqa: E402
import grpc  # noqa: E402
from helpers import billing, pb  # noqa: E402
from grpc_status import rpc_status  # noqa: E402
from google.rpc import error_details_pb2  # noqa: E402

PGBIN = "/usr/lib/postgresql/15/bin"
PRODUCT = "com.example.premium"
ALL_FAULTS = ["kill", "pause", "drop", "blackhole", "delay", "reset"]


def as_postgres(args, **kw):
    if os.geteuid() == 0:
        args = ["runuser", "-u", "postgres", "--"] + args
    return subprocess.run(args, check=True, capture_output=True, timeout=120, **kw)


class Postgres:
    """A throwaway cluster of our own on a free loopback port."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="nemesis-pg-")
        os.chmod(self.dir, 0o700)
        shutil.chown(self.dir, "postgres")
        self.port = free_port()
        as_postgres([f"{PGBIN}/initdb", "-D", self.dir, "-U", "postgres", "--auth=trust", "-E", "UTF8"])
        as_postgres([f"{PGBIN}/pg_ctl", "-D", self.dir, "-l", f"{self.dir}/server.log", "-w", "-t", "60", "-o",
                     f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.dir} "
                     f"-c synchronous_commit=on -c max_connections=200", "start"])
        as_postgres([f"{PGBIN}/createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "billing"])

    def url(self, port=None):
        return f"postgres://postgres@127.0.0.1:{port or self.port}/billing"

    def psql(self, sql):
        return subprocess.run(["psql", self.url(), "-tAF", "\t", "-c", sql], check=True, capture_output=True, text=True,
                              timeout=60).stdout

    def pids(self):
        with open(f"{self.dir}/postmaster.pid") as f:
            master = int(f.readline())
        children = subprocess.run(["pgrep", "-P", str(master)], capture_output=True, text=True).stdout.split()
        return [master] + [int(c) for c in children]

    def stop(self):
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        subprocess.run(["runuser", "-u", "postgres", "--", f"{PGBIN}/pg_ctl", "-D", self.dir, "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)


class Proxy:
    """A TCP proxy on a free loopback port with switchable faults: ok, drop, blackhole, delay, reset."""

    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self.mode = "ok"
        self.lock = threading.Lock()
        self.pairs = []  # (client, server)
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def set(self, mode):
        with self.lock:
            self.mode = mode
            pairs = list(self.pairs)
            if mode in ("drop", "reset"):
                self.pairs = []
        if mode in ("drop", "reset"):
            for a, b in pairs:
                for s in (a, b):
                    try:
                        if mode == "reset":
                            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                        s.close()
                    except OSError:
                        pass
        if mode == "reset":
            with self.lock:
                self.mode = "ok"

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                mode = self.mode
            if mode == "drop":
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=2)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.pairs.append((client, server))
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, a, b):
        socks = [a, b]
        try:
            for _ in range(10_000_000):
                r, _, _ = select.select(socks, [], [], 0.2)
                if self.closed:
                    break
                with self.lock:
                    mode = self.mode
                if mode == "blackhole":
                    continue  # nothing moves; bytes wait in the kernel buffers
                done = False
                for s in r:
                    data = s.recv(65536)
                    if not data:
                        done = True
                        break
                    if mode == "delay":
                        time.sleep(random.uniform(0.2, 0.8))
                    (b if s is a else a).sendall(data)
                if done:
                    break
        except (OSError, ValueError):  # ValueError: select on a socket set() closed
            pass
        finally:
            for s in socks:
                try:
                    s.close()
                except OSError:
                    pass
            with self.lock:
                self.pairs = [p for p in self.pairs if p != (a, b)]

    def close(self):
        self.closed = True
        self.listener.close()
        self.set("drop")


class History:
    def __init__(self):
        self.lock = threading.Lock()
        self.events = []
        self.t0 = time.monotonic()

    def add(self, **e):
        e["t"] = round(time.monotonic() - self.t0, 3)
        with self.lock:
            self.events.append(e)
        return e


def reason_of(err):
    try:
        status = rpc_status.from_call(err)
        for d in status.details if status else []:
            if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                d.Unpack(info)
                return info.reason
    except Exception:  # noqa: BLE001
        pass
    return ""


def classify(err):
    """unknown: the write may or may not have happened; fail: a definite refusal."""
    code = err.code()
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED,
                grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.RESOURCE_EXHAUSTED):
        return "unknown", f"{code.name}:{reason_of(err)}"
    return "fail", reason_of(err) or code.name


class Cluster:
    def __init__(self, pg, store, n=3):
        self.pg = pg
        self.proxies = [Proxy(pg.port) for _ in range(n)]
        flags = ["--dev", "--dev-store", store, "--bundle-id", mint.BUNDLE]
        self.nodes = [Billingd(*flags, database=pg.url(p.port)) for p in self.proxies]
        self.down = set()
        self.lock = threading.Lock()

    def stub(self, i):
        n = self.nodes[i]
        return billing(grpc.insecure_channel(n.address))


def client(cid, cluster, history, signer, shared_proofs, acked_orders, stop, rng, retries):
    channels = [grpc.insecure_channel(n.address) for n in cluster.nodes]
    stubs = [billing(c) for c in channels]
    seq = 0

    def attempt(op, kind, call):
        for a in range(retries + 1):
            i = rng.randrange(len(stubs))
            history.add(op=op, kind=kind, type="invoke", attempt=a, node=i)
            try:
                result = call(stubs[i])
                history.add(op=op, kind=kind, type="ok", attempt=a, node=i, **result)
                return "ok"
            except grpc.RpcError as e:
                outcome, why = classify(e)
                history.add(op=op, kind=kind, type=outcome, attempt=a, node=i, reason=why)
                if outcome == "fail":
                    return "fail"
            time.sleep(min(2.0, 0.05 * (2 ** a)) * rng.uniform(0.5, 1.5))
            if stop.is_set() and a >= 3:
                break
        return "unknown"

    while not stop.is_set():
        seq += 1
        if acked_orders and rng.random() < 0.45:
            with cluster.lock:
                order_id, account = rng.choice(acked_orders)
            if shared_proofs and rng.random() < 0.3:
                with cluster.lock:
                    tx, jws = rng.choice(shared_proofs)
            else:
                tx = str(rng.randrange(10**12, 10**13))
                now = int(time.time() * 1000)
                jws = signer.sign(mint.transaction(tx, PRODUCT, product_type=mint.NON_CONSUMABLE, purchase_ms=now - 1000,
                                                   signed_ms=now))
                with cluster.lock:
                    shared_proofs.append((tx, jws))
            op = f"s{cid}-{seq}"
            history.add(op=op, kind="submit", type="args", order_id=order_id, account=account, tx=tx)
            attempt(op, "submit", lambda s: {"processed": s.SubmitReceipt(
                pb.SubmitReceiptRequest(order_id=order_id, signed_transaction=jws), timeout=3).already_processed})
        else:
            account = f"acct-{cid}-{rng.randrange(20)}"
            key = f"k{cid}-{seq}"
            op = f"c{cid}-{seq}"
            history.add(op=op, kind="create", type="args", account=account, key=key)

            def create(s):
                order = s.CreateOrder(pb.CreateOrderRequest(account_id=account, product_id=PRODUCT, idempotency_key=key),
                                      timeout=3).order
                return {"order_id": order.order_id}
            if attempt(op, "create", create) == "ok":
                oid = [e for e in history.events if e["op"] == op and e["type"] == "ok"][-1]["order_id"]
                with cluster.lock:
                    acked_orders.append((oid, account))
    for c in channels:
        c.close()


def nemesis(cluster, history, faults, stop, rng, log):
    while not stop.is_set():
        stop.wait(rng.uniform(1.0, 3.0))
        if stop.is_set():
            break
        kind = rng.choice(faults)
        length = rng.uniform(1.0, 4.0)
        start = history.add(op="nemesis", kind=kind, type="start")
        if kind == "kill":
            i = rng.randrange(len(cluster.nodes))
            cluster.nodes[i].kill()
            time.sleep(rng.uniform(0.5, 2.0))
            cluster.nodes[i].start()
            start["target"] = i
        elif kind == "pause":
            pids = cluster.pg.pids()
            for p in pids:
                try:
                    os.kill(p, signal.SIGSTOP)
                except ProcessLookupError:
                    pass
            time.sleep(length)
            for p in pids:
                try:
                    os.kill(p, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        else:
            i = rng.randrange(len(cluster.proxies))
            start["target"] = i
            cluster.proxies[i].set(kind)
            if kind != "reset":
                time.sleep(length)
                cluster.proxies[i].set("ok")
        history.add(op="nemesis", kind=kind, type="end")
        log.append(kind)


def check(history, pg):
    """Verdict over the history and the final database. Answers (valid, report)."""
    ev = history.events
    ops = {}
    for e in ev:
        if e["op"] == "nemesis":
            continue
        ops.setdefault(e["op"], []).append(e)
    rows = {}
    for line in pg.psql("SELECT order_id, account_id, product_id, state, coalesce(idempotency_key,''), "
                        "coalesce(transaction_id,'') FROM orders").splitlines():
        oid, acct, prod, state, key, tx = line.split("\t")
        rows[oid] = dict(account=acct, product=prod, state=int(state), key=key, tx=tx)
    txs = {}
    for line in pg.psql("SELECT transaction_id, account_id, coalesce(order_id,'') FROM transactions").splitlines():
        tx, acct, oid = line.split("\t")
        txs[tx] = dict(account=acct, order=oid)
    problems = []
    counts = {"create": {}, "submit": {}}
    reasons = {}
    for op, es in ops.items():
        args = es[0]
        kind = args["kind"]
        final = [e for e in es if e["type"] in ("ok", "fail")]
        unknowns = sum(1 for e in es if e["type"] == "unknown")
        outcome = final[-1]["type"] if final else "unknown"
        if outcome != "unknown" and unknowns:
            outcome += "-after-unknown"
        counts[kind][outcome] = counts[kind].get(outcome, 0) + 1
        if kind == "create":
            oks = [e for e in es if e["type"] == "ok"]
            ids = {e["order_id"] for e in oks}
            if len(ids) > 1:
                problems.append(("idempotency key answered two orders", op, es))
            for oid in ids:
                r = rows.get(oid)
                if r is None or r["account"] != args["account"] or r["key"] != args["key"] or r["product"] != PRODUCT:
                    problems.append(("acknowledged order missing or wrong", op, es + [{"db": r}]))
            in_db = [o for o, r in rows.items() if r["account"] == args["account"] and r["key"] == args["key"]]
            if len(in_db) > 1:
                problems.append(("one key, several orders in the database", op, es))
        else:
            oks = [e for e in es if e["type"] == "ok"]
            if oks:
                r = rows.get(args["order_id"])
                t = txs.get(args["tx"])
                if r is None or r["state"] != 2 or r["tx"] != args["tx"] or t is None or t["order"] != args["order_id"]:
                    problems.append(("acknowledged completion not in the database", op, es + [{"db": r, "tx": t}]))
            fails = [e for e in es if e["type"] == "fail"]
            if fails:
                reasons[fails[-1]["reason"]] = reasons.get(fails[-1]["reason"], 0) + 1
                r = rows.get(args["order_id"])
                if r and r["tx"] == args["tx"]:
                    problems.append(("refused, yet credited to this order", op, es + [{"db": r}]))
    # No transaction credits two orders or two accounts.
    by_tx = {}
    for oid, r in rows.items():
        if r["tx"]:
            by_tx.setdefault(r["tx"], []).append(oid)
    for tx, oids in by_tx.items():
        if len(oids) > 1 or {rows[o]["account"] for o in oids} != {txs.get(tx, {}).get("account")}:
            problems.append(("transaction credits two orders or accounts", tx,
                             [e for e in ev if e.get("tx") == tx or e.get("order_id") in oids]))
    unresolved = sum(counts[k].get("unknown", 0) for k in ("create", "submit"))
    counts["submit refusals"] = reasons
    return problems, counts, unresolved, len(rows), len(by_tx)


def unavailability(history):
    """Longest gap between successful answers, attributed to the fault kinds active when it began."""
    oks = sorted(e["t"] for e in history.events if e["type"] == "ok")
    windows = []
    open_ = {}
    for e in history.events:
        if e["op"] == "nemesis":
            if e["type"] == "start":
                open_[id(e)] = e
            else:
                s = next((s for s in open_.values() if s["kind"] == e["kind"]), None)
                if s:
                    windows.append((s["kind"], s["t"], e["t"]))
                    del open_[id(s)]
    longest = {}
    for a, b in zip(oks, oks[1:]):
        gap = b - a
        for kind, s, end in windows:
            if s - 0.5 <= a <= end:
                longest[kind] = max(longest.get(kind, 0.0), gap)
    return {k: round(v, 2) for k, v in longest.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--faults", default=",".join(ALL_FAULTS))
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--retries", type=int, default=8)
    ap.add_argument("--history", default=None, help="write the history as JSON lines here")
    a = ap.parse_args()
    faults = [f for f in a.faults.split(",") if f]
    assert all(f in ALL_FAULTS for f in faults), faults
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    print(f"nemesis: seed {seed}, {a.seconds:.0f} s, faults {faults}, {a.clients} clients", flush=True)
    pg = Postgres()
    store = tempfile.mkdtemp(prefix="nemesis-store-")
    cluster = None
    try:
        subprocess.run([binary("billingctl"), "teststore", "init", store], check=True, capture_output=True)
        signer = mint.Signer(store)
        cluster = Cluster(pg, store)
        history = History()
        stop, nem_stop = threading.Event(), threading.Event()
        shared, acked, injected = [], [], []
        threads = [threading.Thread(target=client, args=(c, cluster, history, signer, shared, acked, stop,
                                                         random.Random(seed + c + 1), a.retries)) for c in range(a.clients)]
        nem = threading.Thread(target=nemesis, args=(cluster, history, faults, nem_stop, random.Random(seed), injected))
        for t in threads:
            t.start()
        nem.start()
        time.sleep(a.seconds)
        nem_stop.set()
        nem.join(timeout=30)
        for p in cluster.proxies:
            p.set("ok")
        time.sleep(2)  # healed: the clients' retries resolve their unknowns
        stop.set()
        for t in threads:
            t.join(timeout=120)
        problems, counts, unresolved, n_orders, n_credited = check(history, pg)
        gaps = unavailability(history)
        kinds = {k: injected.count(k) for k in faults}
        print(f"faults injected: {kinds}")
        print(f"operations: {json.dumps(counts)}")
        print(f"database: {n_orders} orders, {n_credited} credited transactions; unresolved unknowns: {unresolved}")
        print(f"longest gap between successful answers, by fault active: {gaps}")
        if a.history:
            with open(a.history, "w") as f:
                for e in history.events:
                    f.write(json.dumps(e) + "\n")
        if problems:
            print(f"VERDICT: INVALID ({len(problems)} problems)")
            what, key, slice_ = min(problems, key=lambda p: len(p[2]))
            print(f"smallest failing slice: {what}: {key}")
            for e in slice_:
                print("   ", json.dumps(e))
            return 1
        print("VERDICT: VALID" + (f" ({unresolved} operations still unknown after retries)" if unresolved else ""))
        return 0
    finally:
        if cluster:
            for n in cluster.nodes:
                try:
                    n.stop()
                except Exception:  # noqa: BLE001
                    pass
            for p in cluster.proxies:
                p.close()
        pg.stop()
        shutil.rmtree(store, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
