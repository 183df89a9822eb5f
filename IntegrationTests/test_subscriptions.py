"""Subscriptions as the stores model them, over the wire (DESIGN "Subscriptions as the stores model them"), on
SQLite and on PostgreSQL: the scenarios of Tests/AfterSaleTests/SubscriptionRulesTests.swift with App Store Server
Notifications v2 minted and signed here (appstore_mint), posted to billingd's notifications endpoint, and what they
wrote read back through grpcio: entitlements (product_id, state, pending_product_id, ownership), orders
(refunded_quantity) and each account's events (ListEvents by account: types and snapshots).

Every signedDate is at most the real now (billingd refuses one more than --clock-skew in the future), so each
timeline ends at or before the moment it is posted: purchases days in the past. The server decides ACTIVE, GRACE_PERIOD,
BILLING_RETRY and EXPIRED by its own clock, so the scenarios that need a period to end while they run (a renewal into
a downgraded product, grace period then billing retry) put that end a few seconds after the test starts and wait."""
import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid

import grpc
import pytest

import appstore_mint as mint
from conftest import Billingd, binary, free_port, postgres_database
from helpers import billing, expect_error, pb

BUNDLE = mint.BUNDLE
ENV = "Sandbox"
GROUP = "21000001"
BASIC_YEARLY = "com.example.basic.yearly"
PREMIUM_MONTHLY = "com.example.premium.monthly"
BASIC_MONTHLY = "com.example.basic.monthly"
PLUS_MONTHLY = "com.example.plus.monthly"
COINS = "com.example.coins"
BOOK = "com.example.book"
SECOND = 1000
HOUR = 3_600_000
DAY = 86_400_000
APPLIED = (200, {"result": "applied"})

E = pb.EventType.Name


def now_ms():
    return int(time.time() * 1000)


def wait_until(ms, margin=50):
    """Sleeps until the real clock (the server's too) is past `ms`."""
    delay = (ms + margin - now_ms()) / 1000
    if delay > 0:
        time.sleep(delay)


def post_http1(port, data):
    """POST /appstore/notifications over HTTP/1.1: (status, JSON body or text)."""
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


def wait_port(port, seconds=15):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on {port}")


# --- signed data ---------------------------------------------------------------------------------------------------

def sub(tid, product, *, original=None, purchase, expires, signed=None, token=None, **extra):
    """An auto-renewable subscription transaction of the group, as Apple signs it (Sandbox, a price, a storefront)."""
    t = mint.transaction(tid, product, original=original, purchase_ms=purchase, expires_ms=expires,
                         signed_ms=purchase if signed is None else signed, token=token, environment=ENV)
    t.update(subscriptionGroupIdentifier=GROUP, price=9990, currency="USD", storefront="USA")
    t.update(extra)
    return t


def item(tid, product, *, kind, purchase, quantity=1, token=None, signed=None, **extra):
    t = mint.transaction(tid, product, product_type=kind, purchase_ms=purchase, signed_ms=purchase if signed is None else signed,
                         token=token, quantity=quantity, environment=ENV)
    t.update(extra)
    return t


def revoked(t, *, at, rtype, percentage=None):
    """`t` revoked at `at` and signed then, as a REFUND or REVOKE notification carries it."""
    r = dict(t, revocationDate=at, revocationReason=0, revocationType=rtype, signedDate=at)
    if percentage is not None:
        r["revocationPercentage"] = percentage
    return r


def renewal(original, product, *, next_product=None, signed, auto_renew=True, retry=None, grace=None):
    r = mint.renewal(original, product, auto_renew=auto_renew, signed_ms=signed, environment=ENV)
    r["autoRenewProductId"] = next_product or product
    if retry is not None:
        r["isInBillingRetryPeriod"] = retry
    if grace is not None:
        r["gracePeriodExpiresDate"] = grace
    return r


# --- one billingd per backend ----------------------------------------------------------------------------------------

