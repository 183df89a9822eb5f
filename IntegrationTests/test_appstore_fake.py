"""The fake App Store Server API (appstore_fake.py) against Apple's own Python client (PyPI
app-store-server-library): every endpoint billingd uses (renewal-date extensions, Set App Account Token, refund
history and app transactions included) is called through Apple's AppStoreServerAPIClient, its
answers must parse into the library's models, and every signed item must pass Apple's SignedDataVerifier (strict
chain checks, the test store's root). The fake's JWT checks, fault controls, request log and HTTP/2 are checked
too, so billingd's own client can be tested against the fake with confidence."""
import http.server
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
import warnings

import pytest

from appstore_mint import app_transaction, b64url, renewal, transaction
from conftest import binary


def _need(module_names):
    import importlib
    for name in module_names:
        try:
            importlib.import_module(name)
        except ImportError:
            message = f"{name} is not installed (scripts/deps test installs it)"
            if os.environ.get("CI") == "true":
                pytest.fail("CI=true but " + message, pytrace=False)
            pytest.skip(message, allow_module_level=True)


_need(["appstoreserverlibrary", "hypercorn", "requests"])

import requests  # noqa: E402
from appstoreserverlibrary.api_client import (APIError, APIException, AppStoreServerAPIClient,  # noqa: E402
                                              GetTransactionHistoryVersion)
from appstoreserverlibrary.models.AccountTenure import AccountTenure  # noqa: E402
from appstoreserverlibrary.models.ConsumptionRequest import ConsumptionRequest  # noqa: E402
from appstoreserverlibrary.models.ConsumptionRequestV1 import ConsumptionRequestV1  # noqa: E402
from appstoreserverlibrary.models.ConsumptionStatus import ConsumptionStatus  # noqa: E402
from appstoreserverlibrary.models.DeliveryStatus import DeliveryStatus  # noqa: E402
from appstoreserverlibrary.models.DeliveryStatusV1 import DeliveryStatusV1  # noqa: E402
from appstoreserverlibrary.models.Environment import Environment  # noqa: E402
from appstoreserverlibrary.models.ExtendReasonCode import ExtendReasonCode  # noqa: E402
from appstoreserverlibrary.models.ExtendRenewalDateRequest import ExtendRenewalDateRequest  # noqa: E402
from appstoreserverlibrary.models.MassExtendRenewalDateRequest import MassExtendRenewalDateRequest  # noqa: E402
from appstoreserverlibrary.models.UpdateAppAccountTokenRequest import UpdateAppAccountTokenRequest  # noqa: E402
from appstoreserverlibrary.models.LifetimeDollarsPurchased import LifetimeDollarsPurchased  # noqa: E402
from appstoreserverlibrary.models.LifetimeDollarsRefunded import LifetimeDollarsRefunded  # noqa: E402
from appstoreserverlibrary.models.NotificationHistoryRequest import NotificationHistoryRequest  # noqa: E402
from appstoreserverlibrary.models.NotificationTypeV2 import NotificationTypeV2  # noqa: E402
from appstoreserverlibrary.models.OrderLookupStatus import OrderLookupStatus  # noqa: E402
from appstoreserverlibrary.models.Platform import Platform  # noqa: E402
from appstoreserverlibrary.models.PlayTime import PlayTime  # noqa: E402
from appstoreserverlibrary.models.RefundPreference import RefundPreference  # noqa: E402
from appstoreserverlibrary.models.RefundPreferenceV1 import RefundPreferenceV1  # noqa: E402
from appstoreserverlibrary.models.SendAttemptResult import SendAttemptResult  # noqa: E402
from appstoreserverlibrary.models.Status import Status  # noqa: E402
from appstoreserverlibrary.models.Subtype import Subtype  # noqa: E402
from appstoreserverlibrary.models.TransactionHistoryRequest import (Order, ProductType,  # noqa: E402
                                                                    TransactionHistoryRequest)
from appstoreserverlibrary.models.Type import Type  # noqa: E402
from appstoreserverlibrary.models.UserStatus import UserStatus  # noqa: E402
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier, VerificationException  # noqa: E402
from appstoreserverlibrary.signed_data_verifier import VerificationStatus  # noqa: E402
from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature  # noqa: E402

from appstore_fake import ERROR_CODES, FakeAppStore, make_api_key, now_ms  # noqa: E402

BUNDLE = "com.example.app"
APP_ID = 1234567890
ISSUER = "57246542-96fe-1a63-e053-0824d011072a"
KEY_ID = "2X9R4HXF34"
SUB = "Auto-Renewable Subscription"
DAY = 86400000


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Test store (billingctl teststore init) and an API key pair, in one temporary directory."""
    d = str(tmp_path_factory.mktemp("fake-appstore"))
    subprocess.run([binary("billingctl"), "teststore", "init", d], check=True, capture_output=True, timeout=30)
    p8, public_pem = make_api_key(d)
    with open(os.path.join(d, "root.pem"), "rb") as f:
        root_der = x509.load_pem_x509_certificate(f.read()).public_bytes(serialization.Encoding.DER)
    with open(p8, "rb") as f:
        private_pem = f.read()
    return {"store": d, "p8": private_pem, "public": public_pem, "root": root_der}


@pytest.fixture(scope="module", autouse=True)
def no_leftover_threads():
    """Every fake started here is stopped, with its server thread and notification deliveries."""
    yield
    left = [t.name for t in threading.enumerate() if t.name.startswith("fake-appstore")]
    assert not left, f"threads left behind: {left}"


class Receiver:
    """A notification endpoint on loopback recording what is posted to it and answering `status`."""

    def __init__(self):
        self.status = 200
        self.posts = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                owner.posts.append((self.headers["Content-Type"], json.loads(body)))
                self.send_response(owner.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/appstore/notifications"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.stop()


def start_fake(keys, **kwargs):
    kwargs.setdefault("app_apple_id", APP_ID)
    return FakeAppStore(keys["store"], bundle_id=BUNDLE, issuer_id=ISSUER, key_id=KEY_ID,
                        api_public_key_pem=keys["public"], **kwargs)


@pytest.fixture
def fake(keys, receiver):
    f = start_fake(keys, notification_url=receiver.url)
    yield f
    f.stop()


def apple_client(keys, fake, monkeypatch, environment=Environment.SANDBOX):
    """Apple's client aimed at the fake: its base URL is the one attribute it keeps it in, and `requests` trusts
    the fake's CA through REQUESTS_CA_BUNDLE, so the library's own request code runs unchanged."""
    client = AppStoreServerAPIClient(keys["p8"], KEY_ID, ISSUER, BUNDLE, environment)
    client._base_url = fake.url
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", fake.ca_path)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    return client


@pytest.fixture
def client(keys, fake, monkeypatch):
    return apple_client(keys, fake, monkeypatch)


def verifier_for(keys, environment=Environment.SANDBOX):
    """Apple's verifier with strict chain checks on (the library's default), as for the dev store elsewhere."""
    v = SignedDataVerifier([keys["root"]], False, environment, BUNDLE, APP_ID)
    assert v._chain_verifier.enable_strict_checks
    return v


@pytest.fixture
def verifier(keys):
    return verifier_for(keys)


def tx(tid, product="com.example.pro", *, original=None, product_type=SUB, age_days=1, **kw):
    purchase = now_ms() - age_days * DAY
    if product_type == SUB:
        kw.setdefault("expires_ms", purchase + 30 * DAY)
    return transaction(tid, product, original=original, product_type=product_type, purchase_ms=purchase,
                       signed_ms=now_ms(), **kw)


def api_error(call):
    with pytest.raises(APIException) as e:
        call()
    return e.value.http_status_code, e.value.api_error


def mint_jwt(private_pem, header=None, claims=None, *, drop=(), tamper=False):
    """A bearer token like Apple's client makes (ES256, raw r||s), with fields overridden or dropped."""
    now = int(time.time())
    h = {"alg": "ES256", "kid": KEY_ID, "typ": "JWT", **(header or {})}
    c = {"iss": ISSUER, "iat": now, "exp": now + 300, "aud": "appstoreconnect-v1", "bid": BUNDLE, **(claims or {})}
    for k in drop:
        h.pop(k, None)
        c.pop(k, None)
    key = serialization.load_pem_private_key(private_pem, password=None)
    signing_input = b64url(json.dumps(h).encode()) + "." + b64url(json.dumps(c).encode())
    r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    raw = bytearray(r.to_bytes(32, "big") + s.to_bytes(32, "big"))
    if tamper:
        raw[10] ^= 1
    return signing_input + "." + b64url(bytes(raw))


