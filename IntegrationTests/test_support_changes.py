"""billing.v1.Support's changes over the wire (grpcio), on SQLite and PostgreSQL: ExplainAccess from the entitlement
rule (a reason per case, its `why` naming the deciding id and date), grants (with a duration, an end date, no end;
revoked; their expiry written by the sweep; beside a store subscription of the same product; idempotent; consumables
refused), TransferPurchases (then a renewal notification lands on the new owner), DeleteCustomer (every read path by
the old id empty, the pseudonym's money unchanged, a later REFUND applied to it) and the audit entry of each call.

The App Store side is signed by billingd's own test store and posted to its notifications endpoint
(test_subscriptions' Shop); the server runs without API keys, so the audit trail's operator is "anonymous"."""
import json
import os
import tempfile
import time
import uuid

import grpc
import pytest

from conftest import Billingd
from helpers import expect_error, pb, pb_grpc
from test_subscriptions import (BOOK, COINS, DAY, HOUR, PREMIUM_MONTHLY, SECOND, Shop, item, now_ms, renewal, revoked,
                                sub)

E = pb.EventType.Name
R = pb.AccessReason.Name


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def shop(request):
    s = Shop(request.param)
    s.support = pb_grpc.SupportStub(s.channel)
    yield s
    s.close()


def ids():
    return str(uuid.uuid4().int)[:16]


def grant(shop, account, product, **kw):
    kw.setdefault("reason", "a week while the refund is sorted out")
    return shop.support.GrantEntitlement(pb.GrantEntitlementRequest(account_id=account, product_id=product, **kw), timeout=10)


def explain(shop, account, product=""):
    return shop.support.ExplainAccess(pb.ExplainAccessRequest(account_id=account, product_id=product), timeout=10)


def audit(shop, **kw):
    return list(shop.support.ListAuditEntries(pb.ListAuditEntriesRequest(**kw), timeout=10).entries)


def day(ms):
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ms / 1000))


def wait_for(predicate, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.2)
    return predicate()


# --- grants ----------------------------------------------------------------------------------------------------------

def test_grant_for_a_duration_expires_by_the_sweep_with_its_event(shop):
    account = f"g-dur-{uuid.uuid4().hex[:8]}"
    before = now_ms()
    got = grant(shop, account, PREMIUM_MONTHLY, duration_seconds=2)
    g, e = got.grant, got.entitlement
    assert g.grant_id.startswith("grant_") and uuid.UUID(g.grant_id[6:])
    assert g.account_id == account and g.product_id == PREMIUM_MONTHLY and g.operator == "anonymous"
    assert before <= g.start_time_ms <= now_ms() and g.expires_time_ms == g.start_time_ms + 2000
    assert e.store == pb.STORE_GRANT and e.grant_id == g.grant_id and e.original_transaction_id == g.grant_id
    assert e.active and e.state == pb.ENTITLEMENT_STATE_ACTIVE and e.expires_time_ms == g.expires_time_ms
    # Like any entitlement: GetEntitlements, the feed.
    assert [x.grant_id for x in shop.entitlements(account)] == [g.grant_id]
    granted = [x for x in shop.events(account) if x.type == pb.EVENT_TYPE_ENTITLEMENT_GRANTED]
    assert [(x.cause, x.transaction_id, x.entitlement.grant_id) for x in granted] == [("support:GrantEntitlement", g.grant_id, g.grant_id)]
    # The sweep (every 5 s) writes ENTITLEMENT_EXPIRED within seconds of the end, once.
    expired = wait_for(lambda: [x for x in shop.events(account) if x.type == pb.EVENT_TYPE_ENTITLEMENT_EXPIRED], 30)
    assert [(x.cause, x.entitlement.grant_id, x.entitlement.active) for x in expired] == [("grant_expiry", g.grant_id, False)]
    assert expired[0].time_ms - g.expires_time_ms < 60_000
    time.sleep(6)
    assert len([x for x in shop.events(account) if x.type == pb.EVENT_TYPE_ENTITLEMENT_EXPIRED]) == 1
    fact, = explain(shop, account).facts
    assert (R(fact.reason), fact.grants_access, fact.until_time_ms) == ("ACCESS_REASON_GRANT_EXPIRED", False, 0)
    assert g.grant_id in fact.why and day(g.expires_time_ms) in fact.why


