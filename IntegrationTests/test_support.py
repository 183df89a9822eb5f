"""billing.v1.Support through grpcio (and Connect JSON through httpx), on SQLite and PostgreSQL: FindCustomers by
every id kind billingd records, GetCustomer's summary (money per currency as Revenue defines it), and the audit
trail: one entry per call, refusals included (INVALID_FIELD, ACCOUNT_NOT_FOUND, PERMISSION_DENIED,
UNAUTHENTICATED), filters and paging."""
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid

import grpc
import httpx
import pytest

from conftest import Billingd, binary, postgres_database
from helpers import billing, expect_error, pb, pb_grpc

BUNDLE = "com.example.app"
NOW = int(time.time() * 1000)
HOUR = 3_600_000
DAY = 24 * HOUR
BACKEND, SUPPORT, OTHER = "k-backend", "k-support", "k-other"


def digest(key):
    return hashlib.sha256(key.encode()).hexdigest()


class Desk:
    """billingd --dev with its own test store and three keys: an app backend's (Billing), support's (Support),
    and one with neither Support method."""

    def __init__(self, database):
        self.dir = tempfile.mkdtemp(prefix="support-")
        self.store = os.path.join(self.dir, "teststore")
        subprocess.run([binary("billingctl"), "teststore", "init", self.store], check=True, capture_output=True)
        keys = os.path.join(self.dir, "keys.json")
        with open(keys, "w") as f:
            json.dump({"keys": [
                {"name": "backend", "sha256": digest(BACKEND), "methods": ["billing.v1.Billing/*"]},
                {"name": "support-alice", "sha256": digest(SUPPORT), "methods": ["billing.v1.Support/*", "billing.v1.Billing/GetOrder"]},
                {"name": "other", "sha256": digest(OTHER), "methods": ["billing.v1.Billing/GetOrder"]},
            ]}, f)
        self.server = Billingd("--dev", "--dev-store", self.store, "--bundle-id", BUNDLE, "--environments", "sandbox",
                               "--api-keys", keys, database=database)
        self.channel = self.server.channel()
        self.billing = billing(self.channel)
        self.support = pb_grpc.SupportStub(self.channel)

    def jws(self, product, **kw):
        args = [binary("billingctl"), "teststore", "transaction", "--store", self.store, "--product", product,
                "--bundle-id", BUNDLE, "--environment", "sandbox"]
        for k, v in kw.items():
            args += ["--" + k.replace("_", "-"), str(v)]
        return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()

    def buy(self, account, product="com.example.coins", **kw):
        """An order for `account`, paid by a new transaction (the flags of `teststore transaction`)."""
        order = self.billing.CreateOrder(pb.CreateOrderRequest(account_id=account, product_id=product, quantity=kw.get("quantity", 1)),
                                         timeout=5,
                                         metadata=auth(BACKEND)).order
        jws = self.jws(product, app_account_token=order.order_id, **kw)
        return self.billing.SubmitReceipt(pb.SubmitReceiptRequest(order_id=order.order_id, signed_transaction=jws), timeout=10,
                                          metadata=auth(BACKEND)).order

    def restore(self, account, *jws):
        return self.billing.RestorePurchases(pb.RestorePurchasesRequest(account_id=account, signed_transactions=list(jws)),
                                             timeout=10, metadata=auth(BACKEND))

    def find(self, query, key=SUPPORT):
        return self.support.FindCustomers(pb.FindCustomersRequest(query=query), timeout=5, metadata=auth(key)).matches

    def customer(self, account, key=SUPPORT):
        return self.support.GetCustomer(pb.GetCustomerRequest(account_id=account), timeout=5, metadata=auth(key))

    def audit(self, key=SUPPORT, **kw):
        return self.support.ListAuditEntries(pb.ListAuditEntriesRequest(**kw), timeout=5, metadata=auth(key))

    def close(self):
        self.channel.close()
        self.server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def auth(key):
    return (("authorization", f"Bearer {key}"),)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def desk(request):
    d = Desk(postgres_database() if request.param == "postgres" else None)
    run = uuid.uuid4().hex[:8]
    d.run = run
    # Ann: two consumables (USD and EUR, one refunded in full), a subscription of two periods, one refunded 25%.
    d.ann = f"ann-{run}"
    d.ann_orders = [
        d.buy(d.ann, transaction_id=f"{run}01", purchase_date=NOW - 5 * DAY, price=1990, currency="USD", quantity=2),
        d.buy(d.ann, transaction_id=f"{run}02", purchase_date=NOW - 4 * DAY, price=990, currency="EUR"),
        d.buy(d.ann, product="com.example.pro.monthly", type="auto_renewable_subscription", transaction_id=f"{run}10",
              original_transaction_id=f"{run}10", purchase_date=NOW - 40 * DAY, expires_date=NOW - 10 * DAY, price=4990,
              currency="USD"),
    ]
    d.ann_renewal = d.jws("com.example.pro.monthly", type="auto_renewable_subscription", transaction_id=f"{run}11",
                          original_transaction_id=f"{run}10", purchase_date=NOW - 10 * DAY, expires_date=NOW + 20 * DAY,
                          price=4990, currency="USD", revocation_date=NOW - HOUR, revocation_type="REFUND_PRORATED",
                          revocation_percentage=25000, app_account_token=d.ann_orders[2].order_id)
    d.restore(d.ann, d.ann_renewal)
    # The EUR purchase refunded later: a newer signed view of it, as a restore hands it over.
    d.restore(d.ann, d.jws("com.example.coins", transaction_id=f"{run}02", purchase_date=NOW - 4 * DAY, price=990, currency="EUR",
                           revocation_date=NOW - 3 * DAY, revocation_type="REFUND_FULL", app_account_token=d.ann_orders[1].order_id))
    # Two accounts that restored purchases carrying one appAccountToken that is no order of billingd's.
    d.token = str(uuid.uuid4())
    d.bea, d.cal = f"bea-{run}", f"cal-{run}"
    d.restore(d.bea, d.jws("com.example.lifetime", type="non_consumable", transaction_id=f"{run}20", purchase_date=NOW - DAY,
                           app_account_token=d.token))
    d.restore(d.cal, d.jws("com.example.lifetime", type="non_consumable", transaction_id=f"{run}21", purchase_date=NOW - DAY,
                           app_account_token=d.token))
    yield d
    d.close()