def test_error_codes_are_apples():
    """Every error the fake answers with has the code Apple's library gives that name."""
    assert {name: APIError[name].value for name in ERROR_CODES} == ERROR_CODES


def test_transaction_info(fake, client, verifier):
    token = "7e3fb20b-4cdb-47cc-936d-99d65f608138"
    jws = fake.add_transaction(tx("2000000001", "com.example.coins", product_type="Consumable", token=token))
    answer = client.get_transaction_info("2000000001")
    assert answer.signedTransactionInfo == jws
    decoded = verifier.verify_and_decode_signed_transaction(answer.signedTransactionInfo)
    assert (decoded.transactionId, decoded.productId, decoded.type, decoded.appAccountToken) == \
        ("2000000001", "com.example.coins", Type.CONSUMABLE, token)
    assert (decoded.environment, decoded.bundleId) == (Environment.SANDBOX, BUNDLE)
    assert api_error(lambda: client.get_transaction_info("2999999999")) == (404, APIError.TRANSACTION_ID_NOT_FOUND)
    assert api_error(lambda: client.get_transaction_info("not-a-number")) == (400, APIError.INVALID_TRANSACTION_ID)


def test_transaction_history_pages_by_revision(fake, client, verifier):
    """45 transactions of one customer: 20 + 20 + 5 by revision, in the order they changed; then the last
    revision brings only what changed after it."""
    ids = []
    for i in range(30):
        tid = str(3000000001 + i)
        fake.add_transaction(tx(tid, original="3000000001", age_days=60 - i), customer="alice")
        ids.append(tid)
    for i in range(15):
        tid = str(3100000001 + i)
        fake.add_transaction(tx(tid, "com.example.coins", product_type="Consumable"), customer="alice")
        ids.append(tid)
    fake.add_transaction(tx("3200000001"), customer="bob")

    seen, has_more, revision = [], [], None
    request = TransactionHistoryRequest(sort=Order.ASCENDING)
    for _ in range(5):
        page = client.get_transaction_history("3100000001", revision, request, GetTransactionHistoryVersion.V2)
        assert (page.bundleId, page.appAppleId, page.environment) == (BUNDLE, APP_ID, Environment.SANDBOX)
        seen += [verifier.verify_and_decode_signed_transaction(s).transactionId for s in page.signedTransactions]
        has_more.append(page.hasMore)
        revision = page.revision
        if not page.hasMore:
            break
    assert has_more == [True, True, False]
    assert seen == ids
    assert [r["path"] for r in fake.requests][-3:] == ["/inApps/v2/history/3100000001"] * 3

    fake.add_transaction(tx("3100000099", "com.example.coins", product_type="Consumable"), customer="alice")
    later = client.get_transaction_history("3000000005", revision, request, GetTransactionHistoryVersion.V2)
    assert [verifier.verify_and_decode_signed_transaction(s).transactionId for s in later.signedTransactions] == \
        ["3100000099"]
    assert later.hasMore is False
    assert api_error(lambda: client.get_transaction_history("3999999999", None, request,
                                                            GetTransactionHistoryVersion.V2)) == \
        (404, APIError.TRANSACTION_ID_NOT_FOUND)


def test_transaction_history_filters(fake, client, verifier):
    fake.add_transaction(tx("4000000001", "com.example.pro", age_days=10))
    fake.add_transaction(tx("4000000002", "com.example.coins", product_type="Consumable", age_days=5),
                         customer="4000000001")
    fake.add_transaction(tx("4000000003", "com.example.premium", product_type="Non-Consumable", age_days=2,
                            revocation_ms=now_ms(), revocation_reason=0), customer="4000000001")

    def ids(**kw):
        page = client.get_transaction_history("4000000001", None, TransactionHistoryRequest(**kw),
                                              GetTransactionHistoryVersion.V2)
        return [verifier.verify_and_decode_signed_transaction(s).transactionId for s in page.signedTransactions]

    assert ids() == ["4000000001", "4000000002", "4000000003"]
    assert ids(sort=Order.DESCENDING) == ["4000000003", "4000000002", "4000000001"]
    assert ids(productTypes=[ProductType.CONSUMABLE, ProductType.NON_CONSUMABLE]) == ["4000000002", "4000000003"]
    assert ids(productIds=["com.example.pro"]) == ["4000000001"]
    assert ids(revoked=True) == ["4000000003"]
    assert ids(revoked=False) == ["4000000001", "4000000002"]
    assert ids(startDate=now_ms() - 6 * DAY, endDate=now_ms() - 3 * DAY) == ["4000000002"]
    assert ids(subscriptionGroupIdentifiers=["21000000"]) == ["4000000001"]
    # The deprecated v1 path (the library's default) answers the same way.
    v1 = client.get_transaction_history("4000000001", None, TransactionHistoryRequest())
    assert len(v1.signedTransactions) == 3
    assert api_error(lambda: ids(startDate=now_ms(), endDate=now_ms() - DAY)) == \
        (400, APIError.START_DATE_AFTER_END_DATE)