class Shop:
    """billingd --dev (Sandbox accepted) over SQLite or PostgreSQL, with a test store of its own and its notifications
    endpoint; notifications are signed by that store, as `billingctl teststore` would."""

    def __init__(self, backend):
        self.backend = backend
        self.dir = tempfile.mkdtemp(prefix=f"subscriptions-{backend}-")
        self.store = os.path.join(self.dir, "teststore")
        subprocess.run([binary("billingctl"), "teststore", "init", self.store], check=True, capture_output=True)
        self.signer = mint.Signer(self.store)
        database = postgres_database() if backend == "postgres" else None
        self.port = free_port()
        self.server = Billingd("--dev", "--dev-store", self.store, "--bundle-id", BUNDLE, "--environments", "sandbox",
                               "--notifications-listen", f"127.0.0.1:{self.port}", db_dir=self.dir, database=database)
        wait_port(self.port)
        self.channel = self.server.channel()
        self.stub = billing(self.channel)

    def close(self):
        self.channel.close()
        self.server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    # notifications

    def payload(self, ntype, *, signed, subtype=None, nid=None, tx=None, renewal_info=None, environment=ENV):
        return mint.notification(self.signer, ntype, signed_ms=signed, subtype=subtype, uuid=nid, tx=tx,
                                 renewal_info=renewal_info, environment=environment)

    def post(self, signed_payload):
        return post_http1(self.port, mint.body(signed_payload))

    def notify(self, ntype, subtype=None, *, signed, tx=None, renewal_info=None, nid=None):
        """Posts one notification; it must be applied."""
        assert signed <= now_ms(), f"{ntype} signed {signed - now_ms()} ms in the future"
        got = self.post(self.payload(ntype, signed=signed, subtype=subtype, nid=nid, tx=tx, renewal_info=renewal_info))
        assert got == APPLIED, (ntype, subtype, got)

    # gRPC

    def order(self, account, product, quantity=1):
        return self.stub.CreateOrder(pb.CreateOrderRequest(account_id=account, product_id=product, quantity=quantity),
                                     timeout=10).order

    def get_order(self, order_id):
        return self.stub.GetOrder(pb.GetOrderRequest(order_id=order_id), timeout=10).order

    def submit(self, order_id, t):
        return self.stub.SubmitReceipt(pb.SubmitReceiptRequest(order_id=order_id, signed_transaction=self.signer.sign(t)),
                                       timeout=10)

    def subscribe(self, account, t):
        """An order for `account` paid by `t` (its appAccountToken set to the order) through SubmitReceipt."""
        o = self.order(account, t["productId"], t.get("quantity", 1))
        t["appAccountToken"] = o.order_id
        done = self.submit(o.order_id, t)
        assert done.order.state == pb.ORDER_STATE_COMPLETED and done.order.transaction_id == t["transactionId"]
        return o

    def restore(self, account, ts):
        return list(self.stub.RestorePurchases(
            pb.RestorePurchasesRequest(account_id=account, signed_transactions=[self.signer.sign(t) for t in ts]),
            timeout=10).entitlements)

    def entitlements(self, account):
        return list(self.stub.GetEntitlements(pb.GetEntitlementsRequest(account_id=account, include_inactive=True),
                                              timeout=10).entitlements)

    def one(self, account):
        got = self.entitlements(account)
        assert len(got) == 1, got
        return got[0]

    def events(self, account, after=0):
        got, cursor = [], after
        while True:
            r = self.stub.ListEvents(pb.ListEventsRequest(after_cursor=cursor, limit=1000, account_id=account), timeout=10)
            got += r.events
            if not r.events:
                return got
            cursor = r.next_cursor

    def mark(self, account):
        events = self.events(account)
        return events[-1].cursor if events else 0

    def kinds(self, account, after):
        return [E(e.type) for e in self.events(account, after)]

    def transaction(self, transaction_id):
        return self.stub.GetTransaction(pb.GetTransactionRequest(transaction_id=transaction_id), timeout=10)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def shop(request):
    s = Shop(request.param)
    yield s
    s.close()


def check_snapshots(events):
    """What every event list must satisfy: a snapshot that agrees with its type."""
    for e in events:
        if e.type == pb.EVENT_TYPE_ENTITLEMENT_REVOKED:
            assert e.entitlement.state == pb.ENTITLEMENT_STATE_REVOKED and not e.entitlement.active, e
        if e.type == pb.EVENT_TYPE_ENTITLEMENT_GRANTED:
            assert e.entitlement.active, e
        if e.HasField("entitlement"):
            assert e.entitlement.active == (e.entitlement.state in (pb.ENTITLEMENT_STATE_ACTIVE, pb.ENTITLEMENT_STATE_GRACE_PERIOD)), e


# --- upgrades --------------------------------------------------------------------------------------------------------

def test_immediate_upgrade_changes_the_product_at_once(shop):
    """basic.yearly, then an upgrade to premium.monthly (same original): the new product and its expiry at once,
    ENTITLEMENT_PRODUCT_CHANGED only; the yearly re-signed with isUpgraded later changes nothing."""
    now = now_ms()
    account = "ann"
    yearly = sub("1100", BASIC_YEARLY, purchase=now - 30 * DAY, expires=now + 335 * DAY)
    shop.subscribe(account, yearly)
    e = shop.one(account)
    assert e.product_id == BASIC_YEARLY and e.state == pb.ENTITLEMENT_STATE_ACTIVE and e.subscription_group_id == GROUP
    start = shop.mark(account)
    upgraded_at = now - HOUR
    monthly = sub("1101", PREMIUM_MONTHLY, original="1100", purchase=upgraded_at, expires=upgraded_at + 30 * DAY)
    shop.notify("DID_CHANGE_RENEWAL_PREF", "UPGRADE", signed=upgraded_at, tx=monthly,
                renewal_info=renewal("1100", PREMIUM_MONTHLY, signed=upgraded_at))
    e = shop.one(account)
    assert e.product_id == PREMIUM_MONTHLY and e.latest_transaction_id == "1101" and e.original_transaction_id == "1100"
    assert e.expires_time_ms == upgraded_at + 30 * DAY and e.state == pb.ENTITLEMENT_STATE_ACTIVE and e.active
    assert e.pending_product_id == "" and e.subscription_group_id == GROUP
    events = shop.events(account, start)
    assert [E(x.type) for x in events] == ["EVENT_TYPE_ENTITLEMENT_PRODUCT_CHANGED"]
    assert events[0].entitlement.product_id == PREMIUM_MONTHLY and events[0].entitlement.expires_time_ms == upgraded_at + 30 * DAY
    assert events[0].cause == "notification:DID_CHANGE_RENEWAL_PREF" and events[0].transaction_id == "1101"
    # The yearly, re-signed by Apple with isUpgraded, arrives later (a restore): nothing changes, no event.
    mark = shop.mark(account)
    flagged = dict(yearly, isUpgraded=True, signedDate=upgraded_at + 10 * SECOND)
    restored = shop.restore(account, [flagged])
    assert [r.product_id for r in restored] == [PREMIUM_MONTHLY] and restored[0].active
    assert shop.one(account) == e
    assert shop.kinds(account, mark) == []
    assert shop.transaction("1100").transaction.upgraded
    check_snapshots(shop.events(account))


