"""SubmitReceipt and RestorePurchases end to end through a grpcio client: every reason these methods can
answer, retries, restore policies, 50 concurrent claims of one transaction, and real Apple-signed data."""
import base64
import contextlib
import json
import os
import subprocess
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from conftest import ROOT, Billingd, binary
from helpers import billing, error_info, expect_error, pb

FIXTURES = os.path.join(os.path.dirname(ROOT), "shared", "fixtures", "appstore")
BUNDLE = "com.example.app"
NOW = int(time.time() * 1000)


class Shop:
    """billingd --dev with its test store, and a minting helper over `billingctl teststore`."""

    def __init__(self, *flags):
        self.dir = tempfile.mkdtemp(prefix="purchases-")
        self.store = os.path.join(self.dir, "teststore")
        subprocess.run([binary("billingctl"), "teststore", "init", self.store], check=True, capture_output=True)
        self.server = Billingd("--dev", "--dev-store", self.store, "--bundle-id", BUNDLE, "--environments", "sandbox", *flags)
        self.channel = self.server.channel()
        self.stub = billing(self.channel)

    def jws(self, product="com.example.premium", store=None, **kw):
        args = [binary("billingctl"), "teststore", "transaction", "--store", store or self.store, "--product", product,
                "--bundle-id", kw.pop("bundle", BUNDLE)]
        for k, v in kw.items():
            args += ["--" + k.replace("_", "-"), str(v)]
        return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()

    def receipt(self, *purchases, receipt_type="Xcode", bundle=BUNDLE):
        args = [binary("billingctl"), "teststore", "receipt", "--store", self.store, "--receipt-type", receipt_type, "--bundle-id", bundle]
        for p in purchases:
            args += ["--purchase", p]
        return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()

    def order(self, account="acct", product="com.example.premium"):
        return self.stub.CreateOrder(pb.CreateOrderRequest(account_id=account, product_id=product), timeout=5).order

    def submit(self, order_id, jws=None, receipt=None, transaction_id=""):
        req = pb.SubmitReceiptRequest(order_id=order_id, transaction_id=transaction_id)
        if jws is not None:
            req.signed_transaction = jws
        if receipt is not None:
            req.app_receipt = receipt
        return self.stub.SubmitReceipt(req, timeout=10)

    def close(self):
        self.channel.close()
        self.server.stop()


@pytest.fixture(scope="module")
def shop():
    s = Shop()
    yield s
    s.close()


def test_complete_and_retry(shop):
    order = shop.order()
    jws = shop.jws(app_account_token=order.order_id, environment="sandbox", transaction_id="100001")
    first = shop.submit(order.order_id, jws)
    assert not first.already_processed
    assert first.order.state == pb.ORDER_STATE_COMPLETED and first.order.transaction_id == "100001"
    assert first.order.environment == pb.ENVIRONMENT_SANDBOX
    assert first.transaction.app_account_token == order.order_id and first.transaction.bundle_id == BUNDLE
    assert first.transaction.product_type == pb.PRODUCT_TYPE_NON_CONSUMABLE
    again = shop.submit(order.order_id, jws)
    assert again.already_processed and again.order == first.order
    got = shop.stub.GetOrder(pb.GetOrderRequest(order_id=order.order_id), timeout=5).order
    assert got.state == pb.ORDER_STATE_COMPLETED and got.transaction_id == "100001"


def test_claimed_by_other_order_and_account(shop):
    a, b, c = shop.order("x"), shop.order("x"), shop.order("y")
    jws = shop.jws(transaction_id="100002")
    shop.submit(a.order_id, jws)
    info = expect_error(lambda: shop.submit(b.order_id, jws), grpc.StatusCode.ALREADY_EXISTS, "TRANSACTION_ALREADY_CLAIMED")
    assert info.metadata["transaction_id"] == "100002"
    expect_error(lambda: shop.submit(c.order_id, jws), grpc.StatusCode.ALREADY_EXISTS, "TRANSACTION_ALREADY_CLAIMED")