def test_subscription_statuses(fake, client, verifier):
    now = now_ms()
    fake.add_transaction(dict(tx("5000000001", "com.example.pro", age_days=40), subscriptionGroupIdentifier="G1"),
                         status=2)
    fake.add_transaction(dict(tx("5000000002", "com.example.pro", original="5000000001"),
                              subscriptionGroupIdentifier="G1"),
                         renewal={"originalTransactionId": "5000000001", "productId": "com.example.pro",
                                  "autoRenewProductId": "com.example.pro", "autoRenewStatus": 1, "signedDate": now})
    expired = dict(tx("5000000003", "com.example.news", age_days=60), expiresDate=now - 30 * DAY,
                   subscriptionGroupIdentifier="G2")
    fake.add_transaction(expired, customer="5000000001")
    fake.add_transaction(tx("5000000004", "com.example.coins", product_type="Consumable"), customer="5000000001")

    answer = client.get_all_subscription_statuses("5000000004")
    assert (answer.environment, answer.bundleId, answer.appAppleId) == (Environment.SANDBOX, BUNDLE, APP_ID)
    found = {}
    for group in answer.data:
        for item in group.lastTransactions:
            t = verifier.verify_and_decode_signed_transaction(item.signedTransactionInfo)
            r = verifier.verify_and_decode_renewal_info(item.signedRenewalInfo)
            assert t.originalTransactionId == r.originalTransactionId == item.originalTransactionId
            found[group.subscriptionGroupIdentifier] = (item.status, t.transactionId, r.rawAutoRenewStatus)
    assert found == {"G1": (Status.ACTIVE, "5000000002", 1), "G2": (Status.EXPIRED, "5000000003", 0)}

    active = client.get_all_subscription_statuses("5000000001", [Status.ACTIVE])
    assert [(g.subscriptionGroupIdentifier, len(g.lastTransactions)) for g in active.data] == [("G1", 1)]
    assert fake.requests[-1]["query"] == {"status": ["1"]}
    assert api_error(lambda: client.get_all_subscription_statuses("5999999999")) == \
        (404, APIError.TRANSACTION_ID_NOT_FOUND)


def test_notification_history_pages_and_filters(fake, client, verifier):
    now = now_ms()
    start = now - DAY
    fake.add_notification({"notificationType": "DID_RENEW", "signedDate": start - 1000})  # before the range
    renewed = []
    for i in range(25):
        signed_date = start + 1000 * (i + 1)
        fake.add_transaction(tx(str(6000000001 + i), original="6000000001"))
        renewed.append(fake.add_notification({
            "notificationType": "DID_RENEW", "signedDate": signed_date,
            "data": {"signedTransactionInfo": tx(str(6000000001 + i), original="6000000001")}}))
    failed = [{"attemptDate": now - 5000, "sendAttemptResult": "UNSUCCESSFUL_HTTP_RESPONSE_CODE"},
              {"attemptDate": now - 4000, "sendAttemptResult": "TIMED_OUT"}]
    fake.add_transaction(tx("6100000001", "com.example.coins", product_type="Consumable"), customer="carol")
    refund = fake.add_notification({"notificationType": "REFUND", "signedDate": start + 500,
                                    "data": {"signedTransactionInfo": tx("6100000001", "com.example.coins",
                                                                         product_type="Consumable")}},
                                   send_attempts=failed)
    request = NotificationHistoryRequest(startDate=start, endDate=now + 60000)

    pages, token = [], None
    for _ in range(4):
        page = client.get_notification_history(token, request)
        pages.append(page)
        token = page.paginationToken
        if not page.hasMore:
            break
    assert [len(p.notificationHistory) for p in pages] == [20, 6]
    assert [p.hasMore for p in pages] == [True, False] and pages[-1].paginationToken is None
    items = [i for p in pages for i in p.notificationHistory]
    assert [i.signedPayload for i in items] == [refund] + renewed
    for item in items:
        decoded = verifier.verify_and_decode_notification(item.signedPayload)
        assert (decoded.data.environment, decoded.data.bundleId, decoded.data.appAppleId) == \
            (Environment.SANDBOX, BUNDLE, APP_ID)
        verifier.verify_and_decode_signed_transaction(decoded.data.signedTransactionInfo)
    assert items[1].sendAttempts[0].sendAttemptResult == SendAttemptResult.SUCCESS
    assert [a.sendAttemptResult for a in items[0].sendAttempts] == \
        [SendAttemptResult.UNSUCCESSFUL_HTTP_RESPONSE_CODE, SendAttemptResult.TIMED_OUT]

    def payloads(**kw):
        page = client.get_notification_history(None, NotificationHistoryRequest(startDate=start, endDate=now, **kw))
        return [i.signedPayload for i in page.notificationHistory]

    assert payloads(notificationType=NotificationTypeV2.REFUND) == [refund]
    assert payloads(notificationType=NotificationTypeV2.REFUND, notificationSubtype=Subtype.VOLUNTARY) == []
    assert payloads(transactionId="6100000001") == [refund]
    assert payloads(transactionId="6000000007") == renewed[:20]
    assert payloads(onlyFailures=True) == [refund]

    def error(**kw):
        return api_error(lambda: client.get_notification_history(None, NotificationHistoryRequest(**kw)))

    assert error(startDate=now - 31 * DAY, endDate=now) == (400, APIError.START_DATE_TOO_FAR_IN_PAST)
    assert error(startDate=now - DAY, endDate=now - 2 * DAY) == (400, APIError.START_DATE_AFTER_END_DATE)
    assert error(endDate=now) == (400, APIError.INVALID_START_DATE)
    assert error(startDate=now - DAY) == (400, APIError.INVALID_END_DATE)
    assert error(startDate=start, endDate=now, transactionId="6100000001",
                 notificationType=NotificationTypeV2.REFUND) == (400, APIError.MULTIPLE_FILTERS_SUPPLIED)
    assert api_error(lambda: client.get_notification_history("bogus", request)) == \
        (400, APIError.INVALID_PAGINATION_TOKEN)
    # A token is tied to the request it came from.
    other = NotificationHistoryRequest(startDate=start + 1, endDate=now)
    assert api_error(lambda: client.get_notification_history(pages[0].paginationToken, other)) == \
        (400, APIError.INVALID_PAGINATION_TOKEN)


