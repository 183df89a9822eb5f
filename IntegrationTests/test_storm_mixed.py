"""Google Play and App Store notifications mixed, on two PostgreSQL replicas (issue 23): every App Store
notification and every Google Play push delivered twice, shuffled, from 8 threads alternating replicas, Apple's and
Google's endpoints at once. The final state must be the one of applying each notification once, in order: for Apple,
each lifecycle's last word (its renewal refunded and entitlement revoked, or renewed to its last expiry); for Google,
the purchase's final state in the Play Developer API (RTDN reads the current state back)."""
import collections
import json
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

import appstore_mint as mint
from conftest import Billingd, binary, free_port, postgres_database
from googleplay_fake import FakeGooglePlay
from helpers import billing
from billing.v1 import billing_pb2 as pb

APPLE_SUBS = 12
GOOGLE_SUBS = 12
THREADS = 8
PACKAGE = "com.example.app"
AUDIENCE = "https://billing.example.com/googleplay/rtdn"
MONTH = 30 * 86_400_000


class Node(Billingd):
    """A replica serving App Store notifications and RTDN on a port of its own."""

    def __init__(self, store, fake, catalog, database):
        self.notify_port = free_port()
        flags = fake.billingd_flags()
        flags[flags.index("--google-play-packages") + 1] = PACKAGE
        super().__init__("--dev", "--dev-store", store, "--bundle-id", mint.BUNDLE, "--catalog", catalog, *flags,
                         "--notifications-listen", f"127.0.0.1:{self.notify_port}", "--rtdn-audience", AUDIENCE,
                         "--reconcile-interval", "0", database=database)


def post(url, body, headers, attempts=20):
    """POSTs until a 2xx (a 503 is retried, as Apple and Pub/Sub do); answers the JSON result."""
    for _ in range(attempts):
        req = urllib.request.Request(url, data=body, method="POST", headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())["result"]
        except urllib.error.HTTPError as e:
            if e.code != 503:
                raise AssertionError(f"{url}: HTTP {e.code} {e.read()[:200]}")
        time.sleep(0.2)
    raise AssertionError(f"{url}: still 503 after {attempts} attempts")


