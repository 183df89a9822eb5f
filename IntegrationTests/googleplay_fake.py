"""A local fake of the Google Play Developer API (androidpublisher v3), its OAuth 2.0 token endpoint and a Pub/Sub
push sender, for testing billingd's Google Play client without Google.

It serves, over TLS on 127.0.0.1 (hypercorn in a background thread, as appstore_fake.py does), the purchases
endpoints billingd calls with Google's paths, camelCase JSON field names, int64-as-string numbers, enum spellings and
error shape; a token endpoint that checks the RS256 JWT assertion of the service-account key file it wrote; Google's
push-token public keys (JWKS at /oauth2/v3/certs, PEM map at /oauth2/v1/certs); and a control API under /fake/ to
script purchases, subscriptions, faults and notifications. test_googleplay_fake.py holds it to Google's own Python
clients (google-api-python-client from the shipped discovery document, google-auth); IntegrationTests/README.md lists
the interface and where the fake knowingly differs from Google.

Standalone: python3 IntegrationTests/googleplay_fake.py --port 8443 --tls-dir /tmp/gplay [--package com.example.app]"""
import asyncio
import base64
import datetime
import json
import os
import re
import secrets
import shutil
import ssl
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

from appstore_fake import FakeAppStore, _make_tls_files, b64url_decode, now_ms

SCOPE = "https://www.googleapis.com/auth/androidpublisher"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_LIFETIME = 3599  # expires_in of Google's access tokens
ASSERTION_LIFETIME_MAX = 3600  # Google refuses assertions valid for longer than an hour
CLOCK_SKEW = 300
DAY = 86400000
VOIDED_WINDOW = 30 * DAY  # voidedpurchases.list reaches 30 days back
VOIDED_PAGE_MAX = 1000  # maxResults default and largest value
EXPIRED_GONE = 60 * DAY  # subscriptionsv2.get answers 410 for subscriptions expired longer than this
PUSH_ISSUER = "https://accounts.google.com"
# The assertion's aud Google's token endpoint takes besides the key file's token_uri (google-auth always sends the
# first, whatever token_uri says).
GOOGLE_TOKEN_AUDIENCES = ("https://oauth2.googleapis.com/token", "https://accounts.google.com/o/oauth2/token")

# Pub/Sub-delivered DeveloperNotification type codes, by Google's names.
SUBSCRIPTION_NOTIFICATIONS = dict(
    SUBSCRIPTION_RECOVERED=1, SUBSCRIPTION_RENEWED=2, SUBSCRIPTION_CANCELED=3, SUBSCRIPTION_PURCHASED=4,
    SUBSCRIPTION_ON_HOLD=5, SUBSCRIPTION_IN_GRACE_PERIOD=6, SUBSCRIPTION_RESTARTED=7,
    SUBSCRIPTION_PRICE_CHANGE_CONFIRMED=8, SUBSCRIPTION_DEFERRED=9, SUBSCRIPTION_PAUSED=10,
    SUBSCRIPTION_PAUSE_SCHEDULE_CHANGED=11, SUBSCRIPTION_REVOKED=12, SUBSCRIPTION_EXPIRED=13,
    SUBSCRIPTION_PRICE_CHANGE_UPDATED=19, SUBSCRIPTION_PENDING_PURCHASE_CANCELED=20,
    SUBSCRIPTION_PRICE_STEP_UP_CONSENT_UPDATED=22)
ONE_TIME_NOTIFICATIONS = dict(ONE_TIME_PRODUCT_PURCHASED=1, ONE_TIME_PRODUCT_CANCELED=2)
VOIDED_PRODUCT_TYPES = dict(PRODUCT_TYPE_SUBSCRIPTION=1, PRODUCT_TYPE_ONE_TIME=2)
VOIDED_REFUND_TYPES = dict(REFUND_TYPE_FULL_REFUND=1, REFUND_TYPE_QUANTITY_BASED_PARTIAL_REFUND=2)
# VoidedPurchase.voidedSource and voidedReason codes.
VOIDED_SOURCES = dict(user=0, developer=1, google=2)
VOIDED_REASONS = dict(other=0, remorse=1, not_received=2, defective=3, accidental_purchase=4, fraud=5,
                      friendly_fraud=6, chargeback=7, unacknowledged_purchase=8)
PURCHASE_STATES = dict(purchased=0, canceled=1, pending=2)  # ProductPurchase.purchaseState
REPLACEMENT_MODES = {"WITH_TIME_PRORATION", "CHARGE_PRORATED_PRICE", "WITHOUT_PRORATION", "CHARGE_FULL_PRICE",
                     "DEFERRED", "KEEP_EXISTING"}
# google.rpc status names of the HTTP codes the fake answers with.
STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                409: "ALREADY_EXISTS", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 502: "UNAVAILABLE",
                503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
# Google's errors[] entries: (message, domain, reason) by the fake's names for them.
ERRORS = dict(
    invalid=("Invalid Value", "global", "invalid"),
    product_mismatch=("The purchase token does not match the product ID.", "androidpublisher",
                      "purchaseTokenDoesNotMatchProductId"),
    subscription_mismatch=("The purchase token does not match the subscription ID.", "androidpublisher",
                           "purchaseTokenDoesNotMatchSubscriptionId"),
    invalid_state=("The purchase is not in a valid state to perform the desired operation.", "androidpublisher",
                   "invalidPurchaseState"),
    gone=("The subscription purchase is no longer available for query because it has been expired for too long.",
          "androidpublisher", "subscriptionPurchaseNoLongerAvailable"),
    permission=("The current user has insufficient permissions to perform the requested operation.",
                "androidpublisher", "permissionDenied"),
    order_not_found=("The order was not found.", "androidpublisher", "notFound"),
    already_refunded=("The order has already been refunded.", "androidpublisher", "orderAlreadyRefunded"),
    scope=("Insufficient Permission", "global", "insufficientPermissions"),
    rate=("Rate Limit Exceeded", "usageLimits", "rateLimitExceeded"),
    backend=("Backend Error", "global", "backendError"),
    not_found=("Not Found", "global", "notFound"),
    start_time=("startTime must not be older than 30 days.", "global", "invalid"),
    end_time=("endTime must not be in the future and not before startTime.", "global", "invalid"),
    page_token=("Invalid page token.", "global", "invalid"))
ERROR_MESSAGES = {401: "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie "
                       "or other valid authentication credential. See "
                       "https://developers.google.com/identity/sign-in/web/devconsole-project.",
                  403: "Request had insufficient authentication scopes.", 429: "Rate Limit Exceeded",
                  500: "Internal error encountered.", 503: "The service is currently unavailable."}
FAULT_ERRORS = {429: "rate", 500: "backend", 502: "backend", 503: "backend", 504: "backend", 400: "invalid",
                404: "not_found", 410: "gone", 401: "permission", 403: "permission"}


class GoogleError(Exception):
    """An answer other than success: HTTP status and one of ERRORS (or a whole body)."""

    def __init__(self, status, error="invalid", *, body=None, headers=None, location=None):
        super().__init__(status, error)
        self.status, self.error, self.body, self.headers, self.location = status, error, body, headers or {}, location


def error_body(status, error, *, message=None, location=None):
    """Google's JSON error body: {"error": {"code", "message", "errors": [{message, domain, reason}], "status"}}."""
    text, domain, reason = ERRORS[error]
    item = {"message": text, "domain": domain, "reason": reason}
    if location:
        item.update(location=location, locationType="parameter")
    body = {"code": status, "message": message or text, "errors": [item]}
    if status in STATUS_NAMES:
        body["status"] = STATUS_NAMES[status]
    return {"error": body}


def rfc3339(ms):
    """google-datetime: RFC 3339 in UTC with milliseconds and Z, as Google writes it."""
    dt = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(ms) % 1000:03d}Z"


def money(micros, currency):
    """google.type.Money from micros: units an int64 string, nanos an int32 of the same sign."""
    units, rest = divmod(abs(int(micros)), 1_000_000)
    sign = -1 if micros < 0 else 1
    return {"currencyCode": currency, "units": str(sign * units), "nanos": sign * rest * 1000}


def b64url(data):
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def sign_rs256(key, header, claims):
    """A compact JWS, RS256 (RSASSA-PKCS1-v1_5 with SHA-256)."""
    signing_input = b64url(json.dumps(header, separators=(",", ":")).encode()) + "." + \
        b64url(json.dumps(claims, separators=(",", ":")).encode())
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return signing_input + "." + b64url(signature)


def new_order_id():
    """A Google Play order id: GPA.dddd-dddd-dddd-ddddd."""
    d = "".join(str(secrets.randbelow(10)) for _ in range(17))
    return f"GPA.{d[:4]}-{d[4:8]}-{d[8:12]}-{d[12:]}"


def new_purchase_token():
    """Opaque like Google's: letters, then a dot-separated tail (Google's are longer)."""
    return "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(24)) + ".AO-J1O" + \
        secrets.token_urlsafe(48).replace("-", "x").replace("_", "y")


_RSA_KEYS = {}
_RSA_LOCK = threading.Lock()


def _rsa_key(role):
    """An RSA-2048 key per role, made once a process (key generation is the slow part of starting a fake; key ids
    and emails still differ per fake)."""
    with _RSA_LOCK:
        if role not in _RSA_KEYS:
            _RSA_KEYS[role] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return _RSA_KEYS[role]


def _self_signed(key, cn):
    """A self-signed X.509 certificate for an RSA key, as Google publishes its push-token keys in v1/certs."""
    start = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(start)
            .not_valid_after(start + datetime.timedelta(days=14)).sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


