"""Webhooks (CONFIG.md "Webhooks"): every event POSTed to --webhook-url in cursor order, signed as Standard Webhooks
say (checked by the `standardwebhooks` package), at least once across receiver outages, 500s, kill -9 and SIGTERM
restarts, one sender at a time across PostgreSQL replicas, the --webhook-events filter, bad flags refused at start."""
import json
import os
import shutil
import signal
import subprocess
import threading
import time

import grpc
import pytest

from conftest import Billingd, binary, postgres_database
from helpers import billing
from billing.v1 import billing_pb2 as pb
from webhook_receiver import Receiver, new_secret


def create(node, n, account="acct-hook"):
    stub = billing(grpc.insecure_channel(node.address))
    for _ in range(n):
        stub.CreateOrder(pb.CreateOrderRequest(account_id=account, product_id="p"), timeout=10)


def feed(node):
    """Every event's cursor and type name, oldest first, read with ListEvents."""
    stub = billing(grpc.insecure_channel(node.address))
    out, after = [], 0
    while True:
        page = stub.ListEvents(pb.ListEventsRequest(after_cursor=after, limit=1000), timeout=10)
        out += [(e.cursor, pb.EventType.Name(e.type)[len("EVENT_TYPE_"):]) for e in page.events]
        if not page.events:
            return out
        after = page.events[-1].cursor