def test_production_history_reaches_180_days(keys, monkeypatch, verifier):
    with start_fake(keys, environment="Production") as prod:
        client = apple_client(keys, prod, monkeypatch, Environment.PRODUCTION)
        jws = prod.add_transaction(tx("6500000001"))
        prod.add_notification({"notificationType": "SUBSCRIBED", "signedDate": now_ms() - 100 * DAY,
                               "data": {"signedTransactionInfo": tx("6500000001")}})
        page = client.get_notification_history(None, NotificationHistoryRequest(startDate=now_ms() - 170 * DAY,
                                                                                 endDate=now_ms()))
        decoded = verifier_for(keys, Environment.PRODUCTION).verify_and_decode_notification(
            page.notificationHistory[0].signedPayload)
        assert (decoded.data.environment, decoded.data.appAppleId) == (Environment.PRODUCTION, APP_ID)
        assert api_error(lambda: client.get_notification_history(None, NotificationHistoryRequest(
            startDate=now_ms() - 181 * DAY, endDate=now_ms()))) == (400, APIError.START_DATE_TOO_FAR_IN_PAST)
        assert verifier_for(keys, Environment.PRODUCTION).verify_and_decode_signed_transaction(
            client.get_transaction_info("6500000001").signedTransactionInfo).environment == Environment.PRODUCTION
        with pytest.raises(VerificationException) as e:
            verifier.verify_and_decode_signed_transaction(jws)
        assert e.value.status == VerificationStatus.INVALID_ENVIRONMENT


def consumption_v1(**overrides):
    fields = dict(customerConsented=True, consumptionStatus=ConsumptionStatus.PARTIALLY_CONSUMED,
                  platform=Platform.APPLE, sampleContentProvided=False,
                  deliveryStatus=DeliveryStatusV1.DELIVERED_AND_WORKING_PROPERLY, appAccountToken="",
                  accountTenure=AccountTenure.THIRTY_DAYS_TO_NINETY_DAYS, playTime=PlayTime.ONE_TO_SIX_HOURS,
                  lifetimeDollarsRefunded=LifetimeDollarsRefunded.ZERO_DOLLARS,
                  lifetimeDollarsPurchased=LifetimeDollarsPurchased(3),  # $50-99.99
                  userStatus=UserStatus.ACTIVE, refundPreference=RefundPreferenceV1.PREFER_DECLINE)
    fields.update(overrides)
    return ConsumptionRequestV1(**{k: v for k, v in fields.items() if v is not None})


