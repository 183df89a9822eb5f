"""billingd against the Google Play fake (googleplay_fake.py, held to Google's own client in test_googleplay_fake.py):
SubmitReceipt with Google Play proofs under the App Store's rules, and the acknowledgement every credited purchase
gets (consumables consumed), exactly once, retried until Google has it."""
import json
import os
import tempfile
import time
import uuid

import grpc
import pytest

from conftest import Billingd, postgres_database
from googleplay_fake import FakeGooglePlay
from helpers import billing, expect_error
from billing.v1 import billing_pb2 as pb
from billing.v1 import billing_pb2_grpc as pb_grpc

PACKAGE = "com.example.app"


def catalog():
    path = os.path.join(tempfile.mkdtemp(prefix="gp-catalog-"), "catalog.json")
    with open(path, "w") as f:
        json.dump({"products": [
            {"id": "coins_100", "type": "consumable"},
            {"id": "remove_ads", "type": "non_consumable"},
            {"id": "pro_monthly", "type": "auto_renewable_subscription"},
            {"id": "pro_yearly", "type": "auto_renewable_subscription"},
        ]}, f)
    return path


@pytest.fixture
def fake():
    f = FakeGooglePlay(packages=[PACKAGE, "com.example.other"])
    yield f
    f.stop()


def start(fake, *extra, database=None):
    flags = [f for f in fake.billingd_flags()]
    # The RTDN flags need --rtdn-audience and --notifications-listen: not these tests'.
    i = flags.index("--rtdn-certs")
    del flags[i:i + 4]
    flags[flags.index("--google-play-packages") + 1] = PACKAGE
    return Billingd("--dev", "--catalog", catalog(), *flags, *extra, database=database)


def order(stub, product, account="acct-gp", quantity=1):
    return stub.CreateOrder(pb.CreateOrderRequest(account_id=account, product_id=product, quantity=quantity), timeout=10).order


def submit(stub, order_id, token, product, package=PACKAGE, **kw):
    return stub.SubmitReceipt(
        pb.SubmitReceiptRequest(order_id=order_id, google_play=pb.GooglePlayPurchase(package_name=package, product_id=product, purchase_token=token), **kw),
        timeout=30)


