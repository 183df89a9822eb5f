"""The fake Google Play Developer API (googleplay_fake.py) against Google's own Python clients: every endpoint
billingd uses is called through google-api-python-client, built from the androidpublisher v3 discovery document
the library ships (only rootUrl pointed at the fake), authorized by google-auth service-account credentials loaded
from the key file the fake wrote (the OAuth 2.0 JWT-bearer flow against the fake's token endpoint); every answer is
decoded and its values checked against what was seeded. The fake's Pub/Sub push tokens must pass
google.oauth2.id_token.verify_token with both of Google's certificate formats, and its bad tokens must not. The
control API, faults, call record and standalone mode are checked too. No billingd binary is needed."""
import base64
import datetime
import http.server
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest


_missing = [name for name in ("googleapiclient", "google.auth", "google_auth_httplib2", "httplib2", "requests", "jwt",
                               "hypercorn") if importlib.util.find_spec(name) is None]
if _missing:  # CI must have them (scripts/deps test installs them); elsewhere the module is skipped
    _why = f"not installed: {', '.join(_missing)} (scripts/deps test installs them)"
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true but " + _why, pytrace=False)
    pytest.skip(_why, allow_module_level=True)

import google.auth.exceptions  # noqa: E402
import google_auth_httplib2  # noqa: E402
import googleapiclient  # noqa: E402
import httplib2  # noqa: E402
import jwt  # noqa: E402
import requests  # noqa: E402
from google.auth.transport.requests import Request  # noqa: E402
from google.oauth2 import id_token, service_account  # noqa: E402
from googleapiclient.discovery import build_from_document  # noqa: E402
from googleapiclient.errors import HttpError  # noqa: E402

from googleplay_fake import (DAY, ONE_TIME_NOTIFICATIONS, SCOPE, SUBSCRIPTION_NOTIFICATIONS,  # noqa: E402
                             FakeGooglePlay, new_order_id, now_ms, sign_rs256)

PACKAGE = "com.example.app"
DISCOVERY = os.path.join(os.path.dirname(googleapiclient.__file__), "discovery_cache", "documents",
                         "androidpublisher.v3.json")
HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def discovery():
    with open(DISCOVERY) as f:
        return json.load(f)


# Fields the fake sends that the current discovery document no longer lists (README says why).
LEGACY_FIELDS = {("SubscriptionPurchaseV2", "latestOrderId")}


def conforms(value, schema, doc, where):
    """Asserts that a JSON value is of the discovery document's schema: every field named there, of its type
    (int64 as a decimal string, google-datetime as RFC 3339, enums one of theirs)."""
    name = schema.get("$ref")
    if name:
        schema = doc["schemas"][name]
    kind = schema.get("type")
    if kind == "object":
        assert isinstance(value, dict), where
        properties = schema.get("properties", {})
        for key, item in value.items():
            if (name, key) in LEGACY_FIELDS:
                continue
            if "additionalProperties" in schema:
                conforms(item, schema["additionalProperties"], doc, f"{where}[{key!r}]")
                continue
            assert key in properties, f"{where}.{key} is not in {name or 'the schema'}"
            conforms(item, properties[key], doc, f"{where}.{key}")
    elif kind == "array":
        assert isinstance(value, list), where
        for i, item in enumerate(value):
            conforms(item, schema["items"], doc, f"{where}[{i}]")
    elif kind == "string":
        assert isinstance(value, str), where
        if "enum" in schema:
            assert value in schema["enum"], f"{where}: {value} is not one of {schema['enum']}"
        if schema.get("format") in ("int64", "uint64"):
            assert value.lstrip("-").isdigit(), f"{where}: {value!r} is not an int64 string"
        if schema.get("format") == "google-datetime":
            assert value.endswith("Z") and ms(value) > 0, where
    elif kind == "integer":
        assert isinstance(value, int) and not isinstance(value, bool), where
    elif kind == "boolean":
        assert isinstance(value, bool), where
    else:
        raise AssertionError(f"{where}: schema type {kind!r} not handled")


def response_schema(doc, method):
    """The response schema of a method by Google's name (purchases.products.get), or None (no body)."""
    node = doc
    *resources, verb = method.split(".")
    for resource in resources:
        node = node["resources"][resource]
    return node["methods"][verb].get("response")


def check_answers(fake, doc):
    """Every answer the fake gave in a test: successes of the method's response schema (an empty body where it has
    none), API errors in Google's error shape."""
    for call in fake.calls():
        where = f"{call['method']} {call['path']}"
        if call["method"] in (None, "oauth2.token"):
            continue
        if call["status"] == 200:
            schema = response_schema(doc, call["method"])
            if schema is None:
                assert call["answer"] is None, where
            else:
                conforms(call["answer"], schema, doc, where)
        else:
            error = call["answer"]["error"]
            assert set(error) <= {"code", "message", "errors", "status", "details"}, where
            assert error["code"] == call["status"] and isinstance(error["message"], str), where
            assert error["errors"] and all({"message", "domain", "reason"} <= set(e) for e in error["errors"]), where


@pytest.fixture
def fake(discovery):
    f = FakeGooglePlay(packages=[PACKAGE, "com.example.other"])
    yield f
    try:
        check_answers(f, discovery)
    finally:
        f.stop()


def google_service(fake, discovery, scopes=(SCOPE,)):
    """androidpublisher v3 as Google's client builds it, its rootUrl the fake's; google-auth's service-account
    credentials from the fake's key file, over httplib2 trusting the fake's CA (AuthorizedHttp refreshes the
    token once after a 401, as Google's client does)."""
    doc = dict(discovery, rootUrl=fake.url + "/")
    credentials = service_account.Credentials.from_service_account_file(fake.service_account_path,
                                                                        scopes=list(scopes))
    authed = google_auth_httplib2.AuthorizedHttp(credentials, http=httplib2.Http(ca_certs=fake.ca_path, timeout=10))
    return build_from_document(doc, http=authed)


@pytest.fixture
def play(fake, discovery):
    return google_service(fake, discovery).purchases()


def http_error(call):
    with pytest.raises(HttpError) as e:
        call.execute()
    err = e.value
    body = json.loads(err.content)
    return err.status_code, body["error"]["errors"][0]["reason"], body


def trusting(fake):
    """A requests Session trusting only the fake's CA (trust_env off: REQUESTS_CA_BUNDLE would replace `verify`)."""
    session = requests.Session()
    session.trust_env = False
    session.verify = fake.ca_path
    return session


def ms(rfc3339):
    return int(datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp() * 1000)


# ---- the key file and the token endpoint ---------------------------------------------------------------------------

def test_service_account_key_file_is_googles_format(fake):
    with open(fake.service_account_path) as f:
        info = json.load(f)
    assert set(info) == {"type", "project_id", "private_key_id", "private_key", "client_email", "client_id",
                         "auth_uri", "token_uri", "auth_provider_x509_cert_url", "client_x509_cert_url",
                         "universe_domain"}
    assert info["type"] == "service_account"
    assert info["token_uri"] == fake.url + "/token"
    assert info["private_key"].startswith("-----BEGIN PRIVATE KEY-----\n")
    assert info["client_email"].endswith(".iam.gserviceaccount.com") and info["client_id"].isdigit()
    assert len(info["private_key_id"]) == 40
    credentials = service_account.Credentials.from_service_account_info(info, scopes=[SCOPE])
    assert (credentials.service_account_email, credentials._token_uri) == (info["client_email"], fake.token_uri)