def test_every_submit_reason(shop):
    order = shop.order()
    code = grpc.StatusCode
    expect_error(lambda: shop.submit(order.order_id, "not.a.jws"), code.INVALID_ARGUMENT, "RECEIPT_MALFORMED")
    expect_error(lambda: shop.submit(order.order_id, receipt="!!!"), code.INVALID_ARGUMENT, "RECEIPT_MALFORMED")
    legacy = base64.b64encode(b'{ "signature" = "AAAA"; "purchase-info" = "BBBB"; }').decode()
    expect_error(lambda: shop.submit(order.order_id, receipt=legacy), code.INVALID_ARGUMENT, "RECEIPT_MALFORMED")
    stranger = os.path.join(shop.dir, "stranger")
    subprocess.run([binary("billingctl"), "teststore", "init", stranger], check=True, capture_output=True)
    expect_error(lambda: shop.submit(order.order_id, shop.jws(store=stranger)), code.INVALID_ARGUMENT, "RECEIPT_UNTRUSTED")
    expect_error(lambda: shop.submit(order.order_id, shop.jws(bundle="com.other.app")), code.INVALID_ARGUMENT, "WRONG_APP")
    expect_error(lambda: shop.submit(order.order_id, shop.jws(environment="production")), code.FAILED_PRECONDITION,
                 "ENVIRONMENT_NOT_ALLOWED")
    expect_error(lambda: shop.submit(order.order_id, shop.jws(product="com.example.other")), code.FAILED_PRECONDITION,
                 "PRODUCT_MISMATCH")
    expect_error(lambda: shop.submit(order.order_id, shop.jws(app_account_token=str(uuid.uuid4()))), code.PERMISSION_DENIED,
                 "ACCOUNT_TOKEN_MISMATCH")
    expect_error(lambda: shop.submit(order.order_id, shop.jws(revocation_date=NOW - 1000)), code.FAILED_PRECONDITION,
                 "TRANSACTION_REVOKED")
    expect_error(lambda: shop.submit(str(uuid.uuid4()), shop.jws()), code.NOT_FOUND, "ORDER_NOT_FOUND")
    info = expect_error(lambda: shop.submit("bad-id", shop.jws()), code.INVALID_ARGUMENT, "INVALID_FIELD")
    assert info.metadata["field"] == "order_id"
    info = expect_error(lambda: shop.stub.SubmitReceipt(pb.SubmitReceiptRequest(order_id=order.order_id), timeout=5),
                        code.INVALID_ARGUMENT, "INVALID_FIELD")
    assert info.metadata["field"] == "proof"
    receipt = shop.receipt(f"com.example.premium:200001:{NOW - 5000}")
    expect_error(lambda: shop.submit(order.order_id, receipt=receipt, transaction_id="999"), code.NOT_FOUND, "TRANSACTION_NOT_FOUND")
    other_product = shop.receipt(f"com.example.other:200002:{NOW - 5000}")
    expect_error(lambda: shop.submit(order.order_id, receipt=other_product), code.NOT_FOUND, "TRANSACTION_NOT_FOUND")
    # Nothing above changed the order.
    assert shop.stub.GetOrder(pb.GetOrderRequest(order_id=order.order_id), timeout=5).order.state == pb.ORDER_STATE_PENDING
    shop.submit(order.order_id, shop.jws(transaction_id="200003"))
    expect_error(lambda: shop.submit(order.order_id, shop.jws(transaction_id="200004")), code.FAILED_PRECONDITION, "ORDER_NOT_PENDING")


def test_app_receipt_picks_newest_unclaimed(shop):
    receipt = shop.receipt(f"com.example.premium:300001:{NOW - 9000}", f"com.example.premium:300002:{NOW - 8000}",
                           f"com.example.coins:300003:{NOW - 7000}")
    a, b, c = shop.order("r"), shop.order("r"), shop.order("r")
    assert shop.submit(a.order_id, receipt=receipt).transaction.transaction_id == "300002"
    assert shop.submit(b.order_id, receipt=receipt).transaction.transaction_id == "300001"
    expect_error(lambda: shop.submit(c.order_id, receipt=receipt), grpc.StatusCode.NOT_FOUND, "TRANSACTION_NOT_FOUND")
    assert shop.submit(a.order_id, receipt=receipt).already_processed
    d = shop.order("r", product="com.example.coins")
    assert shop.submit(d.order_id, receipt=receipt, transaction_id="300003").order.transaction_id == "300003"