def test_upgrade_then_lapse_never_grants_the_superseded_transaction(shop):
    """After the upgrade's period lapses the entitlement is EXPIRED (no notification needed); EXPIRED says so once;
    restoring the isUpgraded yearly, whose own expiry is months away, does not bring access back."""
    now = now_ms()
    account = "ann-lapse"
    yearly = sub("1200", BASIC_YEARLY, purchase=now - 60 * DAY, expires=now + 305 * DAY)
    shop.subscribe(account, yearly)
    upgraded_at = now - 40 * DAY
    monthly = sub("1201", PREMIUM_MONTHLY, original="1200", purchase=upgraded_at, expires=upgraded_at + 30 * DAY)
    start = shop.mark(account)
    shop.notify("DID_CHANGE_RENEWAL_PREF", "UPGRADE", signed=upgraded_at, tx=monthly,
                renewal_info=renewal("1200", PREMIUM_MONTHLY, signed=upgraded_at))
    assert shop.kinds(account, start) == ["EVENT_TYPE_ENTITLEMENT_PRODUCT_CHANGED"]
    # The monthly lapsed ten days ago: by the server's clock nothing grants access.
    e = shop.one(account)
    assert e.product_id == PREMIUM_MONTHLY and e.state == pb.ENTITLEMENT_STATE_EXPIRED and not e.active
    assert shop.stub.GetEntitlements(pb.GetEntitlementsRequest(account_id=account), timeout=10).entitlements == []
    start = shop.mark(account)
    shop.notify("EXPIRED", "VOLUNTARY", signed=upgraded_at + 30 * DAY + HOUR, tx=monthly)
    events = shop.events(account, start)
    assert [E(x.type) for x in events] == ["EVENT_TYPE_ENTITLEMENT_EXPIRED"]
    assert events[0].entitlement.state == pb.ENTITLEMENT_STATE_EXPIRED and not events[0].entitlement.active
    # Restoring the upgraded yearly (its expiry still 300 days away) does not re-activate anything.
    flagged = dict(yearly, isUpgraded=True, signedDate=now - HOUR)
    mark = shop.mark(account)
    restored = shop.restore(account, [flagged])
    assert [(r.product_id, r.active, r.state) for r in restored] == [(PREMIUM_MONTHLY, False, pb.ENTITLEMENT_STATE_EXPIRED)]
    assert shop.kinds(account, mark) == []
    assert shop.one(account).state == pb.ENTITLEMENT_STATE_EXPIRED
    check_snapshots(shop.events(account))


def test_upgrade_in_any_order_ends_the_same(shop):
    """The isUpgraded yearly first (it grants nothing: ENTITLEMENT_EXPIRED), then the upgrade's transaction; an older
    view of the yearly without the flag cannot clear it."""
    now = now_ms()
    account = "ann-order"
    yearly = sub("1300", BASIC_YEARLY, purchase=now - 30 * DAY, expires=now + 335 * DAY)
    shop.subscribe(account, yearly)
    upgraded_at = now - HOUR
    start = shop.mark(account)
    shop.restore(account, [dict(yearly, isUpgraded=True, signedDate=upgraded_at + 5 * SECOND)])
    e = shop.one(account)
    assert e.state == pb.ENTITLEMENT_STATE_EXPIRED and not e.active
    assert shop.kinds(account, start) == ["EVENT_TYPE_ENTITLEMENT_EXPIRED"]
    monthly = sub("1301", PREMIUM_MONTHLY, original="1300", purchase=upgraded_at, expires=upgraded_at + 30 * DAY)
    shop.notify("DID_CHANGE_RENEWAL_PREF", "UPGRADE", signed=upgraded_at, tx=monthly)
    e = shop.one(account)
    assert e.product_id == PREMIUM_MONTHLY and e.state == pb.ENTITLEMENT_STATE_ACTIVE and e.active
    mark = shop.mark(account)
    shop.restore(account, [yearly])
    assert shop.one(account) == e
    assert shop.kinds(account, mark) == []
    check_snapshots(shop.events(account))


# --- downgrades and crossgrades --------------------------------------------------------------------------------------