def test_find_by_every_id_kind(desk):
    run, ann = desk.run, desk.ann
    cases = [
        (ann, "account_id"),
        (f"  {ann}\t", "account_id"),                    # surrounding spaces ignored
        (desk.ann_orders[0].order_id, "order_id"),
        (desk.ann_orders[0].order_id.upper(), "order_id"),  # any spelling of the UUID
        (f"{run}01", "transaction_id"),
        (f"{run}11", "transaction_id"),
        (f"{run}10", "transaction_id"),                  # the original is a transaction of its own too
    ]
    for query, kind in cases:
        matches = desk.find(query)
        assert [(m.customer.account_id, m.matched) for m in matches] == [(ann, kind)], query
    # The original transaction id of a chain whose first transaction nobody owns: matched as the original.
    lone = f"{run}30"
    desk.restore(f"dan-{run}", desk.jws("com.example.pro.monthly", type="auto_renewable_subscription", transaction_id=f"{run}31",
                                        original_transaction_id=lone, purchase_date=NOW - DAY, expires_date=NOW + 29 * DAY))
    assert [(m.customer.account_id, m.matched) for m in desk.find(lone)] == [(f"dan-{run}", "original_transaction_id")]
    # One appAccountToken, two accounts.
    both = desk.find(desk.token)
    assert sorted((m.customer.account_id, m.matched) for m in both) == [(desk.bea, "app_account_token"), (desk.cal, "app_account_token")]
    # No match is an empty answer.
    assert list(desk.find(f"nobody-{run}")) == [] and list(desk.find(str(uuid.uuid4()))) == []