def test_token_is_fetched_once_and_reused(fake, play):
    a = fake.add_product("coins100")
    for _ in range(3):
        play.products().get(packageName=PACKAGE, productId="coins100", token=a["token"]).execute()
    tokens = fake.calls("oauth2.token")
    assert len(tokens) == 1 and tokens[0]["status"] == 200
    assert tokens[0]["json"] == {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "scope": SCOPE}
    (issued,) = fake.access_tokens.values()
    assert issued["scopes"] == {SCOPE} and issued["expires"] > time.time() + 3500


@pytest.mark.parametrize("drop", ["revoke", "expire"])
def test_token_refreshed_once_after_a_401(fake, play, drop):
    sub = fake.add_subscription("pro.monthly")
    play.subscriptionsv2().get(packageName=PACKAGE, token=sub["token"]).execute()
    assert (fake.revoke_access_tokens() if drop == "revoke" else fake.expire_access_tokens()) == 1
    fake.reset_calls()
    answer = play.subscriptionsv2().get(packageName=PACKAGE, token=sub["token"]).execute()
    assert answer["subscriptionState"] == "SUBSCRIPTION_STATE_ACTIVE"
    assert [(c["method"], c["status"]) for c in fake.calls()] == [
        ("purchases.subscriptionsv2.get", 401), ("oauth2.token", 200), ("purchases.subscriptionsv2.get", 200)]
    assert fake.calls()[0]["auth_error"] == ("unknown token" if drop == "revoke" else "expired")


def _assertion(fake, key=None, *, header=None, **claims):
    now = int(time.time())
    c = {"iss": fake.client_email, "aud": fake.token_uri, "scope": SCOPE, "iat": now, "exp": now + 3600}
    c.update(claims)
    c = {k: v for k, v in c.items() if v is not None}
    return sign_rs256(key or fake._sa_key, {"alg": "RS256", "typ": "JWT", "kid": fake.private_key_id,
                                            **(header or {})}, c)


def test_token_endpoint_checks_the_assertion(fake):
    from cryptography.hazmat.primitives.asymmetric import rsa
    session = trusting(fake)

    def post(assertion, grant="urn:ietf:params:oauth:grant-type:jwt-bearer"):
        r = session.post(fake.token_uri, data={"grant_type": grant, "assertion": assertion}, timeout=10)
        return r.status_code, r.json()

    status, body = post(_assertion(fake))
    assert status == 200 and set(body) == {"access_token", "expires_in", "token_type"}
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3599
    status, body = post(_assertion(fake, aud="https://oauth2.googleapis.com/token"))
    assert status == 200  # what google-auth sends, whatever token_uri says
    now = int(time.time())
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused = {
        "signature": (_assertion(fake, other), "invalid_grant"),
        "issuer": (_assertion(fake, iss="someone@else.iam.gserviceaccount.com"), "invalid_grant"),
        "audience": (_assertion(fake, aud="https://example.com/token"), "invalid_grant"),
        "too long": (_assertion(fake, exp=now + 7200), "invalid_grant"),
        "expired": (_assertion(fake, iat=now - 7200, exp=now - 3600), "invalid_grant"),
        "future": (_assertion(fake, iat=now + 3600, exp=now + 4000), "invalid_grant"),
        "alg": (_assertion(fake, header={"alg": "HS256"}), "invalid_grant"),
        "no scope": (_assertion(fake, scope=None), "invalid_scope"),
        "garbage": ("not.a.jwt", "invalid_grant"),
    }
    for why, (assertion, error) in refused.items():
        status, body = post(assertion)
        assert (status, body["error"]) == (400, error), why
        assert body["error_description"], why
    status, body = post(_assertion(fake), grant="client_credentials")
    assert (status, body["error"]) == (400, "unsupported_grant_type")
    assert len(fake.access_tokens) == 2
    assert [c["status"] for c in fake.calls("oauth2.token")] == [200, 200] + [400] * (len(refused) + 1)


def test_api_needs_a_bearer_token_it_issued(fake):
    a = fake.add_product("coins100")
    url = f"{fake.url}/androidpublisher/v3/applications/{PACKAGE}/purchases/products/coins100/tokens/{a['token']}"
    for headers in ({}, {"authorization": "Bearer ya29.made-up"}):
        r = requests.get(url, headers=headers, verify=fake.ca_path, timeout=10)
        assert r.status_code == 401
        assert r.headers["www-authenticate"].startswith('Bearer realm="https://accounts.google.com/"')
        error = r.json()["error"]
        assert (error["code"], error["status"]) == (401, "UNAUTHENTICATED")
        assert error["errors"][0]["locationType"] == "header"
        assert error["errors"][0]["reason"] == ("required" if not headers else "authError")


def test_a_token_without_the_androidpublisher_scope_is_refused(fake, discovery):
    other = google_service(fake, discovery, scopes=["https://www.googleapis.com/auth/cloud-platform"]).purchases()
    a = fake.add_product("coins100")
    status, reason, body = http_error(other.products().get(packageName=PACKAGE, productId="coins100",
                                                           token=a["token"]))
    assert (status, reason, body["error"]["status"]) == (403, "insufficientPermissions", "PERMISSION_DENIED")
    assert body["error"]["details"][0]["reason"] == "ACCESS_TOKEN_SCOPE_INSUFFICIENT"


# ---- purchases.products --------------------------------------------------------------------------------------------

def test_products_get_round_trips(fake, play):
    a = fake.add_product("coins100", quantity=3, test=True, account_id="ord_7Hq2", profile_id="p1",
                         region="DE", purchase_ms=1_700_000_000_123, developer_payload="dp")
    b = fake.add_product("premium")
    got = play.products().get(packageName=PACKAGE, productId="coins100", token=a["token"]).execute()
    assert got == {"kind": "androidpublisher#productPurchase", "purchaseTimeMillis": "1700000000123",
                   "purchaseState": 0, "consumptionState": 0, "developerPayload": "dp", "orderId": a["orderId"],
                   "purchaseType": 0, "acknowledgementState": 0, "quantity": 3, "refundableQuantity": 3,
                   "obfuscatedExternalAccountId": "ord_7Hq2", "obfuscatedExternalProfileId": "p1",
                   "regionCode": "DE"}
    plain = play.products().get(packageName=PACKAGE, productId="premium", token=b["token"]).execute()
    # Not a test purchase: no purchaseType. Quantity 1: absent, as Google's reference allows.
    assert "purchaseType" not in plain and "quantity" not in plain and "obfuscatedExternalAccountId" not in plain
    assert plain["orderId"].startswith("GPA.") and len(plain["orderId"]) == len("GPA.1234-5678-9012-34567")
    assert [c["method"] for c in fake.calls() if c["method"] != "oauth2.token"] == ["purchases.products.get"] * 2
    assert fake.calls("purchases.products.get")[0]["productId"] == "coins100"


def test_pending_purchase_completes_or_is_canceled(fake, play):
    a = fake.add_product("coins100", state="pending")
    get = play.products().get(packageName=PACKAGE, productId="coins100", token=a["token"])
    got = get.execute()
    assert got["purchaseState"] == 2 and "orderId" not in got  # no order until paid
    assert http_error(play.products().acknowledge(packageName=PACKAGE, productId="coins100", token=a["token"],
                                                  body={}))[:2] == (400, "invalidPurchaseState")
    done = fake.complete_product(a["token"])
    got = get.execute()
    assert (got["purchaseState"], got["orderId"]) == (0, done["orderId"])
    b = fake.add_product("coins100", state="pending")
    fake.cancel_product(b["token"])
    got = play.products().get(packageName=PACKAGE, productId="coins100", token=b["token"]).execute()
    assert got["purchaseState"] == 1
    assert http_error(play.products().consume(packageName=PACKAGE, productId="coins100",
                                              token=b["token"]))[:2] == (400, "invalidPurchaseState")