def test_downgrade_waits_for_the_renewal(shop):
    """DID_CHANGE_RENEWAL_PREF/DOWNGRADE: pending_product_id and RENEWAL_PRODUCT_CHANGED, the product unchanged; the
    renewal into the new product (its period starts when the old one ends, a few seconds from now): PRODUCT_CHANGED and
    RENEWED."""
    now = now_ms()
    account = "bea"
    ends = now + 3 * SECOND
    p1 = sub("2100", PREMIUM_MONTHLY, purchase=ends - 30 * DAY, expires=ends)
    shop.subscribe(account, p1)
    start = shop.mark(account)
    changed = now - HOUR
    shop.notify("DID_CHANGE_RENEWAL_PREF", "DOWNGRADE", signed=changed, tx=p1,
                renewal_info=renewal("2100", PREMIUM_MONTHLY, next_product=BASIC_MONTHLY, signed=changed))
    e = shop.one(account)
    assert e.product_id == PREMIUM_MONTHLY and e.pending_product_id == BASIC_MONTHLY and e.expires_time_ms == ends
    assert e.state == pb.ENTITLEMENT_STATE_ACTIVE
    events = shop.events(account, start)
    assert [E(x.type) for x in events] == ["EVENT_TYPE_RENEWAL_PRODUCT_CHANGED"]
    assert events[0].entitlement.pending_product_id == BASIC_MONTHLY and events[0].entitlement.product_id == PREMIUM_MONTHLY
    # The renewal brings the new product.
    wait_until(ends)
    start = shop.mark(account)
    b2 = sub("2101", BASIC_MONTHLY, original="2100", purchase=ends, expires=ends + 30 * DAY)
    shop.notify("DID_RENEW", signed=ends, tx=b2,
                renewal_info=renewal("2100", BASIC_MONTHLY, signed=ends))
    e = shop.one(account)
    assert e.product_id == BASIC_MONTHLY and e.pending_product_id == "" and e.expires_time_ms == ends + 30 * DAY
    assert e.latest_transaction_id == "2101" and e.state == pb.ENTITLEMENT_STATE_ACTIVE
    events = shop.events(account, start)
    assert [E(x.type) for x in events] == ["EVENT_TYPE_ENTITLEMENT_PRODUCT_CHANGED", "EVENT_TYPE_ENTITLEMENT_RENEWED"]
    assert all(x.entitlement.product_id == BASIC_MONTHLY and x.entitlement.pending_product_id == "" for x in events)
    check_snapshots(shop.events(account))


def test_crossgrade_pending_then_cancelled(shop):
    """A crossgrade is pending until the renewal; going back to the product the customer has says so; the same renewal
    info again, under another notificationUUID, changes nothing."""
    now = now_ms()
    account = "cal"
    c1 = sub("2200", BASIC_MONTHLY, purchase=now - 10 * DAY, expires=now + 20 * DAY)
    shop.subscribe(account, c1)
    start = shop.mark(account)
    shop.notify("DID_CHANGE_RENEWAL_PREF", signed=now - 2 * HOUR, tx=c1,
                renewal_info=renewal("2200", BASIC_MONTHLY, next_product=PLUS_MONTHLY, signed=now - 2 * HOUR))
    assert shop.one(account).pending_product_id == PLUS_MONTHLY
    assert shop.kinds(account, start) == ["EVENT_TYPE_RENEWAL_PRODUCT_CHANGED"]
    start = shop.mark(account)
    back = renewal("2200", BASIC_MONTHLY, next_product=BASIC_MONTHLY, signed=now - HOUR)
    shop.notify("DID_CHANGE_RENEWAL_PREF", signed=now - HOUR, tx=c1, renewal_info=back)
    e = shop.one(account)
    assert e.pending_product_id == "" and e.product_id == BASIC_MONTHLY
    events = shop.events(account, start)
    assert [E(x.type) for x in events] == ["EVENT_TYPE_RENEWAL_PRODUCT_CHANGED"]
    assert events[0].entitlement.pending_product_id == ""
    start = shop.mark(account)
    shop.notify("DID_CHANGE_RENEWAL_PREF", signed=now - HOUR, tx=c1, renewal_info=back)
    assert shop.kinds(account, start) == []
    assert shop.one(account) == e
    check_snapshots(shop.events(account))


# --- Family Sharing --------------------------------------------------------------------------------------------------

