"""The support RPCs through grpcio: ListTransactions (an account's history, newest first, paged with opaque
tokens), GetTransaction (by transaction id or original transaction id), SignOffer and Google Play proofs
without their configuration; and billingctl's `history` and `transaction` commands."""
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid

import grpc
import pytest

from conftest import Billingd, binary
from helpers import billing, expect_error, pb

BUNDLE = "com.example.app"
NOW = int(time.time() * 1000)
HOUR = 3_600_000


class Store:
    """billingd --dev with its own test store; purchases are signed by `billingctl teststore transaction`."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="transactions-")
        self.store = os.path.join(self.dir, "teststore")
        subprocess.run([binary("billingctl"), "teststore", "init", self.store], check=True, capture_output=True)
        self.server = Billingd("--dev", "--dev-store", self.store, "--bundle-id", BUNDLE, "--environments", "sandbox")
        self.channel = self.server.channel()
        self.stub = billing(self.channel)

    def jws(self, product, **kw):
        args = [binary("billingctl"), "teststore", "transaction", "--store", self.store, "--product", product,
                "--bundle-id", BUNDLE, "--environment", "sandbox"]
        for k, v in kw.items():
            args += ["--" + k.replace("_", "-"), str(v)]
        return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()

    def buy(self, account, transaction_id, purchase_ms, product="com.example.coins"):
        """An order for `account`, paid by a new consumable transaction bought at `purchase_ms`."""
        order = self.stub.CreateOrder(pb.CreateOrderRequest(account_id=account, product_id=product), timeout=5).order
        jws = self.jws(product, type="consumable", transaction_id=transaction_id, purchase_date=purchase_ms,
                       app_account_token=order.order_id)
        return self.stub.SubmitReceipt(pb.SubmitReceiptRequest(order_id=order.order_id, signed_transaction=jws), timeout=10)

    def page(self, account, limit=0, token=""):
        return self.stub.ListTransactions(pb.ListTransactionsRequest(account_id=account, limit=limit, page_token=token), timeout=5)

    def ctl(self, *args, check=True):
        p = subprocess.run([binary("billingctl"), "--addr", self.server.address, *args], capture_output=True, text=True, timeout=30)
        if check:
            assert p.returncode == 0, p.stderr
        return p

    def close(self):
        self.channel.close()
        self.server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def shop():
    s = Store()
    # Seven purchases in one account (two in the same millisecond), one in another account.
    s.history = [("700001", NOW - 7 * HOUR), ("700002", NOW - 2 * HOUR), ("700003", NOW - 5 * HOUR), ("700004", NOW - 5 * HOUR),
                 ("700005", NOW - 1 * HOUR), ("700006", NOW - 6 * HOUR), ("700007", NOW - 3 * HOUR)]
    s.account = "history-" + uuid.uuid4().hex[:8]
    s.orders = {tid: s.buy(s.account, tid, ms).order for tid, ms in s.history}
    s.buy("someone-else", "700099", NOW - 4 * HOUR)
    yield s
    s.close()


def newest_first(history):
    return [tid for tid, _ in sorted(history, key=lambda h: (h[1], h[0]), reverse=True)]


def test_pages_newest_first_with_tokens(shop):
    expected = newest_first(shop.history)
    seen, token, sizes = [], "", []
    while True:
        page = shop.page(shop.account, limit=3, token=token)
        sizes.append(len(page.transactions))
        seen += [t.transaction_id for t in page.transactions]
        token = page.next_page_token
        if not token:
            break
        assert len(sizes) < 10
    assert sizes == [3, 3, 1]
    assert seen == expected
    assert "700099" not in seen
    first = shop.page(shop.account, limit=1).transactions[0]
    assert first.transaction_id == "700005" and first.product_id == "com.example.coins"
    assert first.product_type == pb.PRODUCT_TYPE_CONSUMABLE and first.store == pb.STORE_APP_STORE
    assert first.ownership == pb.OWNERSHIP_PURCHASED and first.environment == pb.ENVIRONMENT_SANDBOX
    assert first.app_account_token == shop.orders["700005"].order_id and first.bundle_id == BUNDLE
    assert first.revocation_type == pb.REVOCATION_TYPE_UNSPECIFIED and first.revocation_reason == ""


def test_last_page_has_no_token(shop):
    exact = shop.page(shop.account, limit=7)
    assert len(exact.transactions) == 7 and exact.next_page_token == ""
    six = shop.page(shop.account, limit=6)
    rest = shop.page(shop.account, limit=6, token=six.next_page_token)
    assert [t.transaction_id for t in rest.transactions] == [newest_first(shop.history)[-1]] and rest.next_page_token == ""
    # A token is not bound to a connection or a replica: the same token answers the same page again.
    assert shop.page(shop.account, limit=6, token=six.next_page_token) == rest


def test_limit_clamps(shop):
    assert len(shop.page(shop.account, limit=0).transactions) == 7      # 0 means 100
    assert len(shop.page(shop.account, limit=5000).transactions) == 7   # more than 1000 means 1000
    assert shop.page("nobody-" + uuid.uuid4().hex[:8]) == pb.ListTransactionsResponse()
    info = expect_error(lambda: shop.page(shop.account, limit=-1), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
    assert info.metadata["field"] == "limit"


def test_bad_requests(shop):
    for token in ["not-a-token!", "AAAA", "MTc6", shop.page(shop.account, limit=1).next_page_token + "="]:
        info = expect_error(lambda: shop.page(shop.account, limit=1, token=token), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
        assert info.metadata["field"] == "page_token"
    for account in ["", "x" * 129, "a\nb"]:
        info = expect_error(lambda: shop.page(account), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
        assert info.metadata["field"] == "account_id"


def test_get_transaction(shop):
    got = shop.stub.GetTransaction(pb.GetTransactionRequest(transaction_id="700003"), timeout=5)
    assert got.transaction.transaction_id == "700003" and got.account_id == shop.account
    assert got.order == shop.orders["700003"] and got.order.state == pb.ORDER_STATE_COMPLETED
    assert got.order.store == pb.STORE_APP_STORE and got.order.refunded_quantity == 0
    # Two renewals of a subscription whose first purchase billingd never saw: the original transaction id
    # answers the newest renewal.
    account = "subs-" + uuid.uuid4().hex[:8]
    sub = dict(type="auto_renewable_subscription", original_transaction_id="710000")
    proofs = [shop.jws("com.example.pro", transaction_id="710002", purchase_date=NOW - 1 * HOUR, expires_date=NOW + HOUR, **sub),
              shop.jws("com.example.pro", transaction_id="710001", purchase_date=NOW - 2 * HOUR, expires_date=NOW - 1 * HOUR, **sub)]
    shop.stub.RestorePurchases(pb.RestorePurchasesRequest(account_id=account, signed_transactions=proofs), timeout=10)
    newest = shop.stub.GetTransaction(pb.GetTransactionRequest(transaction_id="710000"), timeout=5)
    assert newest.transaction.transaction_id == "710002" and newest.transaction.original_transaction_id == "710000"
    assert newest.account_id == account and not newest.HasField("order")
    assert newest.transaction.product_type == pb.PRODUCT_TYPE_AUTO_RENEWABLE_SUBSCRIPTION
    exact = shop.stub.GetTransaction(pb.GetTransactionRequest(transaction_id="710001"), timeout=5)
    assert exact.transaction.transaction_id == "710001"
    # Once the first purchase is recorded too, its id is an exact match and wins.
    first = shop.jws("com.example.pro", transaction_id="710000", purchase_date=NOW - 3 * HOUR, expires_date=NOW - 2 * HOUR, **sub)
    shop.stub.RestorePurchases(pb.RestorePurchasesRequest(account_id=account, signed_transactions=[first]), timeout=10)
    assert shop.stub.GetTransaction(pb.GetTransactionRequest(transaction_id="710000"), timeout=5).transaction.transaction_id == "710000"
    assert [t.transaction_id for t in shop.page(account).transactions] == ["710002", "710001", "710000"]


def test_get_transaction_errors(shop):
    info = expect_error(lambda: shop.stub.GetTransaction(pb.GetTransactionRequest(transaction_id="799999"), timeout=5),
                        grpc.StatusCode.NOT_FOUND, "TRANSACTION_NOT_FOUND")
    assert info.metadata["transaction_id"] == "799999"
    for bad in ["", "9" * 513, "1\x002"]:
        info = expect_error(lambda: shop.stub.GetTransaction(pb.GetTransactionRequest(transaction_id=bad), timeout=5),
                            grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
        assert info.metadata["field"] == "transaction_id"
    expect_error(lambda: shop.stub.GetTransaction(pb.GetTransactionRequest(transaction_id="9" * 512), timeout=5),
                 grpc.StatusCode.NOT_FOUND, "TRANSACTION_NOT_FOUND")


def test_sign_offer_not_configured(shop):
    req = pb.SignOfferRequest(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL, product_id="com.example.pro", offer_id="winback",
                              order_id=str(uuid.uuid4()))
    expect_error(lambda: shop.stub.SignOffer(req, timeout=5), grpc.StatusCode.FAILED_PRECONDITION, "OFFER_SIGNING_NOT_CONFIGURED")


def test_google_play_not_configured(shop):
    order = shop.stub.CreateOrder(pb.CreateOrderRequest(account_id="android", product_id="com.example.coins"), timeout=5).order
    purchase = pb.GooglePlayPurchase(package_name="com.example.android", product_id="com.example.coins", purchase_token="tok")
    expect_error(lambda: shop.stub.SubmitReceipt(pb.SubmitReceiptRequest(order_id=order.order_id, google_play=purchase), timeout=5),
                 grpc.StatusCode.FAILED_PRECONDITION, "GOOGLE_PLAY_NOT_CONFIGURED")
    expect_error(lambda: shop.stub.RestorePurchases(pb.RestorePurchasesRequest(account_id="android", google_play_purchases=[purchase]),
                                                    timeout=5), grpc.StatusCode.FAILED_PRECONDITION, "GOOGLE_PLAY_NOT_CONFIGURED")
    # Nothing changed the order.
    assert shop.stub.GetOrder(pb.GetOrderRequest(order_id=order.order_id), timeout=5).order.state == pb.ORDER_STATE_PENDING


def test_billingctl_history_and_transaction(shop):
    lines = shop.ctl("history", shop.account).stdout.splitlines()
    assert [line.split("\t")[1] for line in lines] == newest_first(shop.history)
    when, tid, product, price, ownership, revocation = lines[0].split("\t")
    assert tid == "700005" and product == "com.example.coins" and ownership == "PURCHASED" and revocation == "-"
    assert when.endswith("Z") and when.startswith(time.strftime("%Y-", time.gmtime((NOW - HOUR) / 1000)))
    assert len(shop.ctl("history", shop.account, "--limit", "4").stdout.splitlines()) == 4
    rows = [json.loads(line) for line in shop.ctl("history", shop.account, "--json", "--limit", "2").stdout.splitlines()]
    assert [r["transactionId"] for r in rows] == newest_first(shop.history)[:2] and rows[0]["store"] == "STORE_APP_STORE"
    got = json.loads(shop.ctl("transaction", "700003").stdout)
    assert got["transaction"]["transactionId"] == "700003" and got["accountId"] == shop.account
    assert got["order"]["orderId"] == shop.orders["700003"].order_id and got["order"]["state"] == "ORDER_STATE_COMPLETED"
    missing = shop.ctl("transaction", "799999", check=False)
    assert missing.returncode == 1 and json.loads(missing.stderr)["reason"] == "TRANSACTION_NOT_FOUND"
    assert shop.ctl("history", check=False).returncode == 2


def test_rpc_lines_name_the_transaction(shop):
    """Support follows an Apple transaction through the log: SubmitReceipt's and GetTransaction's rpc lines name it."""
    shop.buy("acct-log-lines", "790001", int(time.time() * 1000) - 60_000)
    shop.stub.GetTransaction(pb.GetTransactionRequest(transaction_id="790001"), timeout=5)
    deadline, lines = time.time() + 5, []
    while time.time() < deadline:  # the log is written by its own thread
        lines = [json.loads(l) for l in shop.server.log().splitlines() if '"transaction_id":"790001"' in l]
        if {r.get("method", "").rsplit("/", 1)[-1] for r in lines} >= {"SubmitReceipt", "GetTransaction"}:
            break
        time.sleep(0.05)
    methods = {r["method"].rsplit("/", 1)[-1] for r in lines if r.get("msg") == "rpc"}
    assert {"SubmitReceipt", "GetTransaction"} <= methods, lines