def test_acknowledge_and_consume(fake, play):
    a = fake.add_product("premium")
    c = fake.add_product("coins100", quantity=2)
    ack = play.products().acknowledge(packageName=PACKAGE, productId="premium", token=a["token"],
                                      body={"developerPayload": "order 42"})
    assert ack.execute() in (b"", "", None)
    got = play.products().get(packageName=PACKAGE, productId="premium", token=a["token"]).execute()
    assert (got["acknowledgementState"], got["consumptionState"], got["developerPayload"]) == (1, 0, "order 42")
    play.products().consume(packageName=PACKAGE, productId="coins100", token=c["token"]).execute()
    got = play.products().get(packageName=PACKAGE, productId="coins100", token=c["token"]).execute()
    assert (got["acknowledgementState"], got["consumptionState"]) == (1, 1)  # consuming acknowledges
    assert http_error(play.products().consume(packageName=PACKAGE, productId="coins100",
                                              token=c["token"]))[:2] == (400, "invalidPurchaseState")
    acks = fake.calls("purchases.products.acknowledge", token=a["token"])
    assert len(acks) == 1 and acks[0]["json"] == {"developerPayload": "order 42"} and acks[0]["status"] == 200
    assert [x["status"] for x in fake.calls("purchases.products.consume", token=c["token"])] == [200, 400]


def test_unknown_token_other_product_other_package(fake, play):
    a = fake.add_product("coins100")
    status, reason, body = http_error(play.products().get(packageName=PACKAGE, productId="coins100", token="nope"))
    assert (status, reason, body["error"]["status"]) == (400, "invalid", "INVALID_ARGUMENT")
    assert body["error"]["errors"][0]["location"] == "token"
    assert http_error(play.products().get(packageName=PACKAGE, productId="premium",
                                          token=a["token"]))[:2] == (400, "purchaseTokenDoesNotMatchProductId")
    assert http_error(play.products().get(packageName="com.example.other", productId="coins100",
                                          token=a["token"]))[:2] == (400, "invalid")
    fake.reset_calls()
    status, reason, body = http_error(play.products().get(packageName="com.example.unlinked", productId="coins100",
                                                          token=a["token"]))
    assert (status, reason, body["error"]["errors"][0]["domain"]) == (401, "permissionDenied", "androidpublisher")
    # Google's client takes a 401 for a stale token: a fresh token (google.auth.transport's
    # DEFAULT_MAX_REFRESH_ATTEMPTS of them) cannot cure it, and the answer stays the same.
    from google.auth import transport
    attempts = transport.DEFAULT_MAX_REFRESH_ATTEMPTS
    assert [(c["method"], c["status"]) for c in fake.calls()] == [("purchases.products.get", 401)] + [
        ("oauth2.token", 200), ("purchases.products.get", 401)] * attempts


# ---- purchases.subscriptionsv2 and purchases.subscriptions.acknowledge ---------------------------------------------

def test_subscription_round_trips(fake, play):
    start = now_ms() - DAY
    s = fake.add_subscription("pro.monthly", base_plan="p1m", offer_id="intro", offer_tags=["promo"], test=True,
                              account_id="ord_Ab", profile_id="prof", start_ms=start, period_ms=30 * DAY,
                              price_micros=4_490_000, currency="EUR", region="FR")
    got = play.subscriptionsv2().get(packageName=PACKAGE, token=s["token"]).execute()
    (item,) = got["lineItems"]
    assert got["kind"] == "androidpublisher#subscriptionPurchaseV2"
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_ACTIVE"
    assert got["acknowledgementState"] == "ACKNOWLEDGEMENT_STATE_PENDING"
    assert got["externalAccountIdentifiers"] == {"obfuscatedExternalAccountId": "ord_Ab",
                                                 "obfuscatedExternalProfileId": "prof"}
    assert got["testPurchase"] == {} and got["regionCode"] == "FR" and got["etag"]
    assert ms(got["startTime"]) == start and ms(item["expiryTime"]) == start + 30 * DAY
    assert got["latestOrderId"] == item["latestSuccessfulOrderId"] == s["orderId"]
    assert "linkedPurchaseToken" not in got and "canceledStateContext" not in got
    assert item["productId"] == "pro.monthly"
    assert item["offerDetails"] == {"basePlanId": "p1m", "offerId": "intro", "offerTags": ["promo"]}
    assert item["autoRenewingPlan"] == {"autoRenewEnabled": True, "recurringPrice": {
        "currencyCode": "EUR", "units": "4", "nanos": 490000000}}
    plain = play.subscriptionsv2().get(packageName=PACKAGE, token=fake.add_subscription("pro.monthly")["token"])
    assert "testPurchase" not in plain.execute()

    play.subscriptions().acknowledge(packageName=PACKAGE, subscriptionId="pro.monthly", token=s["token"],
                                     body={}).execute()
    got = play.subscriptionsv2().get(packageName=PACKAGE, token=s["token"]).execute()
    assert got["acknowledgementState"] == "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED"
    assert http_error(play.subscriptions().acknowledge(
        packageName=PACKAGE, subscriptionId="pro.yearly", token=s["token"], body={}))[:2] == (
        400, "purchaseTokenDoesNotMatchSubscriptionId")
    assert http_error(play.subscriptionsv2().get(packageName=PACKAGE, token="nope"))[:2] == (400, "invalid")
    assert len(fake.calls("purchases.subscriptions.acknowledge", token=s["token"])) == 2


def test_renewals_cancel_restart_expire(fake, play):
    s = fake.add_subscription("pro.monthly", period_ms=30 * DAY)
    get = play.subscriptionsv2().get(packageName=PACKAGE, token=s["token"])
    first = get.execute()["lineItems"][0]["expiryTime"]
    for n in range(2):
        fake.renew(s["token"])
        got = get.execute()
        assert got["latestOrderId"] == f"{s['orderId']}..{n}"
        assert got["lineItems"][0]["latestSuccessfulOrderId"] == f"{s['orderId']}..{n}"
        assert ms(got["lineItems"][0]["expiryTime"]) == ms(first) + (n + 1) * 30 * DAY
    fake.cancel(s["token"], reason="CANCEL_SURVEY_REASON_COST_RELATED")
    got = get.execute()
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_CANCELED"
    assert got["lineItems"][0]["autoRenewingPlan"]["autoRenewEnabled"] is False
    user = got["canceledStateContext"]["userInitiatedCancellation"]
    assert user["cancelSurveyResult"] == {"reason": "CANCEL_SURVEY_REASON_COST_RELATED"}
    assert abs(ms(user["cancelTime"]) - now_ms()) < 60000
    fake.restart(s["token"])
    got = get.execute()
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_ACTIVE" and "canceledStateContext" not in got
    fake.expire(s["token"])
    got = get.execute()
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_EXPIRED"
    assert ms(got["lineItems"][0]["expiryTime"]) <= now_ms()
    assert "systemInitiatedCancellation" in got["canceledStateContext"]