def test_fifty_concurrent_claims(shop):
    orders = [shop.order(f"c{i}") for i in range(50)]
    jws = shop.jws(transaction_id="400001")

    def submit(o):
        try:
            shop.submit(o.order_id, jws)
            return "OK"
        except grpc.RpcError as e:
            return error_info(e).reason

    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(submit, orders))
    assert results.count("OK") == 1
    assert results.count("TRANSACTION_ALREADY_CLAIMED") == 49
    completed = [o for o in orders if shop.stub.GetOrder(pb.GetOrderRequest(order_id=o.order_id), timeout=5).order.state
                 == pb.ORDER_STATE_COMPLETED]
    assert len(completed) == 1
    print(f"\n50 concurrent SubmitReceipt of one transaction: {results.count('OK')} OK, "
          f"{results.count('TRANSACTION_ALREADY_CLAIMED')} TRANSACTION_ALREADY_CLAIMED")


def test_restore_entitlements(shop):
    account = "restore-" + uuid.uuid4().hex[:8]
    jws = [
        shop.jws(product="premium", transaction_id="500001"),
        shop.jws(product="coins", type="consumable", transaction_id="500002"),
        shop.jws(product="pro", type="auto_renewable_subscription", transaction_id="500003", expires_date=NOW + 86_400_000),
        shop.jws(product="old", type="auto_renewable_subscription", transaction_id="500004", purchase_date=NOW - 90 * 86_400_000,
                 expires_date=NOW - 60 * 86_400_000),
    ]
    receipt = shop.receipt(f"legacy.premium:500005:{NOW - 50_000}")
    resp = shop.stub.RestorePurchases(pb.RestorePurchasesRequest(account_id=account, app_receipt=receipt, signed_transactions=jws),
                                      timeout=10)
    by_product = {e.product_id: e for e in resp.entitlements}
    assert set(by_product) == {"premium", "pro", "old", "legacy.premium"}  # never the consumable
    assert by_product["pro"].active and by_product["pro"].product_type == pb.PRODUCT_TYPE_AUTO_RENEWABLE_SUBSCRIPTION
    assert not by_product["old"].active
    assert by_product["premium"].active and by_product["premium"].product_type == pb.PRODUCT_TYPE_NON_CONSUMABLE
    assert by_product["legacy.premium"].latest_transaction_id == "500005"
    # A later restore with no new proof for this account still answers what it owns.
    again = shop.stub.RestorePurchases(pb.RestorePurchasesRequest(account_id=account, signed_transactions=[jws[0]]), timeout=10)
    assert len(again.entitlements) == 4
    # Transfer (default): another account restoring the same purchase takes it.
    other = shop.stub.RestorePurchases(pb.RestorePurchasesRequest(account_id=account + "-b", signed_transactions=[jws[0]]), timeout=10)
    assert [e.product_id for e in other.entitlements] == ["premium"]
    mine = shop.stub.RestorePurchases(pb.RestorePurchasesRequest(account_id=account, signed_transactions=[jws[2]]), timeout=10)
    assert "premium" not in {e.product_id for e in mine.entitlements}


