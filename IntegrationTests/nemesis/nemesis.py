#!/usr/bin/env python3
"""Nemesis: 3 billingd replicas on a PostgreSQL 15 primary with a synchronous streaming standby of its own,
clients recording every operation (invoke / ok / fail / unknown), two event-feed readers, a nemesis injecting
faults, and a checker over the history, the feeds and the final database. Not collected by pytest (no test_
prefix; test_nemesis_short.py runs it briefly); run it alone, as root, under the shared lock:

    flock /tmp/swift-build.lock python3 IntegrationTests/nemesis/nemesis.py --seconds 180 [--faults kill,pause,drop,blackhole,delay,reset,failover]

Faults: kill (kill -9 a replica, restart it 0.5-2 s later), pause (SIGSTOP the postmaster and every backend of
the primary or the standby, SIGCONT 1-4 s later), failover (promote the standby, stop the old primary
immediately, rebuild it with pg_basebackup as the new primary's synchronous standby), and through a
fault-injecting TCP proxy between each replica and each PostgreSQL server: drop (close every connection, refuse
new ones), blackhole (accept, forward nothing), delay (200-800 ms per chunk), reset (RST every connection once).
The replicas find the primary with a libpq multi-host URL and target_session_attrs=read-write.
Operations: CreateOrder with idempotency keys; SubmitReceipt of minted StoreKit 2 JWS, some shared between orders
of different accounts (TRANSACTION_ALREADY_CLAIMED); RestorePurchases of shared proofs (--restore-policy keep);
REFUND and ONE_TIME_CHARGE notifications POSTed to the replicas' notifications endpoints. Timeouts, UNAVAILABLE
and 503 are unknown and retried as ERRORS.md allows (same key / proof / notification) until a definite answer or
the retry budget. Readers: one pages with ListEvents and keeps stopping and resuming from its last cursor, one
follows WatchEvents and resumes with after_cursor. Exit status 0 when the verdict is VALID."""
import argparse
import bisect
import http.client
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
ALL_FAULTS = ["kill", "pause", "drop", "blackhole", "delay", "reset", "failover"]


def as_postgres(args, **kw):
    if os.geteuid() == 0:
        args = ["runuser", "-u", "postgres", "--"] + args
    return subprocess.run(args, check=True, capture_output=True, timeout=120, **kw)


def pg_ctl(data, *args):
    return as_postgres([f"{PGBIN}/pg_ctl", "-D", data, *args])