def test_pause_grace_hold_recover_revoke(fake, play):
    s = fake.add_subscription("pro.monthly")
    get = play.subscriptionsv2().get(packageName=PACKAGE, token=s["token"])
    resume = now_ms() + 20 * DAY
    fake.pause(s["token"], resume_ms=resume)
    got = get.execute()
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_PAUSED"
    assert ms(got["pausedStateContext"]["autoResumeTime"]) == resume
    fake.resume(s["token"])
    got = get.execute()
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_ACTIVE" and got["latestOrderId"] == s["orderId"] + "..0"
    fake.grace(s["token"], days=3)
    got = get.execute()
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_IN_GRACE_PERIOD"
    assert got["inGracePeriodStateContext"]["renewalDeclined"]["pendingOrderId"] == s["orderId"] + "..1"
    before = fake.subscription(s["token"])["expiryMs"]
    fake.recover(s["token"])  # paid within the grace period: the period runs from the old renewal date
    assert fake.subscription(s["token"])["expiryMs"] == before - 3 * DAY + 30 * DAY
    fake.grace(s["token"], days=3)
    fake.hold(s["token"])
    got = get.execute()
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_ON_HOLD" and ms(got["lineItems"][0]["expiryTime"]) <= now_ms()
    fake.recover(s["token"])
    got = get.execute()
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_ACTIVE" and got["latestOrderId"] == s["orderId"] + "..2"
    assert ms(got["lineItems"][0]["expiryTime"]) - now_ms() > 29 * DAY  # after a hold: from the recovery
    fake.revoke(s["token"])
    got = get.execute()
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_EXPIRED"  # the API shows a revoked one as expired
    assert got["canceledStateContext"] == {"developerInitiatedCancellation": {}}


def test_pending_subscription(fake, play):
    s = fake.add_subscription("pro.monthly", state="pending")
    get = play.subscriptionsv2().get(packageName=PACKAGE, token=s["token"])
    got = get.execute()
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_PENDING"
    assert "startTime" not in got and "latestOrderId" not in got and "expiryTime" not in got["lineItems"][0]
    assert http_error(play.subscriptions().acknowledge(packageName=PACKAGE, subscriptionId="pro.monthly",
                                                       token=s["token"], body={}))[:2] == (400, "invalidPurchaseState")
    done = fake.complete_subscription(s["token"])
    got = get.execute()
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_ACTIVE" and got["latestOrderId"] == done["orderId"]
    t = fake.add_subscription("pro.monthly", state="pending")
    fake.cancel_pending_subscription(t["token"])
    got = play.subscriptionsv2().get(packageName=PACKAGE, token=t["token"]).execute()
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_PENDING_PURCHASE_CANCELED"


def test_upgrade_links_the_new_token_to_the_old(fake, play):
    old = fake.add_subscription("pro.monthly", account_id="ord_1", test=True)
    new = fake.change(old["token"], "pro.yearly", base_plan="p1y", replacement_mode="CHARGE_PRORATED_PRICE",
                      period_ms=365 * DAY)
    assert new["token"] != old["token"]
    got = play.subscriptionsv2().get(packageName=PACKAGE, token=new["token"]).execute()
    assert got["linkedPurchaseToken"] == old["token"]
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_ACTIVE" and got["testPurchase"] == {}
    assert got["externalAccountIdentifiers"]["obfuscatedExternalAccountId"] == "ord_1"
    item = got["lineItems"][0]
    assert item["productId"] == "pro.yearly" and item["offerDetails"]["basePlanId"] == "p1y"
    assert item["itemReplacement"] == {"productId": "pro.monthly", "basePlanId": "monthly",
                                       "replacementMode": "CHARGE_PRORATED_PRICE"}
    assert got["latestOrderId"] != old["orderId"]
    was = play.subscriptionsv2().get(packageName=PACKAGE, token=old["token"]).execute()
    assert was["subscriptionState"] == "SUBSCRIPTION_STATE_EXPIRED"
    assert was["canceledStateContext"] == {"replacementCancellation": {}}


def test_deferred_downgrade_switches_at_renewal(fake, play):
    s = fake.add_subscription("pro.yearly")
    fake.change(s["token"], "pro.monthly", replacement_mode="DEFERRED")
    get = play.subscriptionsv2().get(packageName=PACKAGE, token=s["token"])
    item = get.execute()["lineItems"][0]
    assert item["productId"] == "pro.yearly" and item["deferredItemReplacement"] == {"productId": "pro.monthly"}
    fake.renew(s["token"])
    item = get.execute()["lineItems"][0]
    assert item["productId"] == "pro.monthly" and "deferredItemReplacement" not in item


def test_long_expired_subscription_is_gone(fake, play):
    s = fake.add_subscription("pro.monthly")
    fake.expire(s["token"])
    fake._subs[s["token"]]["expiredMs"] = now_ms() - 61 * DAY
    assert http_error(play.subscriptionsv2().get(packageName=PACKAGE, token=s["token"]))[:2] == (
        410, "subscriptionPurchaseNoLongerAvailable")


# ---- purchases.voidedpurchases and orders ---------------------------------------------------------------------------

def test_voidedpurchases_pages_and_filters(fake, play):
    base = now_ms() - 10 * DAY
    products = [fake.add_product("coins100", quantity=1) for _ in range(23)]
    for i, p in enumerate(products):
        fake.void(p["token"], reason="remorse", source="user", voided_ms=base + i * 1000)
    subs = [fake.add_subscription("pro.monthly") for _ in range(4)]
    for i, s in enumerate(subs):
        fake.renew(s["token"])
        fake.void(s["token"], reason="chargeback", source="google", voided_ms=base + 100000 + i)
    partial = fake.add_product("coins100", quantity=5)
    fake.void(partial["token"], quantity=2, reason="not_received", voided_ms=base + 200000)
    fake.add_product("coins100", package="com.example.other")
    other = fake.add_product("coins100", package="com.example.other")
    fake.void(other["token"], voided_ms=base + 300000)

    def all_pages(**params):
        seen, pages, token = [], 0, None
        while True:
            answer = play.voidedpurchases().list(packageName=PACKAGE, maxResults=10, token=token, **params).execute()
            pages += 1
            seen += answer.get("voidedPurchases", [])
            token = answer.get("tokenPagination", {}).get("nextPageToken")
            if not token:
                return seen, pages
            assert pages < 10

    rows, pages = all_pages()
    assert (len(rows), pages) == (23, 3)  # type 0: one-time products only, no partial refunds
    assert [r["purchaseToken"] for r in rows] == [p["token"] for p in products]
    first = rows[0]
    assert first == {"kind": "androidpublisher#voidedPurchase", "purchaseToken": products[0]["token"],
                     "orderId": products[0]["orderId"], "purchaseTimeMillis": str(products[0]["purchaseMs"]),
                     "voidedTimeMillis": str(base), "voidedSource": 0, "voidedReason": 1}
    rows, _ = all_pages(type=1)
    assert len(rows) == 27
    sub_rows = rows[23:]
    assert [r["orderId"] for r in sub_rows] == [s["orderId"] + "..0" for s in subs]
    assert {(r["voidedSource"], r["voidedReason"]) for r in sub_rows} == {(2, 7)}
    rows, _ = all_pages(type=1, includeQuantityBasedPartialRefund=True)
    assert len(rows) == 28 and rows[-1]["voidedQuantity"] == 2 and rows[-1]["purchaseToken"] == partial["token"]
    rows, _ = all_pages(startTime=str(base + 5000), endTime=str(base + 9000))
    assert [r["voidedTimeMillis"] for r in rows] == [str(base + i * 1000) for i in range(5, 10)]
    answer = play.voidedpurchases().list(packageName=PACKAGE, startTime=str(now_ms())).execute()
    assert answer.get("voidedPurchases") is None and answer["pageInfo"]["totalResults"] == 0
    assert http_error(play.voidedpurchases().list(packageName=PACKAGE,
                                                  startTime=str(now_ms() - 31 * DAY)))[0] == 400
    assert http_error(play.voidedpurchases().list(packageName=PACKAGE, token="garbage"))[0] == 400
    got = play.products().get(packageName=PACKAGE, productId="coins100", token=partial["token"]).execute()
    assert (got["purchaseState"], got["refundableQuantity"]) == (0, 3)
    got = play.products().get(packageName=PACKAGE, productId="coins100", token=products[0]["token"]).execute()
    assert (got["purchaseState"], got["refundableQuantity"]) == (1, 0)
    s = play.subscriptionsv2().get(packageName=PACKAGE, token=subs[0]["token"]).execute()
    assert s["subscriptionState"] == "SUBSCRIPTION_STATE_EXPIRED"
    assert s["canceledStateContext"] == {"systemInitiatedCancellation": {}}