def test_consumption(fake, client):
    fake.add_transaction(tx("7000000001", "com.example.coins", product_type="Consumable"))
    fake.add_transaction(tx("7000000002", "com.example.premium", product_type="Non-Consumable"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # send_consumption_data is the v1 endpoint
        client.send_consumption_data("7000000001", consumption_v1())
        assert fake.requests[-1]["status"] == 202
        assert fake.requests[-1]["path"] == "/inApps/v1/transactions/consumption/7000000001"
        assert fake.consumption["7000000001"] == {
            "customerConsented": True, "consumptionStatus": 2, "platform": 1, "sampleContentProvided": False,
            "deliveryStatus": 0, "appAccountToken": "", "accountTenure": 4, "playTime": 3,
            "lifetimeDollarsRefunded": 1, "lifetimeDollarsPurchased": 3, "userStatus": 1, "refundPreference": 2}

        def error(tid="7000000001", **overrides):
            return api_error(lambda: client.send_consumption_data(tid, consumption_v1(**overrides)))

        assert error(customerConsented=False) == (400, APIError.INVALID_CUSTOMER_CONSENTED)
        assert error(userStatus=None) == (400, APIError.INVALID_USER_STATUS)
        assert error(playTime=None) == (400, APIError.INVALID_PLAY_TIME)
        assert error(appAccountToken="not-a-uuid") == (400, APIError.INVALID_APP_ACCOUNT_TOKEN)
        assert error(rawPlatform=9, platform=None) == (400, APIError.INVALID_PLATFORM)
        assert error(tid="7000000002") == (400, APIError.INVALID_TRANSACTION_TYPE_NOT_SUPPORTED)
        assert error(tid="7999999999") == (404, APIError.TRANSACTION_ID_NOT_FOUND)
        token = "7e3fb20b-4cdb-47cc-936d-99d65f608138"
        client.send_consumption_data("7000000001", consumption_v1(refundPreference=None, appAccountToken=token))
        assert "refundPreference" not in fake.consumption["7000000001"]

    client.send_consumption_information("7000000002", ConsumptionRequest(
        customerConsented=True, sampleContentProvided=True, deliveryStatus=DeliveryStatus.DELIVERED,
        consumptionPercentage=25000, refundPreference=RefundPreference.GRANT_PRORATED))
    assert fake.consumption["7000000002"] == {"customerConsented": True, "sampleContentProvided": True,
                                              "deliveryStatus": "DELIVERED", "consumptionPercentage": 25000,
                                              "refundPreference": "GRANT_PRORATED"}
    assert api_error(lambda: client.send_consumption_information("7000000002", ConsumptionRequest(
        customerConsented=False, sampleContentProvided=True, deliveryStatus=DeliveryStatus.DELIVERED))) == \
        (400, APIError.INVALID_CUSTOMER_CONSENTED)


def test_order_lookup(fake, client, verifier):
    a = fake.add_transaction(tx("8000000001", "com.example.coins", product_type="Consumable"), order_id="MQ7XG3RX2N")
    b = fake.add_transaction(tx("8000000002", "com.example.gems", product_type="Consumable"), order_id="MQ7XG3RX2N",
                             customer="8000000001")
    found = client.look_up_order_id("MQ7XG3RX2N")
    assert found.status == OrderLookupStatus.VALID and found.signedTransactions == [a, b]
    assert [verifier.verify_and_decode_signed_transaction(s).transactionId for s in found.signedTransactions] == \
        ["8000000001", "8000000002"]
    missing = client.look_up_order_id("ZZZZZZZZZZ")
    assert (missing.status, missing.signedTransactions) == (OrderLookupStatus.INVALID, None)


def extension(days=7, reason=ExtendReasonCode.SERVICE_ISSUE_OR_OUTAGE, request_id=None):
    return ExtendRenewalDateRequest(extendByDays=days, extendReasonCode=reason,
                                    requestIdentifier=request_id or str(uuid.uuid4()))


def posted(receiver, verifier, kind):
    """The notifications of type `kind` posted to the receiver so far, verified and decoded."""
    found = [verifier.verify_and_decode_notification(body["signedPayload"]) for _, body in receiver.posts]
    return [n for n in found if n.notificationType == kind]


def test_extend_subscription_renewal_date(fake, client, verifier, receiver, keys):
    """Extend a Subscription Renewal Date: the expiry moves, Get Transaction Info signs the new one, RENEWAL_EXTENDED
    is posted; the same request identifier again extends nothing more; Apple's refusals."""
    sub = tx("9400000001", age_days=5)
    fake.add_transaction(sub, renewal=renewal("9400000001", "com.example.pro", auto_renew=True, signed_ms=now_ms(),
                                              environment="Sandbox"))
    request_id = str(uuid.uuid4())
    answer = client.extend_subscription_renewal_date("9400000001", extension(7, request_id=request_id))
    assert (answer.originalTransactionId, answer.success, answer.effectiveDate) == \
        ("9400000001", True, sub["expiresDate"] + 7 * DAY)
    assert answer.webOrderLineItemId
    assert fake.requests[-1]["path"] == "/inApps/v1/subscriptions/extend/9400000001"
    assert fake.requests[-1]["json"] == {"extendByDays": 7, "extendReasonCode": 3, "requestIdentifier": request_id}
    info = verifier.verify_and_decode_signed_transaction(client.get_transaction_info("9400000001").signedTransactionInfo)
    assert info.expiresDate == answer.effectiveDate
    wait_for(lambda: posted(receiver, verifier, NotificationTypeV2.RENEWAL_EXTENDED))
    [note] = posted(receiver, verifier, NotificationTypeV2.RENEWAL_EXTENDED)
    assert verifier.verify_and_decode_signed_transaction(note.data.signedTransactionInfo).expiresDate == answer.effectiveDate
    assert verifier.verify_and_decode_renewal_info(note.data.signedRenewalInfo).renewalDate == answer.effectiveDate
    assert client.extend_subscription_renewal_date("9400000001", extension(7, request_id=request_id)) == answer
    # A second extension is allowed, a third in 365 days is not.
    client.extend_subscription_renewal_date("9400000001", extension(1))
    assert api_error(lambda: client.extend_subscription_renewal_date("9400000001", extension(1))) == \
        (403, APIError.SUBSCRIPTION_MAX_EXTENSION)

    fake.add_transaction(dict(tx("9400000002", age_days=60), expiresDate=now_ms() - DAY))
    fake.add_transaction(tx("9400000003", ownership="FAMILY_SHARED"))
    fake.add_transaction(tx("9400000004", revocation_ms=now_ms(), revocation_reason=0))

    def error(original="9400000001", **kw):
        return api_error(lambda: client.extend_subscription_renewal_date(original, extension(**kw)))

    assert error("9400000002") == (403, APIError.SUBSCRIPTION_EXTENSION_INELIGIBLE)
    assert error("9400000004") == (403, APIError.SUBSCRIPTION_EXTENSION_INELIGIBLE)
    assert error("9400000003") == (403, APIError.FAMILY_SHARED_SUBSCRIPTION_EXTENSION_INELIGIBLE)
    assert error("9499999999") == (404, APIError.ORIGINAL_TRANSACTION_ID_NOT_FOUND)
    assert error("not-digits") == (400, APIError.INVALID_ORIGINAL_TRANSACTION_ID)
    assert error(days=91) == (400, APIError.INVALID_EXTEND_BY_DAYS)
    assert error(days=0) == (400, APIError.INVALID_EXTEND_BY_DAYS)
    # A reason code Apple's client cannot even build: sent by hand.
    bad = requests.put(fake.url + "/inApps/v1/subscriptions/extend/9400000001", verify=fake.ca_path,
                       headers={"Authorization": "Bearer " + mint_jwt(keys["p8"])},
                       json={"extendByDays": 1, "extendReasonCode": 4, "requestIdentifier": str(uuid.uuid4())})
    assert (bad.status_code, bad.json()["errorCode"]) == (400, APIError.INVALID_EXTEND_REASON_CODE.value)
    assert error(request_id="x" * 129) == (400, APIError.INVALID_REQUEST_IDENTIFIER)


def test_extend_renewal_dates_for_all_active_subscribers(fake, client, verifier, receiver):
    """A mass extension extends every active subscriber of the product in the storefronts named, is complete when
    its status says so, and ends with a RENEWAL_EXTENSION SUMMARY notification."""
    product = "com.example.mass"
    usa = tx("9500000001", product, storefront="USA")
    fake.add_transaction(usa)
    fra = tx("9500000002", product, storefront="FRA")
    fake.add_transaction(fra)
    fake.add_transaction(dict(tx("9500000003", product, age_days=60, storefront="USA"), expiresDate=now_ms() - DAY))
    fake.add_transaction(tx("9500000004", "com.example.other", storefront="USA"))
    request_id = str(uuid.uuid4())
    answer = client.extend_renewal_date_for_all_active_subscribers(MassExtendRenewalDateRequest(
        extendByDays=3, extendReasonCode=ExtendReasonCode.CUSTOMER_SATISFACTION, requestIdentifier=request_id,
        storefrontCountryCodes=["USA"], productId=product))
    assert answer.requestIdentifier == request_id
    assert fake.requests[-1]["path"] == "/inApps/v1/subscriptions/extend/mass"
    status = client.get_status_of_subscription_renewal_date_extensions(request_id, product)
    assert fake.requests[-1]["path"] == f"/inApps/v1/subscriptions/extend/mass/{product}/{request_id}"
    assert (status.requestIdentifier, status.complete, status.succeededCount, status.failedCount) == (request_id, True, 1, 0)
    assert status.completeDate >= now_ms() - 60_000
    extended = verifier.verify_and_decode_signed_transaction(client.get_transaction_info("9500000001").signedTransactionInfo)
    assert extended.expiresDate == usa["expiresDate"] + 3 * DAY
    untouched = verifier.verify_and_decode_signed_transaction(client.get_transaction_info("9500000002").signedTransactionInfo)
    assert untouched.expiresDate == fra["expiresDate"]
    wait_for(lambda: posted(receiver, verifier, NotificationTypeV2.RENEWAL_EXTENSION))
    [summary] = posted(receiver, verifier, NotificationTypeV2.RENEWAL_EXTENSION)
    assert summary.subtype == Subtype.SUMMARY and summary.data is None
    assert (summary.summary.requestIdentifier, summary.summary.productId, summary.summary.succeededCount,
            summary.summary.failedCount, summary.summary.storefrontCountryCodes) == (request_id, product, 1, 0, ["USA"])
    assert (summary.summary.environment, summary.summary.bundleId, summary.summary.appAppleId) == \
        (Environment.SANDBOX, BUNDLE, APP_ID)
    wait_for(lambda: posted(receiver, verifier, NotificationTypeV2.RENEWAL_EXTENDED))

    # Apple works through a mass extension later: until then its status is not complete.
    fake.hold_mass_extensions = True
    later = str(uuid.uuid4())
    client.extend_renewal_date_for_all_active_subscribers(MassExtendRenewalDateRequest(
        extendByDays=1, extendReasonCode=ExtendReasonCode.OTHER, requestIdentifier=later, productId=product))
    pending = client.get_status_of_subscription_renewal_date_extensions(later, product)
    assert (pending.complete, pending.completeDate) == (False, None)
    fake.finish_mass_extensions()
    done = client.get_status_of_subscription_renewal_date_extensions(later, product)
    assert (done.complete, done.succeededCount) == (True, 2)  # every storefront this time

    def error(**kw):
        fields = dict(dict(extendByDays=1, extendReasonCode=ExtendReasonCode.OTHER, requestIdentifier=str(uuid.uuid4()),
                           productId=product), **kw)
        return api_error(lambda: client.extend_renewal_date_for_all_active_subscribers(
            MassExtendRenewalDateRequest(**{k: v for k, v in fields.items() if v is not None})))

    assert error(storefrontCountryCodes=[]) == (400, APIError.INVALID_EMPTY_STOREFRONT_COUNTRY_CODE_LIST)
    assert error(storefrontCountryCodes=["usa"]) == (400, APIError.INVALID_STOREFRONT_COUNTRY_CODE)
    assert error(requestIdentifier="not-a-uuid") == (400, APIError.INVALID_REQUEST_IDENTIFIER)
    assert error(productId=None) == (400, APIError.INVALID_PRODUCT_ID)
    assert error(extendByDays=100) == (400, APIError.INVALID_EXTEND_BY_DAYS)
    assert api_error(lambda: client.get_status_of_subscription_renewal_date_extensions(str(uuid.uuid4()), product)) == \
        (404, APIError.STATUS_REQUEST_NOT_FOUND)
    assert api_error(lambda: client.get_status_of_subscription_renewal_date_extensions(request_id, "com.example.other")) == \
        (404, APIError.STATUS_REQUEST_NOT_FOUND)
    assert api_error(lambda: client.get_status_of_subscription_renewal_date_extensions("not-a-uuid", product)) == \
        (400, APIError.INVALID_REQUEST_IDENTIFIER)


def test_set_app_account_token(fake, client, verifier):
    """Set App Account Token: 200 without a body; every transaction of the purchase is signed anew with the token."""
    fake.add_transaction(tx("9600000001", age_days=40))
    fake.add_transaction(tx("9600000002", original="9600000001", age_days=10))
    fake.add_transaction(tx("9600000003", "com.example.pack", product_type="Non-Consumable", ownership="FAMILY_SHARED"))
    token = str(uuid.uuid4())
    assert client.set_app_account_token("9600000001", UpdateAppAccountTokenRequest(appAccountToken=token)) is None
    entry = fake.requests[-1]
    assert (entry["method"], entry["path"], entry["status"], entry["json"]) == \
        ("PUT", "/inApps/v1/transactions/9600000001/appAccountToken", 200, {"appAccountToken": token})
    for tid in ("9600000001", "9600000002"):
        decoded = verifier.verify_and_decode_signed_transaction(client.get_transaction_info(tid).signedTransactionInfo)
        assert decoded.appAccountToken == token
    assert fake.app_account_tokens == {"9600000001": token}

    def error(tid="9600000001", value=token):
        return api_error(lambda: client.set_app_account_token(tid, UpdateAppAccountTokenRequest(appAccountToken=value)))

    assert error(value="not-a-uuid") == (400, APIError.INVALID_APP_ACCOUNT_TOKEN_UUID_ERROR)
    assert error("9600000002") == (400, APIError.TRANSACTION_ID_IS_NOT_ORIGINAL_TRANSACTION_ID_ERROR)
    assert error("9600000003") == (400, APIError.FAMILY_TRANSACTION_NOT_SUPPORTED_ERROR)
    assert error("9699999999") == (404, APIError.TRANSACTION_ID_NOT_FOUND)


def test_refund_history_pages_by_revision(fake, client, verifier):
    """Get Refund History: the customer's refunded transactions only, oldest revocation first, 20 a page; the last
    revision later brings only refunds made since."""
    now = now_ms()
    refunded = []
    for i in range(25):
        tid = str(9700000001 + i)
        fake.add_transaction(tx(tid, "com.example.coins", product_type="Consumable", revocation_ms=now - (30 - i) * 60_000,
                                revocation_reason=0), customer="dora")
        refunded.append(tid)
    fake.add_transaction(tx("9700000100", "com.example.coins", product_type="Consumable"), customer="dora")
    fake.add_transaction(tx("9700000200", "com.example.coins", product_type="Consumable", revocation_ms=now,
                            revocation_reason=1), customer="eve")
    seen, more, revision = [], [], None
    for _ in range(4):
        page = client.get_refund_history("9700000100", revision)
        for s in page.signedTransactions:
            decoded = verifier.verify_and_decode_signed_transaction(s)
            assert decoded.revocationDate is not None
            seen.append(decoded.transactionId)
        more.append(page.hasMore)
        revision = page.revision
        if not page.hasMore:
            break
    assert (seen, more) == (refunded, [True, False])
    assert fake.requests[-1]["path"] == "/inApps/v2/refund/lookup/9700000100"
    assert fake.requests[-1]["query"]["revision"]
    fake.add_transaction(tx("9700000100", "com.example.coins", product_type="Consumable", revocation_ms=now + 1000,
                            revocation_reason=0), customer="dora")
    later = client.get_refund_history("9700000001", revision)
    assert [verifier.verify_and_decode_signed_transaction(s).transactionId for s in later.signedTransactions] == \
        ["9700000100"]
    assert client.get_refund_history("9700000200", None).hasMore is False
    assert api_error(lambda: client.get_refund_history("9799999999", None)) == (404, APIError.TRANSACTION_ID_NOT_FOUND)
    assert api_error(lambda: client.get_refund_history("9700000100", "bogus")) == (400, APIError.INVALID_REQUEST_REVISION)
    assert api_error(lambda: client.get_refund_history("x", None)) == (400, APIError.INVALID_TRANSACTION_ID)


def test_app_transaction_info(fake, client, verifier):
    fake.add_transaction(tx("9800000001", "com.example.coins", product_type="Consumable"), customer="erin")
    fake.add_transaction(tx("9800000002", "com.example.coins", product_type="Consumable"), customer="frank")
    jws = fake.add_app_transaction(app_transaction(created_ms=now_ms()), customer="erin")
    answer = client.get_app_transaction_info("9800000001")
    assert answer.signedAppTransactionInfo == jws
    assert fake.requests[-1]["path"] == "/inApps/v1/transactions/appTransactions/9800000001"
    decoded = verifier.verify_and_decode_app_transaction(answer.signedAppTransactionInfo)
    assert (decoded.receiptType, decoded.bundleId, decoded.appAppleId) == (Environment.SANDBOX, BUNDLE, APP_ID)
    assert api_error(lambda: client.get_app_transaction_info("9800000002")) == \
        (404, APIError.APP_TRANSACTION_DOES_NOT_EXIST_ERROR)
    assert api_error(lambda: client.get_app_transaction_info("9899999999")) == (404, APIError.TRANSACTION_ID_NOT_FOUND)
    assert api_error(lambda: client.get_app_transaction_info("x")) == (400, APIError.INVALID_TRANSACTION_ID)


def wait_for(predicate, timeout=5):
    deadline = time.time() + timeout
    while not predicate():
        assert time.time() < deadline, "timed out"
        time.sleep(0.01)


def test_test_notification(fake, client, verifier, receiver):
    token = client.request_test_notification().testNotificationToken
    wait_for(lambda: client.get_test_notification_status(token).sendAttempts)
    status = client.get_test_notification_status(token)
    assert [a.sendAttemptResult for a in status.sendAttempts] == [SendAttemptResult.SUCCESS]
    assert receiver.posts == [("application/json", {"signedPayload": status.signedPayload})]
    decoded = verifier.verify_and_decode_notification(status.signedPayload)
    assert (decoded.notificationType, decoded.data.bundleId, decoded.data.environment) == \
        (NotificationTypeV2.TEST, BUNDLE, Environment.SANDBOX)
    assert decoded.notificationUUID and decoded.signedDate

    receiver.status = 500
    failing = client.request_test_notification().testNotificationToken
    wait_for(lambda: client.get_test_notification_status(failing).sendAttempts)
    assert [a.sendAttemptResult for a in client.get_test_notification_status(failing).sendAttempts] == \
        [SendAttemptResult.UNSUCCESSFUL_HTTP_RESPONSE_CODE]
    assert api_error(lambda: client.get_test_notification_status("unknown-token")) == \
        (404, APIError.TEST_NOTIFICATION_NOT_FOUND)


def test_test_notification_without_url(keys, monkeypatch):
    with start_fake(keys) as bare:
        client = apple_client(keys, bare, monkeypatch)
        assert api_error(client.request_test_notification) == (404, APIError.SERVER_NOTIFICATION_URL_NOT_FOUND)


def test_faults_map_to_library_errors(fake, client, keys):
    fake.add_transaction(tx("9000000001"))
    fake.fail_next(429, retry_after=7)
    assert api_error(lambda: client.get_transaction_info("9000000001")) == (429, APIError.RATE_LIMIT_EXCEEDED)
    fake.fail_next(500)
    assert api_error(lambda: client.get_transaction_info("9000000001")) == (500, APIError.GENERAL_INTERNAL)
    fake.fail_next(503, count=2)
    for _ in range(2):
        assert api_error(lambda: client.get_transaction_info("9000000001")) == \
            (503, APIError.GENERAL_INTERNAL_RETRYABLE)
    assert client.get_transaction_info("9000000001").signedTransactionInfo

    fake.fail_next(500, path_prefix="/inApps/v1/lookup/")
    assert client.get_transaction_info("9000000001").signedTransactionInfo
    assert api_error(lambda: client.look_up_order_id("X")) == (500, APIError.GENERAL_INTERNAL)

    headers = {"Authorization": "Bearer " + mint_jwt(keys["p8"])}
    fake.fail_next(429, retry_after=7)
    answer = requests.get(fake.url + "/inApps/v1/transactions/9000000001", headers=headers, verify=fake.ca_path)
    assert (answer.status_code, answer.headers["Retry-After"], answer.headers["Content-Type"]) == \
        (429, "7", "application/json")
    assert answer.json() == {"errorCode": 4290000, "errorMessage": "Rate limit exceeded."}

    fake.delay(1.0)
    with pytest.raises(requests.exceptions.Timeout):
        requests.get(fake.url + "/inApps/v1/transactions/9000000001", headers=headers, verify=fake.ca_path,
                     timeout=0.3)
    started = time.time()
    assert requests.get(fake.url + "/inApps/v1/transactions/9000000001", headers=headers, verify=fake.ca_path,
                        timeout=5).status_code == 200
    assert time.time() - started < 0.5


NOW = int(time.time())
BAD_TOKENS = {
    "kid": ({"kid": "OTHERKEY01"}, {}, {}),
    "iss": ({}, {"iss": "another-issuer"}, {}),
    "aud": ({}, {"aud": "appstoreconnect-v2"}, {}),
    "bid": ({}, {"bid": "com.example.other"}, {}),
    "lifetime": ({}, {"iat": NOW, "exp": NOW + 3601}, {}),
    "expired": ({}, {"iat": NOW - 600, "exp": NOW - 1}, {}),
    "iat": ({}, {"iat": NOW + 600, "exp": NOW + 900}, {}),
    "signature": ({}, {}, {"tamper": True}),
    "alg": ({"alg": "ES384"}, {}, {}),
    "typ": ({}, {}, {"drop": ("typ",)}),
    "no exp": ({}, {}, {"drop": ("exp",)}),
}


@pytest.mark.parametrize("reason", sorted(BAD_TOKENS))
def test_rejects_bad_tokens(fake, keys, reason):
    header, claims, options = BAD_TOKENS[reason]
    if reason in ("lifetime", "expired", "iat"):  # relative to this test's own clock reading
        now = int(time.time())
        claims = {k: v - NOW + now for k, v in claims.items()}
    fake.add_transaction(tx("9100000001"))
    token = mint_jwt(keys["p8"], header, claims, **options)
    answer = requests.get(fake.url + "/inApps/v1/transactions/9100000001", verify=fake.ca_path,
                          headers={"Authorization": "Bearer " + token})
    assert (answer.status_code, answer.content) == (401, b"")
    assert fake.requests[-1]["auth_error"] == {"no exp": "exp"}.get(reason, reason)


def test_accepts_good_tokens_and_refuses_others(fake, keys, monkeypatch, tmp_path):
    fake.add_transaction(tx("9100000002"))
    url = fake.url + "/inApps/v1/transactions/9100000002"
    for token in (mint_jwt(keys["p8"]), mint_jwt(keys["p8"], drop=("iat",)),
                  mint_jwt(keys["p8"], claims={"exp": int(time.time()) + 3600})):
        assert requests.get(url, verify=fake.ca_path, headers={"Authorization": "Bearer " + token}).status_code == 200
    other_key = make_api_key(str(tmp_path))[0]
    with open(other_key, "rb") as f:
        foreign = mint_jwt(f.read())
    for headers in ({}, {"Authorization": "Bearer " + foreign}, {"Authorization": "Basic abc"}):
        answer = requests.get(url, verify=fake.ca_path, headers=headers)
        assert (answer.status_code, answer.content) == (401, b"")
    wrong_kid = AppStoreServerAPIClient(keys["p8"], "OTHERKEY01", ISSUER, BUNDLE, Environment.SANDBOX)
    wrong_kid._base_url = fake.url
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", fake.ca_path)
    with pytest.raises(APIException) as e:
        wrong_kid.get_transaction_info("9100000002")
    assert (e.value.http_status_code, e.value.raw_api_error) == (401, None)


def test_request_log_records_apple_clients_token(fake, client):
    """What Apple's client sends, kept for comparing billingd's tokens: no iat, a 5-minute exp."""
    fake.add_transaction(tx("9200000001"))
    fake.reset_requests()
    before = time.time()
    client.get_transaction_info("9200000001")
    [entry] = fake.requests
    assert (entry["method"], entry["path"], entry["status"], entry["http_version"], entry["auth_error"]) == \
        ("GET", "/inApps/v1/transactions/9200000001", 200, "1.1", None)
    assert entry["jwt_header"] == {"alg": "ES256", "kid": KEY_ID, "typ": "JWT"}
    claims = entry["jwt_claims"]
    assert {k: claims[k] for k in ("iss", "aud", "bid")} == {"iss": ISSUER, "aud": "appstoreconnect-v1", "bid": BUNDLE}
    assert "iat" not in claims  # Apple's library 3.x sends none; Apple's server accepts that
    assert 290 <= claims["exp"] - before <= 310
    assert before - 1 <= entry["time"] <= time.time()


def test_h2_and_alpn(fake, keys):
    fake.add_transaction(tx("9300000001"))
    for offered, chosen in ((["h2"], "h2"), (["http/1.1"], "http/1.1"), (["h2", "http/1.1"], "h2")):
        context = ssl.create_default_context(cafile=fake.ca_path)
        context.set_alpn_protocols(offered)
        with socket.create_connection(("127.0.0.1", fake.port), timeout=5) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                assert tls.selected_alpn_protocol() == chosen
    out = subprocess.run(["curl", "-sS", "--http2", "--cacert", fake.ca_path, "-H",
                          "Authorization: Bearer " + mint_jwt(keys["p8"]), "-w", "\n%{http_version} %{http_code}",
                          fake.url + "/inApps/v1/transactions/9300000001"],
                         capture_output=True, text=True, timeout=15)
    body, status = out.stdout.rsplit("\n", 1)
    assert status == "2 200", out.stderr
    assert "signedTransactionInfo" in json.loads(body)
    assert fake.requests[-1]["http_version"] == "2"
    # localhost is in the certificate too
    out = subprocess.run(["curl", "-sS", "--http2", "--cacert", fake.ca_path, "-o", "/dev/null", "-w", "%{http_code}",
                          f"https://localhost:{fake.port}/inApps/v1/transactions/9300000001"],
                         capture_output=True, text=True, timeout=15)
    assert out.stdout == "401", out.stderr


def test_unknown_paths_are_404(fake, keys):
    headers = {"Authorization": "Bearer " + mint_jwt(keys["p8"])}
    for method, path in (("GET", "/inApps/v1/nothing"), ("DELETE", "/inApps/v1/transactions/1"),
                         ("GET", "/inApps/v1/notifications/history"), ("GET", "/")):
        assert requests.request(method, fake.url + path, headers=headers, verify=fake.ca_path).status_code == 404


def h2_get(tls, path, token):
    """One GET on an HTTP/2 connection (the h2 library as a plain peer); returns (status, body)."""
    import h2.config
    import h2.connection
    import h2.events
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.send_headers(1, [(":method", "GET"), (":path", path), (":scheme", "https"), (":authority", "127.0.0.1"),
                          ("authorization", "Bearer " + token)], end_stream=True)
    tls.sendall(conn.data_to_send())
    status, body = None, b""
    while True:
        for event in conn.receive_data(tls.recv(65535)):
            if isinstance(event, h2.events.ResponseReceived):
                status = dict(event.headers)[b":status"]
            elif isinstance(event, h2.events.DataReceived):
                body += event.data
            elif isinstance(event, h2.events.StreamEnded):
                return status, body
        tls.sendall(conn.data_to_send())


def test_stop_leaves_no_thread_or_port(keys):
    """stop() is quick and complete even while a client keeps its HTTP/2 connection open, as billingd does."""
    before = set(threading.enumerate())
    fake = start_fake(keys)
    port = fake.port
    context = ssl.create_default_context(cafile=fake.ca_path)
    context.set_alpn_protocols(["h2"])
    with context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5),
                             server_hostname="127.0.0.1") as tls:
        assert h2_get(tls, "/inApps/v1/lookup/NONE", mint_jwt(keys["p8"])) == (b"200", b'{"status": 1}')
        started = time.time()
        fake.stop()
        assert time.time() - started < 2
    fake.stop()  # idempotent
    assert set(threading.enumerate()) == before
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    assert not os.path.exists(fake.ca_path)