def test_restore_errors(shop):
    code = grpc.StatusCode
    info = expect_error(lambda: shop.stub.RestorePurchases(pb.RestorePurchasesRequest(account_id="a"), timeout=5),
                        code.INVALID_ARGUMENT, "INVALID_FIELD")
    assert info.metadata["field"] == "proof"
    info = expect_error(lambda: shop.stub.RestorePurchases(pb.RestorePurchasesRequest(signed_transactions=[shop.jws()]), timeout=5),
                        code.INVALID_ARGUMENT, "INVALID_FIELD")
    assert info.metadata["field"] == "account_id"
    expect_error(lambda: shop.stub.RestorePurchases(pb.RestorePurchasesRequest(account_id="a", signed_transactions=["x.y.z"]),
                                                    timeout=5), code.INVALID_ARGUMENT, "RECEIPT_MALFORMED")
    expect_error(lambda: shop.stub.RestorePurchases(pb.RestorePurchasesRequest(account_id="a", app_receipt="AAAA"), timeout=5),
                 code.INVALID_ARGUMENT, "RECEIPT_MALFORMED")
    expect_error(lambda: shop.stub.RestorePurchases(pb.RestorePurchasesRequest(
        account_id="a", signed_transactions=[shop.jws(bundle="com.other")]), timeout=5), code.INVALID_ARGUMENT, "WRONG_APP")


def test_restore_policy_keep():
    s = Shop("--restore-policy", "keep")
    try:
        jws = s.jws(product="premium", transaction_id="600001")
        first = s.stub.RestorePurchases(pb.RestorePurchasesRequest(account_id="alice", signed_transactions=[jws]), timeout=10)
        assert len(first.entitlements) == 1
        second = s.stub.RestorePurchases(pb.RestorePurchasesRequest(account_id="bob", signed_transactions=[jws]), timeout=10)
        assert len(second.entitlements) == 0
    finally:
        s.close()


def test_durable_across_restart(shop):
    order = shop.order("durable")
    jws = shop.jws(transaction_id="700001")
    shop.submit(order.order_id, jws)
    shop.server.restart()
    shop.channel = shop.server.channel()
    shop.stub = billing(shop.channel)
    assert shop.submit(order.order_id, jws).already_processed
    other = shop.order("durable")
    expect_error(lambda: shop.submit(other.order_id, jws), grpc.StatusCode.ALREADY_EXISTS, "TRANSACTION_ALREADY_CLAIMED")


def need_fixtures():
    if not os.path.exists(os.path.join(FIXTURES, "expectations.json")):
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {FIXTURES} is missing")
        pytest.skip(f"{FIXTURES} not found (App Store fixtures live in ../shared)")


@contextlib.contextmanager
def apple_server(bundle, root):
    """billingd serving one real app in the sandbox, trusting one real Apple root."""
    need_fixtures()
    s = Billingd("--bundle-id", bundle, "--environments", "sandbox", "--trust-root", os.path.join(FIXTURES, root))
    try:
        with s.channel() as ch:
            yield billing(ch)
    finally:
        s.stop()


def test_real_apple_sandbox_transactions():
    with apple_server("com.loki-project.loki-messenger", "roots/AppleRootCA-G3.cer") as stub:
        order = stub.CreateOrder(pb.CreateOrderRequest(account_id="loki", product_id="com.getsession.org.pro_sub"), timeout=5).order
        jws = open(os.path.join(FIXTURES, "real-jws/sandbox-session-pro/standalone/txn-2000001024998954-RENEWAL.jws")).read().strip()
        done = stub.SubmitReceipt(pb.SubmitReceiptRequest(order_id=order.order_id, signed_transaction=jws), timeout=10)
        assert done.order.state == pb.ORDER_STATE_COMPLETED
        assert done.transaction.original_transaction_id == "2000001024993299"
        assert done.transaction.product_type == pb.PRODUCT_TYPE_AUTO_RENEWABLE_SUBSCRIPTION
        assert done.transaction.environment == pb.ENVIRONMENT_SANDBOX
        refunded = open(os.path.join(FIXTURES,
                                     "real-jws/sandbox-session-pro/standalone/txn-2000001032604840-REFUNDED-revocationReason0.jws")).read().strip()
        order2 = stub.CreateOrder(pb.CreateOrderRequest(account_id="loki", product_id="com.getsession.org.pro_sub"), timeout=5).order
        expect_error(lambda: stub.SubmitReceipt(pb.SubmitReceiptRequest(order_id=order2.order_id, signed_transaction=refunded),
                                                timeout=10), grpc.StatusCode.FAILED_PRECONDITION, "TRANSACTION_REVOKED")


