"""billingd as a client of the App Store Server API, against the local fake (appstore_fake.py, itself proven
faithful to Apple's own client library in test_appstore_fake.py): restore by transaction id, reconciliation
of missed notifications (and of refunds through Get Refund History), order-id lookups, test notifications,
consumption answers, renewal-date extensions, Set App Account Token, app transactions, tokens, retries and
failures as a caller sees them."""
import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request

import grpc
import pytest

import appstore_mint as mint
from appstore_fake import FakeAppStore, make_api_key
from billing.admin.v1 import admin_pb2, admin_pb2_grpc
from billing.v1 import billing_pb2 as pb
from conftest import Billingd, binary, free_port
from helpers import billing, error_info, expect_error

ISSUER = "57246542-96fe-1a63-e053-0824d011072a"
KEY_ID = "2X9R4HXF34"
SUB = "com.example.pro.monthly"
LIFETIME = "com.example.lifetime"
COINS = "com.example.coins100"
DAY = 86_400_000


def now_ms():
    return int(time.time() * 1000)


class World:
    """A test store, an API key, a production fake, a sandbox fake and one billingd that calls both."""

    def __init__(self, *extra_flags, page_size=20):
        self.dir = tempfile.mkdtemp(prefix="billingd-appstore-api-")
        self.store = os.path.join(self.dir, "teststore")
        subprocess.run([binary("billingctl"), "teststore", "init", self.store], check=True, capture_output=True)
        self.p8, public = make_api_key(self.dir)
        self.signer = mint.Signer(self.store)
        common = dict(bundle_id=mint.BUNDLE, issuer_id=ISSUER, key_id=KEY_ID, api_public_key_pem=public, page_size=page_size)
        self.production = FakeAppStore(self.store, environment="Production", **common)
        self.sandbox = FakeAppStore(self.store, environment="Sandbox", **common)
        self.ca = os.path.join(self.dir, "fakes-ca.pem")
        with open(self.ca, "w") as out:
            for fake in (self.production, self.sandbox):
                out.write(open(fake.ca_path).read())
        self.notify_port = free_port()
        self.billingd = Billingd(
            "--dev", "--dev-store", self.store, "--bundle-id", mint.BUNDLE,
            "--appstore-api-key-id", KEY_ID, "--appstore-api-issuer-id", ISSUER, "--appstore-api-private-key", self.p8,
            "--appstore-api-url", self.production.url, "--appstore-api-sandbox-url", self.sandbox.url,
            "--appstore-api-ca", self.ca, "--notifications-listen", f"127.0.0.1:{self.notify_port}", *extra_flags)
        self.sandbox.notification_url = f"http://127.0.0.1:{self.notify_port}/appstore/notifications"
        self.channel = self.billingd.channel()
        self.api = billing(self.channel)
        self.admin = admin_pb2_grpc.AdminStub(self.channel)

    def close(self):
        self.channel.close()
        self.billingd.stop()
        self.production.stop()
        self.sandbox.stop()
        shutil.rmtree(self.billingd.dir, ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    def deliver(self, signed_payload):
        """Posts a notification as Apple does; the HTTP status and the JSON answer."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.notify_port}/appstore/notifications", data=mint.body(signed_payload),
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())


@pytest.fixture(scope="module")
def world():
    w = World("--reconcile-interval", "0", "--consumption-answers", "auto")
    yield w
    w.close()


def order_of(api, account, product=LIFETIME):
    """A PENDING order of `account`: its id is what the app puts in appAccountToken when it buys."""
    return api.CreateOrder(pb.CreateOrderRequest(account_id=account, product_id=product)).order.order_id


def subscription_history(fake, original, start_ms, renewals, customer=None, token=None):
    """A monthly subscription bought at start_ms and renewed `renewals` times; the transactions' ids."""
    ids = []
    for i in range(renewals + 1):
        tid = str(int(original) + i)
        purchase = start_ms + i * 30 * DAY
        fake.add_transaction(mint.transaction(tid, SUB, original=original, purchase_ms=purchase, expires_ms=purchase + 30 * DAY,
                                              signed_ms=purchase, token=token), customer=customer)
        ids.append(tid)
    return ids


def test_restore_by_transaction_id_falls_back_to_sandbox_and_pages(world):
    start = now_ms() - 200 * DAY
    # 25 transactions: two pages of 20 in the sandbox; production knows none of them. The app bought them
    # through orders of this account (appAccountToken = the order id), which billingd never saw paid.
    ids = subscription_history(world.sandbox, "7100000000", start, 23, customer="alice",
                               token=order_of(world.api, "acct-restore", SUB))
    world.sandbox.add_transaction(mint.transaction("7100000900", LIFETIME, product_type=mint.NON_CONSUMABLE, purchase_ms=start,
                                                   signed_ms=start, token=order_of(world.api, "acct-restore")), customer="alice")
    world.production.reset_requests()
    world.sandbox.reset_requests()
    # Two ids of one customer: one history fetched (the second id is in it).
    r = world.api.RestorePurchases(pb.RestorePurchasesRequest(account_id="acct-restore", transaction_ids=[ids[3], ids[7]]), timeout=30)
    products = {e.product_id: e for e in r.entitlements}
    assert set(products) == {SUB, LIFETIME}
    assert products[SUB].active and products[SUB].original_transaction_id == "7100000000"
    assert products[SUB].environment == pb.ENVIRONMENT_SANDBOX
    # Production was asked first and did not know the id; the sandbox answered both pages.
    prod = [q for q in world.production.requests if q["path"].startswith("/inApps/v2/history/")]
    sand = [q for q in world.sandbox.requests if q["path"].startswith("/inApps/v2/history/")]
    assert len(prod) == 1 and prod[0]["status"] == 404
    assert [q["status"] for q in sand] == [200, 200]
    assert "revision" not in sand[0]["query"] and sand[1]["query"]["revision"]
    assert all(q["http_version"] == "2" for q in prod + sand)
    # GetEntitlements now answers from billingd's own records, without a proof.
    owned = world.api.GetEntitlements(pb.GetEntitlementsRequest(account_id="acct-restore"))
    assert {e.product_id for e in owned.entitlements} == {SUB, LIFETIME}


def test_tokens_are_apples_shape_and_reused(world):
    world.sandbox.reset_requests()
    world.sandbox.add_transaction(mint.transaction("7200000000", LIFETIME, product_type=mint.NON_CONSUMABLE,
                                                   purchase_ms=now_ms() - DAY, signed_ms=now_ms() - DAY,
                                                   token=order_of(world.api, "acct-token-1")))
    first = world.api.RestorePurchases(pb.RestorePurchasesRequest(account_id="acct-token-1", transaction_ids=["7200000000"]), timeout=30)
    assert [e.product_id for e in first.entitlements] == [LIFETIME]
    # A transaction id proves nothing: a second account naming it does not take the purchase (even under the
    # default transfer policy); a signed transaction from the device would.
    second = world.api.RestorePurchases(pb.RestorePurchasesRequest(account_id="acct-token-2", transaction_ids=["7200000000"]), timeout=30)
    assert list(second.entitlements) == []
    still = world.api.GetEntitlements(pb.GetEntitlementsRequest(account_id="acct-token-1"))
    assert [e.product_id for e in still.entitlements] == [LIFETIME]
    seen = [q for q in world.sandbox.requests if q["auth_error"] is None]
    assert len(seen) >= 2
    for q in seen:
        h, c = q["jwt_header"], q["jwt_claims"]
        assert h == {"alg": "ES256", "kid": KEY_ID, "typ": "JWT"}
        assert c["iss"] == ISSUER and c["aud"] == "appstoreconnect-v1" and c["bid"] == mint.BUNDLE
        assert 0 < c["exp"] - c["iat"] <= 3600
        assert abs(c["iat"] - time.time()) < 120
    # One token for both calls (reused until near its expiry).
    assert len({json.dumps(q["jwt_claims"], sort_keys=True) for q in seen}) == 1


def test_an_id_never_takes_from_another_account(world):
    """Restore by id restores like a proof, but never takes a purchase from another account: not one it owns,
    not one paid for another account's pending order (its appAccountToken names that order)."""
    t = now_ms() - DAY
    # Nobody owns it and nothing names an owner: it restores as a signed transaction would.
    world.sandbox.add_transaction(mint.transaction("7250000000", LIFETIME, product_type=mint.NON_CONSUMABLE, purchase_ms=t,
                                                   signed_ms=t))
    r = world.api.RestorePurchases(pb.RestorePurchasesRequest(account_id="acct-first", transaction_ids=["7250000000"]), timeout=30)
    assert [e.product_id for e in r.entitlements] == [LIFETIME]
    # Owned now: another account naming the id gets nothing, even under the default transfer policy.
    r = world.api.RestorePurchases(pb.RestorePurchasesRequest(account_id="acct-second", transaction_ids=["7250000000"]), timeout=30)
    assert list(r.entitlements) == []
    # Alice's purchase, paid but not yet submitted: an attacker naming its id gets nothing, and her SubmitReceipt
    # still completes her order afterwards.
    alice_order = order_of(world.api, "acct-alice")
    tx = mint.transaction("7260000000", LIFETIME, product_type=mint.NON_CONSUMABLE, purchase_ms=t, signed_ms=t, token=alice_order,
                          environment="Sandbox")
    world.sandbox.add_transaction(tx)
    r = world.api.RestorePurchases(pb.RestorePurchasesRequest(account_id="acct-attacker", transaction_ids=["7260000000"]), timeout=30)
    assert list(r.entitlements) == []
    done = world.api.SubmitReceipt(pb.SubmitReceiptRequest(order_id=alice_order, signed_transaction=world.signer.sign(tx)))
    assert done.order.state == pb.ORDER_STATE_COMPLETED and done.order.account_id == "acct-alice"
    # Once Alice owns it, her own restore by id updates it; the attacker's still gets nothing.
    mine = world.api.RestorePurchases(pb.RestorePurchasesRequest(account_id="acct-alice", transaction_ids=["7260000000"]), timeout=30)
    assert [e.product_id for e in mine.entitlements] == [LIFETIME]
    r = world.api.RestorePurchases(pb.RestorePurchasesRequest(account_id="acct-attacker", transaction_ids=["7260000000"]), timeout=30)
    assert list(r.entitlements) == []


def test_restore_refusals(world):
    call = world.api.RestorePurchases
    try:
        call(pb.RestorePurchasesRequest(account_id="acct-x", transaction_ids=["7999999999"]), timeout=30)
        raise AssertionError("expected NOT_FOUND")
    except grpc.RpcError as err:
        # A restore has no order: the message names the transaction, not "this order".
        assert err.code() == grpc.StatusCode.NOT_FOUND and error_info(err).reason == "TRANSACTION_NOT_FOUND"
        assert "7999999999" in err.details() and "order" not in err.details(), err.details()
        assert error_info(err).metadata["transaction_id"] == "7999999999"
    expect_error(call, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD",
                 request=pb.RestorePurchasesRequest(account_id="acct-x", transaction_ids=["12ab"]))
    expect_error(call, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD",
                 request=pb.RestorePurchasesRequest(account_id="acct-x", transaction_ids=[str(i) for i in range(21)]))
    expect_error(call, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD",
                 request=pb.RestorePurchasesRequest(account_id="", transaction_ids=["7100000000"]))


def test_rate_limits_and_outages(world):
    world.sandbox.add_transaction(mint.transaction("7300000000", LIFETIME, product_type=mint.NON_CONSUMABLE,
                                                   purchase_ms=now_ms() - DAY, signed_ms=now_ms() - DAY,
                                                   token=order_of(world.api, "acct-429")))
    # 429 with Retry-After, then an answer: the caller sees only success, about a second later.
    world.sandbox.reset_requests()
    world.sandbox.fail_next(429, retry_after=1, path_prefix="/inApps/v2/history/")
    started = time.monotonic()
    r = world.api.RestorePurchases(pb.RestorePurchasesRequest(account_id="acct-429", transaction_ids=["7300000000"]), timeout=30)
    assert [e.product_id for e in r.entitlements] == [LIFETIME]
    assert time.monotonic() - started >= 0.9
    statuses = [q["status"] for q in world.sandbox.requests if q["path"].startswith("/inApps/v2/history/")]
    assert statuses == [429, 200]
    # 5xx on every attempt: UNAVAILABLE APPSTORE_API_UNAVAILABLE after a bounded number of tries.
    world.sandbox.reset_requests()
    world.sandbox.fail_next(503, count=10, path_prefix="/inApps/v2/history/")
    expect_error(world.api.RestorePurchases, grpc.StatusCode.UNAVAILABLE, "APPSTORE_API_UNAVAILABLE",
                 request=pb.RestorePurchasesRequest(account_id="acct-503", transaction_ids=["7300000000"]), timeout=60)
    tries = [q for q in world.sandbox.requests if q["path"].startswith("/inApps/v2/history/")]
    assert len(tries) == 4
    world.sandbox.clear_faults()  # nothing left over for the next test (6 of the 10 faults were not used)
    # A bad key id is Apple's 401: refused credentials are UNAVAILABLE for the caller and an error in the log.


def test_reconcile_applies_what_was_missed_once(world):
    base = now_ms() - 2 * DAY
    # A purchase the account proves, then a REFUND billingd never received (the endpoint was down).
    tx = mint.transaction("7400000000", LIFETIME, product_type=mint.NON_CONSUMABLE, purchase_ms=base, signed_ms=base)
    world.api.RestorePurchases(pb.RestorePurchasesRequest(account_id="acct-recon", signed_transactions=[world.signer.sign(
        dict(tx, environment="Sandbox"))]))
    refunded = dict(tx, revocationDate=base + 3_600_000, revocationReason=0, signedDate=base + 3_600_000)
    world.sandbox.add_notification({"notificationType": "REFUND", "signedDate": base + 3_600_000,
                                    "data": {"signedTransactionInfo": refunded}})
    r = world.admin.Reconcile(admin_pb2.ReconcileRequest(since_time_ms=base - DAY), timeout=60)
    assert (r.applied, r.duplicate, r.rejected) == (1, 0, 0)
    assert r.pages >= 2  # production (empty) and sandbox
    owned = world.api.GetEntitlements(pb.GetEntitlementsRequest(account_id="acct-recon", include_inactive=True))
    [e] = [e for e in owned.entitlements if e.product_id == LIFETIME]
    assert not e.active and e.revocation_time_ms == base + 3_600_000
    # Again: everything is a duplicate, nothing changes.
    again = world.admin.Reconcile(admin_pb2.ReconcileRequest(since_time_ms=base - DAY), timeout=60)
    assert again.applied == 0 and again.duplicate >= 1
    events = world.api.ListEvents(pb.ListEventsRequest(account_id="acct-recon"))
    assert [ev.type for ev in events.events].count(pb.EVENT_TYPE_ENTITLEMENT_REVOKED) == 1


def test_reconcile_pages_through_history(tmp_path):
    w = World("--reconcile-interval", "0", page_size=3)
    try:
        base = now_ms() - 3 * DAY
        for i in range(10):
            w.sandbox.add_notification({"notificationType": "TEST", "signedDate": base + i * 1000})
        r = w.admin.Reconcile(admin_pb2.ReconcileRequest(since_time_ms=base - 1000), timeout=60)
        assert r.applied == 10 and r.pages == 1 + 4  # production: one empty page; sandbox: 3+3+3+1
        tokens = [q["query"].get("paginationToken") for q in w.sandbox.requests if q["path"] == "/inApps/v1/notifications/history"]
        assert tokens[0] is None and all(tokens[1:])
        bodies = [q["json"] for q in w.sandbox.requests if q["path"] == "/inApps/v1/notifications/history"]
        assert all(b["startDate"] == base - 1000 for b in bodies)
    finally:
        w.close()


def test_reconcile_at_start_from_newest_recorded(tmp_path):
    w = World("--reconcile-interval", "0")
    try:
        # A delivery billingd got, then one it missed: the next start reconciles from the newest recorded less the margin.
        first = now_ms() - 5 * 3_600_000
        assert w.deliver(mint.notification(w.signer, "TEST", signed_ms=first, environment="Sandbox"))[1] == {"result": "applied"}
        w.sandbox.add_notification({"notificationType": "TEST", "signedDate": first + 60_000})
        w.billingd.stop()
        w.billingd.flags = [f for f in w.billingd.flags if f not in ("--reconcile-interval", "0")] + ["--reconcile-margin", "600"]
        w.sandbox.reset_requests()
        w.billingd.start()
        deadline = time.time() + 20
        while time.time() < deadline and "reconciliation" not in w.billingd.log():
            time.sleep(0.1)
        line = [json.loads(l) for l in w.billingd.log().splitlines() if '"reconciliation"' in l][-1]
        assert line["applied"] == 1 and line["error"] == ""
        [body] = [q["json"] for q in w.sandbox.requests if q["path"] == "/inApps/v1/notifications/history"]
        assert body["startDate"] == first - 600_000
    finally:
        w.close()


def test_look_up_order(world):
    t = now_ms() - DAY
    tx = mint.transaction("7500000000", COINS, product_type="Consumable", purchase_ms=t, signed_ms=t)
    world.sandbox.add_transaction(tx, order_id="MK5TTTVWJH")
    order = world.api.CreateOrder(pb.CreateOrderRequest(account_id="acct-lookup", product_id=COINS, idempotency_key="k1")).order
    world.api.SubmitReceipt(pb.SubmitReceiptRequest(order_id=order.order_id, signed_transaction=world.signer.sign(
        dict(tx, environment="Sandbox"))))
    r = world.admin.LookUpOrder(admin_pb2.LookUpOrderRequest(customer_order_id="MK5TTTVWJH"), timeout=30)
    assert r.found and r.environment == pb.ENVIRONMENT_SANDBOX
    assert [x.transaction_id for x in r.transactions] == ["7500000000"]
    assert [o.order_id for o in r.orders] == [order.order_id] and list(r.account_ids) == ["acct-lookup"]
    missing = world.admin.LookUpOrder(admin_pb2.LookUpOrderRequest(customer_order_id="NOSUCHORDER"), timeout=30)
    assert not missing.found and not missing.transactions
    expect_error(world.admin.LookUpOrder, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD",
                 request=admin_pb2.LookUpOrderRequest(customer_order_id="../x"))


def test_test_notification_round_trip(world):
    r = world.admin.RequestTestNotification(admin_pb2.RequestTestNotificationRequest(environment=pb.ENVIRONMENT_SANDBOX), timeout=30)
    assert r.test_notification_token
    deadline = time.time() + 10
    while True:
        s = world.admin.GetTestNotificationStatus(admin_pb2.GetTestNotificationStatusRequest(
            test_notification_token=r.test_notification_token, environment=pb.ENVIRONMENT_SANDBOX), timeout=30)
        if s.send_attempt_results or time.time() > deadline:
            break
        time.sleep(0.1)
    assert list(s.send_attempt_results) == ["SUCCESS"] and s.notification_uuid
    expect_error(world.admin.GetTestNotificationStatus, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD",
                 request=admin_pb2.GetTestNotificationStatusRequest(test_notification_token="unknown-token"), timeout=30)


def test_consumption_request_answered_from_what_billingd_knows(world):
    t = now_ms() - DAY
    tx = mint.transaction("7600000000", COINS, product_type="Consumable", purchase_ms=t, signed_ms=t, environment="Sandbox")
    world.sandbox.add_transaction(tx)
    order = world.api.CreateOrder(pb.CreateOrderRequest(account_id="acct-cons", product_id=COINS, idempotency_key="c1")).order
    world.api.SubmitReceipt(pb.SubmitReceiptRequest(order_id=order.order_id, signed_transaction=world.signer.sign(tx)))
    status, answer = world.deliver(mint.notification(world.signer, "CONSUMPTION_REQUEST", signed_ms=now_ms(), tx=tx,
                                                     environment="Sandbox"))
    assert (status, answer) == (200, {"result": "applied"})
    deadline = time.time() + 10
    while "7600000000" not in world.sandbox.consumption and time.time() < deadline:
        time.sleep(0.05)
    sent = world.sandbox.consumption["7600000000"]
    assert sent["customerConsented"] is True and sent["deliveryStatus"] == "DELIVERED"
    assert sent["sampleContentProvided"] is False
    # Apple retrying the same request (same notificationUUID) is a duplicate: no second answer.
    signed = mint.notification(world.signer, "CONSUMPTION_REQUEST", signed_ms=now_ms(), tx=dict(tx, transactionId="7600000000"),
                               environment="Sandbox", uuid="5f1c2a3b-0000-4000-8000-000000000001")
    assert world.deliver(signed) == (200, {"result": "applied"})
    assert world.deliver(signed) == (200, {"result": "duplicate"})
    time.sleep(1)
    puts = [q for q in world.sandbox.requests if q["path"] == "/inApps/v2/transactions/consumption/7600000000"]
    assert len(puts) == 2  # one per request (the first delivery above, and this one), never one per delivery
    # A server without the v2 endpoint: the same answer through v1, every v1 field present.
    world.sandbox.fail_next(404, path_prefix="/inApps/v2/transactions/consumption/")
    assert world.deliver(mint.notification(world.signer, "CONSUMPTION_REQUEST", signed_ms=now_ms(), tx=tx,
                                            environment="Sandbox"))[1]["result"] == "applied"
    deadline = time.time() + 10
    while "platform" not in world.sandbox.consumption.get("7600000000", {}) and time.time() < deadline:
        time.sleep(0.05)
    v1 = world.sandbox.consumption["7600000000"]
    assert v1["customerConsented"] is True and v1["deliveryStatus"] == 0 and v1["platform"] == 1
    assert v1["appAccountToken"] == order.order_id


def test_not_configured_and_key_never_logged(world, fresh):
    plain = fresh("--dev")
    with plain.channel() as ch:
        expect_error(billing(ch).RestorePurchases, grpc.StatusCode.FAILED_PRECONDITION, "APPSTORE_API_NOT_CONFIGURED",
                     request=pb.RestorePurchasesRequest(account_id="a", transaction_ids=["1"]))
        expect_error(admin_pb2_grpc.AdminStub(ch).Reconcile, grpc.StatusCode.FAILED_PRECONDITION, "APPSTORE_API_NOT_CONFIGURED",
                     request=admin_pb2.ReconcileRequest())
    key_lines = [l for l in open(world.p8).read().splitlines() if l and not l.startswith("-----")]
    log = world.billingd.log()
    assert all(l not in log for l in key_lines)
    metrics_free = re.findall(r"BEGIN PRIVATE KEY", log)
    assert not metrics_free


def test_flag_errors(tmp_path):
    key = tmp_path / "k.p8"
    key.write_text("not a key")
    def run(*flags):
        return subprocess.run([binary("billingd"), "--dev", "--dev-store", str(tmp_path / "ts"), "--bundle-id", mint.BUNDLE,
                               "--listen", "127.0.0.1:0", *flags], capture_output=True, text=True, timeout=30)
    r = run("--appstore-api-key-id", KEY_ID)
    assert r.returncode == 2 and "go together" in r.stderr
    r = run("--appstore-api-key-id", KEY_ID, "--appstore-api-issuer-id", ISSUER, "--appstore-api-private-key", str(key))
    assert r.returncode != 0 and "not an ES256" in r.stderr and "not a key" not in r.stderr
    r = run("--consumption-answers", "sometimes")
    assert r.returncode == 2 and "off or auto" in r.stderr
    r = subprocess.run([binary("billingd"), "--bundle-id", mint.BUNDLE, "--listen", "127.0.0.1:0", "--appstore-api-url", "ftp://127.0.0.1:9"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "https://" in r.stderr


def json_stream(text):
    """Every JSON value printed one after another."""
    decoder, out, i = json.JSONDecoder(), [], 0
    while i < len(text.rstrip()):
        while text[i].isspace():
            i += 1
        value, i = decoder.raw_decode(text, i)
        out.append(value)
    return out


def test_billingctl_appstore_and_admin(world):
    """billingctl calls the API directly with the operator's key (Get Transaction Info, Get All Subscription
    Statuses, history, lookup) and billingd's admin service."""
    t = now_ms() - DAY
    world.sandbox.add_transaction(mint.transaction("7700000000", SUB, purchase_ms=t, expires_ms=t + 30 * DAY, signed_ms=t),
                                  renewal=mint.renewal("7700000000", SUB, auto_renew=False, signed_ms=t))
    base = [binary("billingctl"), "--ca", world.sandbox.ca_path, "appstore"]
    creds = ["--key-id", KEY_ID, "--issuer-id", ISSUER, "--private-key", world.p8, "--bundle-id", mint.BUNDLE,
             "--url", world.sandbox.url]
    info = subprocess.run(base + ["transaction", "7700000000"] + creds, capture_output=True, text=True, timeout=30)
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["transactionId"] == "7700000000"
    statuses = subprocess.run(base + ["statuses", "7700000000"] + creds, capture_output=True, text=True, timeout=30)
    assert statuses.returncode == 0, statuses.stderr
    [s] = json_stream(statuses.stdout)
    assert s["status"] == 1 and s["originalTransactionId"] == "7700000000"
    assert s["renewalInfo"]["autoRenewStatus"] == 0 and s["transaction"]["productId"] == SUB
    missing = subprocess.run(base + ["lookup", "NOSUCHORDER"] + creds, capture_output=True, text=True, timeout=30)
    assert json.loads(missing.stdout) == {"found": False}
    unknown = subprocess.run(base + ["transaction", "7999999998"] + creds, capture_output=True, text=True, timeout=30)
    assert unknown.returncode == 1 and "4040010" in unknown.stderr
    # Through billingd: the admin service.
    admin = [binary("billingctl"), "--addr", world.billingd.address, "admin"]
    r = subprocess.run(admin + ["reconcile", "--since", str(now_ms() - DAY)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert set(json.loads(r.stdout)) >= {"pages", "applied", "duplicate"}
    r = subprocess.run(admin + ["lookup-order", "NOSUCHORDER"], capture_output=True, text=True, timeout=60)
    assert json.loads(r.stdout)["found"] is False
    # The short forms the issue names.
    ctl = [binary("billingctl"), "--addr", world.billingd.address]
    r = subprocess.run(ctl + ["reconcile", "--since", str(now_ms() - DAY)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "applied" in json.loads(r.stdout), r.stderr
    r = subprocess.run(ctl + ["lookup-order", "NOSUCHORDER"], capture_output=True, text=True, timeout=60)
    assert json.loads(r.stdout)["found"] is False
    r = subprocess.run(ctl + ["appstore", "test-notification", "--environment", "sandbox", "--wait"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["sendAttemptResults"] == ["SUCCESS"] and out["notificationUuid"] and out["testNotificationToken"]


def test_reconciliation_after_an_outage_equals_full_delivery(world, fresh):
    """Replica A gets every notification; billingd (B) misses all but the first two, then reconciles from the
    fake's history. Entitlements and events (types, causes, transactions, notifications, in order) end equal."""
    a = fresh("--dev", "--dev-store", world.store, "--bundle-id", mint.BUNDLE, "--notifications-listen", f"127.0.0.1:{free_port()}")
    a_notify = [f for f in a.flags if f.startswith("127.0.0.1:")][0]
    t = now_ms() - 10 * DAY
    sub = mint.transaction("7800000000", SUB, purchase_ms=t, expires_ms=t + 30 * DAY, signed_ms=t, environment="Sandbox")
    life = mint.transaction("7810000000", LIFETIME, product_type=mint.NON_CONSUMABLE, purchase_ms=t, signed_ms=t, environment="Sandbox")
    for server in (a, world.billingd):
        with server.channel() as ch:
            billing(ch).RestorePurchases(pb.RestorePurchasesRequest(account_id="acct-o1", signed_transactions=[world.signer.sign(sub)]))
            billing(ch).RestorePurchases(pb.RestorePurchasesRequest(account_id="acct-o2", signed_transactions=[world.signer.sign(life)]))
    def renewal(i, auto):
        return dict(sub, transactionId=str(7800000000 + i), purchaseDate=t + i * 30 * DAY, expiresDate=t + (i + 1) * 30 * DAY,
                    signedDate=t + i * 30 * DAY)
    step = 60_000
    plan = [
        {"notificationType": "DID_RENEW", "data": {"signedTransactionInfo": dict(sub, transactionId="7800000001", purchaseDate=t + DAY,
                                                                                  expiresDate=t + 31 * DAY, signedDate=t + DAY)}},
        {"notificationType": "DID_CHANGE_RENEWAL_STATUS", "subtype": "AUTO_RENEW_DISABLED",
         "data": {"signedRenewalInfo": mint.renewal("7800000000", SUB, auto_renew=False, signed_ms=t + DAY + step)}},
        {"notificationType": "REFUND", "data": {"signedTransactionInfo": dict(life, revocationDate=t + 2 * DAY, revocationReason=0,
                                                                               signedDate=t + 2 * DAY)}},
        {"notificationType": "DID_RENEW", "data": {"signedTransactionInfo": dict(sub, transactionId="7800000002", purchaseDate=t + 2 * DAY,
                                                                                  expiresDate=t + 40 * DAY, signedDate=t + 2 * DAY + step)}},
        {"notificationType": "REFUND_REVERSED", "data": {"signedTransactionInfo": dict(life, signedDate=t + 3 * DAY)}},
    ]
    signed = []
    for i, n in enumerate(plan):
        signed.append(world.sandbox.add_notification(dict(n, signedDate=now_ms() - 3_600_000 + i * 1000)))
    def post(addr, payload):
        req = urllib.request.Request(f"http://{addr}/appstore/notifications", data=mint.body(payload),
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())["result"]
    assert [post(a_notify, p) for p in signed] == ["applied"] * 5
    assert [world.deliver(p)[1]["result"] for p in signed[:2]] == ["applied"] * 2  # then the outage
    r = world.admin.Reconcile(admin_pb2.ReconcileRequest(since_time_ms=now_ms() - 2 * 3_600_000), timeout=60)
    # Duplicates: the two delivered before the outage, and any test notification of other tests in the range.
    assert r.applied == 3 and r.duplicate >= 2 and r.rejected == 0

    def state(server):
        with server.channel() as ch:
            api = billing(ch)
            out = {}
            for account in ("acct-o1", "acct-o2"):
                ents = api.GetEntitlements(pb.GetEntitlementsRequest(account_id=account, include_inactive=True)).entitlements
                events = api.ListEvents(pb.ListEventsRequest(account_id=account, limit=1000)).events
                out[account] = ([e.SerializeToString(deterministic=True) for e in ents],
                                [(ev.type, ev.cause, ev.transaction_id, ev.notification_uuid,
                                  ev.entitlement.SerializeToString(deterministic=True)) for ev in events])
            return out
    got, want = state(world.billingd), state(a)
    assert got == want
    assert [ev[0] for ev in got["acct-o2"][1]][-2:] == [pb.EVENT_TYPE_ENTITLEMENT_REVOKED, pb.EVENT_TYPE_ENTITLEMENT_REINSTATED]


@pytest.fixture(scope="module")
def strict():
    """Sandbox only, one-second attempts: retries and timeouts without waiting long."""
    w = World("--reconcile-interval", "0", "--environments", "sandbox", "--appstore-api-timeout", "1")
    w.sandbox.add_transaction(mint.transaction("7900000000", LIFETIME, product_type=mint.NON_CONSUMABLE,
                                               purchase_ms=now_ms() - DAY, signed_ms=now_ms() - DAY,
                                               token=order_of(w.api, "acct-strict")))
    yield w
    w.close()


def history_calls(fake):
    return [q["status"] for q in fake.requests if q["path"].startswith("/inApps/v2/history/")]


@pytest.mark.parametrize("faults, statuses, outcome", [
    ([(500, 2)], [500, 500, 200], "ok"),                     # 5xx: retried with backoff
    ([(429, 1)], [429, 200], "ok"),                          # 429: retried after Retry-After
    ([(401, 1)], [401, 200], "ok"),                          # 401: a new token, once
    ([(401, 5)], [401, 401], "APPSTORE_API_UNAVAILABLE"),    # 401 again: our credentials are wrong
    ([(500, 10)], [500, 500, 500, 500], "APPSTORE_API_UNAVAILABLE"),  # 4 attempts at most
    ([(404, 1)], [404], "TRANSACTION_NOT_FOUND"),            # 404: not retried
    ([("delay", 1)], [200, 200], "ok"),                      # an answer slower than the attempt limit: tried again
])
def test_failures_as_documented(strict, faults, statuses, outcome):
    strict.sandbox.clear_faults()
    strict.sandbox.reset_requests()
    for kind, count in faults:
        if kind == "delay":
            strict.sandbox.delay(2.5, count, path_prefix="/inApps/v2/history/")
        else:
            strict.sandbox.fail_next(kind, count=count, retry_after=1 if kind == 429 else None, path_prefix="/inApps/v2/history/")
    request = pb.RestorePurchasesRequest(account_id="acct-strict", transaction_ids=["7900000000"])
    logged_before = strict.billingd.log().count('RestorePurchases"')
    if outcome == "ok":
        r = strict.api.RestorePurchases(request, timeout=60)
        assert [e.product_id for e in r.entitlements] == [LIFETIME]
    else:
        code = grpc.StatusCode.NOT_FOUND if outcome == "TRANSACTION_NOT_FOUND" else grpc.StatusCode.UNAVAILABLE
        expect_error(strict.api.RestorePurchases, code, outcome, request=request, timeout=60)
    if faults[0][0] == "delay":
        time.sleep(2)  # the slow answer is logged by the fake when it finally comes
    assert history_calls(strict.sandbox) == statuses
    # The rpc line names the transaction, and for APPSTORE_API_UNAVAILABLE why Apple could not be used.
    deadline, lines = time.time() + 5, []
    while time.time() < deadline:  # the log is written by its own thread
        lines = [json.loads(l) for l in strict.billingd.log().splitlines() if 'RestorePurchases"' in l][logged_before:]
        if lines:
            break
        time.sleep(0.05)
    assert len(lines) == 1 and lines[-1]["msg"] == "rpc"
    assert lines[-1]["transaction_id"] == "7900000000"
    if outcome == "APPSTORE_API_UNAVAILABLE":
        assert str(statuses[-1]) in lines[-1]["cause"], lines[-1]
    else:
        assert "cause" not in lines[-1]
    strict.sandbox.clear_faults()
    if faults == [(401, 5)]:
        deadline, errors = time.time() + 5, []
        while not errors and time.time() < deadline:  # the log is written by its own thread
            errors = [json.loads(l) for l in strict.billingd.log().splitlines() if '"App Store Server API"' in l and '"error"' in l]
            time.sleep(0.05)
        assert errors and "401" in errors[-1]["error"]


def test_a_failed_reconciliation_range_is_read_again():
    """A run that fails keeps its range: live deliveries moving the newest notification forward meanwhile do not
    make the next run skip what the failed one should have read."""
    w = World("--reconcile-interval", "0", "--reconcile-margin", "60", "--environments", "sandbox", "--appstore-api-timeout", "1")
    try:
        now = now_ms()
        assert w.deliver(mint.notification(w.signer, "TEST", signed_ms=now - 40 * 60_000, environment="Sandbox"))[1]["result"] == "applied"
        missed = w.sandbox.add_notification({"notificationType": "TEST", "signedDate": now - 30 * 60_000})
        w.sandbox.fail_next(503, count=4, path_prefix="/inApps/v1/notifications/history")
        expect_error(w.admin.Reconcile, grpc.StatusCode.UNAVAILABLE, "APPSTORE_API_UNAVAILABLE", request=admin_pb2.ReconcileRequest(),
                     timeout=60)
        # A live delivery: the newest recorded notification is now "now".
        assert w.deliver(mint.notification(w.signer, "TEST", signed_ms=now_ms(), environment="Sandbox"))[1]["result"] == "applied"
        r = w.admin.Reconcile(admin_pb2.ReconcileRequest(), timeout=60)
        assert r.applied == 1 and r.start_time_ms <= now - 40 * 60_000
        assert w.deliver(missed)[1]["result"] == "duplicate"
        # A complete run moves the mark: the next one starts at the end of the last one, less the margin.
        again = w.admin.Reconcile(admin_pb2.ReconcileRequest(), timeout=60)
        assert again.applied == 0 and again.start_time_ms >= r.end_time_ms - 2 * 60_000  # not back to the failed range
        expect_error(w.admin.Reconcile, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD",
                     request=admin_pb2.ReconcileRequest(since_time_ms=now_ms() + 3_600_000))
    finally:
        w.close()


def test_a_server_that_never_speaks_tls_costs_bounded_time(tmp_path):
    """An address that accepts TCP and then says nothing (a stuck balancer, a wrong port): each attempt ends at
    --appstore-api-timeout, the call ends UNAVAILABLE, and billingd stays responsive."""
    import socket as socketlib
    import threading
    silent = socketlib.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    held, stop = [], threading.Event()

    def accept():
        silent.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(silent.accept()[0])
            except OSError:
                pass
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    w = World("--reconcile-interval", "0", "--environments", "sandbox", "--appstore-api-timeout", "1")
    try:
        w.billingd.stop()
        w.billingd.flags = [f if f != w.sandbox.url else f"https://127.0.0.1:{silent.getsockname()[1]}" for f in w.billingd.flags]
        w.billingd.start()
        w.channel = w.billingd.channel()
        api = billing(w.channel)
        started = time.monotonic()
        expect_error(api.RestorePurchases, grpc.StatusCode.UNAVAILABLE, "APPSTORE_API_UNAVAILABLE",
                     request=pb.RestorePurchasesRequest(account_id="acct-silent", transaction_ids=["7000000001"]), timeout=60)
        took = time.monotonic() - started
        assert 3 <= took < 20, took  # 4 attempts of 1 s, with backoff between them
        assert len(held) == 4
        assert api.GetEntitlements(pb.GetEntitlementsRequest(account_id="acct-silent")) is not None
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        silent.close()
        w.close()


def test_a_new_deployment_reads_all_the_history_apple_keeps():
    """Nothing recorded yet: the first reconciliation goes back as far as Apple keeps (30 days in the sandbox)."""
    w = World("--reconcile-interval", "0", "--environments", "sandbox")
    try:
        w.sandbox.add_notification({"notificationType": "TEST", "signedDate": now_ms() - 10 * DAY})
        r = w.admin.Reconcile(admin_pb2.ReconcileRequest(), timeout=60)
        assert r.applied == 1
        assert abs(r.start_time_ms - (now_ms() - 30 * DAY)) < 5 * 60_000
    finally:
        w.close()


# ---- the support calls: renewal-date extensions, Set App Account Token, refund history, app transactions ------------

MASS = "com.example.mass.monthly"


def wait_until(predicate, timeout=10):
    deadline = time.time() + timeout
    while not predicate():
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def entitlement(api, account, product):
    ents = api.GetEntitlements(pb.GetEntitlementsRequest(account_id=account, include_inactive=True)).entitlements
    return next((e for e in ents if e.product_id == product), None)


def test_extend_renewal_date(world):
    """ExtendRenewalDate calls Apple in the environment billingd recorded the subscription in, answers Apple's
    effectiveDate with billingd's account and current expiry; the new expiry arrives with RENEWAL_EXTENDED."""
    t = now_ms() - DAY
    sub = mint.transaction("8100000000", SUB, purchase_ms=t, expires_ms=t + 30 * DAY, signed_ms=t, environment="Sandbox")
    world.sandbox.add_transaction(sub)
    world.api.RestorePurchases(pb.RestorePurchasesRequest(account_id="acct-extend", signed_transactions=[world.signer.sign(sub)]))
    world.production.reset_requests()
    r = world.admin.ExtendRenewalDate(admin_pb2.ExtendRenewalDateRequest(
        original_transaction_id="8100000000", extend_by_days=5, extend_reason_code=3), timeout=30)
    assert (r.original_transaction_id, r.success, r.effective_time_ms) == ("8100000000", True, t + 35 * DAY)
    assert (r.account_id, r.current_expires_time_ms, r.environment) == ("acct-extend", t + 30 * DAY, pb.ENVIRONMENT_SANDBOX)
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", r.request_identifier)
    [sent] = [q for q in world.sandbox.requests if q["path"] == "/inApps/v1/subscriptions/extend/8100000000"]
    assert (sent["method"], sent["json"]) == ("PUT", {"extendByDays": 5, "extendReasonCode": 3,
                                                      "requestIdentifier": r.request_identifier})
    assert not [q for q in world.production.requests if "/extend/" in q["path"]]  # the recorded environment only
    wait_until(lambda: entitlement(world.api, "acct-extend", SUB).expires_time_ms == t + 35 * DAY)
    assert entitlement(world.api, "acct-extend", SUB).active
    # The caller's request identifier is sent as given; the same one again extends nothing more.
    rid = "6f0c8e6e-7d7a-4f43-9d1e-3b3c2b1a0e01"
    first = world.admin.ExtendRenewalDate(admin_pb2.ExtendRenewalDateRequest(
        original_transaction_id="8100000000", extend_by_days=2, request_identifier=rid.upper()), timeout=30)
    again = world.admin.ExtendRenewalDate(admin_pb2.ExtendRenewalDateRequest(
        original_transaction_id="8100000000", extend_by_days=2, request_identifier=rid), timeout=30)
    assert first.request_identifier == rid and again.effective_time_ms == first.effective_time_ms == t + 37 * DAY
    # Apple allows two extensions in 365 days: the third is Apple's 403.
    info = expect_error(world.admin.ExtendRenewalDate, grpc.StatusCode.FAILED_PRECONDITION, "APPSTORE_API_REFUSED",
                        request=admin_pb2.ExtendRenewalDateRequest(original_transaction_id="8100000000", extend_by_days=1),
                        timeout=30)
    assert info.metadata["apple_error_code"] == "4030005"
    # An expired subscription, unknown to billingd: both environments asked, the sandbox refuses it.
    world.sandbox.add_transaction(mint.transaction("8110000000", SUB, purchase_ms=t - 60 * DAY, expires_ms=t - 30 * DAY,
                                                   signed_ms=t))
    info = expect_error(world.admin.ExtendRenewalDate, grpc.StatusCode.FAILED_PRECONDITION, "APPSTORE_API_REFUSED",
                        request=admin_pb2.ExtendRenewalDateRequest(original_transaction_id="8110000000", extend_by_days=1),
                        timeout=30)
    assert info.metadata["apple_error_code"] == "4030004"
    expect_error(world.admin.ExtendRenewalDate, grpc.StatusCode.NOT_FOUND, "TRANSACTION_NOT_FOUND",
                 request=admin_pb2.ExtendRenewalDateRequest(original_transaction_id="8199999999", extend_by_days=1), timeout=30)
    world.sandbox.reset_requests()
    for bad, field in ((dict(extend_by_days=0), "extend_by_days"), (dict(extend_by_days=91), "extend_by_days"),
                       (dict(extend_by_days=1, extend_reason_code=4), "extend_reason_code"),
                       (dict(extend_by_days=1, request_identifier="not-a-uuid"), "request_identifier"),
                       (dict(extend_by_days=1, original_transaction_id="81x"), "original_transaction_id")):
        request = admin_pb2.ExtendRenewalDateRequest(**dict(dict(original_transaction_id="8100000000"), **bad))
        info = expect_error(world.admin.ExtendRenewalDate, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD", request=request)
        assert info.metadata["field"] == field
    assert not [q for q in world.sandbox.requests if "/extend/" in q["path"]]  # refused before Apple was asked


def test_extend_renewal_dates_for_all(world):
    t = now_ms() - DAY
    for tid, storefront in (("8200000000", "USA"), ("8210000000", "FRA")):
        world.sandbox.add_transaction(mint.transaction(tid, MASS, purchase_ms=t, expires_ms=t + 30 * DAY, signed_ms=t,
                                                       storefront=storefront))
    r = world.admin.ExtendRenewalDatesForAll(admin_pb2.ExtendRenewalDatesForAllRequest(
        product_id=MASS, extend_by_days=2, extend_reason_code=1, storefront_country_codes=["USA"],
        environment=pb.ENVIRONMENT_SANDBOX), timeout=30)
    assert r.environment == pb.ENVIRONMENT_SANDBOX and r.request_identifier
    [sent] = [q for q in world.sandbox.requests if q["path"] == "/inApps/v1/subscriptions/extend/mass"]
    assert sent["json"] == {"extendByDays": 2, "extendReasonCode": 1, "requestIdentifier": r.request_identifier,
                            "productId": MASS, "storefrontCountryCodes": ["USA"]}
    s = world.admin.GetExtensionStatus(admin_pb2.GetExtensionStatusRequest(
        product_id=MASS, request_identifier=r.request_identifier, environment=pb.ENVIRONMENT_SANDBOX), timeout=30)
    assert (s.request_identifier, s.complete, s.succeeded_count, s.failed_count) == (r.request_identifier, True, 1, 0)
    assert s.complete_time_ms > 0
    # Every storefront: the field is left out (Apple refuses an empty list).
    everywhere = world.admin.ExtendRenewalDatesForAll(admin_pb2.ExtendRenewalDatesForAllRequest(
        product_id=MASS, extend_by_days=1), timeout=30)
    assert "storefrontCountryCodes" not in [q for q in world.sandbox.requests if q["path"].endswith("/mass")][-1]["json"]
    assert world.admin.GetExtensionStatus(admin_pb2.GetExtensionStatusRequest(
        product_id=MASS, request_identifier=everywhere.request_identifier), timeout=30).succeeded_count == 2
    # Apple working through it: not complete yet.
    world.sandbox.hold_mass_extensions = True
    try:
        held = world.admin.ExtendRenewalDatesForAll(admin_pb2.ExtendRenewalDatesForAllRequest(
            product_id=MASS, extend_by_days=1), timeout=30)
        pending = world.admin.GetExtensionStatus(admin_pb2.GetExtensionStatusRequest(
            product_id=MASS, request_identifier=held.request_identifier), timeout=30)
        assert (pending.complete, pending.complete_time_ms) == (False, 0)
    finally:
        world.sandbox.hold_mass_extensions = False
        world.sandbox.finish_mass_extensions()
    info = expect_error(world.admin.GetExtensionStatus, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD",
                        request=admin_pb2.GetExtensionStatusRequest(product_id=MASS,
                                                                    request_identifier="0f8fad5b-d9cb-469f-a165-70867728950e"),
                        timeout=30)
    assert info.metadata["field"] == "request_identifier"
    for bad, field in ((dict(storefront_country_codes=["usa"]), "storefront_country_codes"),
                       (dict(product_id=""), "product_id"), (dict(extend_by_days=91), "extend_by_days")):
        request = admin_pb2.ExtendRenewalDatesForAllRequest(**dict(dict(product_id=MASS, extend_by_days=1), **bad))
        info = expect_error(world.admin.ExtendRenewalDatesForAll, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD", request=request)
        assert info.metadata["field"] == field


def test_set_app_account_token_moves_an_orphan_onto_an_order(world):
    """A purchase made outside the app (no appAccountToken) that a notification recorded with no account: SetAppAccountToken
    sets its token at Apple to an order's id, then attaches it to the order's account (completing the order). Another
    account's order cannot take it afterwards, and nothing is asked of Apple then."""
    t = now_ms() - DAY
    tx = mint.transaction("8300000000", LIFETIME, product_type=mint.NON_CONSUMABLE, purchase_ms=t, signed_ms=t, environment="Sandbox")
    world.sandbox.add_transaction(tx)
    assert world.deliver(mint.notification(world.signer, "ONE_TIME_CHARGE", signed_ms=now_ms(), tx=tx,
                                           environment="Sandbox"))[1]["result"] == "applied"
    orphan = world.api.GetTransaction(pb.GetTransactionRequest(transaction_id="8300000000"))
    assert orphan.account_id == "" and not orphan.HasField("order")
    order = order_of(world.api, "acct-orphan")
    r = world.admin.SetAppAccountToken(admin_pb2.SetAppAccountTokenRequest(original_transaction_id="8300000000", order_id=order),
                                       timeout=30)
    assert (r.order.order_id, r.order.state, r.order.transaction_id, r.order_completed) == \
        (order, pb.ORDER_STATE_COMPLETED, "8300000000", True)
    assert [x.transaction_id for x in r.transactions] == ["8300000000"] and r.environment == pb.ENVIRONMENT_SANDBOX
    # Apple's side: the token is the order id, in every signed transaction Apple serves from now on.
    assert world.sandbox.app_account_tokens == {"8300000000": order}
    [put] = [q for q in world.sandbox.requests if q["path"] == "/inApps/v1/transactions/8300000000/appAccountToken"]
    assert (put["method"], put["json"], put["status"]) == ("PUT", {"appAccountToken": order}, 200)
    # billingd's side.
    owned = world.api.GetTransaction(pb.GetTransactionRequest(transaction_id="8300000000"))
    assert owned.account_id == "acct-orphan" and owned.order.order_id == order
    assert entitlement(world.api, "acct-orphan", LIFETIME).active
    # Another account's order: refused before Apple is asked.
    world.sandbox.reset_requests()
    other = order_of(world.api, "acct-thief")
    expect_error(world.admin.SetAppAccountToken, grpc.StatusCode.ALREADY_EXISTS, "TRANSACTION_ALREADY_CLAIMED",
                 request=admin_pb2.SetAppAccountTokenRequest(original_transaction_id="8300000000", order_id=other), timeout=30)
    assert world.sandbox.requests == [] and world.sandbox.app_account_tokens["8300000000"] == order
    assert world.api.GetOrder(pb.GetOrderRequest(order_id=other)).order.state == pb.ORDER_STATE_PENDING
    expect_error(world.admin.SetAppAccountToken, grpc.StatusCode.NOT_FOUND, "ORDER_NOT_FOUND",
                 request=admin_pb2.SetAppAccountTokenRequest(original_transaction_id="8300000000",
                                                             order_id="0f8fad5b-d9cb-469f-a165-70867728950e"), timeout=30)
    info = expect_error(world.admin.SetAppAccountToken, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD",
                        request=admin_pb2.SetAppAccountTokenRequest(original_transaction_id="8300000000", order_id="nope"))
    assert info.metadata["field"] == "order_id"


def test_set_app_account_token_fetches_what_billingd_never_saw(world):
    """A subscription billingd has no record of: Get Transaction Info (verified), then Apple's token, then billingd's
    record under the order's account; a renewal's id is not an original transaction id."""
    t = now_ms() - 40 * DAY
    subscription_history(world.sandbox, "8310000000", t, 1)
    order = order_of(world.api, "acct-fetched", SUB)
    r = world.admin.SetAppAccountToken(admin_pb2.SetAppAccountTokenRequest(original_transaction_id="8310000000", order_id=order),
                                       timeout=30)
    assert r.order.state == pb.ORDER_STATE_COMPLETED and r.order.transaction_id == "8310000000"
    assert [q["path"] for q in world.sandbox.requests if q["path"].startswith("/inApps/v1/transactions/83100")] == \
        ["/inApps/v1/transactions/8310000000", "/inApps/v1/transactions/8310000000/appAccountToken"]
    assert world.api.GetTransaction(pb.GetTransactionRequest(transaction_id="8310000000")).account_id == "acct-fetched"
    info = expect_error(world.admin.SetAppAccountToken, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD",
                        request=admin_pb2.SetAppAccountTokenRequest(original_transaction_id="8310000001",
                                                                    order_id=order_of(world.api, "acct-fetched", SUB)),
                        timeout=30)
    assert info.metadata["field"] == "original_transaction_id"
    expect_error(world.admin.SetAppAccountToken, grpc.StatusCode.NOT_FOUND, "TRANSACTION_NOT_FOUND",
                 request=admin_pb2.SetAppAccountTokenRequest(original_transaction_id="8399999999", order_id=order), timeout=30)


def test_a_refund_found_only_through_refund_history(world):
    """A purchase restored by transaction id, then refunded at Apple with no notification billingd could receive
    or find in the notification history: reconciliation's Get Refund History refunds its order and revokes the
    entitlement, as a REFUND notification would; a second run changes nothing."""
    t = now_ms() - 2 * DAY
    order = order_of(world.api, "acct-refund-history")
    tx = mint.transaction("8400000000", LIFETIME, product_type=mint.NON_CONSUMABLE, purchase_ms=t, signed_ms=t, token=order,
                          environment="Sandbox")
    world.sandbox.add_transaction(tx, customer="gina")
    world.api.SubmitReceipt(pb.SubmitReceiptRequest(order_id=order, signed_transaction=world.signer.sign(tx)))
    restored = world.api.RestorePurchases(pb.RestorePurchasesRequest(account_id="acct-refund-history",
                                                                     transaction_ids=["8400000000"]), timeout=30)
    assert [e.product_id for e in restored.entitlements] == [LIFETIME]
    refund_at = now_ms() - 3_600_000
    world.sandbox.add_transaction(dict(tx, revocationDate=refund_at, revocationReason=0, signedDate=refund_at),
                                  customer="gina")
    world.sandbox.reset_requests()
    r = world.admin.Reconcile(admin_pb2.ReconcileRequest(since_time_ms=now_ms() - 2 * 3_600_000), timeout=60)
    assert r.refunds_applied == 1 and r.refund_histories >= 1
    assert "/inApps/v2/refund/lookup/8400000000" in [q["path"] for q in world.sandbox.requests]
    assert world.api.GetOrder(pb.GetOrderRequest(order_id=order)).order.state == pb.ORDER_STATE_REFUNDED
    e = entitlement(world.api, "acct-refund-history", LIFETIME)
    assert not e.active and e.revocation_time_ms == refund_at
    events = world.api.ListEvents(pb.ListEventsRequest(account_id="acct-refund-history")).events
    changes = [(ev.type, ev.cause) for ev in events if ev.cause == "refund_history"]
    assert changes == [(pb.EVENT_TYPE_ORDER_REFUNDED, "refund_history"), (pb.EVENT_TYPE_ENTITLEMENT_REVOKED, "refund_history")]
    again = world.admin.Reconcile(admin_pb2.ReconcileRequest(since_time_ms=now_ms() - 2 * 3_600_000), timeout=60)
    assert again.refunds_applied == 0
    assert len(world.api.ListEvents(pb.ListEventsRequest(account_id="acct-refund-history")).events) == len(events)


def test_get_app_transaction(world):
    world.sandbox.add_transaction(mint.transaction("8500000000", COINS, product_type="Consumable", purchase_ms=now_ms() - DAY,
                                                   signed_ms=now_ms() - DAY), customer="hank")
    world.sandbox.add_transaction(mint.transaction("8510000000", COINS, product_type="Consumable", purchase_ms=now_ms() - DAY,
                                                   signed_ms=now_ms() - DAY), customer="ines")
    app = mint.app_transaction(created_ms=now_ms() - DAY)
    jws = world.sandbox.add_app_transaction(app, customer="hank")
    r = world.admin.GetAppTransaction(admin_pb2.GetAppTransactionRequest(transaction_id="8500000000"), timeout=30)
    assert (r.environment, r.bundle_id, r.signed_app_transaction, r.application_version, r.original_platform) == \
        (pb.ENVIRONMENT_SANDBOX, mint.BUNDLE, jws, "1", "iOS")
    assert r.original_purchase_time_ms == app["originalPurchaseDate"]
    expect_error(world.admin.GetAppTransaction, grpc.StatusCode.NOT_FOUND, "TRANSACTION_NOT_FOUND",
                 request=admin_pb2.GetAppTransactionRequest(transaction_id="8510000000"), timeout=30)
    expect_error(world.admin.GetAppTransaction, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD",
                 request=admin_pb2.GetAppTransactionRequest(transaction_id="85x"))


def test_billingctl_support_commands(world):
    t = now_ms() - DAY
    world.sandbox.add_transaction(mint.transaction("8600000000", SUB, purchase_ms=t, expires_ms=t + 30 * DAY, signed_ms=t))
    admin = [binary("billingctl"), "--addr", world.billingd.address, "--timeout", "30", "admin"]

    def run(*args):
        p = subprocess.run(admin + list(args), capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    out = run("extend", "8600000000", "--days", "3", "--reason", "1")
    assert out["success"] is True and out["effectiveTimeMs"] == str(t + 33 * DAY) and out["environment"] == "ENVIRONMENT_SANDBOX"
    mass = run("extend-all", MASS, "--days", "1", "--storefront", "USA", "--storefront", "FRA", "--environment", "sandbox")
    assert [q for q in world.sandbox.requests if q["path"].endswith("/mass")][-1]["json"]["storefrontCountryCodes"] == ["USA", "FRA"]
    status = run("extension-status", MASS, mass["requestIdentifier"])
    assert status["complete"] is True and status["requestIdentifier"] == mass["requestIdentifier"]
    world.sandbox.add_transaction(mint.transaction("8610000000", COINS, product_type="Consumable", purchase_ms=t, signed_ms=t))
    order = world.api.CreateOrder(pb.CreateOrderRequest(account_id="acct-ctl-token", product_id=COINS)).order.order_id
    token = run("set-token", "8610000000", order)
    assert token["order"]["state"] == "ORDER_STATE_COMPLETED" and token["orderCompleted"] is True
    assert [x["transactionId"] for x in token["transactions"]] == ["8610000000"]
    bad = subprocess.run(admin + ["extend", "8600000000"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--days" in bad.stderr