class FakeGooglePlay:
    """The Play Developer API for `packages`, its token endpoint and push keys, served until stop().

    Seed with add_product / add_subscription, change with the subscription verbs (renew, change, cancel, ...),
    steer with fail_next / set_down / revoke_access_tokens, send RTDN with push / notify_*; inspect calls."""

    # The HTTP server and its lifecycle are the App Store fake's (hypercorn on its own loop thread).
    _start = FakeAppStore._start
    _app = FakeAppStore._app
    _take = FakeAppStore._take  # fault and delay queues, as there
    __enter__ = FakeAppStore.__enter__
    __exit__ = FakeAppStore.__exit__

    def stop(self):
        """Stops serving and waits for the server thread; removes the files only from a directory it made."""
        if self._thread.is_alive() and self._stop_event is not None:
            self._loop.call_soon_threadsafe(self._stop_event.set)
        self._thread.join(10)
        if self._own_dir:
            shutil.rmtree(self._dir, ignore_errors=True)

    def __init__(self, *, packages=("com.example.app",), project_id="billingd-fake", port=0, tls_dir=None,
                 rtdn_url=None, rtdn_ca=None, push_audience=None, push_email=None,
                 pubsub_subscription="projects/billingd-fake/subscriptions/play-rtdn"):
        self.packages = set(packages)
        self.project_id = project_id
        self.rtdn_url = rtdn_url  # with it, changes made through the fake send their RTDN there
        self.rtdn_ca = rtdn_ca  # CA file for an https rtdn_url, or False not to verify
        self.push_audience = push_audience  # default: the URL pushed to (Pub/Sub's default audience)
        self.push_email = push_email or f"rtdn-push@{project_id}.iam.gserviceaccount.com"
        self.pubsub_subscription = pubsub_subscription
        self.down = False  # True: every API and token request answers 503
        self.token_lifetime = TOKEN_LIFETIME
        self._lock = threading.Lock()
        self._calls = []
        self._faults = []  # [status, remaining, retry_after, body, path_prefix]
        self._delays = []  # [seconds, remaining, path_prefix]
        self._deliveries = []
        self._access = {}  # access token -> {"expires": s, "scopes": set, "email"}
        self._products = {}  # token -> one-time purchase record
        self._subs = {}  # token -> subscription record
        self._orders = {}  # orderId -> (kind, token, record of that order)
        self._voided = []  # voided purchase records, in the order Google saw them voided
        self._pushes = {}  # messageId -> {"body", "url"}
        self._in_flight = 0
        self.max_in_flight = 0  # the most API and token requests answered at once (reset_calls resets it)
        self.send_latest_order_id = True  # False: no top-level latestOrderId (gone from the current reference)

        self._own_dir = tls_dir is None
        self._dir = tls_dir or tempfile.mkdtemp(prefix="fake-googleplay-")
        os.makedirs(self._dir, exist_ok=True)
        self.ca_path, cert_path, key_path = _make_tls_files(self._dir)
        self._sa_key = _rsa_key("service account")
        self.private_key_id = secrets.token_hex(20)
        self.client_email = f"billingd@{project_id}.iam.gserviceaccount.com"
        self.client_id = str(100000000000000000000 + secrets.randbelow(10 ** 20))
        self._push_key = _rsa_key("push")
        self.push_kid = secrets.token_hex(20)
        self._stranger_key = _rsa_key("stranger")  # a key no certs URL serves
        self._push_cert = _self_signed(self._push_key, "fake-googleplay-push")
        self.push_sub = str(100000000000000000000 + secrets.randbelow(10 ** 20))
        self._start(cert_path, key_path, port)
        self._thread.name = f"fake-googleplay-{self.port}"
        self.token_uri = self.url + "/token"
        self.jwks_url = self.url + "/oauth2/v3/certs"
        self.pem_certs_url = self.url + "/oauth2/v1/certs"
        self.service_account_path = self._write("service-account.json", self.service_account_info())
        self.jwks_path = self._write("rtdn-certs.jwks.json", self.jwks())
        self.pem_certs_path = self._write("rtdn-certs.pem.json", self.pem_certs())

    def _write(self, name, data):
        path = os.path.join(self._dir, name)
        with open(path, "w") as f:
            json.dump(data, f, indent=2)
        return path

    def service_account_info(self):
        """The JSON key file of the service account, in Google's format, token_uri at this fake."""
        pem = self._sa_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()).decode()
        email = urllib.parse.quote(self.client_email)
        return {"type": "service_account", "project_id": self.project_id, "private_key_id": self.private_key_id,
                "private_key": pem, "client_email": self.client_email, "client_id": self.client_id,
                "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": self.token_uri,
                "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
                "client_x509_cert_url": f"https://www.googleapis.com/robot/v1/metadata/x509/{email}",
                "universe_domain": "googleapis.com"}

    def jwks(self):
        """The push-token keys as Google serves them at /oauth2/v3/certs."""
        numbers = self._push_key.public_key().public_numbers()

        def b64int(n):
            return b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))

        return {"keys": [{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": self.push_kid,
                          "n": b64int(numbers.n), "e": b64int(numbers.e)}]}

    def pem_certs(self):
        """The push-token keys as Google serves them at /oauth2/v1/certs: {kid: PEM certificate}."""
        return {self.push_kid: self._push_cert}

    def billingd_flags(self):
        """billingd's flags (api/CONFIG.md) for this fake."""
        return ["--google-play-api-url", self.url, "--google-play-service-account", self.service_account_path,
                "--google-play-ca", self.ca_path, "--google-play-packages", ",".join(sorted(self.packages)),
                "--rtdn-certs", self.jwks_path, "--rtdn-service-account", self.push_email]

    # ---- seeding: one-time products -----------------------------------------------------------------------------

    def _package(self, package):
        package = package or sorted(self.packages)[0]
        return package

    def add_product(self, product_id, *, package=None, token=None, state="purchased", quantity=1, test=False,
                    account_id=None, profile_id=None, order_id=None, purchase_ms=None, region="US",
                    price_micros=990000, currency="USD", acknowledged=False, consumed=False, developer_payload="",
                    purchase_type=None, notify=True):
        """A one-time product purchase; returns its record (token, orderId, ...). state: purchased, pending or
        canceled (a pending purchase has no orderId until complete_product). test: purchaseType 0 (license
        tester); purchase_type overrides it (1 promo, 2 rewarded). With rtdn_url, a purchased one sends
        ONE_TIME_PRODUCT_PURCHASED."""
        if state not in PURCHASE_STATES:
            raise ValueError("state is purchased, pending or canceled")
        if not isinstance(quantity, int) or quantity < 1:
            raise ValueError("quantity is a positive integer")
        record = {"kind": "product", "package": self._package(package), "productId": product_id,
                  "token": token or new_purchase_token(), "orderId": None, "state": state, "quantity": quantity,
                  "refundableQuantity": quantity, "purchaseType": 0 if test else None, "accountId": account_id,
                  "profileId": profile_id, "purchaseMs": purchase_ms or now_ms(), "regionCode": region,
                  "priceMicros": price_micros, "currency": currency, "acknowledged": bool(acknowledged),
                  "consumed": bool(consumed), "developerPayload": developer_payload, "refunded": False}
        if purchase_type is not None:
            record["purchaseType"] = purchase_type
        if state == "purchased":
            record["orderId"] = order_id or new_order_id()
        note = self.one_time_notification(record, "ONE_TIME_PRODUCT_PURCHASED") if state == "purchased" else None
        return self._register(self._products, record, lambda r: {"createMs": r["purchaseMs"]}, note if notify else None)

    def _register(self, table, record, order, notification):
        """Keeps a new purchase (and its first order), sends its RTDN; returns a copy with `push`."""
        with self._lock:
            if record["token"] in self._products or record["token"] in self._subs:
                raise ValueError("purchase token already used")
            table[record["token"]] = record
            if record["orderId"]:
                self._orders[record["orderId"]] = (record["kind"], record["token"], order(record))
        push = self._auto_notify(notification) if notification else None
        return dict(self._copy(table, record["token"]), push=push)

    def _copy(self, table, token):
        with self._lock:
            record = table.get(token)
            if record is None:
                raise KeyError(token)
            return dict(record)

    def product(self, token):
        """A copy of a one-time purchase record."""
        return self._copy(self._products, token)

    def complete_product(self, token, *, order_id=None):
        """A pending purchase is paid: PURCHASED, an orderId, ONE_TIME_PRODUCT_PURCHASED."""
        with self._lock:
            record = self._products[token]
            if record["state"] != "pending":
                raise ValueError("only a pending purchase completes")
            record.update(state="purchased", orderId=order_id or new_order_id(), purchaseMs=now_ms())
            self._orders[record["orderId"]] = ("product", token, {"createMs": record["purchaseMs"]})
        push = self._auto_notify(self.one_time_notification(record, "ONE_TIME_PRODUCT_PURCHASED"))
        return dict(self.product(token), push=push)

    def cancel_product(self, token):
        """A pending purchase the user gave up (or the payment failed): purchaseState 1, ONE_TIME_PRODUCT_CANCELED."""
        with self._lock:
            record = self._products[token]
            if record["state"] != "pending":
                raise ValueError("only a pending purchase is canceled")
            record["state"] = "canceled"
        push = self._auto_notify(self.one_time_notification(record, "ONE_TIME_PRODUCT_CANCELED"))
        return dict(self.product(token), push=push)

    # ---- seeding: subscriptions ---------------------------------------------------------------------------------

    def add_subscription(self, product_id, *, package=None, token=None, base_plan="monthly", offer_id=None,
                         offer_tags=(), period_ms=30 * DAY, state="active", test=False, account_id=None,
                         profile_id=None, order_id=None, start_ms=None, expiry_ms=None, region="US",
                         price_micros=9990000, currency="USD", auto_renew=True, prepaid=False, acknowledged=False,
                         linked_token=None, item_replacement=None, notify=True):
        """A subscription purchase (SubscriptionPurchaseV2); returns its record. state: active or pending.
        With rtdn_url, an active one sends SUBSCRIPTION_PURCHASED."""
        if state not in ("active", "pending"):
            raise ValueError("a new subscription is active or pending")
        start = start_ms or now_ms()
        record = {"kind": "subscription", "package": self._package(package), "productId": product_id,
                  "token": token or new_purchase_token(), "basePlanId": base_plan, "offerId": offer_id,
                  "offerTags": list(offer_tags), "periodMs": period_ms, "state": "SUBSCRIPTION_STATE_ACTIVE",
                  "test": bool(test), "accountId": account_id, "profileId": profile_id, "startMs": start,
                  "expiryMs": expiry_ms or start + period_ms, "regionCode": region, "priceMicros": price_micros,
                  "currency": currency, "autoRenew": bool(auto_renew) and not prepaid, "prepaid": bool(prepaid),
                  "acknowledged": bool(acknowledged), "linkedPurchaseToken": linked_token, "orderBase": None,
                  "renewals": 0, "orderId": None, "canceled": None, "paused": None, "deferredProductId": None,
                  "itemReplacement": item_replacement, "expiredMs": None, "replacedBy": None}
        if state == "pending":
            record.update(state="SUBSCRIPTION_STATE_PENDING", startMs=None, expiryMs=None)
        else:
            record["orderBase"] = record["orderId"] = order_id or new_order_id()
        note = self.subscription_notification(record, "SUBSCRIPTION_PURCHASED") if state == "active" else None
        return self._register(self._subs, record, self._order_period, note if notify else None)

    def subscription(self, token):
        """A copy of a subscription record."""
        return self._copy(self._subs, token)

    @staticmethod
    def _order_period(record):
        return {"createMs": now_ms(), "startMs": record["startMs"] if record["renewals"] == 0 else
                record["expiryMs"] - record["periodMs"], "endMs": record["expiryMs"], "productId": record["productId"],
                "basePlanId": record["basePlanId"], "offerId": record["offerId"], "priceMicros": record["priceMicros"],
                "currency": record["currency"]}

    def _sub_change(self, token, change, notification, states=None):
        """Applies change(record, now) under the lock to a subscription in one of `states` (short names such as
        ACTIVE; None: any), then sends `notification` (a type name or None)."""
        with self._lock:
            record = self._subs[token]
            if states is not None and record["state"].replace("SUBSCRIPTION_STATE_", "") not in states:
                raise ValueError(f"not for a subscription in {record['state']} (only {', '.join(states)})")
            change(record, now_ms())
        push = self._auto_notify(self.subscription_notification(record, notification)) if notification else None
        return dict(self.subscription(token), push=push)

    def _new_order(self, record, now):
        """A renewal order: the first order's id with `..N` (N from 0), the expiry one period later (from the
        renewal date a grace period held open; from now after a hold or a pause)."""
        if record["state"] == "SUBSCRIPTION_STATE_IN_GRACE_PERIOD":
            record["expiryMs"] = record.pop("graceFromMs")
        record["expiryMs"] = max(record["expiryMs"] or now, now if record["state"] in (
            "SUBSCRIPTION_STATE_ON_HOLD", "SUBSCRIPTION_STATE_PAUSED") else 0) + record["periodMs"]
        record["orderId"] = f"{record['orderBase']}..{record['renewals']}"
        record["renewals"] += 1
        if record["deferredProductId"]:
            record["productId"], record["deferredProductId"] = record["deferredProductId"], None
        record.update(state="SUBSCRIPTION_STATE_ACTIVE", canceled=None, paused=None, autoRenew=not record["prepaid"])
        self._orders[record["orderId"]] = ("subscription", record["token"], self._order_period(record))

    def complete_subscription(self, token, *, order_id=None):
        """A pending subscription is paid: ACTIVE from now, SUBSCRIPTION_PURCHASED."""
        def change(r, now):
            if r["state"] != "SUBSCRIPTION_STATE_PENDING":
                raise ValueError("only a pending subscription completes")
            r.update(state="SUBSCRIPTION_STATE_ACTIVE", startMs=now, expiryMs=now + r["periodMs"])
            r["orderBase"] = r["orderId"] = order_id or new_order_id()
            self._orders[r["orderId"]] = ("subscription", token, self._order_period(r))
        return self._sub_change(token, change, "SUBSCRIPTION_PURCHASED")

    def cancel_pending_subscription(self, token):
        def change(r, now):
            if r["state"] != "SUBSCRIPTION_STATE_PENDING":
                raise ValueError("only a pending subscription is canceled so")
            r["state"] = "SUBSCRIPTION_STATE_PENDING_PURCHASE_CANCELED"
        return self._sub_change(token, change, "SUBSCRIPTION_PENDING_PURCHASE_CANCELED")

    def renew(self, token):
        """The next period is paid: orderId `<first>..N`, expiry one period later, SUBSCRIPTION_RENEWED (a deferred
        replacement takes effect now)."""
        return self._sub_change(token, self._new_order, "SUBSCRIPTION_RENEWED", ["ACTIVE"])

    def cancel(self, token, *, by="user", reason=None):
        """Auto-renew off (the user keeps access until expiryTime): CANCELED, SUBSCRIPTION_CANCELED. by: user,
        system or developer (canceledStateContext); reason: a CancelSurveyResult reason for a user."""
        def change(r, now):
            r.update(state="SUBSCRIPTION_STATE_CANCELED", autoRenew=False, canceled=self._cancel_context(by, now, reason))
        return self._sub_change(token, change, "SUBSCRIPTION_CANCELED", ["ACTIVE", "IN_GRACE_PERIOD"])

    @staticmethod
    def _cancel_context(by, now, reason=None):
        if by == "user":
            context = {"cancelTime": rfc3339(now)}
            if reason:
                context["cancelSurveyResult"] = {"reason": reason}
            return {"userInitiatedCancellation": context}
        return {{"system": "systemInitiatedCancellation", "developer": "developerInitiatedCancellation",
                 "replacement": "replacementCancellation"}[by]: {}}

    def restart(self, token):
        """A canceled subscription the user restored before it lapsed: ACTIVE, SUBSCRIPTION_RESTARTED."""
        def change(r, now):
            r.update(state="SUBSCRIPTION_STATE_ACTIVE", autoRenew=True, canceled=None)
        return self._sub_change(token, change, "SUBSCRIPTION_RESTARTED", ["CANCELED"])

    def expire(self, token):
        """The subscription lapsed: EXPIRED, expiry now at the latest, SUBSCRIPTION_EXPIRED."""
        def change(r, now):
            r.update(state="SUBSCRIPTION_STATE_EXPIRED", autoRenew=False, paused=None, expiredMs=now,
                     expiryMs=min(r["expiryMs"] or now, now), canceled=r["canceled"] or self._cancel_context("system", now))
        return self._sub_change(token, change, "SUBSCRIPTION_EXPIRED",
                                ["ACTIVE", "CANCELED", "IN_GRACE_PERIOD", "ON_HOLD", "PAUSED"])

    def pause(self, token, *, resume_ms=None):
        """PAUSED until resume_ms (default one period on), access ends now: SUBSCRIPTION_PAUSED."""
        def change(r, now):
            r.update(state="SUBSCRIPTION_STATE_PAUSED", expiryMs=min(r["expiryMs"], now),
                     paused={"autoResumeTime": rfc3339(resume_ms or now + r["periodMs"])})
        return self._sub_change(token, change, "SUBSCRIPTION_PAUSED", ["ACTIVE"])

    def resume(self, token):
        """A paused subscription resumes and is charged: a renewal order, SUBSCRIPTION_RENEWED."""
        return self._sub_change(token, self._new_order, "SUBSCRIPTION_RENEWED", ["PAUSED"])

    def grace(self, token, *, days=3):
        """The renewal payment was declined: IN_GRACE_PERIOD, access until `days` later, SUBSCRIPTION_IN_GRACE_PERIOD."""
        def change(r, now):
            r.update(state="SUBSCRIPTION_STATE_IN_GRACE_PERIOD", graceFromMs=r["expiryMs"],
                     expiryMs=max(r["expiryMs"], now) + days * DAY)
        return self._sub_change(token, change, "SUBSCRIPTION_IN_GRACE_PERIOD", ["ACTIVE"])

    def hold(self, token):
        """Account hold: ON_HOLD, no access, SUBSCRIPTION_ON_HOLD."""
        def change(r, now):
            r.pop("graceFromMs", None)
            r.update(state="SUBSCRIPTION_STATE_ON_HOLD", expiryMs=min(r["expiryMs"], now))
        return self._sub_change(token, change, "SUBSCRIPTION_ON_HOLD", ["ACTIVE", "IN_GRACE_PERIOD"])

    def recover(self, token):
        """Payment fixed in grace period or on hold: a renewal order, SUBSCRIPTION_RECOVERED."""
        return self._sub_change(token, self._new_order, "SUBSCRIPTION_RECOVERED", ["IN_GRACE_PERIOD", "ON_HOLD"])

    def change(self, token, new_product_id, *, base_plan=None, replacement_mode="WITH_TIME_PRORATION",
               new_token=None, price_micros=None, period_ms=None, **kwargs):
        """An upgrade, downgrade or resubscribe: a new purchase token whose linkedPurchaseToken is `token`; the old
        one EXPIRED with replacementCancellation. DEFERRED instead marks the old line item's
        deferredItemReplacement and switches the product at its next renewal (same token). Returns the new (or,
        for DEFERRED, the old) subscription record."""
        if replacement_mode not in REPLACEMENT_MODES:
            raise ValueError(f"replacement_mode is one of {sorted(REPLACEMENT_MODES)}")
        old = self.subscription(token)
        live = ["ACTIVE", "CANCELED", "IN_GRACE_PERIOD", "ON_HOLD", "PAUSED"]
        if replacement_mode == "DEFERRED":
            def deferred(r, now):
                r["deferredProductId"] = new_product_id
            return self._sub_change(token, deferred, None, ["ACTIVE"])
        if old["state"].replace("SUBSCRIPTION_STATE_", "") not in live:
            raise ValueError(f"no replacement for a subscription in {old['state']} (a new purchase instead)")

        def replaced(r, now):
            r.update(state="SUBSCRIPTION_STATE_EXPIRED", autoRenew=False, expiryMs=min(r["expiryMs"], now),
                     expiredMs=now, canceled=self._cancel_context("replacement", now))
        new = self.add_subscription(
            new_product_id, package=old["package"], token=new_token, base_plan=base_plan or old["basePlanId"],
            period_ms=period_ms or old["periodMs"], test=old["test"], account_id=old["accountId"],
            profile_id=old["profileId"], region=old["regionCode"], currency=old["currency"],
            price_micros=old["priceMicros"] if price_micros is None else price_micros, linked_token=token,
            item_replacement={"productId": old["productId"], "basePlanId": old["basePlanId"],
                              "replacementMode": replacement_mode}, notify=False, **kwargs)
        with self._lock:
            replaced(self._subs[token], now_ms())
            self._subs[token]["replacedBy"] = new["token"]
        push = self._auto_notify(self.subscription_notification(new, "SUBSCRIPTION_PURCHASED"))
        return dict(new, push=push)

    # ---- voiding (refunds, chargebacks, revocations) --------------------------------------------------------------

    def void(self, token, *, order_id=None, reason="other", source="user", quantity=None, voided_ms=None):
        """Refunds or charges back a purchase: it joins voidedpurchases.list and a voidedPurchaseNotification is
        sent. One-time: all of it (purchaseState 1) or `quantity` of it (a quantity-based partial refund, listed
        only with includeQuantityBasedPartialRefund). Subscription: the order `order_id` (default the latest),
        and, when that is the latest order of a live subscription, the subscription is revoked as revoke() does."""
        reason_code = VOIDED_REASONS[reason] if isinstance(reason, str) else int(reason)
        source_code = VOIDED_SOURCES[source] if isinstance(source, str) else int(source)
        voided_ms = voided_ms or now_ms()
        with self._lock:
            if token in self._products:
                record = self._products[token]
                if record["orderId"] is None or record["refundableQuantity"] == 0:
                    raise ValueError("nothing to void: a purchase without an order, or voided already")
                if quantity is not None and not 1 <= quantity <= record["refundableQuantity"]:
                    raise ValueError("quantity is 1 to the refundable quantity")
                partial = quantity is not None and quantity < record["refundableQuantity"]
                amount = quantity or record["refundableQuantity"]
                record["refundableQuantity"] -= amount
                if not partial:
                    record.update(state="canceled", refunded=True)
                entry = {"purchaseToken": token, "orderId": record["orderId"], "purchaseTimeMillis":
                         str(record["purchaseMs"]), "voidedTimeMillis": str(voided_ms), "voidedSource": source_code,
                         "voidedReason": reason_code, "kind": "androidpublisher#voidedPurchase"}
                if partial:
                    entry["voidedQuantity"] = amount
                meta = {"seenMs": voided_ms, "subscription": False, "partial": partial}
                product_type, refund_type = "PRODUCT_TYPE_ONE_TIME", (
                    "REFUND_TYPE_QUANTITY_BASED_PARTIAL_REFUND" if partial else "REFUND_TYPE_FULL_REFUND")
            elif token in self._subs:
                record = self._subs[token]
                order = order_id or record["orderId"]
                if order is None or self._orders.get(order, (None, None))[1] != token:
                    raise ValueError("no such order of this subscription")
                if any(e["orderId"] == order for e, _ in self._voided):
                    raise ValueError("that order is voided already")
                revoke = order == record["orderId"] and record["state"] not in (
                    "SUBSCRIPTION_STATE_EXPIRED", "SUBSCRIPTION_STATE_PENDING_PURCHASE_CANCELED")
                entry = {"purchaseToken": token, "orderId": order, "purchaseTimeMillis": str(
                    self._orders[order][2]["createMs"]), "voidedTimeMillis": str(voided_ms),
                    "voidedSource": source_code, "voidedReason": reason_code, "kind": "androidpublisher#voidedPurchase"}
                meta = {"seenMs": voided_ms, "subscription": True, "partial": False}
                product_type, refund_type = "PRODUCT_TYPE_SUBSCRIPTION", "REFUND_TYPE_FULL_REFUND"
            else:
                raise KeyError(token)
            self._voided.append((entry, meta))
        pushes = []
        if token in self._subs and revoke:
            pushes.append(self.revoke(token, by="system" if source_code == 2 else "developer")["push"])
        pushes.append(self._auto_notify(self.voided_notification(
            token, entry["orderId"], product_type, refund_type, package=record["package"])))
        return dict(entry, push=pushes[-1], pushes=pushes)

    def refund_unacknowledged(self, *, age_ms=3 * DAY):
        """What Google does to purchases not acknowledged within three days: voids (refunds) every PURCHASED
        one-time purchase and every subscription whose first order is older than age_ms and not acknowledged
        (voidedReason 8 unacknowledged_purchase, voidedSource 2 Google). Returns the voided entries."""
        cutoff = now_ms() - age_ms
        with self._lock:
            tokens = [t for t, r in self._products.items() if r["state"] == "purchased" and not r["acknowledged"]
                      and not r["consumed"] and r["purchaseMs"] <= cutoff]
            tokens += [t for t, r in self._subs.items() if not r["acknowledged"] and r["startMs"] is not None and
                       r["startMs"] <= cutoff and r["state"] != "SUBSCRIPTION_STATE_EXPIRED"]
        return [self.void(t, reason="unacknowledged_purchase", source="google") for t in tokens]

    def revoke(self, token, *, by="developer"):
        """Access revoked at once (a refund or the developer's revoke): EXPIRED as the API shows it,
        SUBSCRIPTION_REVOKED."""
        def change(r, now):
            r.update(state="SUBSCRIPTION_STATE_EXPIRED", autoRenew=False, expiryMs=min(r["expiryMs"] or now, now),
                     expiredMs=now, paused=None, canceled=self._cancel_context(by, now))
        return self._sub_change(token, change, "SUBSCRIPTION_REVOKED",
                                ["ACTIVE", "CANCELED", "IN_GRACE_PERIOD", "ON_HOLD", "PAUSED"])

    # ---- faults, access tokens and the call record ----------------------------------------------------------------

    def fail_next(self, status, *, count=1, retry_after=None, body=None, path_prefix=None):
        """The next `count` API or token requests (under path_prefix, e.g. "/token" or
        "/androidpublisher/v3/applications/PKG/purchases/products") answer `status` with Google's error body for
        it (or `body`); retry_after adds a Retry-After header."""
        with self._lock:
            self._faults.append([status, count, retry_after, body, path_prefix])

    def delay(self, seconds, count=1, *, path_prefix=None):
        """Stalls the next `count` API or token answers (under path_prefix) by `seconds`."""
        with self._lock:
            self._delays.append([seconds, count, path_prefix])

    def clear_faults(self):
        with self._lock:
            self._faults.clear()
            self._delays.clear()
        self.down = False

    def set_down(self, down=True):
        """The API and its token endpoint answer 503 to everything while down (the control API still answers)."""
        self.down = bool(down)

    def revoke_access_tokens(self):
        """Every access token issued so far is refused from now on (401): the client must get a new one."""
        with self._lock:
            n = len(self._access)
            self._access.clear()
        return n

    def expire_access_tokens(self):
        """Every access token issued so far is past its expiry from now on (401 until refreshed)."""
        with self._lock:
            for entry in self._access.values():
                entry["expires"] = time.time() - 1
            return len(self._access)

    @property
    def access_tokens(self):
        with self._lock:
            return {t: dict(e) for t, e in self._access.items()}

    def calls(self, method=None, *, token=None):
        """The API and token requests received, oldest first: dicts with method (Google's name, such as
        "purchases.products.acknowledge", or "oauth2.token"), http_method, path, packageName, productId, token,
        query, json, status, auth_error, time. Filtered by method and purchase token when given."""
        with self._lock:
            out = list(self._calls)
        return [c for c in out if (method is None or c["method"] == method) and (token is None or c["token"] == token)]

    def reset_calls(self):
        with self._lock:
            self._calls.clear()
            self.max_in_flight = self._in_flight

    # ---- notifications (Pub/Sub push) -----------------------------------------------------------------------------

    def developer_notification(self, package=None, *, event_ms=None, **kind):
        """A DeveloperNotification: version, packageName, eventTimeMillis (a string) and one of
        oneTimeProductNotification, subscriptionNotification, voidedPurchaseNotification, testNotification."""
        note = {"version": "1.0", "packageName": self._package(package), "eventTimeMillis": str(event_ms or now_ms())}
        note.update(kind)
        return note

    def one_time_notification(self, record, type_name):
        return self.developer_notification(record["package"], oneTimeProductNotification={
            "version": "1.0", "notificationType": ONE_TIME_NOTIFICATIONS[type_name], "purchaseToken": record["token"],
            "sku": record["productId"]})

    def subscription_notification(self, record, type_name):
        return self.developer_notification(record["package"], subscriptionNotification={
            "version": "1.0", "notificationType": SUBSCRIPTION_NOTIFICATIONS[type_name],
            "purchaseToken": record["token"], "subscriptionId": record["productId"]})

    def voided_notification(self, token, order_id, product_type, refund_type, package=None):
        return self.developer_notification(package, voidedPurchaseNotification={
            "purchaseToken": token, "orderId": order_id, "productType": VOIDED_PRODUCT_TYPES[product_type],
            "refundType": VOIDED_REFUND_TYPES[refund_type]})

    def test_notification(self, package=None):
        return self.developer_notification(package, testNotification={"version": "1.0"})

    def push_message(self, notification, *, message_id=None, attributes=None, publish_ms=None):
        """The Pub/Sub push body for a DeveloperNotification (both spellings of messageId and publishTime, as
        Pub/Sub sends them)."""
        message_id = message_id or str(10 ** 15 + secrets.randbelow(9 * 10 ** 15))
        publish = rfc3339(publish_ms or now_ms())
        message = {"data": base64.b64encode(json.dumps(notification).encode()).decode(), "messageId": message_id,
                   "message_id": message_id, "publishTime": publish, "publish_time": publish}
        if attributes:
            message["attributes"] = dict(attributes)
        return {"message": message, "subscription": self.pubsub_subscription}

    def push_token(self, audience, *, variant="valid", lifetime=3600):
        """The OIDC token Pub/Sub puts in `authorization: Bearer`, RS256 with the fake's key (kid in the header).
        variant: valid, wrong_audience, wrong_email, unverified_email, unknown_key, expired, bad_signature,
        wrong_issuer."""
        now = int(time.time())
        claims = {"aud": audience, "azp": self.push_sub, "email": self.push_email, "email_verified": True,
                  "exp": now + lifetime, "iat": now, "iss": PUSH_ISSUER, "sub": self.push_sub}
        key, kid = self._push_key, self.push_kid
        if variant == "wrong_audience":
            claims["aud"] = audience + "/elsewhere"
        elif variant == "wrong_email":
            claims["email"] = f"someone-else@{self.project_id}.iam.gserviceaccount.com"
        elif variant == "unverified_email":
            claims["email_verified"] = False
        elif variant == "unknown_key":
            key, kid = self._stranger_key, secrets.token_hex(20)
        elif variant == "expired":
            claims.update(iat=now - 2 * lifetime, exp=now - lifetime)
        elif variant == "wrong_issuer":
            claims["iss"] = "https://evil.example.com"
        elif variant not in ("valid", "bad_signature"):
            raise ValueError(f"unknown push token variant {variant!r}")
        token = sign_rs256(key, {"alg": "RS256", "kid": kid, "typ": "JWT"}, claims)
        if variant == "bad_signature":
            head, _, sig = token.rpartition(".")
            raw = bytearray(b64url_decode(sig))
            raw[5] ^= 1
            token = head + "." + b64url(bytes(raw))
        return token

    def push(self, url, notification=None, *, body=None, message_id=None, attributes=None, auth="valid",
             audience=None, ca=None, timeout=10):
        """POSTs a push message to `url` as Pub/Sub does; returns {"status", "body", "messageId", "message"}.
        notification: a DeveloperNotification dict (or body: a whole push body). auth: a push_token variant, or
        "none" for no authorization header. A message id pushed before is sent again as it was (a redelivery)."""
        with self._lock:
            known = self._pushes.get(message_id) if message_id else None
        if body is None:
            body = known["body"] if known else self.push_message(notification or self.test_notification(),
                                                                 message_id=message_id, attributes=attributes)
        message_id = body.get("message", {}).get("messageId", message_id)
        with self._lock:
            self._pushes[message_id] = {"body": body, "url": url}
        headers = {"content-type": "application/json",
                   "user-agent": "APIs-Google; (+https://developers.google.com/webmasters/APIs-Google.html)"}
        if auth != "none":
            headers["authorization"] = "Bearer " + self.push_token(audience or self.push_audience or url, variant=auth)
        request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
        handlers = [urllib.request.ProxyHandler({})]  # straight to the receiver, whatever *_proxy says
        if url.startswith("https:"):
            context = ssl.create_default_context(cafile=ca if ca else None)
            if ca is False:
                context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            handlers.append(urllib.request.HTTPSHandler(context=context))
        try:
            with urllib.request.build_opener(*handlers).open(request, timeout=timeout) as answer:
                status, out = answer.status, answer.read()
        except urllib.error.HTTPError as e:
            status, out = e.code, e.read()
        except (OSError, urllib.error.URLError) as e:
            status, out = None, str(e).encode()
        return {"status": status, "body": out.decode("utf-8", "replace"), "messageId": message_id, "message": body}

    def redeliver(self, message_id, url=None, **kwargs):
        """Pub/Sub's redelivery of a message already pushed: the same body, messageId and publishTime."""
        with self._lock:
            known = self._pushes[message_id]
        return self.push(url or known["url"], body=known["body"], **kwargs)

    def _auto_notify(self, notification):
        """With rtdn_url, sends the RTDN a change made through the fake causes, as Google would; else keeps it."""
        if not self.rtdn_url:
            return {"status": None, "notification": notification}
        result = self.push(self.rtdn_url, notification, ca=self.rtdn_ca)
        result["notification"] = notification
        return result

    # ---- HTTP ------------------------------------------------------------------------------------------------------

    async def _handle(self, scope, headers, body):
        path = scope["path"]
        query = urllib.parse.parse_qs(scope["query_string"].decode("latin-1"), keep_blank_values=True)
        method = scope["method"]
        if path.startswith("/fake/"):
            loop = asyncio.get_running_loop()  # the control API may push to billingd, which calls back here
            return await loop.run_in_executor(None, self._control, method, path, query, body)
        if method == "GET" and path == "/oauth2/v3/certs":
            return 200, {"cache-control": "public, max-age=3600"}, json.dumps(self.jwks()).encode()
        if method == "GET" and path == "/oauth2/v1/certs":
            return 200, {"cache-control": "public, max-age=3600"}, json.dumps(self.pem_certs()).encode()
        entry = {"method": None, "http_method": method, "path": path, "packageName": None, "productId": None,
                 "token": None, "query": query, "json": None, "status": None, "answer": None, "auth_error": None,
                 "time": time.time(), "http_version": scope.get("http_version")}
        with self._lock:
            self._calls.append(entry)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            stall = self._take(self._delays, path)
            if stall:
                await asyncio.sleep(stall[0])
            try:
                if path == "/token":
                    entry["method"] = "oauth2.token"
                    status, extra, out = self._token_endpoint(method, headers, body, entry)
                else:
                    status, extra, out = self._api(method, path, query, headers, body, entry)
            except GoogleError as e:
                status, extra = e.status, dict(e.headers)
                out = json.dumps(e.body if e.body is not None else error_body(e.status, e.error,
                                                                               location=e.location)).encode()
        finally:
            with self._lock:
                self._in_flight -= 1
        entry["status"] = status
        entry["answer"] = json.loads(out) if out else None
        return status, extra, out

    def _fault(self, path):
        if self.down:
            raise GoogleError(503, "backend", body=error_body(503, "backend", message=ERROR_MESSAGES[503]))
        fault = self._take(self._faults, path)
        if fault:
            status, _, retry_after, body, _ = fault
            headers = {"Retry-After": retry_after} if retry_after is not None else {}
            if body is None:
                body = error_body(status, FAULT_ERRORS.get(status, "backend"), message=ERROR_MESSAGES.get(status))
            raise GoogleError(status, body=body, headers=headers)

    # ---- the token endpoint ----------------------------------------------------------------------------------------

    def _token_endpoint(self, method, headers, body, entry):
        def refuse(error, description, status=400):
            entry["auth_error"] = description
            raise GoogleError(status, body={"error": error, "error_description": description})

        if method != "POST":
            raise GoogleError(405, body={"error": "invalid_request", "error_description": "POST only"})
        try:
            self._fault("/token")
        except GoogleError as e:
            raise GoogleError(e.status, body={"error": "internal_failure", "error_description": "Backend Error"},
                              headers=e.headers)
        form = urllib.parse.parse_qs(body.decode("latin-1"))
        entry["json"] = {k: v[0] for k, v in form.items() if k != "assertion"}
        grant = form.get("grant_type", [""])[0]
        if grant != JWT_BEARER:
            refuse("unsupported_grant_type", f"Invalid grant_type: {grant}")
        parts = form.get("assertion", [""])[0].split(".")
        try:
            header, claims = (json.loads(b64url_decode(p)) for p in parts[:2])
            signature = b64url_decode(parts[2])
        except (ValueError, IndexError):
            refuse("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable "
                                    "timeframe. Check your iat and exp values in the JWT claim.")
        if header.get("alg") != "RS256":
            refuse("invalid_grant", "Invalid JWT Signature.")
        if claims.get("iss") != self.client_email:
            refuse("invalid_grant", "Invalid grant: account not found")
        if claims.get("aud") not in (self.token_uri, *GOOGLE_TOKEN_AUDIENCES):
            refuse("invalid_grant", f"Invalid JWT: Failed audience check. The expected value was {self.token_uri} "
                                    f"but the actual value was {claims.get('aud')}")
        now = time.time()
        iat, exp = claims.get("iat"), claims.get("exp")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (iat, exp)) or \
                exp - iat > ASSERTION_LIFETIME_MAX or iat > now + CLOCK_SKEW or exp < now - CLOCK_SKEW:
            refuse("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable "
                                    "timeframe. Check your iat and exp values in the JWT claim.")
        if header.get("kid") not in (None, self.private_key_id):
            refuse("invalid_grant", "Invalid JWT Signature.")
        try:
            self._sa_key.public_key().verify(signature, (parts[0] + "." + parts[1]).encode(), padding.PKCS1v15(),
                                             hashes.SHA256())
        except InvalidSignature:
            refuse("invalid_grant", "Invalid JWT Signature.")
        scopes = set(str(claims.get("scope") or "").split())
        if not scopes:
            refuse("invalid_scope", "Invalid OAuth scope or ID token audience provided.")
        entry["json"]["scope"] = " ".join(sorted(scopes))
        token = "ya29.c." + secrets.token_urlsafe(96)
        with self._lock:
            self._access[token] = {"expires": now + self.token_lifetime, "scopes": scopes, "email": self.client_email}
        return 200, {"cache-control": "no-cache, no-store, max-age=0, must-revalidate"}, json.dumps(
            {"access_token": token, "expires_in": self.token_lifetime, "token_type": "Bearer"}).encode()

    # ---- the Play Developer API ------------------------------------------------------------------------------------

    ROUTES = [
        ("GET", r"/androidpublisher/v3/applications/([^/]+)/purchases/products/([^/]+)/tokens/([^/:]+)",
         "purchases.products.get", "_products_get"),
        ("POST", r"/androidpublisher/v3/applications/([^/]+)/purchases/products/([^/]+)/tokens/([^/:]+):acknowledge",
         "purchases.products.acknowledge", "_products_acknowledge"),
        ("POST", r"/androidpublisher/v3/applications/([^/]+)/purchases/products/([^/]+)/tokens/([^/:]+):consume",
         "purchases.products.consume", "_products_consume"),
        ("GET", r"/androidpublisher/v3/applications/([^/]+)/purchases/subscriptionsv2/tokens/([^/:]+)",
         "purchases.subscriptionsv2.get", "_subscriptionsv2_get"),
        ("POST", r"/androidpublisher/v3/applications/([^/]+)/purchases/subscriptions/([^/]+)/tokens/([^/:]+)"
                 r":acknowledge", "purchases.subscriptions.acknowledge", "_subscriptions_acknowledge"),
        ("GET", r"/androidpublisher/v3/applications/([^/]+)/purchases/voidedpurchases",
         "purchases.voidedpurchases.list", "_voided_list"),
        ("GET", r"/androidpublisher/v3/applications/([^/]+)/orders/([^/:]+)", "orders.get", "_orders_get"),
        ("POST", r"/androidpublisher/v3/applications/([^/]+)/orders/([^/:]+):refund", "orders.refund", "_orders_refund"),
        ("POST", r"/androidpublisher/v3/applications/([^/]+)/purchases/subscriptionsv2/tokens/([^/:]+):revoke",
         "purchases.subscriptionsv2.revoke", "_subscriptionsv2_revoke"),
    ]

    def _api(self, method, path, query, headers, body, entry):
        for m, pattern, name, handler in self.ROUTES:
            match = re.fullmatch(pattern, path)
            if match and m == method:
                break
        else:
            raise GoogleError(404, "not_found", body=error_body(404, "not_found", message=f"Not Found: {path}"))
        args = [urllib.parse.unquote(g) for g in match.groups()]
        entry["method"], entry["packageName"] = name, args[0]
        if name in ("purchases.products.get", "purchases.products.acknowledge", "purchases.products.consume",
                    "purchases.subscriptions.acknowledge"):
            entry["productId"], entry["token"] = args[1], args[2]
        elif name in ("purchases.subscriptionsv2.get", "purchases.subscriptionsv2.revoke"):
            entry["token"] = args[1]
        if self.down:
            self._fault(path)
        self._authorize(headers.get("authorization"), entry)
        self._fault(path)
        self._check_body(name, body)
        entry["json"] = json.loads(body) if body else None
        if args[0] not in self.packages:
            raise GoogleError(401, "permission")  # the service account has no access to that app
        result = getattr(self, handler)(*args, query=query, body=entry["json"])
        return 200, {}, (json.dumps(result).encode() if result is not None else b"")

    # The request bodies' fields (ProductPurchasesAcknowledgeRequest, SubscriptionPurchasesAcknowledgeRequest).
    REQUEST_FIELDS = {"purchases.products.acknowledge": {"developerPayload": None},
                      "purchases.subscriptions.acknowledge": {"developerPayload": None, "externalAccountIds": {
                          "obfuscatedAccountId": None, "obfuscatedProfileId": None}},
                      "purchases.subscriptionsv2.revoke": {"revocationContext": {
                          "fullRefund": None, "proratedRefund": None, "itemBasedRefund": {"productId": None}}}}

    @classmethod
    def _check_body(cls, name, body):
        """400 as Google answers a payload that is not JSON or names a field the request message lacks."""
        if not body:
            return
        try:
            data = json.loads(body)
        except ValueError:
            data = None

        def unknown(value, fields):
            if not isinstance(value, dict):
                return "(the payload)"
            for key, sub in value.items():
                if key not in fields:
                    return key
                inner = unknown(sub, fields[key]) if fields[key] is not None else None
                if inner:
                    return f"{key}.{inner}"
            return None

        bad = "(not JSON)" if data is None else unknown(data, cls.REQUEST_FIELDS.get(name, {}))
        if bad:
            raise GoogleError(400, "invalid", body=error_body(400, "invalid", message=(
                f'Invalid JSON payload received. Unknown name "{bad}": Cannot find field.')))

    def _authorize(self, authorization, entry):
        """401 (Google's body and WWW-Authenticate) unless a bearer token issued here and not expired; 403 when it
        lacks the androidpublisher scope."""
        challenge = {"WWW-Authenticate": 'Bearer realm="https://accounts.google.com/", error="invalid_token"'}
        if not authorization or not authorization.lower().startswith("bearer "):
            entry["auth_error"] = "no bearer token"
            raise GoogleError(401, headers={"WWW-Authenticate": 'Bearer realm="https://accounts.google.com/"'},
                              body=self._auth_error_body("Request is missing required authentication credential. "
                                                         "Expected OAuth 2 access token, login cookie or other valid "
                                                         "authentication credential. See https://developers.google.com"
                                                         "/identity/sign-in/web/devconsole-project.",
                                                         "Login Required.", "required"))
        token = authorization[7:].strip()
        with self._lock:
            known = self._access.get(token)
        if known is None or known["expires"] <= time.time():
            entry["auth_error"] = "expired" if known else "unknown token"
            raise GoogleError(401, body=self._auth_error_body(ERROR_MESSAGES[401], "Invalid Credentials", "authError"),
                              headers=challenge)
        if SCOPE not in known["scopes"]:
            entry["auth_error"] = "scope"
            body = error_body(403, "scope", message=ERROR_MESSAGES[403])
            body["error"]["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                         "reason": "ACCESS_TOKEN_SCOPE_INSUFFICIENT", "domain": "googleapis.com",
                                         "metadata": {"service": "androidpublisher.googleapis.com",
                                                      "method": "google.play.publishing.v3.Purchases." + (
                                                          entry["method"] or "")}}]
            raise GoogleError(403, body=body, headers={"WWW-Authenticate": 'Bearer realm="https://accounts.google.com/", '
                                                       'error="insufficient_scope", scope="' + SCOPE + '"'})

    @staticmethod
    def _auth_error_body(message, item_message, reason):
        body = error_body(401, "permission", message=message)
        body["error"]["errors"] = [{"message": item_message, "domain": "global", "reason": reason,
                                    "location": "Authorization", "locationType": "header"}]
        return body

    def _product_record(self, package, product_id, token):
        with self._lock:
            record = self._products.get(token)
        if record is None or record["package"] != package:
            raise GoogleError(400, "invalid", location="token")
        if record["productId"] != product_id:
            raise GoogleError(400, "product_mismatch", location="token")
        return record

    def _products_get(self, package, product_id, token, *, query, body):
        """ProductPurchase: purchaseState 0/1/2, consumptionState, acknowledgementState, purchaseType only for
        test/promo/rewarded purchases, quantity only when more than one, productId and purchaseToken absent."""
        r = self._product_record(package, product_id, token)
        out = {"kind": "androidpublisher#productPurchase", "purchaseTimeMillis": str(r["purchaseMs"]),
               "purchaseState": PURCHASE_STATES[r["state"]], "consumptionState": int(r["consumed"]),
               "developerPayload": r["developerPayload"], "acknowledgementState": int(r["acknowledged"]),
               "regionCode": r["regionCode"], "refundableQuantity": r["refundableQuantity"]}
        if r["orderId"]:
            out["orderId"] = r["orderId"]
        if r["purchaseType"] is not None:
            out["purchaseType"] = r["purchaseType"]
        if r["quantity"] != 1:
            out["quantity"] = r["quantity"]
        if r["accountId"] is not None:
            out["obfuscatedExternalAccountId"] = r["accountId"]
        if r["profileId"] is not None:
            out["obfuscatedExternalProfileId"] = r["profileId"]
        return out

    def _products_acknowledge(self, package, product_id, token, *, query, body):
        """Acknowledges a PURCHASED purchase (again: no change); pending or canceled: 400 invalidPurchaseState."""
        r = self._product_record(package, product_id, token)
        with self._lock:
            if r["state"] != "purchased":
                raise GoogleError(400, "invalid_state", location="token")
            r["acknowledged"] = True
            if isinstance(body, dict) and body.get("developerPayload"):
                r["developerPayload"] = body["developerPayload"]
        return None

    def _products_consume(self, package, product_id, token, *, query, body):
        """Consumes a PURCHASED purchase (which acknowledges it too); pending, canceled or consumed already: 400
        invalidPurchaseState."""
        r = self._product_record(package, product_id, token)
        with self._lock:
            if r["state"] != "purchased" or r["consumed"]:
                raise GoogleError(400, "invalid_state", location="token")
            r.update(consumed=True, acknowledged=True)
        return None

    def _subscription_record(self, package, token):
        with self._lock:
            record = self._subs.get(token)
        if record is None or record["package"] != package:
            raise GoogleError(400, "invalid", location="token")
        if record["expiredMs"] is not None and record["expiredMs"] < now_ms() - EXPIRED_GONE:
            raise GoogleError(410, "gone")
        return record

    def _subscriptionsv2_get(self, package, token, *, query, body):
        """SubscriptionPurchaseV2, one line item."""
        r = self._subscription_record(package, token)
        with self._lock:
            r = dict(r)
        item = {"productId": r["productId"], "offerDetails": {"basePlanId": r["basePlanId"]}}
        if r["offerTags"]:
            item["offerDetails"]["offerTags"] = list(r["offerTags"])  # Google leaves empty repeated fields out
        if r["offerId"]:
            item["offerDetails"]["offerId"] = r["offerId"]
        if r["expiryMs"] is not None:
            item["expiryTime"] = rfc3339(r["expiryMs"])
        if r["orderId"]:
            item["latestSuccessfulOrderId"] = r["orderId"]
        if r["prepaid"]:
            item["prepaidPlan"] = {} if r["state"] == "SUBSCRIPTION_STATE_EXPIRED" else {
                "allowExtendAfterTime": rfc3339(max(r["startMs"] or now_ms(), (r["expiryMs"] or now_ms()) - 3 * DAY))}
        else:
            item["autoRenewingPlan"] = {"autoRenewEnabled": r["autoRenew"],
                                        "recurringPrice": money(r["priceMicros"], r["currency"])}
        if r["state"] != "SUBSCRIPTION_STATE_PENDING":
            item["offerPhase"] = {"basePrice": {}}
        if r["deferredProductId"]:
            item["deferredItemReplacement"] = {"productId": r["deferredProductId"]}
        if r["itemReplacement"]:
            item["itemReplacement"] = dict(r["itemReplacement"])
        out = {"kind": "androidpublisher#subscriptionPurchaseV2", "regionCode": r["regionCode"], "lineItems": [item],
               "subscriptionState": r["state"], "acknowledgementState": "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED"
               if r["acknowledged"] else "ACKNOWLEDGEMENT_STATE_PENDING",
               "etag": b64url(str(hash((r["state"], r["expiryMs"], r["orderId"], r["acknowledged"]))).encode())}
        if r["startMs"] is not None:
            out["startTime"] = rfc3339(r["startMs"])
        if r["orderId"] and self.send_latest_order_id:
            out["latestOrderId"] = r["orderId"]
        if r["linkedPurchaseToken"]:
            out["linkedPurchaseToken"] = r["linkedPurchaseToken"]
        ids = {k: v for k, v in (("obfuscatedExternalAccountId", r["accountId"]),
                                 ("obfuscatedExternalProfileId", r["profileId"])) if v is not None}
        if ids:
            out["externalAccountIdentifiers"] = ids
        if r["test"]:
            out["testPurchase"] = {}
        if r["paused"] and r["state"] == "SUBSCRIPTION_STATE_PAUSED":
            out["pausedStateContext"] = dict(r["paused"])
        if r["canceled"] and r["state"] in ("SUBSCRIPTION_STATE_CANCELED", "SUBSCRIPTION_STATE_EXPIRED"):
            out["canceledStateContext"] = json.loads(json.dumps(r["canceled"]))
        if r["state"] == "SUBSCRIPTION_STATE_IN_GRACE_PERIOD" and r["orderBase"]:
            out["inGracePeriodStateContext"] = {"renewalDeclined": {
                "pendingOrderId": f"{r['orderBase']}..{r['renewals']}"}}
        if r["state"] == "SUBSCRIPTION_STATE_ON_HOLD" and r["orderBase"]:
            out["onHoldStateContext"] = {"renewalDeclined": {"pendingOrderId": f"{r['orderBase']}..{r['renewals']}"}}
        return out

    def _subscriptions_acknowledge(self, package, subscription_id, token, *, query, body):
        """Acknowledges a subscription purchase (again: no change); pending ones: 400 invalidPurchaseState."""
        r = self._subscription_record(package, token)
        if r["productId"] != subscription_id and r.get("deferredProductId") != subscription_id:
            raise GoogleError(400, "subscription_mismatch", location="token")
        with self._lock:
            if r["state"] in ("SUBSCRIPTION_STATE_PENDING", "SUBSCRIPTION_STATE_PENDING_PURCHASE_CANCELED"):
                raise GoogleError(400, "invalid_state", location="token")
            r["acknowledged"] = True
            ids = (body or {}).get("externalAccountIds") or {}
            if r["accountId"] is None and ids.get("obfuscatedAccountId"):
                r["accountId"] = ids["obfuscatedAccountId"]
            if r["profileId"] is None and ids.get("obfuscatedProfileId"):
                r["profileId"] = ids["obfuscatedProfileId"]
        return None

    def _voided_list(self, package, *, query, body):
        """VoidedPurchasesListResponse: by the time Google saw each voided, in [startTime, endTime] (default and
        limit: 30 days back, now); type 0 one-time products only, 1 with subscriptions; maxResults a page (at most
        1000), continued with token (tokenPagination.nextPageToken), which carries the request's filters."""
        def one(name, default=None):
            values = query.get(name)
            return values[-1] if values else default

        now = now_ms()
        page_token = one("token")
        if page_token:
            try:
                state = json.loads(b64url_decode(page_token))
                start, end, kind, partial, offset = (state[k] for k in ("s", "e", "t", "q", "o"))
            except (ValueError, KeyError, TypeError):
                raise GoogleError(400, "page_token", location="token")
        else:
            try:
                start = int(one("startTime", now - VOIDED_WINDOW))
                end = int(one("endTime", now))
                kind = int(one("type", 0))
            except ValueError:
                raise GoogleError(400, "invalid")
            partial = one("includeQuantityBasedPartialRefund", "false").lower() == "true"
            offset = 0
            if start < now - VOIDED_WINDOW - 60000:
                raise GoogleError(400, "start_time", location="startTime")
            if end > now + 60000 or end < start:
                raise GoogleError(400, "end_time", location="endTime")
            if kind not in (0, 1):
                raise GoogleError(400, "invalid", location="type")
        try:
            size = int(one("maxResults", VOIDED_PAGE_MAX))
        except ValueError:
            raise GoogleError(400, "invalid", location="maxResults")
        size = max(1, min(size, VOIDED_PAGE_MAX))
        with self._lock:
            rows = [dict(e) for e, m in self._voided
                    if start <= m["seenMs"] <= end and (kind == 1 or not m["subscription"]) and
                    (partial or not m["partial"]) and self._owner(e["purchaseToken"]) == package]
        page = rows[offset:offset + size]
        out = {"pageInfo": {"totalResults": len(rows), "resultPerPage": len(page), "startIndex": offset},
               "voidedPurchases": page}
        if offset + size < len(rows):
            out["tokenPagination"] = {"nextPageToken": b64url(json.dumps(
                {"s": start, "e": end, "t": kind, "q": partial, "o": offset + size}).encode())}
        if not page:
            del out["voidedPurchases"]  # Google leaves an empty repeated field out
        return out

    def _owner(self, token):
        record = self._products.get(token) or self._subs.get(token)
        return record["package"] if record else None

    def _orders_refund(self, package, order_id, *, query, body):
        """orders.refund: the order voided as a developer's refund (voidedSource 1 developer, voidedReason 0 other),
        listed by voidedpurchases.list and notified (voidedPurchaseNotification); `revoke=true` also takes the item
        back: a one-time purchase CANCELED, a subscription whose latest order it is revoked (EXPIRED). An unknown
        order is 404; one voided before 400 orderAlreadyRefunded. Empty answer."""
        revoke = (query.get("revoke") or ["false"])[-1]
        if revoke not in ("true", "false"):
            raise GoogleError(400, "invalid", location="revoke")
        with self._lock:
            known = self._orders.get(order_id)
            record = (self._products if known and known[0] == "product" else self._subs).get(known[1]) if known else None
            if not known or not record or record.get("package") != package:
                raise GoogleError(404, "order_not_found")
            if any(e["orderId"] == order_id for e, _ in self._voided):
                raise GoogleError(400, "already_refunded")
        kind, token, _ = known
        if kind == "product":
            with self._lock:
                if revoke == "false":
                    # The money back, the item kept: listed as voided, still PURCHASED.
                    entry = {"purchaseToken": token, "orderId": order_id, "purchaseTimeMillis": str(record["purchaseMs"]),
                             "voidedTimeMillis": str(now_ms()), "voidedSource": VOIDED_SOURCES["developer"],
                             "voidedReason": VOIDED_REASONS["other"], "kind": "androidpublisher#voidedPurchase"}
                    self._voided.append((entry, {"seenMs": now_ms(), "subscription": False, "partial": False}))
                    record["refundableQuantity"] = 0
                    return None
            self.void(token, order_id=order_id, reason="other", source="developer")
            return None
        if revoke == "true":
            self.void(token, order_id=order_id, reason="other", source="developer")
        else:
            with self._lock:
                entry = {"purchaseToken": token, "orderId": order_id, "purchaseTimeMillis": str(
                    self._orders[order_id][2]["createMs"]), "voidedTimeMillis": str(now_ms()),
                    "voidedSource": VOIDED_SOURCES["developer"], "voidedReason": VOIDED_REASONS["other"],
                    "kind": "androidpublisher#voidedPurchase"}
                self._voided.append((entry, {"seenMs": now_ms(), "subscription": True, "partial": False}))
        return None

    def _subscriptionsv2_revoke(self, package, token, *, query, body):
        """purchases.subscriptionsv2.revoke: refunds the latest charge and ends access now (EXPIRED,
        SUBSCRIPTION_REVOKED); revocationContext is required and names one refund kind (fullRefund or
        proratedRefund; the fake voids the latest order either way); a subscription no longer live 400
        invalidPurchaseState."""
        context = (body or {}).get("revocationContext")
        if not isinstance(context, dict) or len([k for k in ("fullRefund", "proratedRefund", "itemBasedRefund") if k in context]) != 1:
            raise GoogleError(400, "invalid", location="revocationContext")
        r = self._subscription_record(package, token)
        if r["state"] not in ("SUBSCRIPTION_STATE_ACTIVE", "SUBSCRIPTION_STATE_CANCELED", "SUBSCRIPTION_STATE_IN_GRACE_PERIOD",
                              "SUBSCRIPTION_STATE_ON_HOLD", "SUBSCRIPTION_STATE_PAUSED"):
            raise GoogleError(400, "invalid_state", location="token")
        self.void(token, reason="other", source="developer")
        return {}  # RevokeSubscriptionPurchaseResponse

    def _orders_get(self, package, order_id, *, query, body):
        """Order: state, total, tax, line items with prices (Google's only source of a one-time purchase's price)."""
        with self._lock:
            known = self._orders.get(order_id)
            record = dict((self._products if known and known[0] == "product" else self._subs).get(
                known[1]) or {}) if known else None
        if not known or record.get("package") != package:
            raise GoogleError(404, "order_not_found")
        kind, token, order = known
        if kind == "product":
            price = record["priceMicros"] * record["quantity"]
            line = {"productId": record["productId"], "productTitle": record["productId"],
                    "listingPrice": money(record["priceMicros"], record["currency"]),
                    "oneTimePurchaseDetails": {"quantity": record["quantity"]}}
            refunded_part = record["refundableQuantity"] < record["quantity"]
            state = {"pending": "PENDING", "canceled": "CANCELED", "purchased": "PROCESSED"}[record["state"]]
            if record["refunded"]:
                state = "REFUNDED"
            elif refunded_part:
                state = "PARTIALLY_REFUNDED"
        else:
            price = order["priceMicros"]
            line = {"productId": order["productId"], "productTitle": order["productId"],
                    "listingPrice": money(order["priceMicros"], order["currency"]),
                    "subscriptionDetails": {"basePlanId": order["basePlanId"], "offerPhase": "BASE",
                                            "offerPhaseDetails": {"baseDetails": {}},
                                            "servicePeriodStartTime": rfc3339(order["startMs"]),
                                            "servicePeriodEndTime": rfc3339(order["endMs"])}}
            if order["offerId"]:
                line["subscriptionDetails"]["offerId"] = order["offerId"]
            with self._lock:
                voided = any(e["orderId"] == order_id for e, _ in self._voided)
            state = "REFUNDED" if voided else "PROCESSED"
        currency = record["currency"]
        line.update(total=money(price, currency), tax=money(0, currency))
        out = {"orderId": order_id, "purchaseToken": token, "state": state, "createTime": rfc3339(order["createMs"]),
               "lastEventTime": rfc3339(order["createMs"]), "buyerAddress": {"buyerCountry": record["regionCode"]},
               "total": money(price, currency), "tax": money(0, currency),
               "developerRevenueInBuyerCurrency": money(price * 85 // 100, currency), "lineItems": [line],
               "salesChannel": "IN_APP", "orderDetails": {"taxInclusive": True},
               "orderHistory": {"processedEvent": {"eventTime": rfc3339(order["createMs"])}}}
        return out

    # ---- the control API (/fake/...) -----------------------------------------------------------------------------

    def _control(self, method, path, query, body):
        """Runs on a worker thread: scripts the fake over HTTP (README: "The fake Google Play")."""
        try:
            data = json.loads(body) if body else {}
            if not isinstance(data, dict):
                raise ValueError("the body is a JSON object")
            result = self._control_route(method, path, data)
            return 200, {}, json.dumps(result).encode()
        except KeyError as e:
            return 404, {}, json.dumps({"error": f"not found: {e.args[0]}"}).encode()
        except (ValueError, TypeError) as e:
            return 400, {}, json.dumps({"error": str(e)}).encode()

    _PRODUCT_FIELDS = dict(packageName="package", token="token", state="state", quantity="quantity", test="test",
                           obfuscatedExternalAccountId="account_id", obfuscatedExternalProfileId="profile_id",
                           orderId="order_id", purchaseTimeMillis="purchase_ms", regionCode="region",
                           priceMicros="price_micros", currency="currency", acknowledged="acknowledged",
                           consumed="consumed", developerPayload="developer_payload", purchaseType="purchase_type",
                           notify="notify")
    _SUBSCRIPTION_FIELDS = dict(packageName="package", token="token", basePlanId="base_plan", offerId="offer_id",
                                offerTags="offer_tags", periodMillis="period_ms", state="state", test="test",
                                obfuscatedExternalAccountId="account_id", obfuscatedExternalProfileId="profile_id",
                                orderId="order_id", startTimeMillis="start_ms", expiryTimeMillis="expiry_ms",
                                regionCode="region", priceMicros="price_micros", currency="currency",
                                autoRenewing="auto_renew", prepaid="prepaid", acknowledged="acknowledged",
                                notify="notify")

    @staticmethod
    def _kwargs(data, fields, *, skip=()):
        unknown = set(data) - set(fields) - set(skip)
        if unknown:
            raise ValueError(f"unknown fields: {sorted(unknown)}")
        out = {}
        for name, arg in fields.items():
            if name in data:
                value = data[name]
                out[arg] = int(value) if name.endswith("Millis") or name == "priceMicros" else value
        return out

    def _control_route(self, method, path, data):
        parts = [urllib.parse.unquote(p) for p in path.split("/")[2:]]
        if method == "GET" and parts == ["calls"]:
            return {"calls": self.calls(), "maxInFlight": self.max_in_flight}
        if method == "DELETE" and parts == ["calls"]:
            self.reset_calls()
            return {}
        if method == "GET" and parts == ["config"]:
            return {"url": self.url, "ca": self.ca_path, "serviceAccount": self.service_account_path,
                    "tokenUri": self.token_uri, "jwksUrl": self.jwks_url, "pemCertsUrl": self.pem_certs_url,
                    "jwksPath": self.jwks_path, "pemCertsPath": self.pem_certs_path, "packages": sorted(self.packages),
                    "pushEmail": self.push_email, "rtdnUrl": self.rtdn_url, "flags": self.billingd_flags()}
        if method == "POST" and parts == ["config"]:
            for key, attr in (("rtdnUrl", "rtdn_url"), ("rtdnCa", "rtdn_ca"), ("pushAudience", "push_audience"),
                              ("sendLatestOrderId", "send_latest_order_id"), ("tokenLifetime", "token_lifetime")):
                if key in data:
                    setattr(self, attr, data[key])
            if "packages" in data:
                self.packages = set(data["packages"])
            return self._control_route("GET", path, {})
        if method != "POST":
            raise KeyError(path)
        if parts == ["products"]:
            return self.add_product(data["productId"], **self._kwargs(data, self._PRODUCT_FIELDS, skip=["productId"]))
        if len(parts) == 3 and parts[0] == "products":
            token, verb = parts[1], parts[2]
            if verb == "complete":
                return self.complete_product(token, order_id=data.get("orderId"))
            if verb == "cancel":
                return self.cancel_product(token)
            if verb == "void":
                return self.void(token, **self._void_kwargs(data))
            raise KeyError(path)
        if parts == ["subscriptions"]:
            return self.add_subscription(data["productId"], **self._kwargs(data, self._SUBSCRIPTION_FIELDS,
                                                                           skip=["productId"]))
        if len(parts) == 3 and parts[0] == "subscriptions":
            return self._subscription_verb(parts[1], parts[2], data)
        if parts == ["faults"]:
            self.fail_next(int(data["status"]), count=int(data.get("count", 1)), retry_after=data.get("retryAfter"),
                           path_prefix=data.get("pathPrefix"))
            return {}
        if parts == ["faults", "clear"]:
            self.clear_faults()
            return {}
        if parts == ["delay"]:
            self.delay(float(data["seconds"]), int(data.get("count", 1)), path_prefix=data.get("pathPrefix"))
            return {}
        if parts == ["down"]:
            self.set_down(data.get("down", True))
            return {"down": self.down}
        if parts == ["access-tokens", "revoke"]:
            return {"revoked": self.revoke_access_tokens()}
        if parts == ["access-tokens", "expire"]:
            return {"expired": self.expire_access_tokens()}
        if parts == ["push"]:
            return self._control_push(data)
        if parts == ["refund-unacknowledged"]:
            return {"voided": self.refund_unacknowledged(age_ms=int(data.get("ageMillis", 3 * DAY)))}
        if parts == ["redeliver"]:
            return self.redeliver(data["messageId"], data.get("url"), auth=data.get("auth", "valid"),
                                  ca=data.get("ca"))
        raise KeyError(path)

    @staticmethod
    def _void_kwargs(data):
        return {k: data[n] for n, k in (("orderId", "order_id"), ("voidedReason", "reason"),
                                        ("voidedSource", "source"), ("voidedQuantity", "quantity"),
                                        ("voidedTimeMillis", "voided_ms")) if n in data}

    def _subscription_verb(self, token, verb, data):
        simple = {"renew": self.renew, "restart": self.restart, "expire": self.expire, "resume": self.resume,
                  "hold": self.hold, "recover": self.recover, "complete": self.complete_subscription,
                  "cancel-pending": self.cancel_pending_subscription}
        if verb in simple:
            return simple[verb](token)
        if verb == "cancel":
            return self.cancel(token, by=data.get("by", "user"), reason=data.get("cancelSurveyReason"))
        if verb == "pause":
            return self.pause(token, resume_ms=data.get("autoResumeTimeMillis"))
        if verb == "grace":
            return self.grace(token, days=int(data.get("days", 3)))
        if verb == "revoke":
            return self.revoke(token, by=data.get("by", "developer"))
        if verb == "void":
            return self.void(token, **self._void_kwargs(data))
        if verb == "change":
            return self.change(token, data["productId"], base_plan=data.get("basePlanId"),
                               replacement_mode=data.get("replacementMode", "WITH_TIME_PRORATION"),
                               new_token=data.get("token"), price_micros=data.get("priceMicros"),
                               period_ms=data.get("periodMillis"))
        raise KeyError(f"/fake/subscriptions/{token}/{verb}")

    def _control_push(self, data):
        """POST /fake/push: {"url", "notification"} or a shorthand: {"url", "oneTimeProduct": {"token",
        "type"}} / {"subscription": {"token", "type"}} / {"voided": {"token", "orderId", "productType",
        "refundType"}} / {"test": true}; optional messageId, attributes, auth, audience, ca."""
        note = data.get("notification")
        if note is None:
            if "oneTimeProduct" in data:
                spec = data["oneTimeProduct"]
                note = self.one_time_notification(self.product(spec["token"]), spec.get("type",
                                                                                         "ONE_TIME_PRODUCT_PURCHASED"))
            elif "subscription" in data:
                spec = data["subscription"]
                note = self.subscription_notification(self.subscription(spec["token"]), spec["type"])
            elif "voided" in data:
                spec = data["voided"]
                record = self._products.get(spec["token"]) or self.subscription(spec["token"])
                note = self.voided_notification(spec["token"], spec.get("orderId", record["orderId"]),
                                                spec.get("productType", "PRODUCT_TYPE_SUBSCRIPTION" if
                                                         record["kind"] == "subscription" else "PRODUCT_TYPE_ONE_TIME"),
                                                spec.get("refundType", "REFUND_TYPE_FULL_REFUND"), record["package"])
            else:
                note = self.test_notification(data.get("packageName"))
        url = data.get("url") or self.rtdn_url
        if not url:
            raise ValueError("no url and no rtdnUrl configured")
        return self.push(url, note, message_id=data.get("messageId"), attributes=data.get("attributes"),
                         auth=data.get("auth", "valid"), audience=data.get("audience"), ca=data.get("ca", self.rtdn_ca))


def main():
    import argparse
    import signal
    parser = argparse.ArgumentParser(description="Serve a fake Google Play Developer API until SIGTERM or SIGINT.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tls-dir", required=True, help="directory for the CA, the service-account key file and "
                                                         "the push-token certificates (created if missing)")
    parser.add_argument("--package", action="append", help="package name served (repeatable); default "
                                                           "com.example.app")
    parser.add_argument("--rtdn-url", help="billingd's POST /googleplay/rtdn URL: changes made through the control "
                                           "API send their notifications there")
    parser.add_argument("--rtdn-ca", help="CA file for an https --rtdn-url")
    parser.add_argument("--push-audience", help="aud of push tokens (default: the URL pushed to)")
    args = parser.parse_args()
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)  # before the server thread starts: it inherits the mask
    fake = FakeGooglePlay(packages=args.package or ["com.example.app"], port=args.port, tls_dir=args.tls_dir,
                          rtdn_url=args.rtdn_url, rtdn_ca=args.rtdn_ca, push_audience=args.push_audience)
    audience = args.push_audience or args.rtdn_url or "<the URL Pub/Sub pushes to>"
    print(json.dumps({"url": fake.url, "ca": fake.ca_path, "serviceAccount": fake.service_account_path,
                      "jwks": fake.jwks_path, "pemCerts": fake.pem_certs_path, "pushEmail": fake.push_email}),
          flush=True)
    print(f"""# point billingd at it:
billingd ... --google-play-api-url {fake.url} --google-play-service-account {fake.service_account_path} \\
    --google-play-ca {fake.ca_path} --google-play-packages {",".join(sorted(fake.packages))} \\
    --rtdn-certs {fake.jwks_path} --rtdn-service-account {fake.push_email} --rtdn-audience {audience}
# script it (see IntegrationTests/README.md, "The fake Google Play"):
curl --cacert {fake.ca_path} -X POST {fake.url}/fake/products -d '{{"productId": "coins100"}}'""", flush=True)
    signal.sigwait(stop_signals)
    fake.stop()


if __name__ == "__main__":
    main()