def test_real_apple_sandbox_receipt():
    with apple_server("dev.bonzer.weeka.app", "roots/AppleIncRootCertificate.cer") as stub:
        product = "dev.bonzer.weeka.app.subscription.pro.annual"
        receipt = open(os.path.join(FIXTURES, "receipts/tpinappreceipt/receipt-sandbox-g5")).read().strip()
        order = stub.CreateOrder(pb.CreateOrderRequest(account_id="weeka", product_id=product), timeout=5).order
        done = stub.SubmitReceipt(pb.SubmitReceiptRequest(order_id=order.order_id, app_receipt=receipt), timeout=10)
        assert done.order.state == pb.ORDER_STATE_COMPLETED
        assert done.transaction.transaction_id in ("2000001092134138", "2000001092148094")
        restored = stub.RestorePurchases(pb.RestorePurchasesRequest(account_id="weeka", app_receipt=receipt), timeout=10)
        assert {e.product_id for e in restored.entitlements} == {product}


def test_quantity_must_match(shop):
    order = shop.stub.CreateOrder(pb.CreateOrderRequest(account_id="qty", product_id="com.example.premium", quantity=3), timeout=5).order
    info = expect_error(lambda: shop.submit(order.order_id, shop.jws(quantity=1)), grpc.StatusCode.FAILED_PRECONDITION, "PRODUCT_MISMATCH")
    assert info.metadata["field"] == "quantity"
    done = shop.submit(order.order_id, shop.jws(quantity=3))
    assert done.order.quantity == 3 and done.transaction.quantity == 3


def test_require_account_token():
    s = Shop("--require-account-token")
    try:
        order = s.order("token")
        expect_error(lambda: s.submit(order.order_id, s.jws()), grpc.StatusCode.PERMISSION_DENIED, "ACCOUNT_TOKEN_MISMATCH")
        assert s.submit(order.order_id, s.jws(app_account_token=order.order_id)).order.state == pb.ORDER_STATE_COMPLETED
        # App receipts carry no token and are not affected.
        other = s.order("token")
        assert s.submit(other.order_id, receipt=s.receipt(f"com.example.premium:{uuid.uuid4().int % 10**12}")).order.state \
            == pb.ORDER_STATE_COMPLETED
    finally:
        s.close()


def test_reject_stale_purchases_from_environment(monkeypatch):
    monkeypatch.setenv("BILLING_REJECT_STALE_PURCHASES", "true")
    monkeypatch.setenv("BILLING_CLOCK_SKEW", "60")
    s = Shop()
    try:
        order = s.order("stale")
        now = int(time.time() * 1000)
        info = expect_error(lambda: s.submit(order.order_id, s.jws(transaction_id="800001", purchase_date=now - 3_600_000)),
                            grpc.StatusCode.FAILED_PRECONDITION, "TRANSACTION_PREDATES_ORDER")
        assert info.metadata["transaction_id"] == "800001"
        expect_error(lambda: s.submit(order.order_id, s.jws(type="auto_renewable_subscription", purchase_date=now - 30_000,
                                                             expires_date=now - 20_000)),
                     grpc.StatusCode.FAILED_PRECONDITION, "TRANSACTION_PREDATES_ORDER")
        assert s.submit(order.order_id, s.jws(purchase_date=now - 30_000)).order.state == pb.ORDER_STATE_COMPLETED
    finally:
        s.close()


def test_purchase_rule_flags_are_checked():
    for flags in (["--clock-skew", "soon"], ["--reject-stale-purchases=maybe"]):
        r = subprocess.run([binary("billingd"), "--dev", *flags], capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and flags[0].split("=")[0] in r.stderr
    usage = subprocess.run([binary("billingd"), "--help"], capture_output=True, text=True, timeout=10)
    for flag in ("--require-account-token", "--reject-stale-purchases", "--clock-skew"):
        assert flag in usage.stdout + usage.stderr