def test_family_sharing_never_pays_an_order(shop):
    """A FAMILY_SHARED transaction cannot pay the member's order (NOT_PURCHASED_BY_ACCOUNT); a purchase notification
    naming that order grants the entitlement (OWNERSHIP_FAMILY_SHARED) and leaves the order PENDING; REVOKE
    (FAMILY_REVOKE) takes the grant back with no order event; a restore grants the same way."""
    now = now_ms()
    kid = "kid"
    o = shop.order(kid, PREMIUM_MONTHLY)
    shared = sub("3100", PREMIUM_MONTHLY, purchase=now - DAY, expires=now + 29 * DAY, token=o.order_id,
                 inAppOwnershipType="FAMILY_SHARED")
    info = expect_error(lambda: shop.submit(o.order_id, shared), grpc.StatusCode.FAILED_PRECONDITION, "NOT_PURCHASED_BY_ACCOUNT")
    assert info.metadata["transaction_id"] == "3100"
    assert shop.get_order(o.order_id).state == pb.ORDER_STATE_PENDING
    start = shop.mark(kid)
    shop.notify("SUBSCRIBED", "INITIAL_BUY", signed=now - DAY + SECOND, tx=shared)
    assert shop.get_order(o.order_id).state == pb.ORDER_STATE_PENDING
    e = shop.one(kid)
    assert e.ownership == pb.OWNERSHIP_FAMILY_SHARED and e.active and e.state == pb.ENTITLEMENT_STATE_ACTIVE and e.order_id == ""
    events = shop.events(kid, start)
    assert [E(x.type) for x in events] == ["EVENT_TYPE_ENTITLEMENT_GRANTED"]
    assert events[0].entitlement.ownership == pb.OWNERSHIP_FAMILY_SHARED
    start = shop.mark(kid)
    shop.notify("REVOKE", signed=now - HOUR, tx=revoked(shared, at=now - HOUR, rtype="FAMILY_REVOKE"))
    e = shop.one(kid)
    assert e.state == pb.ENTITLEMENT_STATE_REVOKED and not e.active and e.revocation_time_ms == now - HOUR
    events = shop.events(kid, start)
    assert [E(x.type) for x in events] == ["EVENT_TYPE_ENTITLEMENT_REVOKED"]
    assert events[0].entitlement.state == pb.ENTITLEMENT_STATE_REVOKED
    assert shop.get_order(o.order_id).state == pb.ORDER_STATE_PENDING
    got = shop.transaction("3100")
    assert got.transaction.ownership == pb.OWNERSHIP_FAMILY_SHARED
    assert got.transaction.revocation_type == pb.REVOCATION_TYPE_FAMILY_REVOKE
    assert got.account_id == kid and got.order.order_id == ""
    check_snapshots(shop.events(kid))


def test_family_sharing_restore_grants_and_revoke_takes_back(shop):
    """A restore of a family member's subscription and non-consumable: OWNERSHIP_FAMILY_SHARED, active, no order;
    REVOKE of the non-consumable revokes it and writes no order event."""
    now = now_ms()
    kid = "kid2"
    shared = sub("3200", PREMIUM_MONTHLY, purchase=now - DAY, expires=now + 29 * DAY, inAppOwnershipType="FAMILY_SHARED")
    book = item("3201", BOOK, kind=mint.NON_CONSUMABLE, purchase=now - DAY, inAppOwnershipType="FAMILY_SHARED")
    start = shop.mark(kid)
    restored = shop.restore(kid, [shared, book])
    assert sorted((r.product_id, r.ownership, r.active, r.order_id) for r in restored) == sorted([
        (PREMIUM_MONTHLY, pb.OWNERSHIP_FAMILY_SHARED, True, ""), (BOOK, pb.OWNERSHIP_FAMILY_SHARED, True, "")])
    assert sorted(shop.kinds(kid, start)) == ["EVENT_TYPE_ENTITLEMENT_GRANTED"] * 2
    start = shop.mark(kid)
    shop.notify("REVOKE", signed=now - HOUR, tx=revoked(book, at=now - HOUR, rtype="FAMILY_REVOKE"))
    events = shop.events(kid, start)
    assert [E(x.type) for x in events] == ["EVENT_TYPE_ENTITLEMENT_REVOKED"]
    assert events[0].entitlement.product_id == BOOK and events[0].entitlement.state == pb.ENTITLEMENT_STATE_REVOKED
    states = {e.product_id: e.state for e in shop.entitlements(kid)}
    assert states == {BOOK: pb.ENTITLEMENT_STATE_REVOKED, PREMIUM_MONTHLY: pb.ENTITLEMENT_STATE_ACTIVE}
    check_snapshots(shop.events(kid))


# --- refunds ---------------------------------------------------------------------------------------------------------

def test_prorated_then_full_refund_of_a_consumable(shop):
    """REFUND_PRORATED 33333 of a quantity-3 consumable: refunded_quantity 1, COMPLETED, ORDER_PARTIALLY_REFUNDED;
    then REFUND_FULL: REFUNDED, refunded_quantity 3, ORDER_REFUNDED."""
    now = now_ms()
    account = "dan"
    o = shop.order(account, COINS, quantity=3)
    coins = item("4100", COINS, kind="Consumable", quantity=3, purchase=now - DAY, token=o.order_id)
    shop.submit(o.order_id, coins)
    start = shop.mark(account)
    shop.notify("REFUND", signed=now - 2 * HOUR, tx=revoked(coins, at=now - 2 * HOUR, rtype="REFUND_PRORATED", percentage=33333))
    got = shop.get_order(o.order_id)
    assert got.state == pb.ORDER_STATE_COMPLETED and got.refunded_quantity == 1 and got.quantity == 3
    events = shop.events(account, start)
    assert [E(x.type) for x in events] == ["EVENT_TYPE_ORDER_PARTIALLY_REFUNDED"]
    assert events[0].order.refunded_quantity == 1 and events[0].order.state == pb.ORDER_STATE_COMPLETED
    t = shop.transaction("4100").transaction
    assert t.revocation_type == pb.REVOCATION_TYPE_REFUND_PRORATED and t.revocation_percentage == 33333
    start = shop.mark(account)
    shop.notify("REFUND", signed=now - HOUR, tx=revoked(coins, at=now - HOUR, rtype="REFUND_FULL"))
    got = shop.get_order(o.order_id)
    assert got.state == pb.ORDER_STATE_REFUNDED and got.refunded_quantity == 3
    events = shop.events(account, start)
    assert [E(x.type) for x in events] == ["EVENT_TYPE_ORDER_REFUNDED"]
    assert events[0].order.refunded_quantity == 3
    assert shop.transaction("4100").transaction.revocation_type == pb.REVOCATION_TYPE_REFUND_FULL