def test_orders_get_gives_prices(fake, discovery):
    orders = google_service(fake, discovery).orders()
    a = fake.add_product("coins100", quantity=3, price_micros=1_990_000, currency="JPY", region="JP")
    got = orders.get(packageName=PACKAGE, orderId=a["orderId"]).execute()
    assert (got["orderId"], got["purchaseToken"], got["state"]) == (a["orderId"], a["token"], "PROCESSED")
    assert got["total"] == {"currencyCode": "JPY", "units": "5", "nanos": 970000000}
    (line,) = got["lineItems"]
    assert line["listingPrice"] == {"currencyCode": "JPY", "units": "1", "nanos": 990000000}
    assert line["oneTimePurchaseDetails"] == {"quantity": 3} and got["buyerAddress"] == {"buyerCountry": "JP"}
    s = fake.add_subscription("pro.monthly", price_micros=9_990_000)
    renewed = fake.renew(s["token"])
    got = orders.get(packageName=PACKAGE, orderId=renewed["orderId"]).execute()
    details = got["lineItems"][0]["subscriptionDetails"]
    assert ms(details["servicePeriodEndTime"]) == renewed["expiryMs"]
    assert ms(details["servicePeriodEndTime"]) - ms(details["servicePeriodStartTime"]) == 30 * DAY
    with pytest.raises(HttpError) as e:
        orders.get(packageName=PACKAGE, orderId=new_order_id()).execute()
    assert e.value.status_code == 404


# ---- faults ---------------------------------------------------------------------------------------------------------