def test_grant_until_a_date_and_for_good_then_revoked(shop):
    account = f"g-end-{uuid.uuid4().hex[:8]}"
    until = now_ms() + 3 * DAY
    dated = grant(shop, account, BOOK, expires_time_ms=until, reason="goodwill").grant
    assert dated.expires_time_ms == until
    forever = grant(shop, account, PREMIUM_MONTHLY, reason="press account").grant
    assert forever.expires_time_ms == 0
    answer = explain(shop, account)
    assert answer.has_access
    by_grant = {f.transaction_id: f for f in answer.facts}
    f = by_grant[dated.grant_id]
    assert (R(f.reason), f.grants_access, f.until_time_ms, f.store) == ("ACCESS_REASON_GRANTED", True, until, pb.STORE_GRANT)
    assert f.why == f"granted by anonymous until {day(until)} (grant {dated.grant_id}): goodwill"
    assert by_grant[forever.grant_id].until_time_ms == 0 and "with no end" in by_grant[forever.grant_id].why
    # Revoked: REVOKED at once, one ENTITLEMENT_REVOKED; revoking again answers it unchanged.
    r = shop.support.RevokeGrant(pb.RevokeGrantRequest(grant_id=forever.grant_id, reason="press tour over"), timeout=10)
    assert r.grant.revocation_time_ms > 0 and r.entitlement.state == pb.ENTITLEMENT_STATE_REVOKED and not r.entitlement.active
    again = shop.support.RevokeGrant(pb.RevokeGrantRequest(grant_id=forever.grant_id, reason="twice"), timeout=10)
    assert again.grant == r.grant
    revoked_events = [x for x in shop.events(account) if x.type == pb.EVENT_TYPE_ENTITLEMENT_REVOKED]
    assert [(x.cause, x.entitlement.grant_id) for x in revoked_events] == [("support:RevokeGrant", forever.grant_id)]
    f = {x.transaction_id: x for x in explain(shop, account, PREMIUM_MONTHLY).facts}[forever.grant_id]
    assert R(f.reason) == "ACCESS_REASON_GRANT_REVOKED" and day(r.grant.revocation_time_ms) in f.why
    # GetCustomer lists both grants and their entitlements; FindCustomers finds the account by a grant id.
    c = shop.support.GetCustomer(pb.GetCustomerRequest(account_id=account), timeout=10)
    assert sorted(g.grant_id for g in c.grants) == sorted([dated.grant_id, forever.grant_id])
    assert {g.grant_id: g.reason for g in c.grants}[dated.grant_id] == "goodwill"
    assert sorted(e.grant_id for e in c.entitlements) == sorted([dated.grant_id, forever.grant_id])
    m, = shop.support.FindCustomers(pb.FindCustomersRequest(query=dated.grant_id), timeout=10).matches
    assert (m.customer.account_id, m.matched) == (account, "grant_id")
    expect_error(lambda: shop.support.RevokeGrant(pb.RevokeGrantRequest(grant_id="grant_" + str(uuid.uuid4()), reason="x"),
                                                  timeout=10), grpc.StatusCode.NOT_FOUND, "GRANT_NOT_FOUND")


