"""After the sale under load, on PostgreSQL: a storm of App Store Server Notifications (shuffled, 30 %
redelivered, 8 threads, two replicas on one database; once more with kill -9 of a replica mid-storm) about
subscriptions that renew, switch auto-renew, upgrade mid-period (the superseded transaction re-signed isUpgraded),
downgrade at the next renewal, are refunded or expire, and Family Sharing grants that are revoked, ends in exactly
the orders and entitlements that the same notifications give, posted once each in signedDate order, to one fresh
billingd. Events say what changed, so shuffled delivery writes other events than in-order delivery: every event list
keeps the rules (a REVOKED snapshot for ENTITLEMENT_REVOKED, one ENTITLEMENT_GRANTED per entitlement, RENEWED only
for a later expiry, each order completed once), and the in-order reference writes exactly what each lifecycle
expects. WatchEvents resumed 100 times across replicas misses and repeats nothing; and its commit-to-delivery delay,
on one replica and across replicas.

Every signedDate is in the past (billingd refuses one more than --clock-skew ahead): each lifecycle ends 1 to 60 days
ago, with no expiry within a day of the clock.

Sizes: BILLING_STORM_NOTIFICATIONS (distinct notifications, 10 per original transaction on average),
BILLING_STORM_WATCH_OPS (writer operations of the watcher test). Run with -s for the numbers."""
import collections
import http.client
import json
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

import appstore_mint as mint
from conftest import Billingd, binary, free_port, postgres_database
from helpers import billing, pb