def test_prorated_refund_of_a_subscription_ends_access_and_keeps_the_order(shop):
    now = now_ms()
    account = "eve"
    t = sub("4200", PREMIUM_MONTHLY, purchase=now - DAY, expires=now + 29 * DAY)
    o = shop.subscribe(account, t)
    start = shop.mark(account)
    shop.notify("REFUND", signed=now - HOUR, tx=revoked(t, at=now - HOUR, rtype="REFUND_PRORATED", percentage=50000))
    assert shop.get_order(o.order_id).state == pb.ORDER_STATE_COMPLETED
    assert shop.one(account).state == pb.ENTITLEMENT_STATE_REVOKED
    assert shop.kinds(account, start) == ["EVENT_TYPE_ORDER_PARTIALLY_REFUNDED", "EVENT_TYPE_ENTITLEMENT_REVOKED"]
    check_snapshots(shop.events(account))


def test_full_refund_of_a_subscription(shop):
    now = now_ms()
    account = "eve-full"
    t = sub("4300", PREMIUM_MONTHLY, purchase=now - DAY, expires=now + 29 * DAY)
    o = shop.subscribe(account, t)
    start = shop.mark(account)
    shop.notify("REFUND", signed=now - HOUR, tx=revoked(t, at=now - HOUR, rtype="REFUND_FULL"))
    got = shop.get_order(o.order_id)
    assert got.state == pb.ORDER_STATE_REFUNDED and got.refunded_quantity == 1
    e = shop.one(account)
    assert e.state == pb.ENTITLEMENT_STATE_REVOKED and not e.active
    events = shop.events(account, start)
    assert [E(x.type) for x in events] == ["EVENT_TYPE_ORDER_REFUNDED", "EVENT_TYPE_ENTITLEMENT_REVOKED"]
    check_snapshots(events)


def test_older_period_refund_leaves_the_renewed_entitlement(shop):
    """A first-seen subscription whose period already ended is ENTITLEMENT_EXPIRED (not GRANTED); its renewal
    RENEWED; a refund of the older period refunds that order only."""
    now = now_ms()
    account = "fay"
    p1 = sub("4400", PREMIUM_MONTHLY, purchase=now - 40 * DAY, expires=now - 10 * DAY)
    start = shop.mark(account)
    o = shop.subscribe(account, p1)
    assert shop.kinds(account, start) == ["EVENT_TYPE_ORDER_CREATED", "EVENT_TYPE_ORDER_COMPLETED", "EVENT_TYPE_ENTITLEMENT_EXPIRED"]
    start = shop.mark(account)
    p2 = sub("4401", PREMIUM_MONTHLY, original="4400", purchase=now - 10 * DAY, expires=now + 20 * DAY)
    shop.notify("DID_RENEW", signed=now - 10 * DAY, tx=p2)
    assert shop.kinds(account, start) == ["EVENT_TYPE_ENTITLEMENT_RENEWED"]
    start = shop.mark(account)
    shop.notify("REFUND", signed=now - HOUR, tx=revoked(p1, at=now - HOUR, rtype="REFUND_FULL"))
    assert shop.get_order(o.order_id).state == pb.ORDER_STATE_REFUNDED
    e = shop.one(account)
    assert e.active and e.latest_transaction_id == "4401" and e.state == pb.ENTITLEMENT_STATE_ACTIVE
    assert shop.kinds(account, start) == ["EVENT_TYPE_ORDER_REFUNDED"]
    check_snapshots(shop.events(account))


# --- verification of what a notification carries --------------------------------------------------------------------

def test_nested_environment_mismatch_is_refused_and_applies_nothing(shop):
    """A Sandbox notification carrying a Production signedTransactionInfo (or renewal info): HTTP 400, nothing
    recorded, the PENDING order its token names stays PENDING; the same notificationUUID, sound, is then applied."""
    now = now_ms()
    account = "gil"
    o = shop.order(account, PREMIUM_MONTHLY)
    good = sub("5100", PREMIUM_MONTHLY, purchase=now - HOUR, expires=now + 30 * DAY, token=o.order_id)
    production = dict(good, environment="Production")
    nid = str(uuid.uuid4())
    start = shop.mark(account)
    status, answer = shop.post(shop.payload("SUBSCRIBED", subtype="INITIAL_BUY", signed=now - HOUR, nid=nid, tx=production))
    assert (status, answer) == (400, {"error": "RECEIPT_MALFORMED"})
    status, answer = shop.post(shop.payload("SUBSCRIBED", subtype="INITIAL_BUY", signed=now - HOUR, nid=nid, tx=good,
                                            renewal_info=dict(renewal("5100", PREMIUM_MONTHLY, signed=now - HOUR),
                                                              environment="Production")))
    assert (status, answer) == (400, {"error": "RECEIPT_MALFORMED"})
    assert shop.get_order(o.order_id).state == pb.ORDER_STATE_PENDING
    assert shop.entitlements(account) == []
    assert shop.kinds(account, start) == []
    shop.notify("SUBSCRIBED", "INITIAL_BUY", signed=now - HOUR, nid=nid, tx=good)
    assert shop.get_order(o.order_id).state == pb.ORDER_STATE_COMPLETED
    assert shop.kinds(account, start) == ["EVENT_TYPE_ORDER_COMPLETED", "EVENT_TYPE_ENTITLEMENT_GRANTED"]