def wait_calls(fake, method, token, n=1, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline:
        ok = [c for c in fake.calls(method, token=token) if 200 <= c["status"] < 300]
        if len(ok) >= n:
            return ok
        time.sleep(0.05)
    return [c for c in fake.calls(method, token=token) if 200 <= c["status"] < 300]


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_one_time_products_completed_acknowledged_once_and_consumables_consumed(fake, db):
    node = start(fake, database=postgres_database() if db == "postgres" else None)
    try:
        stub = billing(grpc.insecure_channel(node.address))
        coins = order(stub, "coins_100")
        p = fake.add_product("coins_100", account_id=coins.order_id)
        r = submit(stub, coins.order_id, p["token"], "coins_100")
        assert r.order.state == pb.ORDER_STATE_COMPLETED and r.order.transaction_id == p["orderId"]
        assert r.transaction.store == pb.STORE_GOOGLE_PLAY and r.transaction.environment == pb.ENVIRONMENT_PRODUCTION
        assert not r.already_processed
        again = submit(stub, coins.order_id, p["token"], "coins_100")
        assert again.already_processed and again.order.transaction_id == p["orderId"]
        # A consumable is consumed (which acknowledges it), once; never acknowledged separately.
        assert len(wait_calls(fake, "purchases.products.consume", p["token"])) == 1
        time.sleep(0.5)
        assert len(fake.calls("purchases.products.consume", token=p["token"])) == 1
        assert fake.product(p["token"])["consumed"]

        ads = order(stub, "remove_ads")
        q = fake.add_product("remove_ads", account_id=ads.order_id, test=True)
        r = submit(stub, ads.order_id, q["token"], "remove_ads")
        assert r.order.state == pb.ORDER_STATE_COMPLETED and r.transaction.environment == pb.ENVIRONMENT_SANDBOX
        assert len(wait_calls(fake, "purchases.products.acknowledge", q["token"])) == 1
        assert fake.calls("purchases.products.consume", token=q["token"]) == []
        assert fake.product(q["token"])["acknowledged"]
    finally:
        node.stop()


def test_refusals_record_nothing_and_acknowledge_nothing(fake):
    node = start(fake)
    try:
        stub = billing(grpc.insecure_channel(node.address))
        o = order(stub, "remove_ads")
        pending = fake.add_product("remove_ads", account_id=o.order_id, state="pending")
        expect_error(lambda: submit(stub, o.order_id, pending["token"], "remove_ads"), grpc.StatusCode.FAILED_PRECONDITION, "PURCHASE_PENDING")
        canceled = fake.add_product("remove_ads", account_id=o.order_id, state="canceled")
        expect_error(lambda: submit(stub, o.order_id, canceled["token"], "remove_ads"), grpc.StatusCode.FAILED_PRECONDITION, "PURCHASE_CANCELED")
        expect_error(lambda: submit(stub, o.order_id, "unknown-token-123", "remove_ads"), grpc.StatusCode.NOT_FOUND, "PURCHASE_NOT_FOUND")
        expect_error(lambda: submit(stub, o.order_id, pending["token"], "remove_ads", package="com.example.other"),
                     grpc.StatusCode.INVALID_ARGUMENT, "WRONG_APP")
        # The token of another account's order: its obfuscatedExternalAccountId names another order.
        elsewhere = fake.add_product("remove_ads", account_id=str(uuid.uuid4()))
        expect_error(lambda: submit(stub, o.order_id, elsewhere["token"], "remove_ads"), grpc.StatusCode.PERMISSION_DENIED, "ACCOUNT_TOKEN_MISMATCH")
        # The API down: UNAVAILABLE, nothing recorded.
        fake.set_down(True)
        ok = fake.add_product("remove_ads", account_id=o.order_id)
        expect_error(lambda: submit(stub, o.order_id, ok["token"], "remove_ads"), grpc.StatusCode.UNAVAILABLE, "GOOGLE_PLAY_UNAVAILABLE")
        fake.set_down(False)
        assert stub.GetOrder(pb.GetOrderRequest(order_id=o.order_id), timeout=10).order.state == pb.ORDER_STATE_PENDING
        time.sleep(0.5)
        assert fake.calls("purchases.products.acknowledge") == [] and fake.calls("purchases.products.consume") == []
        # Claimed elsewhere: the same purchase cannot pay a second order.
        r = submit(stub, o.order_id, ok["token"], "remove_ads")
        assert r.order.state == pb.ORDER_STATE_COMPLETED
        other = order(stub, "remove_ads", account="acct-other")
        expect_error(lambda: submit(stub, other.order_id, ok["token"], "remove_ads"), grpc.StatusCode.PERMISSION_DENIED, "ACCOUNT_TOKEN_MISMATCH")
        free = fake.add_product("remove_ads")
        r = submit(stub, other.order_id, free["token"], "remove_ads")
        assert r.order.state == pb.ORDER_STATE_COMPLETED
        third = order(stub, "remove_ads", account="acct-third")
        expect_error(lambda: submit(stub, third.order_id, free["token"], "remove_ads"), grpc.StatusCode.ALREADY_EXISTS, "TRANSACTION_ALREADY_CLAIMED")
        # A product mismatch.
        coins = order(stub, "coins_100")
        expect_error(lambda: submit(stub, coins.order_id, ok["token"], "remove_ads"), grpc.StatusCode.FAILED_PRECONDITION, "PRODUCT_MISMATCH")
    finally:
        node.stop()


def test_unconfigured_answers_google_play_not_configured(fresh):
    node = fresh("--dev")
    stub = billing(grpc.insecure_channel(node.address))
    o = order(stub, "p")
    expect_error(lambda: submit(stub, o.order_id, "t", "p"), grpc.StatusCode.FAILED_PRECONDITION, "GOOGLE_PLAY_NOT_CONFIGURED")


def test_acknowledgement_retried_through_failures_and_restarts(fake):
    node = start(fake)
    try:
        stub = billing(grpc.insecure_channel(node.address))
        o = order(stub, "remove_ads")
        p = fake.add_product("remove_ads", account_id=o.order_id)
        fake.fail_next(503, count=100, path_prefix=f"/androidpublisher/v3/applications/{PACKAGE}/purchases/products/remove_ads/tokens/{p['token']}:acknowledge")
        r = submit(stub, o.order_id, p["token"], "remove_ads")
        assert r.order.state == pb.ORDER_STATE_COMPLETED
        deadline = time.time() + 10
        while time.time() < deadline and not fake.calls("purchases.products.acknowledge", token=p["token"]):
            time.sleep(0.05)
        assert fake.calls("purchases.products.acknowledge", token=p["token"])
        # The client's own retries (4 attempts) end, the attempt is logged as failed and queued for later.
        deadline = time.time() + 30
        while time.time() < deadline and '"google play acknowledgement failed"' not in node.log():
            time.sleep(0.1)
        assert '"google play acknowledgement failed"' in node.log()
        node.kill()  # the pending acknowledgement is in the database
        fake.clear_faults()
        node.start()
        # The first retry waits its backoff (5 s after the first failure, then 10 s ...).
        assert len(wait_calls(fake, "purchases.products.acknowledge", p["token"], timeout=40)) == 1
        assert fake.product(p["token"])["acknowledged"]
    finally:
        node.stop()


def test_subscriptions_purchased_with_price_and_chain_kept_on_upgrade(fake):
    node = start(fake)
    try:
        stub = billing(grpc.insecure_channel(node.address))
        o = order(stub, "pro_monthly")
        s = fake.add_subscription("pro_monthly", account_id=o.order_id, price_micros=4990000, currency="EUR")
        r = submit(stub, o.order_id, s["token"], "pro_monthly")
        assert r.order.state == pb.ORDER_STATE_COMPLETED and r.transaction.transaction_id == s["orderId"]
        assert r.transaction.original_transaction_id == s["orderId"]
        assert r.transaction.price_milliunits == 4990 and r.transaction.currency == "EUR"
        assert len(wait_calls(fake, "purchases.subscriptions.acknowledge", s["token"])) == 1
        ents = stub.GetEntitlements(pb.GetEntitlementsRequest(account_id="acct-gp"), timeout=10).entitlements
        assert [(e.product_id, e.active) for e in ents] == [("pro_monthly", True)]

        # An upgrade: a new token linked to the old one (the app passed the new order's id as obfuscatedAccountId),
        # paid through a new order: one entitlement, the new product.
        up = order(stub, "pro_yearly")
        new = fake.add_subscription("pro_yearly", account_id=up.order_id, linked_token=s["token"], notify=False,
                                    item_replacement={"productId": "pro_monthly", "basePlanId": "monthly", "replacementMode": "WITH_TIME_PRORATION"})
        r = submit(stub, up.order_id, new["token"], "pro_yearly")
        assert r.order.state == pb.ORDER_STATE_COMPLETED
        assert r.transaction.original_transaction_id == s["orderId"], "the chain keeps its first purchase's id"
        ents = stub.GetEntitlements(pb.GetEntitlementsRequest(account_id="acct-gp"), timeout=10).entitlements
        assert [(e.product_id, e.active) for e in ents if e.active] == [("pro_yearly", True)]
    finally:
        node.stop()


def test_on_postgres(fake):
    database = postgres_database()
    node = start(fake, database=database)
    try:
        stub = billing(grpc.insecure_channel(node.address))
        o = order(stub, "coins_100", quantity=3)
        p = fake.add_product("coins_100", account_id=o.order_id, quantity=3)
        r = submit(stub, o.order_id, p["token"], "coins_100")
        assert r.order.state == pb.ORDER_STATE_COMPLETED and r.transaction.quantity == 3
        assert len(wait_calls(fake, "purchases.products.consume", p["token"])) == 1
    finally:
        node.stop()


def start_rtdn(fake, *extra, database=None):
    """billingd with RTDN on its notifications port; the fake pushes every change it makes there."""
    flags = fake.billingd_flags()
    flags[flags.index("--google-play-packages") + 1] = PACKAGE
    node = Billingd("--dev", "--catalog", catalog(), *flags, "--notifications-listen", "127.0.0.1:0", *extra,
                    "--rtdn-audience", "https://billing.example.com/googleplay/rtdn", database=database)
    # The port answers a moment before the "started" line is written.
    deadline = time.time() + 10
    while time.time() < deadline and '"msg":"started"' not in node.log():
        time.sleep(0.02)
    started = next(json.loads(l) for l in node.log().splitlines() if '"msg":"started"' in l)
    fake.rtdn_url = f"http://{started['notifications']}/googleplay/rtdn"
    fake.push_audience = "https://billing.example.com/googleplay/rtdn"
    return node


def entitlement(stub, account, product=None):
    ents = stub.GetEntitlements(pb.GetEntitlementsRequest(account_id=account, include_inactive=True), timeout=10).entitlements
    return next((e for e in ents if product is None or e.product_id == product), None)


def test_rtdn_authentication_and_duplicates(fake):
    node = start_rtdn(fake)
    try:
        url = fake.rtdn_url
        for variant in ["none", "wrong_audience", "wrong_email", "unverified_email", "unknown_key", "expired", "bad_signature", "wrong_issuer"]:
            r = fake.push(url, auth=variant)
            assert r["status"] == 401, (variant, r)
        ok = fake.push(url, message_id="m-1")
        assert ok["status"] == 200 and json.loads(ok["body"])["result"] == "applied"
        again = fake.redeliver("m-1")
        assert again["status"] == 200 and json.loads(again["body"])["result"] == "duplicate"
        import urllib.request
        req = urllib.request.Request(url, data=b'{"not": "a push"}', method="POST", headers={
            "content-type": "application/json", "authorization": "Bearer " + fake.push_token(fake.push_audience)})
        try:
            urllib.request.urlopen(req, timeout=10)
            raise AssertionError("a body that is not a push message was taken")
        except urllib.error.HTTPError as e:
            assert e.code == 400
    finally:
        node.stop()


def test_rtdn_completes_a_pending_purchase_by_itself(fake):
    node = start_rtdn(fake)
    try:
        stub = billing(grpc.insecure_channel(node.address))
        o = order(stub, "remove_ads")
        p = fake.add_product("remove_ads", account_id=o.order_id, state="pending")
        expect_error(lambda: submit(stub, o.order_id, p["token"], "remove_ads"), grpc.StatusCode.FAILED_PRECONDITION, "PURCHASE_PENDING")
        done = fake.complete_product(p["token"])
        assert done["push"]["status"] == 200, done["push"]
        got = stub.GetOrder(pb.GetOrderRequest(order_id=o.order_id), timeout=10).order
        assert got.state == pb.ORDER_STATE_COMPLETED and got.transaction_id == done["orderId"]
        assert len(wait_calls(fake, "purchases.products.acknowledge", p["token"])) == 1
        events = stub.ListEvents(pb.ListEventsRequest(after_cursor=0, limit=100), timeout=10).events
        assert any(e.type == pb.EVENT_TYPE_ORDER_COMPLETED and e.cause == "rtdn:ONE_TIME_PRODUCT_PURCHASED" for e in events)
    finally:
        node.stop()


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_rtdn_subscription_lifecycle_and_voided_purchase(fake, db):
    node = start_rtdn(fake, database=postgres_database() if db == "postgres" else None)
    try:
        stub = billing(grpc.insecure_channel(node.address))
        o = order(stub, "pro_monthly", account="acct-sub")
        s = fake.add_subscription("pro_monthly", account_id=o.order_id)
        assert s["push"]["status"] == 200
        assert stub.GetOrder(pb.GetOrderRequest(order_id=o.order_id), timeout=10).order.state == pb.ORDER_STATE_COMPLETED
        e = entitlement(stub, "acct-sub")
        assert e.active and e.product_id == "pro_monthly"
        first_expiry = e.expires_time_ms

        r = fake.renew(s["token"])
        assert r["push"]["status"] == 200
        e = entitlement(stub, "acct-sub")
        assert e.active and e.expires_time_ms > first_expiry

        assert fake.cancel(s["token"])["push"]["status"] == 200
        e = entitlement(stub, "acct-sub")
        assert e.active and not e.auto_renew

        # Another subscriber: on hold (billing retry), recovered, then expired.
        o3 = order(stub, "pro_yearly", account="acct-hold")
        h = fake.add_subscription("pro_yearly", account_id=o3.order_id)
        assert fake.hold(h["token"])["push"]["status"] == 200
        assert entitlement(stub, "acct-hold").state == pb.ENTITLEMENT_STATE_BILLING_RETRY
        assert fake.recover(h["token"])["push"]["status"] == 200
        assert entitlement(stub, "acct-hold").state == pb.ENTITLEMENT_STATE_ACTIVE
        # Paused by the user: PAUSED (no access, ENTITLEMENT_EXPIRED says so), then resumed: ACTIVE again.
        assert fake.pause(h["token"])["push"]["status"] == 200
        e = entitlement(stub, "acct-hold")
        assert e.state == pb.ENTITLEMENT_STATE_PAUSED and not e.active
        events = stub.ListEvents(pb.ListEventsRequest(after_cursor=0, limit=1000, account_id="acct-hold"), timeout=10).events
        assert events[-1].type == pb.EVENT_TYPE_ENTITLEMENT_EXPIRED and events[-1].cause == "rtdn:SUBSCRIPTION_PAUSED"
        assert fake.resume(h["token"])["push"]["status"] == 200
        assert entitlement(stub, "acct-hold").state == pb.ENTITLEMENT_STATE_ACTIVE
        assert fake.expire(h["token"])["push"]["status"] == 200
        e = entitlement(stub, "acct-hold")
        assert e.state == pb.ENTITLEMENT_STATE_EXPIRED and not e.active

        assert fake.revoke(s["token"])["push"]["status"] == 200
        e = entitlement(stub, "acct-sub")
        assert e.state == pb.ENTITLEMENT_STATE_REVOKED and not e.active
        events = stub.ListEvents(pb.ListEventsRequest(after_cursor=0, limit=100, account_id="acct-sub"), timeout=10).events
        assert any(ev.type == pb.EVENT_TYPE_ENTITLEMENT_REVOKED and ev.cause == "rtdn:SUBSCRIPTION_REVOKED" for ev in events)

        # A one-time purchase voided (a refund): the order is refunded.
        o2 = order(stub, "remove_ads", account="acct-sub")
        p = fake.add_product("remove_ads", account_id=o2.order_id)
        assert stub.GetOrder(pb.GetOrderRequest(order_id=o2.order_id), timeout=10).order.state == pb.ORDER_STATE_COMPLETED
        v = fake.void(p["token"], reason="remorse")
        assert v["push"]["status"] == 200, v["push"]
        assert stub.GetOrder(pb.GetOrderRequest(order_id=o2.order_id), timeout=10).order.state == pb.ORDER_STATE_REFUNDED
    finally:
        node.stop()


def test_voided_purchases_reconciled_at_start(fake):
    node = start(fake)
    try:
        stub = billing(grpc.insecure_channel(node.address))
        o = order(stub, "remove_ads", account="acct-void")
        p = fake.add_product("remove_ads", account_id=o.order_id)
        assert submit(stub, o.order_id, p["token"], "remove_ads").order.state == pb.ORDER_STATE_COMPLETED
        fake.void(p["token"], reason="chargeback")  # no RTDN reaches billingd: only the voided list knows
        node.restart()
        deadline = time.time() + 20
        state = None
        while time.time() < deadline:
            state = stub.GetOrder(pb.GetOrderRequest(order_id=o.order_id), timeout=10).order.state
            if state == pb.ORDER_STATE_REFUNDED:
                break
            time.sleep(0.1)
        assert state == pb.ORDER_STATE_REFUNDED, node.log()[-1500:]
        assert fake.calls("purchases.voidedpurchases.list")
        # The report is logged once the whole list is applied, a moment after the order changed.
        deadline = time.time() + 10
        while time.time() < deadline and not any("voided purchases reconciled" in l and '"applied":1' in l for l in node.log().splitlines()):
            time.sleep(0.05)
        line = next(json.loads(l) for l in node.log().splitlines() if "voided purchases reconciled" in l and '"applied":1' in l)
        assert line["read"] >= 1
        node.restart()  # read again: recorded once
        deadline = time.time() + 20
        while time.time() < deadline and node.log().count("voided purchases reconciled") < 3:  # one per start
            time.sleep(0.1)
        last = [json.loads(l) for l in node.log().splitlines() if "voided purchases reconciled" in l][-1]
        assert last["duplicate"] == 1 and last["applied"] == 0
    finally:
        node.stop()


def test_restore_with_google_play_purchases(fake):
    node = start(fake)
    try:
        stub = billing(grpc.insecure_channel(node.address))
        # Bought on another device, never reported: the app restores with the tokens Google Play gives it.
        ads = fake.add_product("remove_ads")
        sub = fake.add_subscription("pro_monthly")
        pending = fake.add_product("remove_ads", state="pending")
        r = stub.RestorePurchases(pb.RestorePurchasesRequest(account_id="acct-restore", google_play_purchases=[
            pb.GooglePlayPurchase(package_name=PACKAGE, product_id="remove_ads", purchase_token=ads["token"]),
            pb.GooglePlayPurchase(package_name=PACKAGE, product_id="pro_monthly", purchase_token=sub["token"]),
            pb.GooglePlayPurchase(package_name=PACKAGE, product_id="remove_ads", purchase_token=pending["token"]),
        ]), timeout=30)
        got = sorted((e.product_id, e.active, e.store) for e in r.entitlements)
        assert got == [("pro_monthly", True, pb.STORE_GOOGLE_PLAY), ("remove_ads", True, pb.STORE_GOOGLE_PLAY)]
        # Recorded as paid: acknowledged (a purchase restored is the account's now).
        assert len(wait_calls(fake, "purchases.products.acknowledge", ads["token"])) == 1
        assert len(wait_calls(fake, "purchases.subscriptions.acknowledge", sub["token"])) == 1
        assert fake.calls("purchases.products.acknowledge", token=pending["token"]) == []
        expect_error(lambda: stub.RestorePurchases(pb.RestorePurchasesRequest(account_id="acct-restore", google_play_purchases=[
            pb.GooglePlayPurchase(package_name="com.example.other", product_id="remove_ads", purchase_token=ads["token"])]), timeout=30),
            grpc.StatusCode.INVALID_ARGUMENT, "WRONG_APP")
    finally:
        node.stop()


def test_billingctl_scripts_the_fake_and_verifies_with_the_api(fake):
    import subprocess
    from conftest import binary
    made = subprocess.run([binary("billingctl"), "teststore", "play-purchase", "--fake", fake.url, "--ca", fake.ca_path,
                           "--product", "remove_ads", "--order", "0190a3c2-7d4e-7b1a-9c3d-2e4f5a6b7c8d", "--test"],
                          capture_output=True, text=True, timeout=30)
    assert made.returncode == 0, made.stderr
    record = json.loads(made.stdout)
    assert record["productId"] == "remove_ads" and record["orderId"].startswith("GPA.")
    seen = subprocess.run([binary("billingctl"), "play", "verify", PACKAGE, "remove_ads", record["token"], "--service-account",
                           fake.service_account_path, "--api-url", fake.url, "--ca", fake.ca_path], capture_output=True, text=True, timeout=30)
    assert seen.returncode == 0, seen.stderr
    got = json.loads(seen.stdout)
    assert got["orderId"] == record["orderId"] and got["purchaseState"] == 0 and got["purchaseType"] == 0
    assert got["obfuscatedExternalAccountId"] == "0190a3c2-7d4e-7b1a-9c3d-2e4f5a6b7c8d"
    sub = subprocess.run([binary("billingctl"), "teststore", "play-subscription", "--fake", fake.url, "--ca", fake.ca_path,
                          "--product", "pro_monthly"], capture_output=True, text=True, timeout=30)
    assert sub.returncode == 0, sub.stderr
    token = json.loads(sub.stdout)["token"]
    seen = subprocess.run([binary("billingctl"), "play", "verify", PACKAGE, "pro_monthly", token, "--subscription", "--service-account",
                           fake.service_account_path, "--api-url", fake.url, "--ca", fake.ca_path], capture_output=True, text=True, timeout=30)
    assert seen.returncode == 0, seen.stderr
    assert json.loads(seen.stdout)["subscriptionState"] == "SUBSCRIPTION_STATE_ACTIVE"
    missing = subprocess.run([binary("billingctl"), "play", "verify", PACKAGE, "remove_ads", "no-such-token", "--service-account",
                              fake.service_account_path, "--api-url", fake.url, "--ca", fake.ca_path], capture_output=True, text=True, timeout=30)
    assert missing.returncode != 0 and "not found" in missing.stderr


def long_token(n=300):
    """A purchase token of n characters, in Google's alphabet (real ones are often longer than 128)."""
    import secrets
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."
    return "".join(secrets.choice(alphabet) for _ in range(n))


def db_flag(db):
    return postgres_database() if db == "postgres" else None


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_get_transaction_by_a_300_character_purchase_token(fake, db):
    """GetTransaction takes the purchase token the contract names, at its real length: a one-time product's token
    answers its transaction, a subscription's the newest transaction of that token (after a renewal too)."""
    node = start_rtdn(fake, database=db_flag(db))
    try:
        stub = billing(grpc.insecure_channel(node.address))
        o = order(stub, "remove_ads", account="acct-token")
        p = fake.add_product("remove_ads", account_id=o.order_id, token=long_token(300), notify=False)
        assert len(p["token"]) == 300
        submit(stub, o.order_id, p["token"], "remove_ads")
        got = stub.GetTransaction(pb.GetTransactionRequest(transaction_id=p["token"]), timeout=10)
        assert got.transaction.transaction_id == p["orderId"] and got.account_id == "acct-token"
        assert got.order.order_id == o.order_id

        o2 = order(stub, "pro_monthly", account="acct-token")
        s = fake.add_subscription("pro_monthly", account_id=o2.order_id, token=long_token(400))
        assert s["push"]["status"] == 200
        got = stub.GetTransaction(pb.GetTransactionRequest(transaction_id=s["token"]), timeout=10)
        assert got.transaction.transaction_id == s["orderId"] and got.account_id == "acct-token"
        renewed = fake.renew(s["token"])
        assert renewed["push"]["status"] == 200
        got = stub.GetTransaction(pb.GetTransactionRequest(transaction_id=s["token"]), timeout=10)
        assert got.transaction.transaction_id == renewed["orderId"], "the token's newest transaction"
        # The bound is 512 bytes; an unknown token of that length is simply not found.
        expect_error(lambda: stub.GetTransaction(pb.GetTransactionRequest(transaction_id=long_token(512)), timeout=10),
                     grpc.StatusCode.NOT_FOUND, "TRANSACTION_NOT_FOUND")
        expect_error(lambda: stub.GetTransaction(pb.GetTransactionRequest(transaction_id=long_token(513)), timeout=10),
                     grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
    finally:
        node.stop()


def account_events(stub, account):
    return list(stub.ListEvents(pb.ListEventsRequest(after_cursor=0, limit=1000, account_id=account), timeout=10).events)


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_subscription_expired_writes_entitlement_expired_once(fake, db):
    """SUBSCRIPTION_EXPIRED (the API reads SUBSCRIPTION_STATE_EXPIRED) ends the entitlement with one
    ENTITLEMENT_EXPIRED, as the App Store's EXPIRED does; the same news again (a new message, a redelivery) writes
    nothing."""
    node = start_rtdn(fake, database=db_flag(db))
    try:
        stub = billing(grpc.insecure_channel(node.address))
        o = order(stub, "pro_monthly", account="acct-exp")
        s = fake.add_subscription("pro_monthly", account_id=o.order_id)
        assert fake.cancel(s["token"])["push"]["status"] == 200
        expired = fake.expire(s["token"])
        assert expired["push"]["status"] == 200
        e = entitlement(stub, "acct-exp")
        assert e.state == pb.ENTITLEMENT_STATE_EXPIRED and not e.active
        events = account_events(stub, "acct-exp")
        ends = [ev for ev in events if ev.type == pb.EVENT_TYPE_ENTITLEMENT_EXPIRED]
        assert len(ends) == 1 and ends[0].cause == "rtdn:SUBSCRIPTION_EXPIRED", [(ev.type, ev.cause) for ev in events]
        assert ends[0].entitlement.state == pb.ENTITLEMENT_STATE_EXPIRED and not ends[0].entitlement.active
        # The same state told again: a new Pub/Sub message, and a redelivery of the first one.
        url = fake.rtdn_url
        again = fake.push(url, fake.subscription_notification(fake.subscription(s["token"]), "SUBSCRIPTION_EXPIRED"))
        assert again["status"] == 200 and json.loads(again["body"])["result"] == "applied"
        assert len(account_events(stub, "acct-exp")) == len(events), "a repeat writes no event"
    finally:
        node.stop()


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_the_replaced_tokens_transaction_reads_upgraded(fake, db):
    """An upgrade through linkedPurchaseToken: one entitlement (the new product), and the replaced purchase's
    transaction is `upgraded`, as the App Store marks the transaction an upgrade supersedes; a deferred downgrade
    marks nothing."""
    node = start_rtdn(fake, database=db_flag(db))
    try:
        stub = billing(grpc.insecure_channel(node.address))
        o = order(stub, "pro_monthly", account="acct-up")
        s = fake.add_subscription("pro_monthly", account_id=o.order_id)
        assert s["push"]["status"] == 200
        up = fake.change(s["token"], "pro_yearly", replacement_mode="CHARGE_PRORATED_PRICE", period_ms=365 * 86400000)
        assert up["push"]["status"] == 200
        history = stub.ListTransactions(pb.ListTransactionsRequest(account_id="acct-up"), timeout=10).transactions
        by_id = {t.transaction_id: t for t in history}
        assert set(by_id) == {s["orderId"], up["orderId"]}, list(by_id)
        assert by_id[s["orderId"]].upgraded, "the replaced purchase is superseded"
        assert not by_id[up["orderId"]].upgraded
        assert by_id[up["orderId"]].original_transaction_id == s["orderId"]
        ents = stub.GetEntitlements(pb.GetEntitlementsRequest(account_id="acct-up", include_inactive=True), timeout=10).entitlements
        assert [(e.product_id, e.active) for e in ents] == [("pro_yearly", True)]
        got = stub.GetTransaction(pb.GetTransactionRequest(transaction_id=s["token"]), timeout=10)
        assert got.transaction.upgraded and got.transaction.transaction_id == s["orderId"]
        # A deferred change keeps the same token: nothing is superseded.
        o2 = order(stub, "pro_yearly", account="acct-down")
        d = fake.add_subscription("pro_yearly", account_id=o2.order_id)
        fake.change(d["token"], "pro_monthly", replacement_mode="DEFERRED")
        fake.renew(d["token"])
        history = stub.ListTransactions(pb.ListTransactionsRequest(account_id="acct-down"), timeout=10).transactions
        assert len(history) == 2 and not any(t.upgraded for t in history)
    finally:
        node.stop()


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_support_finds_a_customer_by_purchase_token_and_order_number(fake, db):
    """Support.FindCustomers with the ids an Android customer or Google's order e-mail gives: the purchase token
    (any length up to 512 bytes) and the orderId (GPA.xxxx), each by its index; GetCustomer then shows the store."""
    node = start_rtdn(fake, database=db_flag(db))
    try:
        channel = grpc.insecure_channel(node.address)
        stub, support = billing(channel), pb_grpc.SupportStub(channel)
        o = order(stub, "pro_monthly", account="acct-android")
        s = fake.add_subscription("pro_monthly", account_id=o.order_id, token=long_token(300))
        assert s["push"]["status"] == 200
        renewed = fake.renew(s["token"])
        assert renewed["push"]["status"] == 200
        for query, kind in [(s["token"], "purchase_token"), (s["orderId"], "transaction_id"), (renewed["orderId"], "transaction_id"),
                            (o.order_id, "order_id")]:
            matches = support.FindCustomers(pb.FindCustomersRequest(query=query), timeout=10).matches
            assert [(m.customer.account_id, m.matched) for m in matches] == [("acct-android", kind)], query
        c = support.GetCustomer(pb.GetCustomerRequest(account_id="acct-android"), timeout=10).customer
        assert list(c.stores) == [pb.STORE_GOOGLE_PLAY] and c.transactions == 2 and c.orders == 1
        assert support.FindCustomers(pb.FindCustomersRequest(query=long_token(300)), timeout=10).matches == []
    finally:
        node.stop()


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_support_refunds_google_play_purchases_through_the_store(fake, db):
    """Support.RefundPurchase: a one-time purchase through orders.refund (revoke as asked), a subscription with its
    access ended through purchases.subscriptionsv2.revoke; each recorded as a voided purchase is (the transaction
    revoked, its order REFUNDED, ENTITLEMENT_REVOKED); a repeat answers the recorded refund without asking Google; an
    order Google refunded elsewhere is recorded as refunded; Google's own refusal is STORE_REFUSED with its words."""
    node = start(fake, database=db_flag(db))
    try:
        channel = grpc.insecure_channel(node.address)
        stub, support = billing(channel), pb_grpc.SupportStub(channel)
        refund = lambda tid, revoke=False: support.RefundPurchase(
            pb.RefundPurchaseRequest(transaction_id=tid, revoke_access=revoke, reason="customer asked"), timeout=30)
        ads = order(stub, "remove_ads", account="acct-refund")
        p = fake.add_product("remove_ads", account_id=ads.order_id)
        submit(stub, ads.order_id, p["token"], "remove_ads")
        r = refund(p["orderId"])
        assert r.transaction.revocation_time_ms > 0 and r.transaction.revocation_type == pb.REVOCATION_TYPE_REFUND_FULL
        assert r.order.state == pb.ORDER_STATE_REFUNDED and r.order.order_id == ads.order_id
        call, = fake.calls("orders.refund")
        assert call["path"].endswith(f"/orders/{p['orderId']}:refund") and call["query"]["revoke"] == ["false"]
        assert call["status"] == 200 and fake.product(p["token"])["state"] == "purchased"  # Google kept the item
        assert [v["orderId"] for v, _ in fake._voided] == [p["orderId"]]
        ents = stub.GetEntitlements(pb.GetEntitlementsRequest(account_id="acct-refund", include_inactive=True), timeout=10).entitlements
        assert [(e.product_id, e.state) for e in ents] == [("remove_ads", pb.ENTITLEMENT_STATE_REVOKED)]
        events = stub.ListEvents(pb.ListEventsRequest(account_id="acct-refund", limit=100), timeout=10).events
        assert ("EVENT_TYPE_ENTITLEMENT_REVOKED", "support:RefundPurchase") in [(pb.EventType.Name(e.type), e.cause) for e in events]
        # Again: the recorded refund, Google not asked twice.
        assert refund(p["orderId"]).transaction.revocation_time_ms == r.transaction.revocation_time_ms
        assert len(fake.calls("orders.refund")) == 1

        # A subscription, its access ended: purchases.subscriptionsv2.revoke with a full refund.
        sub = order(stub, "pro_monthly", account="acct-refund")
        s = fake.add_subscription("pro_monthly", account_id=sub.order_id)
        submit(stub, sub.order_id, s["token"], "pro_monthly")
        r = refund(s["token"], revoke=True)  # by its purchase token, too
        assert r.transaction.transaction_id == s["orderId"] and r.transaction.revocation_time_ms > 0
        call, = fake.calls("purchases.subscriptionsv2.revoke")
        assert call["path"].endswith(f"/purchases/subscriptionsv2/tokens/{s['token']}:revoke") and call["status"] == 200
        assert call["json"] == {"revocationContext": {"fullRefund": {}}}
        assert fake.subscription(s["token"])["state"] == "SUBSCRIPTION_STATE_EXPIRED"
        # An earlier period of a renewed subscription: that order, through orders.refund (a revoke would end the latest).
        sub2 = order(stub, "pro_yearly", account="acct-refund")
        s2 = fake.add_subscription("pro_yearly", account_id=sub2.order_id)
        submit(stub, sub2.order_id, s2["token"], "pro_yearly")
        renewed = fake.renew(s2["token"])
        stub.RestorePurchases(pb.RestorePurchasesRequest(account_id="acct-refund", google_play_purchases=[pb.GooglePlayPurchase(
            package_name=PACKAGE, product_id="pro_yearly", purchase_token=s2["token"])]), timeout=30)
        r = refund(s2["orderId"], revoke=True)
        assert r.transaction.transaction_id == s2["orderId"]
        last_call = fake.calls("orders.refund")[-1]
        assert last_call["path"].endswith(f"/orders/{s2['orderId']}:refund") and last_call["query"]["revoke"] == ["true"]
        assert len(fake.calls("purchases.subscriptionsv2.revoke")) == 1 and renewed["orderId"] != s2["orderId"]

        # Refunded elsewhere (the Play Console), not yet known to billingd: Google says so, billingd records it.
        more = order(stub, "remove_ads", account="acct-refund-2")
        q = fake.add_product("remove_ads", account_id=more.order_id)
        submit(stub, more.order_id, q["token"], "remove_ads")
        fake.void(q["token"], source="developer")
        r = refund(q["orderId"], revoke=True)
        assert r.transaction.revocation_time_ms > 0 and r.order.state == pb.ORDER_STATE_REFUNDED
        assert fake.calls("orders.refund")[-1]["status"] == 400
        # Google refuses for a reason of its own: STORE_REFUSED with Google's words, nothing recorded.
        last = order(stub, "remove_ads", account="acct-refund-3")
        z = fake.add_product("remove_ads", account_id=last.order_id)
        submit(stub, last.order_id, z["token"], "remove_ads")
        fake.fail_next(400, path_prefix=f"/androidpublisher/v3/applications/{PACKAGE}/orders")
        info = expect_error(lambda: refund(z["orderId"]), grpc.StatusCode.FAILED_PRECONDITION, "STORE_REFUSED")
        assert "HTTP 400 invalid" in info.metadata["store_error"]
        t = stub.GetTransaction(pb.GetTransactionRequest(transaction_id=z["orderId"]), timeout=10).transaction
        assert t.revocation_time_ms == 0
        expect_error(lambda: refund("GPA.0000-0000-0000-00000"), grpc.StatusCode.NOT_FOUND, "TRANSACTION_NOT_FOUND")
        entries = support.ListAuditEntries(pb.ListAuditEntriesRequest(method="billing.v1.Support/RefundPurchase"), timeout=10).entries
        assert [e.outcome for e in entries][:2] == ["TRANSACTION_NOT_FOUND", "STORE_REFUSED"]
        assert {e.account_id for e in entries if e.outcome == "OK"} == {"acct-refund", "acct-refund-2"}
    finally:
        node.stop()