def test_faults_answer_googles_errors(fake, play):
    a = fake.add_product("coins100")
    get = play.products().get(packageName=PACKAGE, productId="coins100", token=a["token"])
    get.execute()
    for status, reason, name in ((500, "backendError", "INTERNAL"), (503, "backendError", "UNAVAILABLE"),
                                 (429, "rateLimitExceeded", "RESOURCE_EXHAUSTED")):
        fake.fail_next(status, retry_after=7 if status == 429 else None)
        got_status, got_reason, body = http_error(get)
        assert (got_status, got_reason, body["error"]["status"]) == (status, reason, name)
    assert fake.calls()[-1]["status"] == 429
    fake.fail_next(503, count=2, path_prefix=f"/androidpublisher/v3/applications/{PACKAGE}/purchases/products")
    started = time.time()
    assert get.execute(num_retries=3)["purchaseState"] == 0  # Google's client retries 5xx with backoff
    assert time.time() - started < 20
    assert [c["status"] for c in fake.calls("purchases.products.get")][-3:] == [503, 503, 200]
    fake.set_down()
    assert http_error(get)[0] == 503
    r = requests.post(fake.token_uri, data={"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                                            "assertion": _assertion(fake)}, verify=fake.ca_path, timeout=10)
    assert r.status_code == 503
    fake.set_down(False)
    assert get.execute()["purchaseState"] == 0
    fake.fail_next(429, retry_after=3)
    r = requests.get(f"{fake.url}/androidpublisher/v3/applications/{PACKAGE}/purchases/voidedpurchases",
                     headers={"authorization": "Bearer " + next(iter(fake.access_tokens))}, verify=fake.ca_path,
                     timeout=10)
    assert (r.status_code, r.headers["retry-after"]) == (429, "3")


def test_token_endpoint_fault_is_retried_by_google_auth(fake, play):
    a = fake.add_product("coins100")
    fake.fail_next(503, path_prefix="/token")
    assert play.products().get(packageName=PACKAGE, productId="coins100", token=a["token"]).execute()
    assert [c["status"] for c in fake.calls("oauth2.token")] == [503, 200]


# ---- the control API --------------------------------------------------------------------------------------------------

def test_control_api_scripts_the_fake(fake, play):
    s = trusting(fake)

    def control(path, body=None, method="POST"):
        r = s.request(method, fake.url + "/fake/" + path, json=body, timeout=10)
        assert r.status_code == 200, r.text
        return r.json()

    config = control("config", method="GET")
    assert config["serviceAccount"] == fake.service_account_path and "--google-play-api-url" in config["flags"]
    p = control("products", {"productId": "coins100", "quantity": 2, "test": True,
                             "obfuscatedExternalAccountId": "ord_9", "state": "pending"})
    assert p["orderId"] is None and p["state"] == "pending"
    p = control(f"products/{p['token']}/complete")
    got = play.products().get(packageName=PACKAGE, productId="coins100", token=p["token"]).execute()
    assert (got["orderId"], got["quantity"], got["purchaseType"], got["obfuscatedExternalAccountId"]) == (
        p["orderId"], 2, 0, "ord_9")
    sub = control("subscriptions", {"productId": "pro.monthly", "basePlanId": "p1m", "test": True,
                                    "obfuscatedExternalAccountId": "ord_10", "periodMillis": 7 * DAY})
    renewed = control(f"subscriptions/{sub['token']}/renew")
    assert renewed["orderId"] == sub["orderId"] + "..0"
    new = control(f"subscriptions/{sub['token']}/change", {"productId": "pro.yearly"})
    assert new["linkedPurchaseToken"] == sub["token"]
    control(f"subscriptions/{new['token']}/pause", {})
    assert control(f"subscriptions/{new['token']}/resume")["orderId"] == new["orderId"] + "..0"
    control(f"subscriptions/{new['token']}/cancel", {"by": "user"})
    r = s.post(fake.url + f"/fake/subscriptions/{new['token']}/renew", timeout=10)
    assert r.status_code == 400 and "CANCELED" in r.json()["error"]  # a canceled subscription does not renew
    voided = control(f"subscriptions/{new['token']}/void", {"voidedReason": "fraud", "voidedSource": "developer"})
    assert (voided["voidedReason"], voided["voidedSource"]) == (5, 1)
    got = play.subscriptionsv2().get(packageName=PACKAGE, token=new["token"]).execute()
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_EXPIRED"
    control("faults", {"status": 503, "count": 1})
    assert http_error(play.subscriptionsv2().get(packageName=PACKAGE, token=new["token"]))[0] == 503
    assert control("access-tokens/revoke")["revoked"] == 1
    play.subscriptionsv2().get(packageName=PACKAGE, token=new["token"]).execute()
    calls = control("calls", method="GET")["calls"]
    assert [c["status"] for c in calls if c["method"] == "purchases.subscriptionsv2.get"] == [200, 503, 401, 200]
    control("calls", method="DELETE")
    assert fake.calls() == []
    for path, body, status in (("products", {"productId": "x", "colour": "red"}, 400),
                               ("subscriptions/nope/renew", {}, 404), ("nothing", {}, 404)):
        assert s.post(fake.url + "/fake/" + path, json=body, timeout=10).status_code == status


# ---- Pub/Sub push ----------------------------------------------------------------------------------------------------

class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers 200 to every POST and keeps (headers, JSON body) in the server's `posts`."""

    def do_POST(self):
        self.server.posts.append((dict(self.headers), json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    """An RTDN endpoint on loopback (plain HTTP) recording what is pushed to it: .url, .posts."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.posts = []
    server.url = f"http://127.0.0.1:{server.server_address[1]}/googleplay/rtdn"
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def google_request(fake):
    return Request(trusting(fake))


def bearer(headers):
    return {k.lower(): v for k, v in headers.items()}.get("authorization", "")[len("Bearer "):]


def decode(message):
    return json.loads(base64.b64decode(message["message"]["data"]))


def test_push_is_pubsubs_and_its_token_passes_google_auth(fake, receiver):
    s = fake.add_subscription("pro.monthly")
    note = fake.subscription_notification(fake.subscription(s["token"]), "SUBSCRIPTION_RENEWED")
    result = fake.push(receiver.url, note, attributes={"source": "test"})
    assert result["status"] == 200
    (headers, body) = receiver.posts[-1]
    assert set(body) == {"message", "subscription"} and body["subscription"].startswith("projects/")
    message = body["message"]
    assert message["messageId"] == message["message_id"] == result["messageId"]
    assert message["publishTime"] == message["publish_time"] and message["attributes"] == {"source": "test"}
    assert decode(body) == {"version": "1.0", "packageName": PACKAGE, "eventTimeMillis": note["eventTimeMillis"],
                            "subscriptionNotification": {"version": "1.0", "notificationType": 2,
                                                         "purchaseToken": s["token"],
                                                         "subscriptionId": "pro.monthly"}}
    token = bearer(headers)
    assert jwt.get_unverified_header(token) == {"alg": "RS256", "kid": fake.push_kid, "typ": "JWT"}
    for certs_url in (fake.jwks_url, fake.pem_certs_url):
        claims = id_token.verify_token(token, google_request(fake), audience=receiver.url, certs_url=certs_url)
        assert claims["iss"] == "https://accounts.google.com" and claims["aud"] == receiver.url
        assert claims["email"] == fake.push_email and claims["email_verified"] is True
        assert claims["sub"] == claims["azp"] == fake.push_sub
        assert 0 < claims["exp"] - time.time() <= 3600 and claims["iat"] <= time.time()


@pytest.mark.parametrize("certs", ["jwks", "pem"])
def test_bad_push_tokens_are_refused_by_google_auth(fake, certs):
    certs_url = fake.jwks_url if certs == "jwks" else fake.pem_certs_url
    audience = "https://billing.example.com/googleplay/rtdn"
    request = google_request(fake)
    for variant in ("wrong_audience", "unknown_key", "expired", "bad_signature"):
        with pytest.raises((ValueError, jwt.PyJWTError, google.auth.exceptions.GoogleAuthError)):
            id_token.verify_token(fake.push_token(audience, variant=variant), request, audience=audience,
                                  certs_url=certs_url)
    # Signed and addressed right, but not the push subscription's account (or issuer): the library passes them;
    # the receiver (billingd) must check the claims, and these show why it would refuse.
    claims = {v: id_token.verify_token(fake.push_token(audience, variant=v), request, audience=audience,
                                       certs_url=certs_url) for v in ("wrong_email", "unverified_email", "wrong_issuer")}
    assert claims["wrong_email"]["email"] != fake.push_email
    assert claims["unverified_email"]["email_verified"] is False
    assert claims["wrong_issuer"]["iss"] not in ("accounts.google.com", "https://accounts.google.com")


def test_push_without_token_and_redelivery(fake, receiver):
    note = fake.test_notification()
    first = fake.push(receiver.url, note, auth="none")
    assert "authorization" not in {k.lower() for k in receiver.posts[-1][0]}
    again = fake.redeliver(first["messageId"])
    assert again["status"] == 200 and receiver.posts[-1][1] == receiver.posts[-2][1]
    assert bearer(receiver.posts[-1][0])  # a redelivery is authenticated as usual
    assert decode(receiver.posts[-1][1])["testNotification"] == {"version": "1.0"}
    same = fake.push(receiver.url, message_id=first["messageId"])
    assert same["message"] == first["message"]


def test_changes_send_their_rtdn(fake, receiver):
    fake.rtdn_url = receiver.url
    a = fake.add_product("coins100")
    p = fake.add_product("coins100", state="pending")
    fake.complete_product(p["token"])
    q = fake.add_product("coins100", state="pending")
    fake.cancel_product(q["token"])
    s = fake.add_subscription("pro.monthly")
    fake.renew(s["token"])
    new = fake.change(s["token"], "pro.yearly")
    fake.void(a["token"], quantity=None)
    fake.void(new["token"])
    kinds = []
    for headers, body in receiver.posts:
        note = decode(body)
        assert note["packageName"] == PACKAGE and note["eventTimeMillis"].isdigit()
        assert id_token.verify_token(bearer(headers), google_request(fake), audience=receiver.url,
                                     certs_url=fake.jwks_url)["email"] == fake.push_email
        if "oneTimeProductNotification" in note:
            n = note["oneTimeProductNotification"]
            kinds.append(({v: k for k, v in ONE_TIME_NOTIFICATIONS.items()}[n["notificationType"]], n["purchaseToken"]))
        elif "subscriptionNotification" in note:
            n = note["subscriptionNotification"]
            kinds.append(({v: k for k, v in SUBSCRIPTION_NOTIFICATIONS.items()}[n["notificationType"]],
                          n["purchaseToken"]))
        else:
            n = note["voidedPurchaseNotification"]
            kinds.append((("voided", n["productType"], n["refundType"], n["orderId"]), n["purchaseToken"]))
    assert kinds == [
        ("ONE_TIME_PRODUCT_PURCHASED", a["token"]), ("ONE_TIME_PRODUCT_PURCHASED", p["token"]),
        ("ONE_TIME_PRODUCT_CANCELED", q["token"]), ("SUBSCRIPTION_PURCHASED", s["token"]),
        ("SUBSCRIPTION_RENEWED", s["token"]), ("SUBSCRIPTION_PURCHASED", new["token"]),
        (("voided", 2, 1, a["orderId"]), a["token"]), ("SUBSCRIPTION_REVOKED", new["token"]),
        (("voided", 1, 1, new["orderId"]), new["token"])]


def test_control_push_shorthands(fake, receiver):
    s = fake.add_subscription("pro.monthly")
    r = requests.post(fake.url + "/fake/push", json={"url": receiver.url, "subscription": {
        "token": s["token"], "type": "SUBSCRIPTION_IN_GRACE_PERIOD"}, "auth": "expired", "messageId": "42"},
        verify=fake.ca_path, timeout=10).json()
    assert (r["status"], r["messageId"]) == (200, "42")
    note = decode(receiver.posts[-1][1])
    assert note["subscriptionNotification"]["notificationType"] == 6
    with pytest.raises((ValueError, jwt.PyJWTError, google.auth.exceptions.GoogleAuthError)):
        id_token.verify_token(bearer(receiver.posts[-1][0]), google_request(fake), audience=receiver.url,
                              certs_url=fake.jwks_url)
    r = requests.post(fake.url + "/fake/redeliver", json={"messageId": "42"}, verify=fake.ca_path, timeout=10)
    assert r.json()["status"] == 200 and receiver.posts[-1][1] == receiver.posts[-2][1]


# ---- standalone ------------------------------------------------------------------------------------------------------

def test_standalone_mode(tmp_path, discovery):
    tls_dir = tmp_path / "gplay"
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "googleplay_fake.py"), "--port", "0",
                             "--tls-dir", str(tls_dir), "--package", PACKAGE], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        info = json.loads(line)
        hint = "".join(proc.stdout.readline() for _ in range(4))
        assert f"--google-play-api-url {info['url']}" in hint and "--rtdn-certs" in hint
        for path in (info["ca"], info["serviceAccount"], info["jwks"], info["pemCerts"]):
            assert os.path.isfile(path) and os.path.dirname(path) == str(tls_dir)
        r = requests.post(info["url"] + "/fake/products", json={"productId": "coins100"}, verify=info["ca"],
                          timeout=10)
        token = r.json()["token"]

        class Standalone:
            url, service_account_path, ca_path = info["url"], info["serviceAccount"], info["ca"]

        got = google_service(Standalone, discovery).purchases().products().get(
            packageName=PACKAGE, productId="coins100", token=token).execute()
        assert got["purchaseState"] == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert os.path.isfile(tls_dir / "service-account.json")  # files in a directory it was given are kept


# ---- more of Google's behaviour ---------------------------------------------------------------------------------------

def test_the_schema_check_is_not_vacuous(discovery):
    good = {"kind": "androidpublisher#productPurchase", "purchaseTimeMillis": "1", "purchaseState": 0}
    conforms(good, {"$ref": "ProductPurchase"}, discovery, "$")
    for bad in ({"purchaseTimeMillis": 1}, {"purchaseState": "0"}, {"priceAmountMicros": "1"},
                {"acknowledgementState": True}):
        with pytest.raises(AssertionError):
            conforms(bad, {"$ref": "ProductPurchase"}, discovery, "$")
    with pytest.raises(AssertionError):
        conforms({"subscriptionState": "ACTIVE"}, {"$ref": "SubscriptionPurchaseV2"}, discovery, "$")
    with pytest.raises(AssertionError):
        conforms({"lineItems": [{"expiryTime": "1700000000000"}]}, {"$ref": "SubscriptionPurchaseV2"}, discovery, "$")


def test_request_bodies_are_checked_and_ack_sets_account_ids(fake, play):
    a = fake.add_product("premium")
    assert http_error(play.products().acknowledge(packageName=PACKAGE, productId="premium", token=a["token"],
                                                  body={"payload": "x"}))[:2] == (400, "invalid")
    assert fake.product(a["token"])["acknowledged"] is False
    s = fake.add_subscription("pro.monthly")
    play.subscriptions().acknowledge(packageName=PACKAGE, subscriptionId="pro.monthly", token=s["token"], body={
        "externalAccountIds": {"obfuscatedAccountId": "ord_5", "obfuscatedProfileId": "prof_5"}}).execute()
    got = play.subscriptionsv2().get(packageName=PACKAGE, token=s["token"]).execute()
    assert got["externalAccountIdentifiers"] == {"obfuscatedExternalAccountId": "ord_5",
                                                 "obfuscatedExternalProfileId": "prof_5"}
    assert http_error(play.subscriptions().acknowledge(
        packageName=PACKAGE, subscriptionId="pro.monthly", token=s["token"],
        body={"externalAccountIds": {"accountId": "x"}}))[:2] == (400, "invalid")


def test_google_refunds_what_was_not_acknowledged_in_three_days(fake, play):
    old = now_ms() - 3 * DAY - 60000
    late = fake.add_product("premium", purchase_ms=old)
    acked = fake.add_product("premium", purchase_ms=old, acknowledged=True)
    fresh = fake.add_product("premium")
    sub = fake.add_subscription("pro.monthly", start_ms=old)
    voided = fake.refund_unacknowledged()
    assert {v["purchaseToken"] for v in voided} == {late["token"], sub["token"]}
    assert {(v["voidedReason"], v["voidedSource"]) for v in voided} == {(8, 2)}
    states = {t: play.products().get(packageName=PACKAGE, productId="premium", token=t).execute()["purchaseState"]
              for t in (late["token"], acked["token"], fresh["token"])}
    assert states == {late["token"]: 1, acked["token"]: 0, fresh["token"]: 0}
    got = play.subscriptionsv2().get(packageName=PACKAGE, token=sub["token"]).execute()
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_EXPIRED"
    listed = play.voidedpurchases().list(packageName=PACKAGE, type=1).execute()["voidedPurchases"]
    assert [v["purchaseToken"] for v in listed] == [v["purchaseToken"] for v in voided]


def test_latest_order_id_can_be_left_out(fake, play):
    s = fake.add_subscription("pro.monthly")
    fake.send_latest_order_id = False
    got = play.subscriptionsv2().get(packageName=PACKAGE, token=s["token"]).execute()
    assert "latestOrderId" not in got and got["lineItems"][0]["latestSuccessfulOrderId"] == s["orderId"]


def test_http2_and_concurrent_calls(fake, play):
    import asyncio
    import ssl
    import httpx
    a = fake.add_product("coins100")
    play.products().get(packageName=PACKAGE, productId="coins100", token=a["token"]).execute()  # a token
    access = next(iter(fake.access_tokens))
    url = f"{fake.url}/androidpublisher/v3/applications/{PACKAGE}/purchases/products/coins100/tokens/{a['token']}"
    with httpx.Client(http2=True, verify=ssl.create_default_context(cafile=fake.ca_path), trust_env=False,
                      timeout=10) as client:
        r = client.get(url, headers={"authorization": "Bearer " + access})
        assert (r.status_code, r.http_version, r.json()["purchaseState"]) == (200, "HTTP/2", 0)
        assert fake.calls("purchases.products.get")[-1]["http_version"] == "2"
    fake.reset_calls()
    fake.delay(0.5, count=4)

    # Four streams at once on one HTTP/2 connection, from asyncio: httpcore's synchronous HTTP/2 connection shared
    # by threads races on its socket (encode/httpcore#679: "Server disconnected" under load, the CI flake of this
    # test); its asyncio one multiplexes streams as HTTP/2 means to.
    async def concurrently():
        async with httpx.AsyncClient(http2=True, verify=ssl.create_default_context(cafile=fake.ca_path), trust_env=False,
                                     timeout=10) as client:
            return await asyncio.gather(*[client.get(url, headers={"authorization": "Bearer " + access}) for _ in range(4)])

    answers = asyncio.run(concurrently())
    assert [(x.status_code, x.http_version) for x in answers] == [(200, "HTTP/2")] * 4
    assert fake.max_in_flight >= 2  # one HTTP/2 connection, the stalled answers overlapped


def test_delay_lets_a_client_time_out(fake, discovery):
    a = fake.add_product("coins100")
    credentials = service_account.Credentials.from_service_account_file(fake.service_account_path, scopes=[SCOPE])
    authed = google_auth_httplib2.AuthorizedHttp(credentials, http=httplib2.Http(ca_certs=fake.ca_path, timeout=0.5))
    play = build_from_document(dict(discovery, rootUrl=fake.url + "/"), http=authed).purchases()
    get = play.products().get(packageName=PACKAGE, productId="coins100", token=a["token"])
    get.execute()
    fake.delay(3.0, path_prefix="/androidpublisher")
    started = time.time()
    with pytest.raises(OSError):  # socket.timeout / TimeoutError
        get.execute()
    assert time.time() - started < 2.5  # the client gave up before the answer came
    assert get.execute()["purchaseState"] == 0


def test_control_api_rtdn_to_a_receiver_that_calls_back(fake, discovery, tmp_path):
    """billingd answers an RTDN by reading the purchase from the API: a change made through the control API must
    not hold the fake's loop while it pushes."""
    seen = []

    class CallsBack(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            note = decode(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            token = note["oneTimeProductNotification"]["purchaseToken"]
            got = google_service(fake, discovery).purchases().products().get(
                packageName=PACKAGE, productId="coins100", token=token).execute()
            seen.append((token, got["purchaseState"]))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CallsBack)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        session = trusting(fake)
        url = f"http://127.0.0.1:{server.server_address[1]}/googleplay/rtdn"
        assert session.post(fake.url + "/fake/config", json={"rtdnUrl": url}, timeout=10).json()["rtdnUrl"] == url
        p = session.post(fake.url + "/fake/products", json={"productId": "coins100", "state": "pending"},
                         timeout=10).json()
        assert p["push"] is None and seen == []
        done = session.post(fake.url + f"/fake/products/{p['token']}/complete", timeout=15).json()
        assert done["push"]["status"] == 200 and seen == [(p["token"], 0)]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_void_rules(fake, play, receiver):
    fake.rtdn_url = receiver.url
    s = fake.add_subscription("pro.monthly")
    fake.renew(s["token"])
    old = fake.void(s["token"], order_id=s["orderId"])  # the first order: access is paid by the renewal
    assert old["orderId"] == s["orderId"] and len(old["pushes"]) == 1
    got = play.subscriptionsv2().get(packageName=PACKAGE, token=s["token"]).execute()
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_ACTIVE"
    with pytest.raises(ValueError):
        fake.void(s["token"], order_id=s["orderId"])  # voided already
    with pytest.raises(ValueError):
        fake.void(s["token"], order_id=new_order_id())  # not an order of this subscription
    latest = fake.void(s["token"])
    assert latest["orderId"] == s["orderId"] + "..0" and len(latest["pushes"]) == 2  # REVOKED, then voided
    got = play.subscriptionsv2().get(packageName=PACKAGE, token=s["token"]).execute()
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_EXPIRED"
    c = fake.add_product("coins100", quantity=4)
    fake.void(c["token"], quantity=1)
    fake.void(c["token"], quantity=3)  # the rest: a full refund of what was left
    with pytest.raises(ValueError):
        fake.void(c["token"])
    got = play.products().get(packageName=PACKAGE, productId="coins100", token=c["token"]).execute()
    assert (got["purchaseState"], got["refundableQuantity"]) == (1, 0)
    rows = play.voidedpurchases().list(packageName=PACKAGE, type=1, includeQuantityBasedPartialRefund=True).execute()
    assert [(r["orderId"], r.get("voidedQuantity")) for r in rows["voidedPurchases"]] == [
        (s["orderId"], None), (s["orderId"] + "..0", None), (c["orderId"], 1), (c["orderId"], None)]
    refunds = [decode(b)["voidedPurchaseNotification"] for _, b in receiver.posts
               if "voidedPurchaseNotification" in decode(b)]
    assert [(n["productType"], n["refundType"]) for n in refunds] == [(1, 1), (1, 1), (2, 2), (2, 1)]


def test_prepaid_plan(fake, play):
    s = fake.add_subscription("pass.month", base_plan="prepaid-1m", prepaid=True, period_ms=30 * DAY)
    got = play.subscriptionsv2().get(packageName=PACKAGE, token=s["token"]).execute()
    item = got["lineItems"][0]
    assert "autoRenewingPlan" not in item and ms(item["expiryTime"]) == s["expiryMs"]
    assert ms(item["prepaidPlan"]["allowExtendAfterTime"]) == s["expiryMs"] - 3 * DAY
    fake.expire(s["token"])
    item = play.subscriptionsv2().get(packageName=PACKAGE, token=s["token"]).execute()["lineItems"][0]
    assert item["prepaidPlan"] == {}


def test_orders_refund_and_subscriptions_revoke_through_googles_client(fake, discovery, play):
    """The two calls Support.RefundPurchase makes, as google-api-python-client sends them (the discovery document's
    paths, `revoke` as a query parameter, empty answers): the order joins voidedpurchases.list; revoke=true takes the
    item back; a second refund of an order is 400 orderAlreadyRefunded; an unknown order 404; a subscription revoked
    is EXPIRED with its current order voided (purchases.subscriptionsv2.revoke, with revocationContext required)."""
    orders = google_service(fake, discovery).orders()
    kept, taken = fake.add_product("premium"), fake.add_product("premium")
    assert orders.refund(packageName=PACKAGE, orderId=kept["orderId"]).execute() in (b"", "", None)
    assert orders.refund(packageName=PACKAGE, orderId=taken["orderId"], revoke=True).execute() in (b"", "", None)
    assert [c["query"].get("revoke") for c in fake.calls("orders.refund")] == [None, ["true"]]
    state = lambda t: play.products().get(packageName=PACKAGE, productId="premium", token=t).execute()["purchaseState"]
    assert (state(kept["token"]), state(taken["token"])) == (0, 1)  # kept: still purchased; taken: canceled
    voided = play.voidedpurchases().list(packageName=PACKAGE).execute()["voidedPurchases"]
    assert {v["orderId"]: v["voidedSource"] for v in voided} == {kept["orderId"]: 1, taken["orderId"]: 1}
    assert http_error(orders.refund(packageName=PACKAGE, orderId=kept["orderId"]))[:2] == (400, "orderAlreadyRefunded")
    with pytest.raises(HttpError) as e:
        orders.refund(packageName=PACKAGE, orderId=new_order_id()).execute()
    assert e.value.status_code == 404
    s = fake.add_subscription("pro.monthly")
    subs = play.subscriptionsv2()
    assert http_error(subs.revoke(packageName=PACKAGE, token=s["token"], body={}))[:2] == (400, "invalid")
    full = {"revocationContext": {"fullRefund": {}}}
    assert subs.revoke(packageName=PACKAGE, token=s["token"], body=full).execute() in (b"", "", None, {})
    got = play.subscriptionsv2().get(packageName=PACKAGE, token=s["token"]).execute()
    assert got["subscriptionState"] == "SUBSCRIPTION_STATE_EXPIRED"
    voided = play.voidedpurchases().list(packageName=PACKAGE, type=1).execute()["voidedPurchases"]
    assert s["orderId"] in [v["orderId"] for v in voided]
    assert http_error(subs.revoke(packageName=PACKAGE, token=s["token"], body=full))[:2] == (400, "invalidPurchaseState")