def delivered(node):
    """billingd_webhook_deliveries_total{result="delivered"} of a node started with --metrics-listen 127.0.0.1:0."""
    import urllib.request
    deadline = time.time() + 10
    while time.time() < deadline and '"msg":"started"' not in node.log():
        time.sleep(0.02)
    started = next(json.loads(l) for l in node.log().splitlines() if '"msg":"started"' in l)
    text = urllib.request.urlopen(f"http://{started['metrics']}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith('billingd_webhook_deliveries_total{result="delivered"}'):
            return int(float(line.split()[-1]))
    return 0


def hook_flags(receiver, *extra):
    flags = ["--webhook-url", receiver.url, "--webhook-secret", receiver.secret, *extra]
    return flags + (["--webhook-ca", receiver.ca] if receiver.ca else ["--dev"])


def in_order_exactly(receiver, node):
    """Every event of the feed reached the receiver, in cursor order; answers the duplicates (at least once)."""
    expected = [c for c, _ in feed(node)]
    got = receiver.cursors()
    seen = []
    for c in got:
        if not seen or c > seen[-1]:
            seen.append(c)
        else:
            # A resend repeats an event already accepted (its 2xx was not recorded): never an older gap.
            assert c in seen, f"{c} arrived out of order after {seen[-1]}"
    assert seen == expected, f"delivered {seen[:5]}... ({len(seen)}) != feed {expected[:5]}... ({len(expected)})"
    return len(got) - len(seen)


def test_https_delivery_in_order_with_a_verifiable_body():
    receiver = Receiver(new_secret(), tls=True)
    node = Billingd(*hook_flags(receiver))
    try:
        create(node, 30)
        assert receiver.wait_for(30), f"{len(receiver.ids())} of 30 delivered: {node.log()[-1500:]}"
        assert in_order_exactly(receiver, node) == 0
        wid, payload, _, headers = receiver.accepted[0]
        assert wid == "evt_1" and headers["content-type"] == "application/json"
        assert headers["webhook-signature"].startswith("v1,")
        assert abs(int(headers["webhook-timestamp"]) - time.time()) < 60
        assert payload["type"] == "ORDER_CREATED"
        assert payload["timestamp"].endswith("Z") and "T" in payload["timestamp"]
        data = payload["data"]
        assert data["type"] == "EVENT_TYPE_ORDER_CREATED" and data["cursor"] == "1"
        assert data["accountId"] == "acct-hook" and data["order"]["productId"] == "p"
        assert receiver.bad_signatures == 0
        metrics_ok = [l for l in node.log().splitlines() if "webhook delivery failed" in l]
        assert metrics_ok == []
    finally:
        node.stop()
        receiver.down()


def test_receiver_down_then_500s_then_back_loses_nothing():
    receiver = Receiver(new_secret())
    node = Billingd(*hook_flags(receiver), "--metrics-listen", "127.0.0.1:0")
    try:
        create(node, 5)
        assert receiver.wait_for(5)
        receiver.down()
        create(node, 5)
        time.sleep(2.5)  # attempts fail (connection refused) and back off: 1 s, 2 s, ...
        receiver.fail_next = 2
        receiver.up()
        assert receiver.wait_for(10, timeout=40), node.log()[-2000:]
        assert in_order_exactly(receiver, node) == 0
        failures = [json.loads(l) for l in node.log().splitlines() if "webhook delivery failed" in l]
        assert any(f["result"] == "failed" for f in failures)
        assert any(f["result"] == "rejected" and f["status"] == 500 for f in failures)
        assert all(f["cursor"] == 6 for f in failures), "only the first undelivered event is tried until it succeeds"
        assert all("whsec_" not in json.dumps(f) for f in failures)
    finally:
        node.stop()
        receiver.down()


@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_restart_mid_delivery_loses_nothing(how):
    receiver = Receiver(new_secret())
    node = Billingd(*hook_flags(receiver))
    try:
        create(node, 200)
        receiver.wait_for(40)
        node.kill() if how == "sigkill" else node.stop()
        create_later = Billingd(*hook_flags(receiver), db_dir=node.dir)
        try:
            create(create_later, 20)
            assert receiver.wait_for(220, timeout=60), f"{len(receiver.ids())} delivered"
            time.sleep(0.3)
            dups = in_order_exactly(receiver, create_later)
            if how == "sigterm":
                assert dups <= 1, "a drained stop resends at most the event in flight"
            else:
                assert dups <= 1
        finally:
            create_later.stop()
    finally:
        receiver.down()


def test_event_filter_skips_the_rest_and_a_bad_secret_is_refused(tmp_path):
    receiver = Receiver(new_secret())
    node = Billingd(*hook_flags(receiver, "--webhook-events", "ORDER_EXPIRED,ORDER_COMPLETED"), "--order-ttl", "2")
    try:
        create(node, 3)
        assert receiver.wait_for(3, timeout=30), node.log()[-1500:]
        assert [p["type"] for _, p, _, _ in receiver.accepted] == ["ORDER_EXPIRED"] * 3
        expired = [c for c, t in feed(node) if t == "ORDER_EXPIRED"]
        assert receiver.cursors() == expired
    finally:
        node.stop()
        receiver.down()

    for secret, words in [("not-a-secret", "whsec_"), ("whsec_" + "QUJD", "24 to 64 bytes"), ("whsec_!!!", "base64")]:
        r = subprocess.run(
            [binary("billingd"), "--dev", "--database", f"sqlite:{tmp_path}/x.db", "--webhook-url", "http://127.0.0.1:9/x",
             "--webhook-secret", secret], capture_output=True, text=True, timeout=20)
        assert r.returncode != 0 and words in r.stderr and "--webhook-secret" in r.stderr, r.stderr
        assert secret not in r.stderr or secret == "not-a-secret" and "not-a-secret" not in r.stderr.replace("whsec_", "")
    r = subprocess.run(
        [binary("billingd"), "--database", f"sqlite:{tmp_path}/y.db", "--webhook-url", "http://127.0.0.1:9/x", "--webhook-secret", new_secret()],
        capture_output=True, text=True, timeout=20)
    assert r.returncode != 0 and "https://" in r.stderr
    r = subprocess.run(
        [binary("billingd"), "--dev", "--database", f"sqlite:{tmp_path}/z.db", "--webhook-url", "https://127.0.0.1:9/x", "--webhook-secret",
         new_secret(), "--webhook-events", "ORDER_DELETED"], capture_output=True, text=True, timeout=20)
    assert r.returncode != 0 and "ORDER_DELETED" in r.stderr


def test_two_postgres_replicas_one_sender_and_takeover_after_kill():
    database = postgres_database()
    receiver = Receiver(new_secret())
    a = Billingd(*hook_flags(receiver), "--metrics-listen", "127.0.0.1:0", database=database)
    b = Billingd(*hook_flags(receiver), "--metrics-listen", "127.0.0.1:0", database=database)
    try:
        create(a, 20, account="acct-a")
        create(b, 20, account="acct-b")
        assert receiver.wait_for(40, timeout=30)
        assert [n for n in (a, b) if "webhooks on" in n.log()] == [a, b]
        # Exactly one replica sent (its delivered counter), the other none. The counter moves once the sender has read
        # the receiver's 2xx, a moment after the receiver has the event: read it until it settles (bounded).
        settle = time.time() + 10
        while sorted([delivered(a), delivered(b)]) != [0, 40] and time.time() < settle:
            time.sleep(0.05)
        assert sorted([delivered(a), delivered(b)]) == [0, 40]
        # Which replica sends: the one whose holder the database names; kill it.
        holder = subprocess.run(["psql", database, "-Atc", "SELECT holder FROM webhook_cursor"], capture_output=True, text=True).stdout.strip()
        victim, survivor = (a, b) if str(a.proc.pid) in holder.split("/") else (b, a)
        assert str(victim.proc.pid) in holder.split("/"), holder
        victim.kill()
        create(survivor, 20, account="acct-c")
        assert receiver.wait_for(60, timeout=45), f"{len(receiver.ids())} delivered after the takeover"
        assert in_order_exactly(receiver, survivor) <= 1
        holder = subprocess.run(["psql", database, "-Atc", "SELECT holder FROM webhook_cursor"], capture_output=True, text=True).stdout.strip()
        assert str(survivor.proc.pid) in holder.split("/")
    finally:
        a.stop()
        b.stop()
        receiver.down()


def billingctl(node, *args):
    r = subprocess.run([binary("billingctl"), "--addr", node.address, *args], capture_output=True, text=True, timeout=20)
    return r.returncode, r.stdout, r.stderr


def test_billingctl_status_and_replay(tmp_path):
    receiver = Receiver(new_secret())
    node = Billingd(*hook_flags(receiver))
    try:
        create(node, 6)
        assert receiver.wait_for(6)
        deadline = time.time() + 10
        while time.time() < deadline:
            rc, out, err = billingctl(node, "webhooks", "status")
            assert rc == 0, err
            status = json.loads(out)
            if status["position"] == "6":
                break
            time.sleep(0.1)
        assert status["position"] == "6" and status["newestCursor"] == "6" and status["lagEvents"] == "0"
        assert status["sendingHere"] is True and status["failures"] == 0 and status["url"] == receiver.url
        assert int(status["lastDeliveryTimeMs"]) > 0

        rc, out, err = billingctl(node, "webhooks", "replay", "--from", "3")
        assert rc == 0, err
        assert receiver.wait_for(10)
        assert receiver.cursors() == [1, 2, 3, 4, 5, 6, 3, 4, 5, 6]

        receiver.down()
        create(node, 1)
        deadline = time.time() + 10
        while time.time() < deadline:
            status = json.loads(billingctl(node, "webhooks", "status")[1])
            if status["failures"] >= 1:
                break
            time.sleep(0.2)
        assert status["failures"] >= 1 and status["lastError"] and status["lagEvents"] == "1"
        assert int(status["oldestUndeliveredAgeMs"]) >= 0
        rc, _, err = billingctl(node, "webhooks", "replay")
        assert rc == 2 and "--from" in err
    finally:
        node.stop()
        receiver.down()

    plain = Billingd()
    try:
        rc, out, err = billingctl(plain, "webhooks", "status")
        assert rc != 0 and "WEBHOOKS_NOT_CONFIGURED" in err + out
    finally:
        plain.stop()


def metric(node, name):
    """One unlabelled sample of a node started with --metrics-listen 127.0.0.1:0."""
    import urllib.request
    started = next(json.loads(l) for l in node.log().splitlines() if '"msg":"started"' in l)
    text = urllib.request.urlopen(f"http://{started['metrics']}/metrics", timeout=5).read().decode()
    return next(float(l.split()[-1]) for l in text.splitlines() if l.startswith(name + " "))


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_lag_gauge_is_the_number_of_undelivered_events(db):
    """billingd_webhook_lag_events is the cursor distance docs/CONFIGURATION.md promises: while the receiver is down
    it counts every event committed and not delivered (not only those of the batch being retried), and 0 once all
    are delivered."""
    receiver = Receiver(new_secret())
    node = Billingd(*hook_flags(receiver), "--metrics-listen", "127.0.0.1:0",
                    database=postgres_database() if db == "postgres" else None)
    try:
        create(node, 2)
        assert receiver.wait_for(2)
        deadline = time.time() + 10
        while time.time() < deadline and metric(node, "billingd_webhook_lag_events") != 0:
            time.sleep(0.05)
        assert metric(node, "billingd_webhook_lag_events") == 0
        receiver.down()
        # One event first, so that the sender is retrying it when the others commit.
        create(node, 1)
        time.sleep(1.5)
        create(node, 2)
        expected = len(feed(node)) - 2
        assert expected == 3
        deadline = time.time() + 10
        while time.time() < deadline and metric(node, "billingd_webhook_lag_events") != expected:
            time.sleep(0.05)
        assert metric(node, "billingd_webhook_lag_events") == expected
        receiver.up()
        assert receiver.wait_for(5, timeout=40), node.log()[-2000:]
        deadline = time.time() + 10
        while time.time() < deadline and metric(node, "billingd_webhook_lag_events") != 0:
            time.sleep(0.05)
        assert metric(node, "billingd_webhook_lag_events") == 0
    finally:
        node.stop()
        receiver.down()