def test_grant_is_idempotent_and_checks_its_fields(shop):
    account = f"g-key-{uuid.uuid4().hex[:8]}"
    first = grant(shop, account, BOOK, duration_seconds=7 * 86400, idempotency_key="ticket-41").grant
    again = grant(shop, account, BOOK, duration_seconds=7 * 86400, idempotency_key="ticket-41").grant
    assert again == first
    assert len(shop.entitlements(account)) == 1
    expect_error(lambda: grant(shop, account, PREMIUM_MONTHLY, idempotency_key="ticket-41"), grpc.StatusCode.FAILED_PRECONDITION,
                 "IDEMPOTENCY_KEY_REUSED")
    for kw in ({"duration_seconds": 60, "expires_time_ms": now_ms() + HOUR}, {"duration_seconds": -1}, {"reason": ""},
               {"expires_time_ms": now_ms() - HOUR}, {"reason": "x" * 501}):
        info = expect_error(lambda: grant(shop, account, BOOK, **kw), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
        assert info.metadata["field"] in ("duration_seconds", "expires_time_ms", "reason"), kw
    expect_error(lambda: grant(shop, "", BOOK), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")


def test_grant_beside_a_store_subscription_of_the_same_product(shop):
    account, tid = f"g-side-{uuid.uuid4().hex[:8]}", ids()
    now = now_ms()
    # The store subscription lapsed yesterday (nothing renewed it); the grant gives access beside it.
    t = sub(tid, PREMIUM_MONTHLY, purchase=now - 31 * DAY, expires=now - DAY)
    shop.subscribe(account, t)
    g = grant(shop, account, PREMIUM_MONTHLY, duration_seconds=3600).grant
    ents = shop.entitlements(account)
    assert sorted((e.store, e.active) for e in ents) == [(pb.STORE_APP_STORE, False), (pb.STORE_GRANT, True)]
    answer = explain(shop, account, PREMIUM_MONTHLY)
    assert answer.has_access
    assert [(R(f.reason), f.transaction_id) for f in answer.facts] == [("ACCESS_REASON_GRANTED", g.grant_id),
                                                                       ("ACCESS_REASON_EXPIRED", tid)]
    assert answer.facts[1].why.startswith(f"expired {day(now - DAY)}: the period of transaction {tid} ended")
    # A restore answers it too.
    assert g.grant_id in [e.grant_id for e in shop.restore(account, [t])]


def test_grant_of_a_consumable_is_refused_with_a_catalog():
    path = os.path.join(tempfile.mkdtemp(prefix="grant-catalog-"), "catalog.json")
    with open(path, "w") as f:
        json.dump({"products": [{"id": "coins", "type": "consumable"}, {"id": "pro", "type": "auto_renewable_subscription"}]}, f)
    server = Billingd("--dev", "--catalog", path)
    try:
        with server.channel() as ch:
            support = pb_grpc.SupportStub(ch)
            req = lambda p: support.GrantEntitlement(pb.GrantEntitlementRequest(account_id="a", product_id=p, reason="r"), timeout=10)
            info = expect_error(lambda: req("coins"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
            assert info.metadata["field"] == "product_id"
            expect_error(lambda: req("nope"), grpc.StatusCode.NOT_FOUND, "PRODUCT_NOT_FOUND")
            assert req("pro").entitlement.product_type == pb.PRODUCT_TYPE_AUTO_RENEWABLE_SUBSCRIPTION
    finally:
        server.stop()


# --- ExplainAccess ---------------------------------------------------------------------------------------------------

def test_explain_access_names_the_deciding_fact(shop):
    account, now = f"x-{uuid.uuid4().hex[:8]}", now_ms()
    book, coins, active, refunded, upgraded, shared = ids(), ids(), ids(), ids(), ids(), ids()
    shop.restore(account, [
        item(book, BOOK, kind="Non-Consumable", purchase=now - 9 * DAY),
        sub(active, PREMIUM_MONTHLY, purchase=now - DAY, expires=now + 29 * DAY),
        revoked(sub(refunded, "com.example.basic.monthly", purchase=now - 5 * DAY, expires=now + 25 * DAY),
                at=now - 2 * DAY, rtype="REFUND_FULL"),
        sub(upgraded, "com.example.basic.yearly", purchase=now - 3 * DAY, expires=now + 300 * DAY, isUpgraded=True),
        sub(shared, "com.example.plus.monthly", purchase=now - DAY, expires=now + 29 * DAY, inAppOwnershipType="FAMILY_SHARED"),
    ])
    shop.subscribe(account, item(coins, COINS, kind="Consumable", purchase=now))  # no entitlement, no fact
    answer = explain(shop, account)
    assert answer.has_access
    got = {f.transaction_id: f for f in answer.facts}
    assert set(got) == {book, active, refunded, upgraded, shared}
    expect = {
        book: ("ACCESS_REASON_PURCHASED", True, 0, day(now - 9 * DAY)),
        active: ("ACCESS_REASON_SUBSCRIPTION_ACTIVE", True, now + 29 * DAY, day(now + 29 * DAY)),
        refunded: ("ACCESS_REASON_REFUNDED", False, 0, day(now - 2 * DAY)),
        upgraded: ("ACCESS_REASON_UPGRADED", False, 0, upgraded),
        shared: ("ACCESS_REASON_FAMILY_SHARED", True, now + 29 * DAY, day(now + 29 * DAY)),
    }
    for tid, (reason, access, until, mentioned) in expect.items():
        f = got[tid]
        assert (R(f.reason), f.grants_access, f.until_time_ms) == (reason, access, until), (tid, f)
        assert tid in f.why and mentioned in f.why, f.why
    assert got[refunded].why == f"revoked: refunded in full on {day(now - 2 * DAY)} (transaction {refunded})"
    # The granting ones first.
    assert [f.grants_access for f in answer.facts] == sorted((f.grants_access for f in answer.facts), reverse=True)
    only = explain(shop, account, BOOK)
    assert only.has_access and [f.transaction_id for f in only.facts] == [book]
    none = explain(shop, account, "com.example.never")
    assert not none.has_access and not none.facts
    expect_error(lambda: explain(shop, f"nobody-{uuid.uuid4().hex}"), grpc.StatusCode.NOT_FOUND, "ACCOUNT_NOT_FOUND")


def test_explain_access_through_grace_period_and_billing_retry(shop):
    account, tid, now = f"xg-{uuid.uuid4().hex[:8]}", ids(), now_ms()
    t = sub(tid, PREMIUM_MONTHLY, original=tid, purchase=now - 30 * DAY, expires=now - HOUR)
    shop.subscribe(account, t)
    info = renewal(tid, PREMIUM_MONTHLY, signed=now - 30 * 60_000, retry=True, grace=now + 2 * DAY)
    shop.notify("DID_FAIL_TO_RENEW", "GRACE_PERIOD", signed=now - 30 * 60_000, tx=t, renewal_info=info)
    f, = explain(shop, account).facts
    assert (R(f.reason), f.until_time_ms) == ("ACCESS_REASON_GRACE_PERIOD", now + 2 * DAY)
    assert day(now + 2 * DAY) in f.why and tid in f.why
    info = renewal(tid, PREMIUM_MONTHLY, signed=now - 60_000, retry=True)
    shop.notify("GRACE_PERIOD_EXPIRED", signed=now - 60_000, tx=t, renewal_info=info)
    f, = explain(shop, account).facts
    assert (R(f.reason), f.grants_access) in (("ACCESS_REASON_BILLING_RETRY", False), ("ACCESS_REASON_EXPIRED", False))


# --- TransferPurchases -----------------------------------------------------------------------------------------------

def test_transfer_then_a_renewal_lands_on_the_new_owner(shop):
    a, b, tid, now = f"t-from-{uuid.uuid4().hex[:8]}", f"t-to-{uuid.uuid4().hex[:8]}", ids(), now_ms()
    first = sub(tid, PREMIUM_MONTHLY, original=tid, purchase=now - 20 * DAY, expires=now + 10 * DAY)
    order = shop.subscribe(a, first)
    grant(shop, a, BOOK)  # grants do not move
    moved = shop.support.TransferPurchases(
        pb.TransferPurchasesRequest(from_account_id=a, to_account_id=b, reason="customer signed in with a new account"), timeout=10)
    assert moved.transferred == 1
    assert [(e.original_transaction_id, e.active) for e in moved.entitlements] == [(tid, True)]
    assert [e.store for e in shop.entitlements(a)] == [pb.STORE_GRANT]
    assert shop.get_order(order.order_id).account_id == a  # orders stay with the account that placed them
    got = [(E(x.type), x.cause) for x in shop.events(b)]
    assert got == [("EVENT_TYPE_ENTITLEMENT_TRANSFERRED", "support:TransferPurchases")]
    left = [x for x in shop.events(a) if x.type == pb.EVENT_TYPE_ENTITLEMENT_TRANSFERRED]
    assert len(left) == 1 and not left[0].entitlement.active
    # Apple renews it: the new owner's entitlement moves, the old owner hears nothing.
    a_events = len(shop.events(a))
    renewal_tx = sub(ids(), PREMIUM_MONTHLY, original=tid, purchase=now - SECOND, expires=now + 40 * DAY)
    shop.notify("DID_RENEW", signed=now, tx=renewal_tx, renewal_info=renewal(tid, PREMIUM_MONTHLY, signed=now))
    e, = [x for x in shop.entitlements(b) if x.original_transaction_id == tid]
    assert e.latest_transaction_id == renewal_tx["transactionId"] and e.expires_time_ms == now + 40 * DAY
    assert E(shop.events(b)[-1].type) == "EVENT_TYPE_ENTITLEMENT_RENEWED"
    assert len(shop.events(a)) == a_events
    # Refusals.
    req = lambda **kw: shop.support.TransferPurchases(pb.TransferPurchasesRequest(**kw), timeout=10)
    expect_error(lambda: req(from_account_id=f"nobody-{uuid.uuid4().hex}", to_account_id=b, reason="r"), grpc.StatusCode.NOT_FOUND,
                 "ACCOUNT_NOT_FOUND")
    info = expect_error(lambda: req(from_account_id=b, to_account_id=b, reason="r"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
    assert info.metadata["field"] == "to_account_id"
    expect_error(lambda: req(from_account_id=b, to_account_id=a, reason="r", original_transaction_ids=["999"]),
                 grpc.StatusCode.NOT_FOUND, "TRANSACTION_NOT_FOUND")
    expect_error(lambda: req(from_account_id=b, to_account_id=a), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")


# --- DeleteCustomer --------------------------------------------------------------------------------------------------

def test_erasure_end_to_end(shop):
    old, tid, now = f"erase-{uuid.uuid4().hex[:8]}", ids(), now_ms()
    o = shop.stub.CreateOrder(pb.CreateOrderRequest(account_id=old, product_id=BOOK, idempotency_key="k1"), timeout=10).order
    t = item(tid, BOOK, kind="Non-Consumable", purchase=now - HOUR, price=4990, currency="USD", appAccountToken=o.order_id)
    shop.submit(o.order_id, t)
    g = grant(shop, old, PREMIUM_MONTHLY).grant
    shop.support.FindCustomers(pb.FindCustomersRequest(query=old), timeout=10)
    before = shop.support.GetCustomer(pb.GetCustomerRequest(account_id=old), timeout=10).customer
    assert [(m.currency, m.milliunits) for m in before.spent] == [("USD", 4990)]
    gone = shop.support.DeleteCustomer(pb.DeleteCustomerRequest(account_id=old, reason="GDPR request #12"), timeout=10)
    p = gone.pseudonym
    assert p.startswith("deleted_") and uuid.UUID(p[8:])
    assert (gone.orders, gone.transactions) == (1, 1) and gone.events >= 4
    # The old id finds nothing anywhere: first the trail (the reads below are new operator actions, audited as such).
    assert [e for e in audit(shop, limit=1000) if old in e.request_json or old in (e.target, e.account_id)] == []
    assert not shop.support.FindCustomers(pb.FindCustomersRequest(query=old), timeout=10).matches
    expect_error(lambda: shop.support.GetCustomer(pb.GetCustomerRequest(account_id=old), timeout=10), grpc.StatusCode.NOT_FOUND,
                 "ACCOUNT_NOT_FOUND")
    assert not shop.entitlements(old)
    assert not shop.stub.ListTransactions(pb.ListTransactionsRequest(account_id=old), timeout=10).transactions
    assert not shop.events(old)
    # Under the pseudonym: the same money, the order, the grant, one ACCOUNT_DELETED.
    after = shop.support.GetCustomer(pb.GetCustomerRequest(account_id=p), timeout=10)
    assert after.customer.deleted and after.customer.spent == before.spent and after.customer.orders == before.orders
    assert [x.grant_id for x in after.grants] == [g.grant_id]
    assert shop.get_order(o.order_id).account_id == p
    deleted = [x for x in shop.events(p) if x.type == pb.EVENT_TYPE_ACCOUNT_DELETED]
    assert [(x.account_id, x.cause) for x in deleted] == [(p, "support:DeleteCustomer")]
    assert all(x.account_id == p and (not x.HasField("order") or x.order.account_id == p) for x in shop.events(p))
    entry, = audit(shop, account_id=p, method="billing.v1.Support/DeleteCustomer")
    assert entry.outcome == "OK" and entry.reason == "GDPR request #12" and old not in entry.request_json
    # A later REFUND from Apple still applies, to the pseudonym.
    refund_at = now_ms() - SECOND
    shop.notify("REFUND", signed=refund_at, tx=revoked(t, at=refund_at, rtype="REFUND_FULL"))
    assert shop.get_order(o.order_id).state == pb.ORDER_STATE_REFUNDED
    assert [e.state for e in shop.entitlements(p) if e.store == pb.STORE_APP_STORE] == [pb.ENTITLEMENT_STATE_REVOKED]
    assert not shop.entitlements(old)
    # A new order under the old id starts a new account; its idempotency key was dropped.
    fresh = shop.stub.CreateOrder(pb.CreateOrderRequest(account_id=old, product_id=BOOK, idempotency_key="k1"), timeout=10).order
    assert fresh.order_id != o.order_id and fresh.account_id == old
    # Safe to repeat: the pseudonym stays, the old id's new account is its own.
    expect_error(lambda: shop.support.DeleteCustomer(pb.DeleteCustomerRequest(account_id=f"nobody-{uuid.uuid4().hex}", reason="r"),
                                                     timeout=10), grpc.StatusCode.NOT_FOUND, "ACCOUNT_NOT_FOUND")
    refunded = shop.support.GetCustomer(pb.GetCustomerRequest(account_id=p), timeout=10).customer
    assert [(m.currency, m.milliunits) for m in refunded.spent] == [("USD", 0)] and refunded.refunded_transactions == 1


# --- the audit trail of the changes ----------------------------------------------------------------------------------

def test_each_change_writes_its_audit_entry(shop):
    account = f"aud-{uuid.uuid4().hex[:8]}"
    g = grant(shop, account, BOOK, reason="ticket 7").grant
    shop.support.RevokeGrant(pb.RevokeGrantRequest(grant_id=g.grant_id, reason="ticket 7 closed"), timeout=10)
    explain(shop, account)
    expect_error(lambda: grant(shop, account, BOOK, reason=""), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
    got = [(e.method.split("/")[1], e.outcome, e.reason, e.target) for e in audit(shop, account_id=account)]
    assert got == [
        ("GrantEntitlement", "INVALID_FIELD", "", BOOK),
        ("ExplainAccess", "OK", "", ""),
        ("RevokeGrant", "OK", "ticket 7 closed", g.grant_id),
        ("GrantEntitlement", "OK", "ticket 7", BOOK),
    ]
    assert all(e.operator == "anonymous" for e in audit(shop, account_id=account))


# --- billingctl ------------------------------------------------------------------------------------------------------

def ctl(shop, *args, check=True):
    from conftest import binary
    import subprocess
    r = subprocess.run([binary("billingctl"), "--addr", shop.server.address, *args], capture_output=True, text=True, timeout=30)
    if check:
        assert r.returncode == 0, (args, r.stderr)
    return r


def test_billingctl_walks_a_support_case(shop):
    account, other, tid, now = f"cli-{uuid.uuid4().hex[:8]}", f"cli-new-{uuid.uuid4().hex[:8]}", ids(), now_ms()
    shop.subscribe(account, sub(tid, PREMIUM_MONTHLY, original=tid, purchase=now - 31 * DAY, expires=now - DAY))
    found = ctl(shop, "customer", "find", tid).stdout
    assert found.startswith(f"{account}  (matched transaction_id)")
    why = ctl(shop, "customer", "explain", account).stdout.splitlines()
    assert why[0] == f"{account} has no access" and why[1].startswith(f"  - {PREMIUM_MONTHLY}  EXPIRED  expired {day(now - DAY)}")
    g = json.loads(ctl(shop, "grant", account, PREMIUM_MONTHLY, "--for", "7d", "--reason", "ticket 99").stdout)["grant"]
    assert int(g["expiresTimeMs"]) - int(g["startTimeMs"]) == 7 * DAY and g["operator"] == "anonymous"
    assert ctl(shop, "customer", "explain", account, PREMIUM_MONTHLY).stdout.startswith(f"{account} has access")
    until = json.loads(ctl(shop, "grant", account, BOOK, "--until", "2099-01-31", "--reason", "r").stdout)["grant"]
    assert int(until["expiresTimeMs"]) == 4073500800000  # 2099-01-31 00:00 UTC
    assert json.loads(ctl(shop, "grant", "revoke", g["grantId"], "--reason", "sorted").stdout)["grant"]["revocationTimeMs"]
    shown = json.loads(ctl(shop, "customer", "show", account).stdout)
    assert shown["customer"]["accountId"] == account and len(shown["grants"]) == 2
    moved = json.loads(ctl(shop, "transfer", account, other, "--reason", "new sign-in").stdout)
    assert moved["transferred"] == 1
    refused = ctl(shop, "refund", tid, "--reason", "asked", check=False)
    assert refused.returncode == 1 and "REFUND_NOT_SUPPORTED" in refused.stderr
    entries = json.loads(ctl(shop, "audit", "--account", account, "--limit", "3").stdout)["entries"]
    assert [e["method"].split("/")[1] for e in entries] == ["TransferPurchases", "GetCustomer", "RevokeGrant"]
    # The refund named a purchase the other account owns now: its entry is that account's.
    refund, = json.loads(ctl(shop, "audit", "--account", other, "--method", "billing.v1.Support/RefundPurchase").stdout)["entries"]
    assert (refund["outcome"], refund["target"], refund["reason"]) == ("REFUND_NOT_SUPPORTED", tid, "asked")
    gone = json.loads(ctl(shop, "customer", "delete", other, "--reason", "erasure request").stdout)
    assert gone["pseudonym"].startswith("deleted_")
    assert ctl(shop, "grant", account, BOOK, check=False).returncode == 2  # no --reason: a usage error


def test_admin_calls_that_change_something_are_audited(shop):
    from billing.admin.v1 import admin_pb2, admin_pb2_grpc
    admin = admin_pb2_grpc.AdminStub(shop.channel)
    expect_error(lambda: admin.Reconcile(admin_pb2.ReconcileRequest(), timeout=10), grpc.StatusCode.FAILED_PRECONDITION,
                 "APPSTORE_API_NOT_CONFIGURED")
    expect_error(lambda: admin.SetAppAccountToken(admin_pb2.SetAppAccountTokenRequest(
        original_transaction_id="1", order_id=str(uuid.uuid4())), timeout=10), None)
    entry = audit(shop, method="billing.admin.v1.Admin/Reconcile", limit=1)[0]
    assert (entry.operator, entry.outcome) == ("anonymous", "APPSTORE_API_NOT_CONFIGURED")
    assert entry.request_json.startswith("{")
    entry = audit(shop, method="billing.admin.v1.Admin/SetAppAccountToken", limit=1)[0]
    assert entry.outcome != "OK" and "originalTransactionId" in entry.request_json
    # Reads are not changes: GetWebhookStatus writes no entry.
    before = len(audit(shop, limit=1000))
    try:
        admin.GetWebhookStatus(admin_pb2.GetWebhookStatusRequest(), timeout=10)
    except grpc.RpcError:
        pass
    assert len(audit(shop, limit=1000)) == before + 1  # the ListAuditEntries above, nothing for GetWebhookStatus