NOTIFICATIONS = int(os.environ.get("BILLING_STORM_NOTIFICATIONS", "10000"))
TRANSACTIONS = max(1, NOTIFICATIONS // 10)
ACCOUNTS = max(1, TRANSACTIONS // 10)
DUPLICATES = 0.30
THREADS = 8
WATCH_OPS = int(os.environ.get("BILLING_STORM_WATCH_OPS", "600"))
MONTHLY = "com.example.pro.monthly"
PLUS = "com.example.proplus.monthly"  # what some lifecycles upgrade to, in the middle of a period
BASIC = "com.example.basic.monthly"  # what some lifecycles downgrade to, at the next renewal
PREMIUM = "com.example.premium"
DAY = 86_400_000
HOUR = 3_600_000
PATH = "/appstore/notifications"
HEADERS = {"content-type": "application/json"}
SEED = int(os.environ.get("BILLING_STORM_SEED", "20251"))


# ---------------------------------------------------------------------------------------------------
# Plan: lifecycles as data (order index instead of order id), minted per database.

def lifecycle(i, budget, rng, now):
    """`budget` notifications about one subscription (original transaction), bought through order i, and maybe a
    Family Sharing grant of another one; with what in-order delivery must write and leave (see `expect`).

    SUBSCRIBED (appAccountToken = order i) at the lifecycle's start; DID_RENEWs every 30 days (new transaction ids,
    same original, later signedDates); maybe an upgrade to PLUS in the middle of a period (DID_CHANGE_RENEWAL_PREF/
    UPGRADE with the new product's transaction and renewal info, then the superseded transaction re-signed isUpgraded
    eight hours later, as a REFUND_DECLINED carries it), or a downgrade (DID_CHANGE_RENEWAL_PREF/DOWNGRADE: renewal
    info whose autoRenewProductId is BASIC; every later renewal is of BASIC); DID_CHANGE_RENEWAL_STATUS switching
    auto-renew off / on at random points, each with the transaction and renewal info of its time; maybe a
    FAMILY_SHARED subscription of its own original transaction (SUBSCRIBED naming order i, which it cannot pay) and
    its REVOKE ten days later; maybe a REFUND of the first transaction and maybe EXPIRED after the last period.

    The whole timeline ends 1 to 60 days before `now` (billingd refuses a signedDate more than --clock-skew ahead),
    and no expiry falls within a day of `now`, so whether a period is over is the same when the plan is made, posted
    and read. Every signedDate is distinct: offsets are whole hours and each lifecycle's start is i * 20 ms off the
    hour."""
    original = 2_000_000_000 + i * 100
    rest = budget - 1
    refund = rest > 0 and rng.random() < 1 / 3
    rest -= refund
    expired = rest > 0 and rng.random() < 1 / 4
    rest -= expired
    family = rest > 0 and rng.random() < 1 / 5
    rest -= family
    revoke = family and rest > 0 and rng.random() < 1 / 2
    rest -= revoke
    upgrade = rest >= 2 and rng.random() < 1 / 4
    rest -= 2 * upgrade
    downgrade = not upgrade and rest > 0 and rng.random() < 1 / 4
    rest -= downgrade
    status = min(rest, rng.randint(0, 3))
    renewals = rest - status
    if renewals > 8:
        status, renewals = status + renewals - 8, 8

    # Periods, as offsets from the start: the purchase, then one per renewal 30 days after the previous one began;
    # an upgrade begins one 15 days into the period it supersedes; renewals after the downgrade's period are BASIC.
    steps = ["renew"] * renewals
    if upgrade:
        steps.insert(rng.randint(0, renewals), "upgrade")
    down = rng.randint(0, renewals) if downgrade else None
    periods = [dict(product=MONTHLY, start=0, via="SUBSCRIBED")]
    for how in steps:
        prev = periods[-1]
        if how == "upgrade":
            periods.append(dict(product=PLUS, start=prev["start"] + 15 * DAY, via="UPGRADE"))
        else:
            product = BASIC if down is not None and len(periods) - 1 >= down else prev["product"]
            periods.append(dict(product=product, start=prev["start"] + 30 * DAY, via="DID_RENEW"))
    for p, q in enumerate(periods):
        q["tid"] = str(original + p)
    last = len(periods) - 1
    slots = sorted(rng.sample([(p, h) for p in range(len(periods)) for h in range(1, 6)], status))
    fam = periods[rng.randrange(len(periods))]["start"] + 9 * HOUR if family else None
    end = periods[last]["start"] + 12 * HOUR

    # Where the timeline sits: it ends 1 to 60 days ago, no expiry within a day of now.
    length = max([end + 2 * HOUR] + ([fam + 10 * DAY] if family else []))
    expiries = [q["start"] + 30 * DAY for q in periods] + ([fam + 30 * DAY] if family else [])
    hour = (now // HOUR) * HOUR
    while True:
        base = hour - HOUR - length - rng.randint(1, 60) * DAY
        if all(abs(base + x - now) > DAY for x in expiries):
            break
    base += i * 20

    def at(offset):
        return base + offset

    def tx(p, signed=None, **extra):
        q = periods[p]
        return dict(transaction_id=q["tid"], original=str(original), product_id=q["product"], purchase_ms=at(q["start"]),
                    expires_ms=at(q["start"] + 30 * DAY), token=i, signed_ms=at(q["start"]) if signed is None else signed,
                    extra=extra)

    status_times = [at(periods[p]["start"] + h * HOUR) for p, h in slots]
    down_time = at(periods[down]["start"] + 7 * HOUR) if downgrade else None

    def auto_at(t):
        """Auto-renew at `t`: on until the first change; the k-th change sets it to k odd."""
        value = True
        for k, st in enumerate(status_times):
            if st < t:
                value = bool(k % 2)
        return value

    def renewal_at(t, auto):
        """The renewal info Apple signs at `t`: the product then, the product of the next renewal (BASIC once the
        downgrade was asked for, else the product then)."""
        p = max(p for p, q in enumerate(periods) if at(q["start"]) <= t)
        upcoming = BASIC if downgrade and t >= down_time else periods[p]["product"]
        return dict(original=str(original), product_id=periods[p]["product"], auto_renew=auto, signed_ms=t, next=upcoming)

    main = str(original)
    first = "ENTITLEMENT_GRANTED" if at(30 * DAY) > now else "ENTITLEMENT_EXPIRED"
    notes = [dict(type="SUBSCRIBED", subtype="INITIAL_BUY", signed=at(0), tx=tx(0),
                  expect={main: [first], "order": ["ORDER_COMPLETED"]})]
    for p in range(1, len(periods)):
        q, t = periods[p], at(periods[p]["start"])
        if q["via"] == "UPGRADE":
            notes.append(dict(type="DID_CHANGE_RENEWAL_PREF", subtype="UPGRADE", signed=t, tx=tx(p), renewal=renewal_at(t, auto_at(t)),
                              expect={main: ["ENTITLEMENT_PRODUCT_CHANGED", "ENTITLEMENT_RENEWED"]}))
            notes.append(dict(type="REFUND_DECLINED", subtype=None, signed=t + 8 * HOUR, tx=tx(p - 1, t + 8 * HOUR, isUpgraded=True),
                              expect={main: []}))
        else:
            changed = ["ENTITLEMENT_PRODUCT_CHANGED"] if q["product"] != periods[p - 1]["product"] else []
            notes.append(dict(type="DID_RENEW", subtype=None, signed=t, tx=tx(p), expect={main: changed + ["ENTITLEMENT_RENEWED"]}))
    for k, ((p, _), t) in enumerate(zip(slots, status_times)):
        notes.append(dict(type="DID_CHANGE_RENEWAL_STATUS", subtype="AUTO_RENEW_ENABLED" if k % 2 else "AUTO_RENEW_DISABLED",
                          signed=t, tx=tx(p), renewal=renewal_at(t, bool(k % 2)), expect={main: ["RENEWAL_STATUS_CHANGED"]}))
    if downgrade:
        notes.append(dict(type="DID_CHANGE_RENEWAL_PREF", subtype="DOWNGRADE", signed=down_time, tx=tx(down),
                          renewal=renewal_at(down_time, auto_at(down_time)), expect={main: ["RENEWAL_PRODUCT_CHANGED"]}))
    shared = str(original + 50)
    if family:
        shares = dict(transaction_id=str(original + 50), original=str(original + 50), product_id=MONTHLY, purchase_ms=at(fam),
                      expires_ms=at(fam + 30 * DAY), token=i, signed_ms=at(fam), extra=dict(inAppOwnershipType="FAMILY_SHARED"))
        notes.append(dict(type="SUBSCRIBED", subtype="INITIAL_BUY", signed=at(fam), tx=shares,
                          expect={shared: ["ENTITLEMENT_GRANTED" if at(fam + 30 * DAY) > now else "ENTITLEMENT_EXPIRED"]}))
        if revoke:
            t = at(fam + 10 * DAY)
            notes.append(dict(type="REVOKE", subtype=None, signed=t, expect={shared: ["ENTITLEMENT_REVOKED"]},
                              tx=dict(shares, revocation_ms=t, revocation_reason=0, signed_ms=t,
                                      extra=dict(inAppOwnershipType="FAMILY_SHARED", revocationType="FAMILY_REVOKE"))))
    # The refund of the first transaction revokes the entitlement only while that transaction is its current one.
    alone = len(periods) == 1
    if refund:
        t = at(end + HOUR)
        upgraded = dict(isUpgraded=True) if len(periods) > 1 and periods[1]["via"] == "UPGRADE" else {}
        notes.append(dict(type="REFUND", subtype=None, signed=t,
                          tx=dict(tx(0, t, revocationType="REFUND_FULL", **upgraded), revocation_ms=t, revocation_reason=0),
                          expect={"order": ["ORDER_REFUNDED"], main: ["ENTITLEMENT_REVOKED"] if alone else []}))
    if expired:
        notes.append(dict(type="EXPIRED", subtype="VOLUNTARY", signed=at(end + 2 * HOUR), tx=tx(last),
                          expect={main: [] if refund and alone else ["ENTITLEMENT_EXPIRED"]}))
    for n in notes:
        n["uuid"] = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        n.setdefault("renewal", None)
    assert len(notes) == budget

    # What in-order delivery writes (order events of order i; entitlement events per original transaction) and leaves.
    events = {"order": ["ORDER_CREATED"], main: []}
    if family:
        events[shared] = []
    for n in sorted(notes, key=lambda n: n["signed"]):
        for key, kinds in n["expect"].items():
            events[key] += kinds
    revoked = at(end + HOUR) if refund and alone else 0
    expires = at(periods[last]["start"] + 30 * DAY)
    state = ("REVOKED" if revoked else "EXPIRED" if expired or expires <= now else "ACTIVE")
    entitlements = [ent(str(original), periods[last]["tid"], expires, auto_at(now), revoked, periods[last]["product"], state,
                        BASIC if downgrade and down == last else "", "PURCHASED", i)]
    if family:
        gone = at(fam + 10 * DAY) if revoke else 0
        state = "REVOKED" if revoke else "ACTIVE" if at(fam + 30 * DAY) > now else "EXPIRED"
        entitlements.append(ent(str(original + 50), str(original + 50), at(fam + 30 * DAY), True, gone, MONTHLY, state, "",
                                "FAMILY_SHARED", None))
    return notes, dict(original=str(original), periods=len(periods), refund=refund, expired=expired, upgrade=upgrade,
                       downgrade=downgrade, family=family, revoke=revoke, account=i % ACCOUNTS, events=events,
                       entitlements=entitlements)


def ent(original, latest, expires, auto_renew, revoked, product, state, pending, ownership, order):
    """An entitlement as the snapshots compare it (`order`: the index of its order in the plan, None without one)."""
    return (original, latest, expires, state in ("ACTIVE", "GRACE_PERIOD"), auto_renew, revoked, product,
            "ENTITLEMENT_STATE_" + state, pending, "OWNERSHIP_" + ownership, order)


class Plan:
    """`NOTIFICATIONS` distinct notifications over `TRANSACTIONS` lifecycles, one order each on `ACCOUNTS` accounts."""

    def __init__(self, seed=SEED):
        rng = random.Random(seed)
        now = int(time.time() * 1000)
        budgets = [1] * TRANSACTIONS
        for _ in range(NOTIFICATIONS - TRANSACTIONS):
            budgets[rng.randrange(TRANSACTIONS)] += 1
        self.notes, self.lifecycles = [], []
        for i, b in enumerate(budgets):
            notes, shape = lifecycle(i, b, rng, now)
            self.notes += notes
            self.lifecycles.append(shape)
        signed = [n["signed"] for n in self.notes]
        assert len(set(signed)) == len(signed), "signedDates must be distinct"
        assert max(signed) < now, "every signedDate in the past"
        assert len(self.notes) == max(NOTIFICATIONS, TRANSACTIONS)
        self.accounts = [f"acct-{a}" for a in range(ACCOUNTS)]
        self.rng = rng

    def account(self, i):
        return self.accounts[i % ACCOUNTS]

    def mint(self, signer, order_ids):
        """uuid -> HTTP body, with appAccountToken = that database's order id."""
        out = {}
        for n in self.notes:
            t = dict(n["tx"])
            extra = t.pop("extra")
            t["token"] = order_ids[t["token"]]
            tx = mint.transaction(t.pop("transaction_id"), t.pop("product_id"), **t)
            tx.update(extra)
            renewal = None
            if n["renewal"]:
                r = dict(n["renewal"])
                upcoming = r.pop("next")
                renewal = mint.renewal(**r)
                renewal["autoRenewProductId"] = upcoming
            out[n["uuid"]] = mint.body(mint.notification(signer, n["type"], subtype=n["subtype"], uuid=n["uuid"],
                                                         signed_ms=n["signed"], tx=tx, renewal_info=renewal))
        return out

    def storm(self, seed):
        """Every uuid once, plus 30 % redeliveries, shuffled."""
        rng = random.Random(seed)
        uuids = [n["uuid"] for n in self.notes]
        deliveries = uuids + rng.sample(uuids, int(len(uuids) * DUPLICATES))
        rng.shuffle(deliveries)
        return deliveries


@pytest.fixture(scope="module")
def plan():
    return Plan()


@pytest.fixture(scope="module")
def store_dir():
    d = tempfile.mkdtemp(prefix="storm-store-")
    subprocess.run([binary("billingctl"), "teststore", "init", d], check=True, capture_output=True)
    yield d
    shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------
# Processes, orders, delivery, snapshots.

class Node(Billingd):
    """billingd with the notifications endpoint on a port of its own (kept across restarts)."""

    def __init__(self, store, database):
        self.notify_port = free_port()
        super().__init__("--dev", "--dev-store", store, "--bundle-id", mint.BUNDLE,
                         "--notifications-listen", f"127.0.0.1:{self.notify_port}", database=database)

    def start(self):
        super().start()
        deadline = time.time() + 15
        while time.time() < deadline:
            try:
                with __import__("socket").create_connection(("127.0.0.1", self.notify_port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)


def cluster(n, store, database=None):
    database = database or postgres_database()
    nodes = [Node(store, database) for _ in range(n)]
    return database, nodes


def shutdown(nodes, channels=()):
    for c in channels:
        c.close()
    for n in nodes:
        n.stop()


def create_orders(stubs, plan):
    """One PENDING order per lifecycle, through every replica in turn; returns their ids in plan order."""
    def create(i):
        return stubs[i % len(stubs)].CreateOrder(
            pb.CreateOrderRequest(account_id=plan.account(i), product_id=MONTHLY, idempotency_key=f"storm-{i}"),
            timeout=30).order.order_id
    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(create, range(TRANSACTIONS)))


class Poster:
    """POSTs bodies over HTTP/1.1 keep-alive, one connection per replica; Apple-style redelivery:
    anything but 200 (connection error, 5xx) is retried with backoff, up to `attempts` times."""

    def __init__(self, nodes, attempts=1, deadline=None):
        self.nodes, self.attempts, self.deadline = nodes, attempts, deadline
        self.conns = [None] * len(nodes)

    def _conn(self, k):
        if self.conns[k] is None:
            self.conns[k] = http.client.HTTPConnection("127.0.0.1", self.nodes[k].notify_port, timeout=30)
        return self.conns[k]

    def post(self, body, first, stats):
        """Delivers until 200; returns the answer's result (applied, duplicate, ignored) or raises."""
        backoff = 0.02
        for attempt in range(self.attempts):
            k = (first + attempt) % len(self.nodes)
            try:
                c = self._conn(k)
                c.request("POST", PATH, body=body, headers=HEADERS)
                r = c.getresponse()
                data = r.read()
                if r.status == 200:
                    return json.loads(data)["result"]
                if r.status < 500:
                    raise AssertionError(f"HTTP {r.status} {data!r}")
                stats[f"http {r.status}"] += 1
            except (OSError, http.client.HTTPException) as e:
                stats[type(e).__name__] += 1
                if self.conns[k] is not None:
                    self.conns[k].close()
                    self.conns[k] = None
            if attempt + 1 == self.attempts or (self.deadline and time.time() > self.deadline):
                break
            time.sleep(backoff)
            backoff = min(backoff * 2, 0.5)
        raise AssertionError(f"no 200 after {attempt + 1} attempts: {dict(stats)}")

    def close(self):
        for c in self.conns:
            if c is not None:
                c.close()


def storm(nodes, bodies, deliveries, attempts, during=None):
    """Posts `deliveries` from THREADS threads, alternating replicas. `during(progress)` runs on the caller's
    thread while they post. Returns (results Counter, retried Counter, seconds)."""
    results, retried = collections.Counter(), collections.Counter()
    lock = threading.Lock()
    done = [0]
    errors = []
    deadline = time.time() + 300

    def worker(w):
        poster = Poster(nodes, attempts=attempts, deadline=deadline)
        mine, stats = collections.Counter(), collections.Counter()
        try:
            for j in range(w, len(deliveries), THREADS):
                mine[poster.post(bodies[deliveries[j]], j % len(nodes), stats)] += 1
                with lock:
                    done[0] += 1
        except Exception as e:  # reported below, with the thread's counts
            errors.append(repr(e))
        finally:
            poster.close()
            with lock:
                results.update(mine)
                retried.update(stats)

    started = time.time()
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(THREADS)]
    for t in threads:
        t.start()
    if during:
        during(lambda: done[0] / len(deliveries))
    for t in threads:
        t.join(timeout=max(1, deadline - time.time()))
    assert not any(t.is_alive() for t in threads), "storm threads hung"
    assert not errors, errors[:5]
    return results, retried, time.time() - started


def list_events(stub):
    events, cursor = [], 0
    while True:
        page = stub.ListEvents(pb.ListEventsRequest(after_cursor=cursor, limit=1000), timeout=30)
        events += page.events
        if not page.events:
            return events
        cursor = page.next_cursor


Event = collections.namedtuple("Event", "cursor type account order order_state original expires state active cause change")


def event_row(e):
    """An event as the checks read it: its type, its order (id, state) and its entitlement snapshot, by name."""
    o, x = e.order, e.entitlement
    return Event(e.cursor, pb.EventType.Name(e.type)[len("EVENT_TYPE_"):], e.account_id, o.order_id,
                 pb.OrderState.Name(o.state), x.original_transaction_id, x.expires_time_ms,
                 pb.EntitlementState.Name(x.state), x.active, e.cause, (e.cause, e.notification_uuid, e.time_ms))


def snapshot(stub, order_ids, plan):
    index = {oid: i for i, oid in enumerate(order_ids)}

    def order(oid):
        o = stub.GetOrder(pb.GetOrderRequest(order_id=oid), timeout=30).order
        return pb.OrderState.Name(o.state), o.transaction_id, o.refunded_quantity

    def entitlements(account):
        es = stub.GetEntitlements(pb.GetEntitlementsRequest(account_id=account, include_inactive=True), timeout=30).entitlements
        return sorted((e.original_transaction_id, e.latest_transaction_id, e.expires_time_ms, e.active, e.auto_renew,
                       e.revocation_time_ms, e.product_id, pb.EntitlementState.Name(e.state), e.pending_product_id,
                       pb.Ownership.Name(e.ownership), index.get(e.order_id)) for e in es)
    with ThreadPoolExecutor(THREADS) as pool:
        orders = list(pool.map(order, order_ids))
        ents = dict(zip(plan.accounts, pool.map(entitlements, plan.accounts)))
    events = [event_row(e) for e in list_events(stub)]
    types = collections.Counter(e.type for e in events)
    cursors = [e.cursor for e in events]
    assert all(a < b for a, b in zip(cursors, cursors[1:])), "ListEvents cursors not strictly increasing"
    return dict(orders=orders, entitlements=ents, events=events, types=types)


def check_invariants(name, snap, order_ids):
    """What every event list must satisfy, whatever order the notifications came in (DESIGN "Subscriptions as the
    stores model them": an event says what changed, and its snapshot agrees with its type):
    - ENTITLEMENT_REVOKED carries a REVOKED entitlement, ENTITLEMENT_GRANTED an active one; `active` agrees with `state`;
    - ENTITLEMENT_GRANTED at most once per account and original transaction;
    - ENTITLEMENT_RENEWED only when the expiry moved forward from the snapshot of that entitlement before the change
      (the events of one change, e.g. PRODUCT_CHANGED and RENEWED of one renewal, carry the same snapshot);
    - per order: CREATED first; COMPLETED once from PENDING (the purchase), and again only after REFUNDED (a
      reversal); REFUNDED only from COMPLETED; each order event's snapshot in the state it moved to."""
    granted = collections.Counter()
    before, last = {}, {}
    orders, purchases = {}, collections.Counter()
    problems = []
    for e in snap["events"]:
        key = (e.account, e.original)
        if not e.type.startswith("ORDER_"):
            if e.active != (e.state in ("ENTITLEMENT_STATE_ACTIVE", "ENTITLEMENT_STATE_GRACE_PERIOD")):
                problems.append(("active disagrees with state", e))
            if e.type == "ENTITLEMENT_REVOKED" and e.state != "ENTITLEMENT_STATE_REVOKED":
                problems.append(("REVOKED snapshot not REVOKED", e))
            if e.type == "ENTITLEMENT_GRANTED":
                granted[key] += 1
                if granted[key] > 1:
                    problems.append(("GRANTED twice", e))
                if not e.active:
                    problems.append(("GRANTED inactive", e))
            if key in last and last[key].change != e.change:
                before[key] = last[key]
            if e.type == "ENTITLEMENT_RENEWED" and (key not in before or e.expires <= before[key].expires):
                problems.append(("RENEWED without a later expiry", before.get(key), e))
            last[key] = e
            continue
        state = orders.get(e.order)
        moves = {"ORDER_CREATED": ({None}, "ORDER_STATE_PENDING"),
                 "ORDER_COMPLETED": ({"ORDER_STATE_PENDING", "ORDER_STATE_REFUNDED"}, "ORDER_STATE_COMPLETED"),
                 "ORDER_REFUNDED": ({"ORDER_STATE_COMPLETED"}, "ORDER_STATE_REFUNDED"),
                 "ORDER_PARTIALLY_REFUNDED": ({"ORDER_STATE_COMPLETED"}, "ORDER_STATE_COMPLETED"),
                 "ORDER_EXPIRED": ({"ORDER_STATE_PENDING"}, "ORDER_STATE_EXPIRED")}
        if e.type not in moves or state not in moves[e.type][0] or e.order_state != moves[e.type][1]:
            problems.append((f"order event from {state}", e))
        if e.type == "ORDER_COMPLETED" and state == "ORDER_STATE_PENDING":
            purchases[e.order] += 1
        orders[e.order] = e.order_state
    assert not problems, f"{name}: {len(problems)} events break the rules, e.g. {problems[:3]}"
    unpaid = [o for o in order_ids if purchases[o] != 1]
    assert not unpaid, f"{name}: {len(unpaid)} orders not completed exactly once from PENDING, e.g. {unpaid[0]}"


def compare(name, got, want):
    """The storm's end state is the reference's: orders and entitlements. Events are not compared: they say what
    changed, so a late, older view that changes nothing writes nothing, and a subscription first seen through a
    later renewal is granted then (shuffled delivery writes other events than in-order delivery)."""
    diffs = [i for i, (a, b) in enumerate(zip(got["orders"], want["orders"])) if a != b]
    assert not diffs, f"{name}: {len(diffs)} orders differ, e.g. order {diffs[0]}: {got['orders'][diffs[0]]} vs {want['orders'][diffs[0]]}"
    bad = [a for a in want["entitlements"] if got["entitlements"][a] != want["entitlements"][a]]
    assert not bad, (f"{name}: entitlements of {len(bad)} accounts differ, e.g. {bad[0]}:\n"
                     f"{got['entitlements'][bad[0]]}\nvs reference\n{want['entitlements'][bad[0]]}")



@pytest.fixture(scope="module")
def reference(plan, store_dir):
    """One fresh billingd and database; every distinct notification once, sequentially, in signedDate order."""
    _, nodes = cluster(1, store_dir)
    channel = nodes[0].channel()
    try:
        stub = billing(channel)
        order_ids = create_orders([stub], plan)
        bodies = plan.mint(mint.Signer(store_dir), order_ids)
        poster, stats, results = Poster(nodes), collections.Counter(), collections.Counter()
        started = time.time()
        for n in sorted(plan.notes, key=lambda n: n["signed"]):
            results[poster.post(bodies[n["uuid"]], 0, stats)] += 1
        elapsed = time.time() - started
        poster.close()
        assert results == {"applied": len(plan.notes)}, results
        snap = snapshot(stub, order_ids, plan)
        print(f"\nreference: {len(plan.notes)} notifications over {TRANSACTIONS} subscriptions, {ACCOUNTS} accounts, "
              f"in signedDate order on one billingd: {elapsed:.1f} s ({len(plan.notes) / elapsed:.0f}/s); "
              f"{len(snap['events'])} events {dict(sorted(snap['types'].items()))}")
        check_expected(plan, snap, order_ids)
        check_invariants("reference", snap, order_ids)
        return snap
    finally:
        shutdown(nodes, [channel])


def check_expected(plan, snap, order_ids):
    """What the plan says, independently of billingd, of in-order delivery: every order (COMPLETED, or REFUNDED with
    its one unit refunded), every entitlement (latest transaction, product, expiry, state, pending product, auto-renew,
    ownership, order) and, per lifecycle, the exact order events of its order and entitlement events of each of its
    original transactions (`lifecycle` says which each notification writes)."""
    want = collections.defaultdict(list)
    for i, shape in enumerate(plan.lifecycles):
        assert snap["orders"][i] == ((("ORDER_STATE_REFUNDED", shape["original"], 1) if shape["refund"]
                                      else ("ORDER_STATE_COMPLETED", shape["original"], 0))), (i, shape, snap["orders"][i])
        want[plan.account(i)] += shape["entitlements"]
    for account in plan.accounts:
        got, expected = snap["entitlements"][account], sorted(want[account])
        bad = [(g, w) for g, w in zip(got, expected) if g != w]
        assert len(got) == len(expected) and not bad, (account, len(got), len(expected), bad[:3])
    by_order, by_original = collections.defaultdict(list), collections.defaultdict(list)
    for e in snap["events"]:
        if e.type.startswith("ORDER_"):
            by_order[e.order].append(e.type)
        else:
            by_original[e.original].append((e.account, e.type))
    keys = set()
    for i, shape in enumerate(plan.lifecycles):
        for key, kinds in shape["events"].items():
            if key == "order":
                assert by_order[order_ids[i]] == kinds, (i, shape, by_order[order_ids[i]])
            else:
                keys.add(key)
                assert by_original[key] == [(plan.account(i), k) for k in kinds], (i, key, shape, by_original[key])
    assert set(by_original) <= keys, sorted(set(by_original) - keys)[:5]


def run_storm(name, plan, store_dir, reference, kill=False):
    database, nodes = cluster(2, store_dir)
    channels = [n.channel() for n in nodes]
    try:
        stubs = [billing(c) for c in channels]
        t = time.time()
        order_ids = create_orders(stubs, plan)
        created = time.time() - t
        t = time.time()
        bodies = plan.mint(mint.Signer(store_dir), order_ids)
        minted = time.time() - t
        deliveries = plan.storm(seed=SEED + (7 if kill else 3))
        killed = {}

        def kill_one(progress):
            deadline = time.time() + 120
            while progress() < 0.4 and time.time() < deadline:
                time.sleep(0.01)
            killed["at"] = progress()
            nodes[1].kill()
            t0 = time.time()
            time.sleep(0.3)
            nodes[1].start()
            killed["down"] = time.time() - t0
        results, retried, elapsed = storm(nodes, bodies, deliveries, attempts=60 if kill else 20,
                                          during=kill_one if kill else None)
        assert sum(results.values()) == len(deliveries)
        # Exactly once by notificationUUID: every distinct one recorded once. Each delivery is answered
        # "applied" or "duplicate"; only a notification whose first answer was lost to the kill (committed,
        # then the connection died) may be answered "duplicate" on every delivery.
        lost = sum(v for k, v in retried.items() if not k.startswith("ConnectionRefused"))
        assert set(results) <= {"applied", "duplicate"}, results
        assert len(plan.notes) - lost <= results["applied"] <= len(plan.notes), (results, retried)
        recorded = subprocess.run(["psql", database, "-tAc", "SELECT count(*), count(DISTINCT notification_uuid) FROM notifications"],
                                  capture_output=True, text=True, check=True).stdout.strip()
        assert recorded == f"{len(plan.notes)}|{len(plan.notes)}", recorded
        snaps = [snapshot(s, order_ids, plan) for s in stubs]
        print(f"\n{name}: {len(deliveries)} deliveries ({len(plan.notes)} distinct + {len(deliveries) - len(plan.notes)} "
              f"redeliveries) from {THREADS} threads to 2 replicas: {elapsed:.1f} s ({len(deliveries) / elapsed:.0f}/s); "
              f"answers {dict(results)}; retried {dict(retried) or 0}"
              + (f"; replica 2 killed -9 at {killed['at']:.0%} and back in {killed['down']:.1f} s" if kill else "")
              + f"; {TRANSACTIONS} orders created in {created:.1f} s, minted in {minted:.1f} s; "
              f"{len(snaps[0]['events'])} events {dict(sorted(snaps[0]['types'].items()))}")
        if not kill:
            assert not retried, f"a healthy storm needed retries: {dict(retried)}"
        assert snaps[0] == snaps[1], "the two replicas disagree"
        check_invariants(name, snaps[0], order_ids)
        compare(name, snaps[0], reference)
    finally:
        shutdown(nodes, channels)


def test_storm_two_replicas_matches_in_order_reference(plan, store_dir, reference):
    run_storm("storm", plan, store_dir, reference)


def test_storm_with_kill9_and_redelivery_matches_reference(plan, store_dir, reference):
    run_storm("storm with kill -9", plan, store_dir, reference, kill=True)


# ---------------------------------------------------------------------------------------------------
# WatchEvents: resumed 100 times across replicas while 8 writers work; then latency.

def purchase_body(signer, order_id, transaction_id):
    now = int(time.time() * 1000)
    tx = mint.transaction(transaction_id, PREMIUM, product_type=mint.NON_CONSUMABLE, purchase_ms=now - 1000, token=order_id,
                          signed_ms=now - 1000)
    return mint.body(mint.notification(signer, "ONE_TIME_CHARGE", signed_ms=now - 500, tx=tx))


def test_watch_events_resumed_100_times_misses_and_repeats_nothing(store_dir):
    database, nodes = cluster(2, store_dir)
    channels = [n.channel() for n in nodes]
    stubs = [billing(c) for c in channels]
    signer = mint.Signer(store_dir)
    stop = threading.Event()
    ops, errors = collections.Counter(), []
    lock = threading.Lock()
    deadline = time.time() + 90

    def writer(w):
        poster = Poster(nodes, attempts=5)
        stats = collections.Counter()
        try:
            for i in range(WATCH_OPS // THREADS):
                if stop.is_set() or time.time() > deadline:
                    break
                k = (w + i) % 2
                order = stubs[k].CreateOrder(pb.CreateOrderRequest(account_id=f"watch-{w}-{i}", product_id=PREMIUM),
                                             timeout=30).order
                result = poster.post(purchase_body(signer, order.order_id, f"{w:02d}{i:06d}"), 1 - k, stats)
                with lock:
                    ops[result] += 1
        except Exception as e:
            errors.append(repr(e))
        finally:
            poster.close()

    received, sessions, timeouts, where = [], 0, 0, {}
    rng = random.Random(SEED)
    try:
        writers = [threading.Thread(target=writer, args=(w,)) for w in range(THREADS)]
        started = time.time()
        for t in writers:
            t.start()
        last = 0
        for sessions in range(1, 101):
            want = rng.randint(1, 12)
            call = stubs[sessions % 2].WatchEvents(pb.WatchEventsRequest(after_cursor=last), timeout=10)
            try:
                for e in call:
                    assert e.cursor > last, f"cursor {e.cursor} after {last} (session {sessions})"
                    received.append(e)
                    where[e.cursor] = (sessions, sessions % 2)
                    last = e.cursor
                    want -= 1
                    if want == 0:
                        break
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED, err
                timeouts += 1
            finally:
                call.cancel()
        resumed = len(received)
        stop.set()
        for t in writers:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in writers)
        assert not errors, errors[:3]
        writing = time.time() - started
        # Drain to the final cursor, alternating replicas on every (bounded) session.
        history = list_events(stubs[0])
        final = history[-1].cursor
        drain_deadline = time.time() + 60
        while last < final and time.time() < drain_deadline:
            sessions += 1
            call = stubs[sessions % 2].WatchEvents(pb.WatchEventsRequest(after_cursor=last), timeout=10)
            try:
                for e in call:
                    assert e.cursor > last
                    received.append(e)
                    last = e.cursor
                    if last >= final:
                        break
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED, err
            finally:
                call.cancel()
        got = [(e.cursor, e.type, e.account_id) for e in received]
        want = [(e.cursor, e.type, e.account_id) for e in history]
        missed = len(set(want) - set(got))
        gaps = gap_ranges(sorted(c for c, _, _ in set(want) - set(got)))
        repeated = len(got) - len(set(got))
        print(f"\nwatch: {sum(ops.values())} orders paid by ONE_TIME_CHARGE ({dict(ops)}) from {THREADS} writers through 2 replicas "
              f"in {writing:.1f} s; {sessions} WatchEvents sessions alternating replicas ({timeouts} idle), {resumed} events "
              f"while writing, {len(received)} in all; history {len(history)} events, final cursor {final}; "
              f"missed {missed}, repeated {repeated}")
        for lo, hi in gaps[:10]:
            before = max((c for c in where if c < lo), default=0)
            after = min((c for c in where if c > hi), default=0)
            print(f"  missed cursors {lo}..{hi}: last received before {before} in session/replica {where.get(before)}, "
                  f"next {after} in session/replica {where.get(after)}")
        assert sum(ops.values()) >= 100 and ops["applied"] == sum(ops.values())
        assert missed == 0 and repeated == 0
        assert got == want
        assert all(a < b for a, b in zip([c for c, _, _ in got], [c for c, _, _ in got][1:]))
        assert collections.Counter(e.type for e in history)[pb.EVENT_TYPE_ORDER_COMPLETED] == sum(ops.values())
    finally:
        stop.set()
        shutdown(nodes, channels)


def gap_ranges(cursors):
    ranges = []
    for c in cursors:
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return ranges


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def test_watch_events_delay_same_replica_and_across(store_dir):
    database, nodes = cluster(2, store_dir)
    channels = [n.channel() for n in nodes]
    stubs = [billing(c) for c in channels]
    per_side = 150
    arrivals = {}
    lock = threading.Lock()
    try:
        start = list_events(stubs[0])
        call = stubs[0].WatchEvents(pb.WatchEventsRequest(after_cursor=start[-1].cursor if start else 0), timeout=120)

        def watch():
            try:
                for e in call:
                    now = time.time() * 1000
                    with lock:
                        arrivals[e.account_id] = now - e.time_ms
                    if len(arrivals) >= 2 * per_side:
                        return
            except grpc.RpcError:
                pass
        watcher = threading.Thread(target=watch)
        watcher.start()
        time.sleep(0.5)  # the watcher is live
        rng = random.Random(SEED)
        for i in range(2 * per_side):
            side = i % 2
            stubs[side].CreateOrder(pb.CreateOrderRequest(account_id=f"{'same' if side == 0 else 'across'}-{i}",
                                                          product_id=PREMIUM), timeout=10)
            time.sleep(rng.uniform(0.005, 0.03))
        watcher.join(timeout=30)
        call.cancel()
        same = [v for k, v in arrivals.items() if k.startswith("same")]
        across = [v for k, v in arrivals.items() if k.startswith("across")]
        assert len(same) == per_side and len(across) == per_side, (len(same), len(across))
        line = (f"\nWatchEvents delay (receive - event.time_ms), watcher on replica 1: same replica n={len(same)} "
                f"p50 {percentile(same, 50):.1f} ms p99 {percentile(same, 99):.1f} ms max {max(same):.1f} ms; across replicas "
                f"n={len(across)} p50 {percentile(across, 50):.1f} ms p99 {percentile(across, 99):.1f} ms max {max(across):.1f} ms")
        print(line)
        assert len(same) == per_side and len(across) == per_side
        # Events come by LISTEN/NOTIFY, not by the listener's once-a-second wake: then half would wait 500 ms or
        # more. The median tells the two apart; a tail bound would only measure the machine's scheduling (a few
        # events of one run waited 80-240 ms on 2 busy cores while the same replica also served the writes).
        assert percentile(same, 50) <= 50 and percentile(across, 50) <= 50, line
        # Nothing waits past the wake that catches a lost notification.
        assert max(same) <= 1500 and max(across) <= 1500, line
    finally:
        shutdown(nodes, channels)