def test_google_and_apple_notifications_mixed_on_two_replicas():
    store = tempfile.mkdtemp(prefix="storm-mixed-")
    subprocess.run([binary("billingctl"), "teststore", "init", store], check=True, capture_output=True)
    catalog = os.path.join(store, "catalog.json")
    with open(catalog, "w") as f:
        json.dump({"products": [{"id": "apple.monthly", "type": "auto_renewable_subscription"},
                                {"id": "pro_monthly", "type": "auto_renewable_subscription"}]}, f)
    fake = FakeGooglePlay(packages=[PACKAGE])
    fake.push_audience = AUDIENCE
    database = postgres_database()
    nodes = [Node(store, fake, catalog, database) for _ in range(2)]
    try:
        stubs = [billing(grpc.insecure_channel(n.address)) for n in nodes]
        rng = random.Random(23)

        def create(i, product):
            return stubs[i % 2].CreateOrder(pb.CreateOrderRequest(account_id=f"acct-{product}-{i}", product_id=product),
                                            timeout=30).order.order_id
        apple_orders = [create(i, "apple.monthly") for i in range(APPLE_SUBS)]
        google_orders = [create(i, "pro_monthly") for i in range(GOOGLE_SUBS)]

        # Apple: SUBSCRIBED, DID_RENEW, then REFUND for the odd ones, each signed later than the one before.
        signer = mint.Signer(store)
        now = int(time.time() * 1000) - 3_600_000
        deliveries, apple_expect = [], {}
        for i, order_id in enumerate(apple_orders):
            original = str(2_000_000_000_100_000 + i * 10)
            start = now + i * 1000
            steps = [("SUBSCRIBED", "INITIAL_BUY", original, start, None), ("DID_RENEW", None, str(int(original) + 1), start + 10, None)]
            if i % 2:
                steps.append(("REFUND", None, str(int(original) + 1), start + 20, start + 20))
            for k, (kind, subtype, tid, signed, revoked) in enumerate(steps):
                purchase = start if tid == original else start + MONTH - 60_000
                tx = mint.transaction(tid, "apple.monthly", original=original, purchase_ms=purchase, expires_ms=purchase + MONTH,
                                      token=order_id, signed_ms=signed, revocation_ms=revoked,
                                      revocation_reason=0 if revoked else None, revocation_type="REFUND_FULL" if revoked else None)
                renewal = mint.renewal(original, "apple.monthly", auto_renew=True, signed_ms=signed)
                body = mint.body(mint.notification(signer, kind, subtype=subtype, signed_ms=signed, tx=tx, renewal_info=renewal))
                deliveries.append(("apple", body))
            apple_expect[f"acct-apple.monthly-{i}"] = ("REVOKED" if i % 2 else "ACTIVE", str(int(original) + 1))

        # Google: purchased, renewed twice, then canceled (even) or revoked (odd); every push kept for the storm.
        google_expect = {}
        for i, order_id in enumerate(google_orders):
            s = fake.add_subscription("pro_monthly", account_id=order_id, notify=False)
            notes = [fake.subscription_notification(s, "SUBSCRIPTION_PURCHASED")]
            for _ in range(2):
                fake.renew(s["token"])
                notes.append(fake.subscription_notification(fake.subscription(s["token"]), "SUBSCRIPTION_RENEWED"))
            if i % 2:
                fake.revoke(s["token"])
                notes.append(fake.subscription_notification(fake.subscription(s["token"]), "SUBSCRIPTION_REVOKED"))
            else:
                fake.cancel(s["token"])
                notes.append(fake.subscription_notification(fake.subscription(s["token"]), "SUBSCRIPTION_CANCELED"))
            final = fake.subscription(s["token"])
            for n in notes:
                deliveries.append(("google", json.dumps(fake.push_message(n)).encode()))
            google_expect[f"acct-pro_monthly-{i}"] = ("REVOKED" if i % 2 else "ACTIVE", final["orderId"])

        # Every delivery twice, shuffled; 8 threads, replicas alternating.
        storm = deliveries + deliveries
        rng.shuffle(storm)
        results = collections.Counter()
        lock = threading.Lock()

        def deliver(j):
            kind, body = storm[j]
            node = nodes[j % 2]
            if kind == "apple":
                r = post(f"http://127.0.0.1:{node.notify_port}/appstore/notifications", body, {"content-type": "application/json"})
            else:
                token = fake.push_token(AUDIENCE)
                r = post(f"http://127.0.0.1:{node.notify_port}/googleplay/rtdn", body,
                         {"content-type": "application/json", "authorization": "Bearer " + token})
            with lock:
                results[(kind, r)] += 1
        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(deliver, range(len(storm))))
        assert results[("apple", "applied")] == len([d for d in deliveries if d[0] == "apple"]), results
        assert results[("google", "applied")] == len([d for d in deliveries if d[0] == "google"]), results
        assert results[("apple", "duplicate")] + results[("google", "duplicate")] == len(deliveries), results

        # The final state, read through either replica.
        for account, (state, latest) in apple_expect.items():
            for stub in stubs:
                es = stub.GetEntitlements(pb.GetEntitlementsRequest(account_id=account, include_inactive=True), timeout=30).entitlements
                assert [(pb.EntitlementState.Name(e.state)[len("ENTITLEMENT_STATE_"):], e.latest_transaction_id) for e in es] == [(state, latest)], account
        # The refunds are of renewals: the orders (paid by the first purchases) stay COMPLETED.
        for order_id in apple_orders:
            assert stubs[0].GetOrder(pb.GetOrderRequest(order_id=order_id), timeout=30).order.state == pb.ORDER_STATE_COMPLETED
        for account, (state, latest) in google_expect.items():
            es = stubs[1].GetEntitlements(pb.GetEntitlementsRequest(account_id=account, include_inactive=True), timeout=30).entitlements
            assert [(pb.EntitlementState.Name(e.state)[len("ENTITLEMENT_STATE_"):], e.latest_transaction_id) for e in es] == [(state, latest)], account
            if state == "ACTIVE":
                assert not es[0].auto_renew, "canceled: no renewal"
        # RTDN reads the current state: every push here finds the final one (the latest order, revoked for the odd
        # ones), as applying them in order would, so the order is paid by the latest order and refunded with it.
        for i, order_id in enumerate(google_orders):
            o = stubs[1].GetOrder(pb.GetOrderRequest(order_id=order_id), timeout=30).order
            assert o.state == (pb.ORDER_STATE_REFUNDED if i % 2 else pb.ORDER_STATE_COMPLETED), (i, o)
            assert o.transaction_id == google_expect[f"acct-pro_monthly-{i}"][1]
        # Every Google purchase recorded as paid and not revoked was acknowledged, once, by one of the two replicas
        # (a purchase first recorded already revoked is Google's refund: nothing to acknowledge).
        live = {fake.subscription(t)["token"] for t in [c["token"] for c in fake.calls("purchases.subscriptionsv2.get")]
                if fake.subscription(t)["state"] != "SUBSCRIPTION_STATE_EXPIRED"}
        deadline = time.time() + 20
        while time.time() < deadline and not live <= {c["token"] for c in fake.calls("purchases.subscriptions.acknowledge") if c["status"] == 200}:
            time.sleep(0.1)
        acked = collections.Counter(c["token"] for c in fake.calls("purchases.subscriptions.acknowledge") if c["status"] == 200)
        assert live <= set(acked) and len(live) == GOOGLE_SUBS // 2, (live, acked)
        assert max(acked.values()) == 1, acked
    finally:
        for n in nodes:
            n.stop()
        fake.stop()
        shutil.rmtree(store, ignore_errors=True)