def test_standalone(keys, tmp_path):
    """`python3 appstore_fake.py ...` prints its URL and CA as JSON and serves until SIGTERM."""
    public = tmp_path / "api.pub.pem"
    public.write_bytes(keys["public"])
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "appstore_fake.py")
    proc = subprocess.Popen([sys.executable, script, "--store", keys["store"], "--issuer-id", ISSUER,
                             "--key-id", KEY_ID, "--public-key", str(public), "--bundle-id", BUNDLE,
                             "--environment", "Production", "--app-apple-id", str(APP_ID)],
                            stdout=subprocess.PIPE, text=True)
    try:
        info = json.loads(proc.stdout.readline())
        assert info["environment"] == "Production"
        answer = requests.get(info["url"] + "/inApps/v1/lookup/NOPE", verify=info["ca"], timeout=5,
                              headers={"Authorization": "Bearer " + mint_jwt(keys["p8"])})
        assert (answer.status_code, answer.json()) == (200, {"status": 1})
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        proc.stdout.close()


def test_parity_table_lists_every_method_of_apples_client():
    """docs/APPSTORE_API.md's parity table names every public method of the installed AppStoreServerAPIClient (a
    library upgrade that adds one fails here until the table says what billingd does about it)."""
    import inspect
    methods = [n for n, _ in inspect.getmembers(AppStoreServerAPIClient, inspect.isfunction) if not n.startswith("_")]
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "APPSTORE_API.md")) as f:
        doc = f.read()
    table = doc[doc.index("## Parity with Apple's App Store Server Library"):doc.index("## Testing without Apple")]
    assert len(methods) >= 30
    assert [m for m in methods if f"`{m}`" not in table] == []