def test_signed_date_in_the_future_is_refused(shop):
    """More than --clock-skew (300 s) ahead: 400, nothing applied; within it: applied."""
    now = now_ms()
    account = "hap"
    o = shop.order(account, BOOK)
    t = item("5200", BOOK, kind=mint.NON_CONSUMABLE, purchase=now - HOUR, token=o.order_id)
    nid = str(uuid.uuid4())
    assert shop.post(shop.payload("ONE_TIME_CHARGE", signed=now + 10 * 60 * SECOND, nid=nid, tx=t)) == \
        (400, {"error": "RECEIPT_MALFORMED"})
    assert shop.get_order(o.order_id).state == pb.ORDER_STATE_PENDING
    assert shop.post(shop.payload("ONE_TIME_CHARGE", signed=now + 60 * SECOND, nid=nid, tx=t)) == APPLIED
    assert shop.get_order(o.order_id).state == pb.ORDER_STATE_COMPLETED


def test_rescind_consent_with_app_data_is_recorded_without_events(shop):
    """RESCIND_CONSENT carries appData instead of data: 200, recorded (a redelivery is a duplicate), no event."""
    before = [e.cursor for e in shop.stub.ListEvents(pb.ListEventsRequest(limit=1000), timeout=10).events]
    start = max(before, default=0)
    payload = {"notificationType": "RESCIND_CONSENT", "notificationUUID": str(uuid.uuid4()), "version": "2.0",
               "signedDate": now_ms() - SECOND, "appData": {"appAppleId": 1234567890, "bundleId": BUNDLE, "environment": ENV}}
    signed = shop.signer.sign(payload)
    assert shop.post(signed) == APPLIED
    assert shop.post(signed) == (200, {"result": "duplicate"})
    assert list(shop.stub.ListEvents(pb.ListEventsRequest(after_cursor=start, limit=1000), timeout=10).events) == []
    # Its appData speaks for the app and environment like data does: another bundle is refused.
    other = dict(payload, notificationUUID=str(uuid.uuid4()), appData=dict(payload["appData"], bundleId="com.other.app"))
    assert shop.post(shop.signer.sign(other))[0] == 400


# --- purchases by notification ---------------------------------------------------------------------------------------

def test_offer_redeemed_initial_buy_completes_the_order(shop):
    """OFFER_REDEEMED/INITIAL_BUY is a purchase: it completes the PENDING order its token names (ORDER_COMPLETED,
    ENTITLEMENT_GRANTED) and keeps the offer; OFFER_REDEEMED/UPGRADE of the running subscription is not."""
    now = now_ms()
    account = "hal"
    o = shop.order(account, PREMIUM_MONTHLY)
    t = sub("6100", PREMIUM_MONTHLY, purchase=now - 2 * HOUR, expires=now + 7 * DAY, token=o.order_id,
            price=0, offerType=3, offerIdentifier="WELCOME")
    start = shop.mark(account)
    shop.notify("OFFER_REDEEMED", "INITIAL_BUY", signed=now - 2 * HOUR, tx=t)
    got = shop.get_order(o.order_id)
    assert got.state == pb.ORDER_STATE_COMPLETED and got.transaction_id == "6100" and got.store == pb.STORE_APP_STORE
    events = shop.events(account, start)
    assert [E(x.type) for x in events] == ["EVENT_TYPE_ORDER_COMPLETED", "EVENT_TYPE_ENTITLEMENT_GRANTED"]
    assert events[1].entitlement.order_id == o.order_id
    tx = shop.transaction("6100").transaction
    assert (tx.offer_id, tx.offer_type, tx.price_milliunits, tx.currency) == ("WELCOME", "OFFER_CODE", 0, "USD")
    o2 = shop.order(account, PREMIUM_MONTHLY)
    t2 = sub("6101", PREMIUM_MONTHLY, original="6100", purchase=now - HOUR, expires=now + 30 * DAY, token=o2.order_id)
    shop.notify("OFFER_REDEEMED", "UPGRADE", signed=now - HOUR, tx=t2)
    assert shop.get_order(o2.order_id).state == pb.ORDER_STATE_PENDING
    check_snapshots(shop.events(account))