def test_find_refuses_bad_queries(desk):
    for bad in ["", "   ", "x" * 513, "a\nb"]:
        info = expect_error(lambda: desk.find(bad), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
        assert info.metadata["field"] == "query"
    assert len(desk.find("x" * 512)) == 0


def test_get_customer_summary_and_entitlements(desk):
    r = desk.customer(desk.ann)
    c = r.customer
    assert c.account_id == desk.ann and not c.deleted
    assert c.orders == 3 and c.transactions == 4 and c.refunded_transactions == 2
    # Paid less refunds, per currency: 2 x 19.90 + 49.90 + 49.90 - 25% of 49.90 (12.475 -> 12.475); EUR 9.90 - 9.90.
    assert [(m.currency, m.milliunits) for m in c.spent] == [("EUR", 0), ("USD", 2 * 1990 + 4990 + 4990 - 1248)]
    assert list(c.stores) == [pb.STORE_APP_STORE]
    assert c.first_seen_time_ms == NOW - 40 * DAY
    assert c.last_seen_time_ms >= NOW - 4 * DAY
    # Every entitlement, inactive ones too: the prorated refund revoked the subscription.
    by_product = {e.product_id: e for e in r.entitlements}
    assert by_product["com.example.pro.monthly"].state == pb.ENTITLEMENT_STATE_REVOKED
    assert c.active_entitlements == sum(1 for e in r.entitlements if e.active)
    assert list(r.grants) == []


def test_get_customer_refusals(desk):
    info = expect_error(lambda: desk.customer(f"nobody-{desk.run}"), grpc.StatusCode.NOT_FOUND, "ACCOUNT_NOT_FOUND")
    assert info.metadata["account_id"] == f"nobody-{desk.run}"
    for bad in ["", "x" * 129, "a\u0000b"]:
        info = expect_error(lambda: desk.customer(bad), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
        assert info.metadata["field"] == "account_id"


def test_every_call_is_audited_refusals_too(desk):
    account = f"eve-{desk.run}"
    desk.buy(account, transaction_id=f"{desk.run}40", purchase_date=NOW - HOUR)
    time.sleep(0.01)  # nothing of the tests before shares a millisecond with `start`
    start = int(time.time() * 1000)
    desk.customer(account)
    desk.find("someone@example.com")
    expect_error(lambda: desk.customer(f"ghost-{desk.run}"), grpc.StatusCode.NOT_FOUND, "ACCOUNT_NOT_FOUND")
    expect_error(lambda: desk.customer("a\nb"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
    # A key without Support methods, and no key at all: refused, and in the trail.
    expect_error(lambda: desk.customer(account, key=OTHER), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    expect_error(lambda: desk.customer(account, key="not-a-key"), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
    # The app backend's key cannot read the trail either.
    expect_error(lambda: desk.audit(key=BACKEND), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")

    deadline = time.time() + 5
    while True:  # the entries of calls refused before the service are written just after their answer
        entries = [e for e in desk.audit(since_time_ms=start, limit=1000).entries
                   if not (e.method == "billing.v1.Support/ListAuditEntries" and e.operator == "support-alice")]
        if len(entries) >= 7 or time.time() > deadline:
            break
        time.sleep(0.05)
    seen = [(e.operator, e.method.split("/")[1], e.account_id, e.outcome) for e in reversed(entries)]
    assert seen == [
        ("support-alice", "GetCustomer", account, "OK"),
        ("support-alice", "FindCustomers", "", "OK"),
        ("support-alice", "GetCustomer", f"ghost-{desk.run}", "ACCOUNT_NOT_FOUND"),
        ("support-alice", "GetCustomer", "a\nb", "INVALID_FIELD"),
        ("other", "GetCustomer", "", "PERMISSION_DENIED"),
        ("anonymous", "GetCustomer", "", "UNAUTHENTICATED"),
        ("backend", "ListAuditEntries", "", "PERMISSION_DENIED"),
    ], seen
    find = entries[-2]
    # The request as proto3 JSON, the e-mail address removed (from the target too).
    assert json.loads(find.request_json) == {"query": "[email]"} and find.target == "[email]"
    assert json.loads(entries[-1].request_json) == {"accountId": account}
    assert all(e.audit_id.startswith("audit_") and start <= e.time_ms <= int(time.time() * 1000) for e in entries)
    # Reading the trail is itself audited.
    mine = desk.audit(method="billing.v1.Support/ListAuditEntries", since_time_ms=start).entries
    assert {e.operator for e in mine} == {"support-alice", "backend"}
    assert all(e.outcome == ("OK" if e.operator == "support-alice" else "PERMISSION_DENIED") for e in mine)


def test_audit_filters_and_pages(desk):
    account = f"fay-{desk.run}"
    desk.buy(account, transaction_id=f"{desk.run}50", purchase_date=NOW - HOUR)
    for _ in range(7):
        desk.customer(account)
    pages, token = [], ""
    while True:
        # Each page's own call is an entry too (newest, ahead of the cursor): the pages are read by method.
        page = desk.audit(account_id=account, method="billing.v1.Support/GetCustomer", limit=3, page_token=token)
        pages.append([e.audit_id for e in page.entries])
        token = page.next_page_token
        if not token:
            break
        assert len(pages) < 10
    assert [len(p) for p in pages] == [3, 3, 1]
    ids = [i for p in pages for i in p]
    assert len(set(ids)) == 7
    whole = desk.audit(account_id=account, method="billing.v1.Support/GetCustomer").entries
    assert [e.audit_id for e in whole] == ids  # newest first, the same order paged or not
    assert [e.time_ms for e in whole] == sorted((e.time_ms for e in whole), reverse=True)
    assert all(e.account_id == account and e.operator == "support-alice" for e in whole)
    assert desk.audit(account_id=account, operator="nobody").entries == []
    # The three page reads, the whole read and the `nobody` one, each naming the account it read the trail of; this
    # read's own entry is written after what it read, in the same transaction.
    assert len(desk.audit(account_id=account, method="billing.v1.Support/ListAuditEntries").entries) == 5
    assert desk.audit(account_id=account, until_time_ms=1).entries == []
    for field, kw in [("limit", {"limit": -1}), ("page_token", {"page_token": "nope"}), ("account_id", {"account_id": "a\nb"})]:
        info = expect_error(lambda: desk.audit(**kw), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
        assert info.metadata["field"] == field


def test_support_over_connect_json(desk):
    with httpx.Client(timeout=10) as c:
        r = c.post(f"http://{desk.server.address}/billing.v1.Support/FindCustomers", content=json.dumps({"query": desk.ann}),
                   headers={"content-type": "application/json", "authorization": f"Bearer {SUPPORT}"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["matches"][0]["matched"] == "account_id" and body["matches"][0]["customer"]["accountId"] == desk.ann
        assert body["matches"][0]["customer"]["stores"] == ["STORE_APP_STORE"]
        r = c.post(f"http://{desk.server.address}/billing.v1.Support/GetCustomer", content=json.dumps({"accountId": f"ghost-{desk.run}"}),
                   headers={"content-type": "application/json", "authorization": f"Bearer {SUPPORT}"})
        assert r.status_code == 404 and r.json()["code"] == "not_found", r.text