class PgNode:
    """One PostgreSQL server of the replicated pair: a data directory (replaced on a rebuild) on a fixed port.
    TCP only: a Unix socket lock file in the data directory would be copied by pg_basebackup."""

    def __init__(self, port):
        self.port = port
        self.dir = None

    def fresh_dir(self):
        self.dir = tempfile.mkdtemp(prefix="nemesis-pg-")
        os.chmod(self.dir, 0o700)
        shutil.chown(self.dir, "postgres")

    def start(self):
        pg_ctl(self.dir, "-l", f"{self.dir}/server.log", "-w", "-t", "60", "-o",
               f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories=''", "start")

    def url(self):
        return f"postgres://postgres@127.0.0.1:{self.port}/billing"

    def psql(self, sql):
        return subprocess.run(["psql", self.url(), "-tAF", "\t", "-c", sql], check=True, capture_output=True, text=True,
                              timeout=60).stdout

    def pids(self):
        try:
            with open(f"{self.dir}/postmaster.pid") as f:
                master = int(f.readline())
        except (OSError, ValueError):
            return []
        children = subprocess.run(["pgrep", "-P", str(master)], capture_output=True, text=True).stdout.split()
        return [master] + [int(c) for c in children]

    def stop(self, remove=True):
        """Immediate stop (SIGCONT first, in case a pause left it stopped); the directory goes too."""
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        subprocess.run(["runuser", "-u", "postgres", "--", f"{PGBIN}/pg_ctl", "-D", self.dir, "-m", "immediate", "-w",
                        "stop"], capture_output=True, timeout=60)
        if remove:
            shutil.rmtree(self.dir, ignore_errors=True)

    def follow(self, primary):
        """Becomes a synchronous standby of primary: pg_basebackup into a fresh directory (-R writes standby.signal
        and primary_conninfo), then start. synchronous_standby_names = '*' on the primary makes it synchronous."""
        self.fresh_dir()
        as_postgres([f"{PGBIN}/pg_basebackup", "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres", "-D",
                     self.dir, "-R", "-X", "stream", "-c", "fast"])
        self.start()


class Postgres:
    """A PostgreSQL 15 primary and its synchronous streaming standby, on two fixed loopback ports. Every commit
    waits until the standby has flushed it (synchronous_commit = on), so an acknowledged write survives a
    failover. billingd finds the primary through a multi-host URL with target_session_attrs=read-write."""

    SETTINGS = ["wal_level = replica", "max_wal_senders = 10", "hot_standby = on", "synchronous_commit = on",
                "synchronous_standby_names = '*'", "max_connections = 200", "wal_keep_size = '256MB'"]

    def __init__(self):
        self.nodes = [PgNode(free_port()), PgNode(free_port())]
        self.primary, self.standby = self.nodes
        self.primary.fresh_dir()
        as_postgres([f"{PGBIN}/initdb", "-D", self.primary.dir, "-U", "postgres", "--auth=trust", "-E", "UTF8"])
        with open(f"{self.primary.dir}/postgresql.conf", "a") as f:
            f.write("\n".join(self.SETTINGS) + "\n")
        self.primary.start()
        self.standby.follow(self.primary)
        self.wait_sync()
        as_postgres([f"{PGBIN}/createdb", "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", "postgres", "billing"])

    @property
    def port(self):
        return self.primary.port

    def wait_sync(self, timeout=60):
        """Until the standby streams and is synchronous: only then may another failover come."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run(["psql", f"postgres://postgres@127.0.0.1:{self.primary.port}/postgres", "-tA", "-c",
                                  "SELECT sync_state FROM pg_stat_replication"], capture_output=True, text=True,
                                 timeout=20).stdout.split()
            if "sync" in out:
                return
            time.sleep(0.1)
        raise RuntimeError("the standby did not become synchronous")

    def failover(self):
        """Promote the standby, stop the old primary (immediate), rebuild it as the new primary's standby."""
        old, new = self.primary, self.standby
        pg_ctl(new.dir, "-w", "-t", "60", "promote")
        old.stop()
        self.primary, self.standby = new, old
        old.follow(new)
        self.wait_sync()

    def url(self, ports=None):
        hosts = ",".join(f"127.0.0.1:{p}" for p in (ports or [n.port for n in self.nodes]))
        return f"postgres://postgres@{hosts}/billing?target_session_attrs=read-write"

    def psql(self, sql):
        return self.primary.psql(sql)

    def pids(self):
        return self.primary.pids() + self.standby.pids()

    def stop(self):
        for n in self.nodes:
            if n.dir:
                n.stop()


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


class Outcome(Exception):
    """A non-gRPC answer (a notification delivery): outcome is ok, fail or unknown."""

    def __init__(self, outcome, reason):
        super().__init__(reason)
        self.outcome, self.reason = outcome, reason


class Cluster:
    """3 billingd replicas; replica i reaches each PostgreSQL server through a proxy of its own (proxies[i])."""

    def __init__(self, pg, store, n=3):
        self.pg = pg
        self.proxies = [[Proxy(node.port) for node in pg.nodes] for _ in range(n)]
        self.notify_ports = [free_port() for _ in range(n)]
        flags = ["--dev", "--dev-store", store, "--bundle-id", mint.BUNDLE, "--restore-policy", "keep"]
        self.nodes = [Billingd(*flags, "--notifications-listen", f"127.0.0.1:{port}",
                               database=pg.url([p.port for p in pair]))
                      for pair, port in zip(self.proxies, self.notify_ports)]
        self.lock = threading.Lock()

    def all_proxies(self):
        return [p for pair in self.proxies for p in pair]


def post_notification(port, signed_payload):
    """POSTs one notification as Apple does: 200 is ok, 503 or no answer unknown, anything else fail."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
    try:
        conn.request("POST", "/appstore/notifications", mint.body(signed_payload), {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
    except (OSError, http.client.HTTPException) as e:
        raise Outcome("unknown", type(e).__name__)
    finally:
        conn.close()
    if r.status == 200:
        return {"result": json.loads(data).get("result")}
    raise Outcome("unknown" if r.status == 503 else "fail", f"HTTP {r.status}")


class Shared:
    """What the clients learned, for later operations to reuse (under lock)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.orders = []   # (order_id, account) of acknowledged CreateOrder
        self.proofs = []   # (tx, jws, signed_ms) minted for SubmitReceipt
        self.credited = []  # (order_id, tx, signed_ms) of acknowledged SubmitReceipt

    def pick(self, rng, name):
        with self.lock:
            items = getattr(self, name)
            return rng.choice(items) if items else None

    def add(self, name, item):
        with self.lock:
            getattr(self, name).append(item)


def client(cid, cluster, history, signer, shared, stop, rng, retries):
    """One client: a seeded mix of CreateOrder, SubmitReceipt, RestorePurchases and REFUND / ONE_TIME_CHARGE
    notifications, each retried while its outcome is unknown, with the same key, proof or notification."""
    channels = [grpc.insecure_channel(n.address) for n in cluster.nodes]
    stubs = [billing(c) for c in channels]
    seq = 0

    def attempt(op, kind, call):
        for a in range(retries + 1):
            i = rng.randrange(len(stubs))
            history.add(op=op, kind=kind, type="invoke", attempt=a, node=i)
            try:
                result = call(i)
                history.add(op=op, kind=kind, type="ok", attempt=a, node=i, **result)
                return result
            except grpc.RpcError as e:
                outcome, why = classify(e)
            except Outcome as e:
                outcome, why = e.outcome, e.reason
            history.add(op=op, kind=kind, type=outcome, attempt=a, node=i, reason=why)
            if outcome == "fail":
                return None
            time.sleep(min(2.0, 0.05 * (2 ** a)) * rng.uniform(0.5, 1.5))
            if stop.is_set() and a >= 3:
                break
        return None

    def now():
        return int(time.time() * 1000)

    while not stop.is_set():
        seq += 1
        roll = rng.random()
        picked = shared.pick(rng, "orders")
        if picked and roll < 0.38:
            order_id, account = picked
            proof = shared.pick(rng, "proofs") if rng.random() < 0.3 else None
            if proof is None:
                tx, t = str(rng.randrange(10**12, 10**13)), now()
                proof = (tx, signer.sign(mint.transaction(tx, PRODUCT, product_type=mint.NON_CONSUMABLE,
                                                          purchase_ms=t - 1000, signed_ms=t)), t)
                shared.add("proofs", proof)
            tx, jws, signed = proof
            op = f"s{cid}-{seq}"
            history.add(op=op, kind="submit", type="args", order_id=order_id, account=account, tx=tx)
            if attempt(op, "submit", lambda i: {"processed": stubs[i].SubmitReceipt(
                    pb.SubmitReceiptRequest(order_id=order_id, signed_transaction=jws), timeout=3).already_processed}):
                shared.add("credited", (order_id, tx, signed))
        elif picked and roll < 0.45:
            account = picked[1]
            proofs = [p for p in (shared.pick(rng, "proofs") for _ in range(rng.randint(1, 3))) if p]
            op = f"r{cid}-{seq}"
            history.add(op=op, kind="restore", type="args", account=account, txs=[p[0] for p in proofs])
            request = pb.RestorePurchasesRequest(account_id=account, signed_transactions=[p[1] for p in proofs])
            attempt(op, "restore", lambda i: {"latest": sorted(e.latest_transaction_id for e in stubs[i].RestorePurchases(
                request, timeout=3).entitlements)})
        elif picked and roll < 0.50 and shared.credited:
            order_id, tx, signed = shared.pick(rng, "credited")
            t = max(now(), signed + 1)
            payload = mint.transaction(tx, PRODUCT, product_type=mint.NON_CONSUMABLE, purchase_ms=signed - 1000,
                                       revocation_ms=t, revocation_reason=0, signed_ms=t)
            uuid_ = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            body = mint.notification(signer, "REFUND", signed_ms=t, uuid=uuid_, tx=payload)
            op = f"n{cid}-{seq}"
            history.add(op=op, kind="refund", type="args", order_id=order_id, tx=tx, uuid=uuid_)
            attempt(op, "refund", lambda i: post_notification(cluster.notify_ports[i], body))
        elif picked and roll < 0.54:
            order_id, account = picked
            tx, t = str(rng.randrange(10**12, 10**13)), now()
            payload = mint.transaction(tx, PRODUCT, product_type=mint.NON_CONSUMABLE, purchase_ms=t - 1000, signed_ms=t,
                                       token=order_id)
            uuid_ = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            body = mint.notification(signer, "ONE_TIME_CHARGE", signed_ms=t, uuid=uuid_, tx=payload)
            op = f"o{cid}-{seq}"
            history.add(op=op, kind="charge", type="args", order_id=order_id, account=account, tx=tx, uuid=uuid_)
            attempt(op, "charge", lambda i: post_notification(cluster.notify_ports[i], body))
        else:
            account = f"acct-{cid}-{rng.randrange(20)}"
            key = f"k{cid}-{seq}"
            op = f"c{cid}-{seq}"
            history.add(op=op, kind="create", type="args", account=account, key=key)
            answer = attempt(op, "create", lambda i: {"order_id": stubs[i].CreateOrder(
                pb.CreateOrderRequest(account_id=account, product_id=PRODUCT, idempotency_key=key), timeout=3).order.order_id})
            if answer:
                shared.add("orders", (answer["order_id"], account))
    for c in channels:
        c.close()


class Feed:
    """The event feed as one reader saw it; the main thread sets `target` (the final largest cursor) at the end."""

    def __init__(self, name):
        self.name = name
        self.start = 0
        self.seen = []  # (cursor, type, account, order_id, notification_uuid)
        self.errors = 0
        self.resumes = 0
        self.caught_up = False

    def record(self, e):
        self.seen.append((e.cursor, e.type, e.account_id, e.order.order_id, e.notification_uuid))
        return e.cursor


def pager(feed, cluster, finish, rng):
    """ListEvents paging with random page sizes; now and then it stops, closes its channel and resumes later,
    on a random replica, from the last cursor it processed."""
    cursor = feed.start
    channel = None
    while not (finish.target is not None and cursor >= finish.target) and not finish.deadline():
        if channel is None or rng.random() < 0.1:
            if channel is not None:
                channel.close()
                feed.resumes += 1
                time.sleep(rng.uniform(0.1, 1.5))
            channel = grpc.insecure_channel(rng.choice(cluster.nodes).address)
        try:
            page = billing(channel).ListEvents(pb.ListEventsRequest(after_cursor=cursor, limit=rng.choice([1, 5, 50, 300])),
                                               timeout=3)
        except grpc.RpcError:
            feed.errors += 1
            channel.close()
            channel = None
            time.sleep(0.1)
            continue
        for e in page.events:
            cursor = feed.record(e)
        if not page.events:
            time.sleep(0.05)
    if channel is not None:
        channel.close()
    feed.caught_up = finish.target is not None and cursor >= finish.target


def watcher(feed, cluster, finish, rng):
    """WatchEvents on a random replica; after an error or its 2-5 s deadline it resumes with after_cursor."""
    cursor = feed.start
    while not (finish.target is not None and cursor >= finish.target) and not finish.deadline():
        channel = grpc.insecure_channel(rng.choice(cluster.nodes).address)
        try:
            for e in billing(channel).WatchEvents(pb.WatchEventsRequest(after_cursor=cursor), timeout=rng.uniform(2, 5)):
                cursor = feed.record(e)
                if finish.target is not None and cursor >= finish.target:
                    break
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                feed.errors += 1
                time.sleep(0.1)
        finally:
            channel.close()
        feed.resumes += 1
    feed.caught_up = finish.target is not None and cursor >= finish.target


class Finish:
    """Set once the writes have stopped: the largest cursor readers must reach, and a time limit to reach it."""

    def __init__(self):
        self.target = None
        self.until = None

    def set(self, target, seconds):
        self.until = time.monotonic() + seconds
        self.target = target

    def deadline(self):
        return self.until is not None and time.monotonic() > self.until


def pause(pids, seconds):
    for sig in (signal.SIGSTOP, signal.SIGCONT):
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        if sig == signal.SIGSTOP:
            time.sleep(seconds)


def nemesis(cluster, history, faults, stop, rng, log):
    """Every 1-3 s one fault. The first round injects every kind once, in a seeded order, even if the run's
    time is up, so that a short run covers them all. A fault that cannot be injected ends the run as an error."""
    try:
        inject(cluster, history, faults, stop, rng, log)
    except Exception as e:  # noqa: BLE001
        log.append(("error", repr(e)))
        raise


def inject(cluster, history, faults, stop, rng, log):
    plan = rng.sample(faults, len(faults))
    while plan or not stop.is_set():
        stop.wait(rng.uniform(1.0, 3.0))
        if not plan and stop.is_set():
            break
        kind = plan.pop(0) if plan else rng.choice(faults)
        length = rng.uniform(1.0, 4.0)
        start = history.add(op="nemesis", kind=kind, type="start")
        if kind == "kill":
            i = rng.randrange(len(cluster.nodes))
            start["target"] = i
            cluster.nodes[i].kill()
            time.sleep(rng.uniform(0.5, 2.0))
            cluster.nodes[i].start()
        elif kind == "pause":
            node = rng.choice(cluster.pg.nodes)
            start["target"] = "primary" if node is cluster.pg.primary else "standby"
            pause(node.pids(), length)
        elif kind == "failover":
            start["target"] = f"{cluster.pg.primary.port}->{cluster.pg.standby.port}"
            cluster.pg.failover()
        else:
            i = rng.randrange(len(cluster.proxies))
            start["target"] = i
            for p in cluster.proxies[i]:
                p.set(kind)
            if kind != "reset":
                time.sleep(length)
                for p in cluster.proxies[i]:
                    p.set("ok")
        end = history.add(op="nemesis", kind=kind, type="end")
        log.append((kind, round(end["t"] - start["t"], 2)))


ORDER_CREATED, ORDER_COMPLETED, ORDER_REFUNDED, ORDER_EXPIRED = 1, 2, 3, 4
PENDING, COMPLETED, REFUNDED = 1, 2, 3


def order_id_of(snapshot):
    """The order id of an event's stored order snapshot: length-prefixed fields ("36:<id>..."), the id first."""
    n, _, rest = snapshot.partition(":")
    return rest[:int(n)] if n.isdigit() else ""


def read_database(pg):
    rows = {}
    for line in pg.psql("SELECT order_id, account_id, product_id, state, coalesce(idempotency_key,''), "
                        "coalesce(transaction_id,'') FROM orders").splitlines():
        oid, acct, prod, state, key, tx = line.split("\t")
        rows[oid] = dict(account=acct, product=prod, state=int(state), key=key, tx=tx)
    txs = {}
    for line in pg.psql("SELECT transaction_id, account_id, coalesce(order_id,'') FROM transactions").splitlines():
        tx, acct, oid = line.split("\t")
        txs[tx] = dict(account=acct, order=oid)
    events = {}
    for line in pg.psql("SELECT feed_cursor, event_type, account_id, coalesce(notification_uuid,''), "
                        "coalesce(order_snapshot,'') FROM events WHERE feed_cursor IS NOT NULL").splitlines():
        cursor, type_, acct, nuuid, snap = line.split("\t")
        events[int(cursor)] = (int(cursor), int(type_), acct, order_id_of(snap), nuuid)
    return rows, txs, events


def check_feed(feeds, rows, events):
    """Every reader: strictly increasing cursors; every event it saw is in the final feed as it saw it; it saw
    every event after its start cursor (no gap, no repeat). The final feed: one ORDER_CREATED per order, one
    ORDER_COMPLETED per paid order (no refund is reversed here), one ORDER_REFUNDED per refunded order, no
    event for an order that does not exist, and no event type twice for one notification UUID."""
    problems = []
    for f in feeds:
        cursors = [s[0] for s in f.seen]
        bad = next((i for i in range(1, len(cursors)) if cursors[i] <= cursors[i - 1]), None)
        if bad is not None:
            problems.append((f"reader {f.name}: cursor not increasing", f.name, [list(s) for s in f.seen[max(0, bad - 2):bad + 2]]))
        wrong = [s for s in f.seen if events.get(s[0]) != s]
        if wrong:
            problems.append((f"reader {f.name}: saw events the final feed does not hold", f.name,
                             [{"seen": list(s), "db": events.get(s[0])} for s in wrong[:5]]))
        missing = sorted(set(c for c in events if c > f.start) - set(cursors))
        if missing or not f.caught_up:
            problems.append((f"reader {f.name}: gap (caught up: {f.caught_up})", f.name,
                             [{"missing": missing[:10], "count": len(missing)}]))
    per_order = {}
    for _, type_, _, oid, _ in events.values():
        if oid:
            per_order.setdefault(oid, []).append(type_)
    for oid in set(per_order) | set(rows):
        r = rows.get(oid)
        got = per_order.get(oid, [])
        if r is None:
            problems.append(("events for an order that does not exist", oid, [{"types": got}]))
            continue
        want = {ORDER_CREATED: 1, ORDER_COMPLETED: int(r["state"] in (COMPLETED, REFUNDED)),
                ORDER_REFUNDED: int(r["state"] == REFUNDED), ORDER_EXPIRED: 0}
        have = {t: got.count(t) for t in want}
        if have != want:
            problems.append(("order events do not match the order's changes", oid, [{"db": r, "want": want, "have": have}]))
    by_uuid = {}
    for c, type_, _, _, nuuid in events.values():
        if nuuid:
            by_uuid.setdefault(nuuid, []).append(type_)
    for nuuid, types in by_uuid.items():
        if len(types) != len(set(types)):
            problems.append(("one notification wrote an event type twice", nuuid, [{"types": types}]))
    return problems


def check(history, pg, feeds):
    """Verdict over the history, the readers' feeds and the final database. Answers (problems, counts, ...)."""
    ev = history.events
    ops = {}
    for e in ev:
        if e["op"] != "nemesis":
            ops.setdefault(e["op"], []).append(e)
    rows, txs, events = read_database(pg)
    problems = check_feed(feeds, rows, events)
    refunded = {}  # tx -> outcome of REFUND deliveries for it: any attempt, and acknowledged
    for es in ops.values():
        if es[0]["kind"] == "refund":
            r = refunded.setdefault(es[0]["tx"], {"tried": True, "ok": False})
            r["ok"] = r["ok"] or any(e["type"] == "ok" for e in es)
    counts = {k: {} for k in ("create", "submit", "restore", "refund", "charge")}
    reasons = {}
    by_key = {}  # (account, key) -> order ids in the database
    for oid, r in rows.items():
        by_key.setdefault((r["account"], r["key"]), []).append(oid)
    for op, es in ops.items():
        args = es[0]
        kind = args["kind"]
        oks = [e for e in es if e["type"] == "ok"]
        fails = [e for e in es if e["type"] == "fail"]
        final = [e for e in es if e["type"] in ("ok", "fail")]
        unknowns = sum(1 for e in es if e["type"] == "unknown")
        outcome = final[-1]["type"] if final else "unknown"
        if outcome != "unknown" and unknowns:
            outcome += "-after-unknown"
        counts[kind][outcome] = counts[kind].get(outcome, 0) + 1
        r = rows.get(args.get("order_id"))
        if kind == "create":
            ids = {e["order_id"] for e in oks}
            if len(ids) > 1:
                problems.append(("idempotency key answered two orders", op, es))
            for oid in ids:
                r = rows.get(oid)
                if r is None or r["account"] != args["account"] or r["key"] != args["key"] or r["product"] != PRODUCT:
                    problems.append(("acknowledged order missing or wrong", op, es + [{"db": r}]))
            if len(by_key.get((args["account"], args["key"]), [])) > 1:
                problems.append(("one key, several orders in the database", op, es))
        elif kind == "submit":
            refund = refunded.get(args["tx"])
            states = (COMPLETED, REFUNDED) if refund else (COMPLETED,)
            if oks:
                t = txs.get(args["tx"])
                if r is None or r["state"] not in states or r["tx"] != args["tx"] or t is None or t["order"] != args["order_id"]:
                    problems.append(("acknowledged completion not in the database", op, es + [{"db": r, "tx": t}]))
            if fails:
                reason = fails[-1]["reason"]
                reasons[reason] = reasons.get(reason, 0) + 1
                if r and r["tx"] == args["tx"] and not (refund and reason == "TRANSACTION_REVOKED"):
                    problems.append(("refused, yet credited to this order", op, es + [{"db": r}]))
        elif kind == "refund":
            if oks and (r is None or r["state"] != REFUNDED or r["tx"] != args["tx"]):
                problems.append(("acknowledged REFUND, order not REFUNDED", op, es + [{"db": r}]))
            if fails:
                problems.append(("a valid notification was refused", op, es))
        elif kind == "charge":
            if oks and (r is None or r["state"] == PENDING or args["tx"] not in txs):
                problems.append(("acknowledged ONE_TIME_CHARGE, order still pending or transaction not recorded", op,
                                 es + [{"db": r, "tx": txs.get(args["tx"])}]))
            if fails:
                problems.append(("a valid notification was refused", op, es))
        elif kind == "restore":
            for e in oks:
                for tx in e["latest"]:
                    if txs.get(tx, {}).get("account") != args["account"]:
                        problems.append(("restore answered a purchase the account does not own", op,
                                         es + [{"tx": tx, "db": txs.get(tx)}]))
    # No transaction credits two orders or two accounts.
    by_tx = {}
    for oid, r in rows.items():
        if r["tx"]:
            by_tx.setdefault(r["tx"], []).append(oid)
    for tx, oids in by_tx.items():
        if len(oids) > 1 or {rows[o]["account"] for o in oids} != {txs.get(tx, {}).get("account")}:
            problems.append(("transaction credits two orders or accounts", tx,
                             [e for e in ev if e.get("tx") == tx or e.get("order_id") in oids]))
    unresolved = sum(c.get("unknown", 0) for c in counts.values())
    counts["submit refusals"] = reasons
    summary = dict(orders=len(rows), credited=len(by_tx), refunded=sum(1 for r in rows.values() if r["state"] == REFUNDED),
                   events=len(events), feeds={f.name: dict(events=len(f.seen), resumes=f.resumes, errors=f.errors)
                                              for f in feeds})
    return problems, counts, unresolved, summary


LOST = ("acknowledged order missing or wrong", "acknowledged completion not in the database",
        "acknowledged REFUND, order not REFUNDED", "acknowledged ONE_TIME_CHARGE, order still pending or transaction not recorded")


def tally(counts, problems):
    """The verdict's counts: operations acknowledged (ok, also after an unknown); acknowledged writes the final
    database lost (plus feed events a reader saw that the final feed lost); transactions credited to two orders or
    accounts; keys with two orders; operations that had an unknown attempt, resolved by a later definite answer
    (ok or refused) or still unknown after the retries."""
    kinds = ("create", "submit", "restore", "refund", "charge")
    acked = {k: counts[k].get("ok", 0) + counts[k].get("ok-after-unknown", 0) for k in kinds}
    whats = [p[0] for p in problems]
    return dict(acknowledged=sum(acked.values()), acknowledged_by_kind=acked,
                lost=sum(w in LOST for w in whats) + sum("saw events the final feed does not hold" in w for w in whats),
                duplicated_credits=whats.count("transaction credits two orders or accounts"),
                duplicate_orders=whats.count("one key, several orders in the database")
                + whats.count("idempotency key answered two orders"),
                unknown_resolved=sum(counts[k].get(o, 0) for k in kinds for o in ("ok-after-unknown", "fail-after-unknown")),
                unknown_unresolved=sum(counts[k].get("unknown", 0) for k in kinds))


def unavailability(history):
    """Per fault kind, the longest time the clients got no acknowledged answer (ok) from any replica: the longest
    interval between consecutive ok answers that overlaps a fault window of that kind (start to end of the
    injection, restart or heal included). "none": the longest such interval overlapping no fault, the baseline."""
    oks = sorted(e["t"] for e in history.events if e["type"] == "ok")
    windows, open_ = [], {}
    for e in history.events:
        if e["op"] == "nemesis":
            if e["type"] == "start":
                open_[e["kind"]] = e["t"]  # one fault at a time
            elif e["kind"] in open_:
                windows.append((e["kind"], open_.pop(e["kind"]), e["t"]))
    gaps = [(b - a, a, b) for a, b in zip(oks, oks[1:])]
    longest, faulty = {}, set()
    for kind, start, end in windows:
        j = max(0, bisect.bisect_right(oks, start) - 1)  # the interval that holds the fault's start
        while j < len(gaps) and gaps[j][1] < end:
            if gaps[j][2] > start:
                longest[kind] = max(longest.get(kind, 0.0), gaps[j][0])
                faulty.add(j)
            j += 1
    calm = [g[0] for j, g in enumerate(gaps) if j not in faulty]
    if calm:
        longest["none"] = max(calm)
    return {k: round(v, 2) for k, v in sorted(longest.items(), key=lambda kv: -kv[1])}


def wait_numbered(pg, timeout=30):
    """Until every committed event has its cursor (the replicas' sequencers number within about 250 ms)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pg.psql("SELECT count(*) FROM events WHERE feed_cursor IS NULL").strip() == "0":
            break
        time.sleep(0.2)
    return int(pg.psql("SELECT coalesce(max(feed_cursor), 0) FROM events").strip())


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--faults", default=",".join(ALL_FAULTS))
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--retries", type=int, default=8)
    ap.add_argument("--history", default=None, help="write the history (and each reader's feed) as JSON lines here")
    a = ap.parse_args(argv)
    faults = [f for f in a.faults.split(",") if f]
    assert all(f in ALL_FAULTS for f in faults), faults
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    print(f"nemesis: seed {seed}, {a.seconds:.0f} s, faults {faults}, {a.clients} clients", flush=True)
    began = time.monotonic()
    pg = Postgres()
    store = tempfile.mkdtemp(prefix="nemesis-store-")
    cluster = None
    try:
        subprocess.run([binary("billingctl"), "teststore", "init", store], check=True, capture_output=True)
        signer = mint.Signer(store)
        cluster = Cluster(pg, store)
        history = History()
        stop, nem_stop, finish = threading.Event(), threading.Event(), Finish()
        shared, injected = Shared(), []
        feeds = [Feed("pager"), Feed("watcher")]
        readers = [threading.Thread(target=fn, args=(f, cluster, finish, random.Random(seed - k - 1)), daemon=True)
                   for k, (fn, f) in enumerate(zip((pager, watcher), feeds))]
        threads = [threading.Thread(target=client, args=(c, cluster, history, signer, shared, stop,
                                                         random.Random(seed + c + 1), a.retries), daemon=True)
                   for c in range(a.clients)]
        nem = threading.Thread(target=nemesis, args=(cluster, history, faults, nem_stop, random.Random(seed), injected),
                               daemon=True)
        for t in threads + readers:
            t.start()
        nem.start()
        time.sleep(a.seconds)
        nem_stop.set()
        nem.join(timeout=120)
        for p in cluster.all_proxies():
            p.set("ok")
        time.sleep(2)  # healed: the clients' retries resolve their unknowns
        stop.set()
        for t in threads:
            t.join(timeout=120)
        finish.set(wait_numbered(pg), 60)
        for t in readers:
            t.join(timeout=90)
        errors = [d for k, d in injected if k == "error"]
        if errors:
            print(f"VERDICT: ERROR: the nemesis failed: {errors}")
            return 2
        problems, counts, unresolved, summary = check(history, pg, feeds)
        gaps = unavailability(history)
        kinds = {k: sum(1 for i in injected if i[0] == k) for k in faults}
        print(f"faults injected: {kinds}; failover durations (s): {[d for k, d in injected if k == 'failover']}")
        print(f"operations: {json.dumps(counts)}")
        print(f"database: {json.dumps(summary)}; unresolved unknowns: {unresolved}")
        print(f"longest unavailability (s) by fault kind, no acknowledged answer from any replica: {gaps}")
        t = tally(counts, problems)
        print(f"counts: acknowledged {t['acknowledged']} {json.dumps(t['acknowledged_by_kind'])}, lost {t['lost']}, "
              f"duplicated credits {t['duplicated_credits']}, duplicate orders {t['duplicate_orders']}, "
              f"unknown resolved {t['unknown_resolved']}, unknown unresolved {t['unknown_unresolved']}")
        print(f"duration: {time.monotonic() - began:.1f} s")
        if a.history:
            with open(a.history, "w") as f:
                for e in history.events:
                    f.write(json.dumps(e) + "\n")
                for fd in feeds:
                    f.write(json.dumps({"reader": fd.name, "start": fd.start, "seen": fd.seen}) + "\n")
        if problems:
            print(f"VERDICT: INVALID ({len(problems)} problems)")
            what, key, slice_ = min(problems, key=lambda p: len(p[2]))
            print(f"smallest failing slice: {what}: {key}")
            for e in slice_:
                print("   ", json.dumps(e))
            for what, key, _ in problems[:10]:
                print(f"  problem: {what}: {key}")
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
                shutil.rmtree(n.dir, ignore_errors=True)
            for p in cluster.all_proxies():
                p.close()
        pg.stop()
        shutil.rmtree(store, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