def test_one_time_charge_after_submit_receipt_writes_nothing(shop):
    """A notification that changes nothing writes no event: ONE_TIME_CHARGE of a purchase SubmitReceipt already
    recorded."""
    now = now_ms()
    account = "gus"
    o = shop.order(account, BOOK)
    book = item("6200", BOOK, kind=mint.NON_CONSUMABLE, purchase=now - HOUR, token=o.order_id)
    shop.submit(o.order_id, book)
    start = shop.mark(account)
    shop.notify("ONE_TIME_CHARGE", signed=now - HOUR + SECOND, tx=book)
    assert shop.kinds(account, start) == []


def test_renewal_status_and_late_older_renewal(shop):
    """DID_CHANGE_RENEWAL_STATUS: RENEWAL_STATUS_CHANGED only; a late DID_RENEW of an older period moves nothing."""
    now = now_ms()
    account = "jon"
    t1 = sub("6300", PREMIUM_MONTHLY, purchase=now - 10 * DAY, expires=now + 20 * DAY)
    shop.subscribe(account, t1)
    start = shop.mark(account)
    shop.notify("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", signed=now - HOUR,
                renewal_info=renewal("6300", PREMIUM_MONTHLY, signed=now - HOUR, auto_renew=False))
    assert shop.kinds(account, start) == ["EVENT_TYPE_RENEWAL_STATUS_CHANGED"]
    assert shop.one(account).auto_renew is False
    start = shop.mark(account)
    t0 = sub("6299", PREMIUM_MONTHLY, original="6300", purchase=now - 40 * DAY, expires=now - 10 * DAY)
    shop.notify("DID_RENEW", signed=now - 40 * DAY, tx=t0)
    assert shop.kinds(account, start) == []
    assert shop.one(account).latest_transaction_id == "6300"


# --- grace period, billing retry, recovery ---------------------------------------------------------------------------

def test_grace_period_then_billing_retry_then_recovery(shop):
    """The period ends a few seconds from now; DID_FAIL_TO_RENEW/GRACE_PERIOD: BILLING_ISSUE, GRACE_PERIOD (active)
    until the grace period ends a few seconds later, then BILLING_RETRY (no access); GRACE_PERIOD_EXPIRED:
    ENTITLEMENT_EXPIRED, still BILLING_RETRY; DID_RENEW/BILLING_RECOVERY: RENEWED, ACTIVE."""
    now = now_ms()
    account = "ida"
    ends = now + 3 * SECOND
    grace = ends + 3 * SECOND
    t1 = sub("7100", PREMIUM_MONTHLY, purchase=ends - 30 * DAY, expires=ends)
    shop.subscribe(account, t1)
    e = shop.one(account)
    assert e.state == pb.ENTITLEMENT_STATE_ACTIVE, "subscribing took longer than the period left"
    wait_until(ends)
    failed = now_ms()
    start = shop.mark(account)
    shop.notify("DID_FAIL_TO_RENEW", "GRACE_PERIOD", signed=failed, tx=t1,
                renewal_info=renewal("7100", PREMIUM_MONTHLY, signed=failed, retry=True, grace=grace))
    events = shop.events(account, start)
    assert [E(x.type) for x in events] == ["EVENT_TYPE_BILLING_ISSUE"]
    assert events[0].entitlement.grace_period_expires_time_ms == grace
    assert events[0].entitlement.state == pb.ENTITLEMENT_STATE_GRACE_PERIOD and events[0].entitlement.active
    e = shop.one(account)
    assert now_ms() < grace, "too slow to see the grace period"
    assert e.state == pb.ENTITLEMENT_STATE_GRACE_PERIOD and e.active and e.grace_period_expires_time_ms == grace
    assert [x.original_transaction_id for x in shop.stub.GetEntitlements(
        pb.GetEntitlementsRequest(account_id=account), timeout=10).entitlements] == ["7100"]
    wait_until(grace)
    e = shop.one(account)
    assert e.state == pb.ENTITLEMENT_STATE_BILLING_RETRY and not e.active
    start = shop.mark(account)
    shop.notify("GRACE_PERIOD_EXPIRED", signed=now_ms(), tx=t1)
    events = shop.events(account, start)
    assert [E(x.type) for x in events] == ["EVENT_TYPE_ENTITLEMENT_EXPIRED"]
    assert events[0].entitlement.state == pb.ENTITLEMENT_STATE_BILLING_RETRY and not events[0].entitlement.active
    assert shop.one(account).state == pb.ENTITLEMENT_STATE_BILLING_RETRY
    # The store recovers the payment: a new period, active again.
    time.sleep(0.01)
    recovered = now_ms()
    start = shop.mark(account)
    t2 = sub("7101", PREMIUM_MONTHLY, original="7100", purchase=recovered, expires=recovered + 30 * DAY)
    shop.notify("DID_RENEW", "BILLING_RECOVERY", signed=recovered, tx=t2,
                renewal_info=renewal("7100", PREMIUM_MONTHLY, signed=recovered, retry=False))
    e = shop.one(account)
    assert e.state == pb.ENTITLEMENT_STATE_ACTIVE and e.active and e.latest_transaction_id == "7101"
    events = shop.events(account, start)
    assert [E(x.type) for x in events] == ["EVENT_TYPE_ENTITLEMENT_RENEWED"]
    assert events[0].entitlement.state == pb.ENTITLEMENT_STATE_ACTIVE
    check_snapshots(shop.events(account))
