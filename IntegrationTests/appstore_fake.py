"""A local fake of Apple's App Store Server API, for testing billingd's client without Apple.

It serves the endpoints billingd uses over TLS on 127.0.0.1 with ALPN h2 and http/1.1 (hypercorn in a
background thread), checks each request's JWT the way Apple does, and answers with the paths, JSON field
names, error codes and signed data (ES256 JWS from a `billingctl teststore init` directory) of Apple's API.
Its faithfulness is checked against Apple's own Python library in test_appstore_fake.py; IntegrationTests/
README.md lists the interface and where the fake knowingly differs from Apple.

Standalone: python3 IntegrationTests/appstore_fake.py --store DIR --issuer-id I --key-id K --public-key PEM ..."""
import asyncio
import base64
import datetime
import hashlib
import ipaddress
import json
import os
import re
import socket
import ssl
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from appstore_mint import SUBSCRIPTION, Signer

AUDIENCE = "appstoreconnect-v1"
TOKEN_LIFETIME_MAX = 3600  # Apple refuses tokens valid for longer than 60 minutes
CLOCK_SKEW = 60
DEFAULT_GROUP = "21000000"  # subscriptionGroupIdentifier given to subscriptions seeded without one
HISTORY_DAYS = {"Production": 180, "Sandbox": 30}  # how far back notification history reaches

# TransactionHistoryRequest productType values and the `type` of the transactions they select.
PRODUCT_TYPES = {"AUTO_RENEWABLE": "Auto-Renewable Subscription", "NON_RENEWABLE": "Non-Renewing Subscription",
                 "CONSUMABLE": "Consumable", "NON_CONSUMABLE": "Non-Consumable"}
NOTIFICATION_TYPES = {
    "SUBSCRIBED", "DID_CHANGE_RENEWAL_PREF", "DID_CHANGE_RENEWAL_STATUS", "OFFER_REDEEMED", "DID_RENEW", "EXPIRED",
    "DID_FAIL_TO_RENEW", "GRACE_PERIOD_EXPIRED", "PRICE_INCREASE", "REFUND", "REFUND_DECLINED", "CONSUMPTION_REQUEST",
    "RENEWAL_EXTENDED", "REVOKE", "TEST", "RENEWAL_EXTENSION", "REFUND_REVERSED", "EXTERNAL_PURCHASE_TOKEN",
    "ONE_TIME_CHARGE", "RESCIND_CONSENT", "METADATA_UPDATE", "MIGRATION", "PRICE_CHANGE"}
NOTIFICATION_SUBTYPES = {
    "INITIAL_BUY", "RESUBSCRIBE", "DOWNGRADE", "UPGRADE", "AUTO_RENEW_ENABLED", "AUTO_RENEW_DISABLED", "VOLUNTARY",
    "BILLING_RETRY", "PRICE_INCREASE", "GRACE_PERIOD", "PENDING", "ACCEPTED", "BILLING_RECOVERY",
    "PRODUCT_NOT_FOR_SALE", "SUMMARY", "FAILURE", "UNREPORTED"}

# ConsumptionRequestV1 (PUT /inApps/v1/transactions/consumption): every field but refundPreference is required.
CONSUMPTION_V1_ENUMS = {  # field: (largest value, error)
    "consumptionStatus": (3, "INVALID_CONSUMPTION_STATUS"), "platform": (2, "INVALID_PLATFORM"),
    "deliveryStatus": (5, "INVALID_DELIVERY_STATUS"), "accountTenure": (7, "INVALID_ACCOUNT_TENURE"),
    "playTime": (7, "INVALID_PLAY_TIME"), "lifetimeDollarsRefunded": (7, "INVALID_LIFETIME_DOLLARS_REFUNDED"),
    "lifetimeDollarsPurchased": (7, "INVALID_LIFETIME_DOLLARS_PURCHASED"), "userStatus": (4, "INVALID_USER_STATUS"),
    "refundPreference": (3, "GENERAL_BAD_REQUEST")}
DELIVERY_STATUS_V2 = {"DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM", "UNDELIVERED_SERVER_OUTAGE",
                      "UNDELIVERED_OTHER"}
REFUND_PREFERENCE_V2 = {"DECLINE", "GRANT_FULL", "GRANT_PRORATED"}
UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")

# Apple's error codes, by the names of the APIError enum in Apple's libraries.
ERROR_CODES = dict(
    GENERAL_BAD_REQUEST=4000000, INVALID_REQUEST_REVISION=4000005, INVALID_TRANSACTION_ID=4000006,
    START_DATE_TOO_FAR_IN_PAST=4000012, START_DATE_AFTER_END_DATE=4000013, INVALID_PAGINATION_TOKEN=4000014,
    INVALID_START_DATE=4000015, INVALID_END_DATE=4000016, INVALID_NOTIFICATION_TYPE=4000018,
    MULTIPLE_FILTERS_SUPPLIED=4000019, INVALID_SORT=4000021, INVALID_PRODUCT_TYPE=4000022, INVALID_PRODUCT_ID=4000023,
    INVALID_SUBSCRIPTION_GROUP_IDENTIFIER=4000024, INVALID_IN_APP_OWNERSHIP_TYPE=4000026, INVALID_REVOKED=4000030,
    INVALID_STATUS=4000031, INVALID_ACCOUNT_TENURE=4000032, INVALID_APP_ACCOUNT_TOKEN=4000033,
    INVALID_CONSUMPTION_STATUS=4000034, INVALID_CUSTOMER_CONSENTED=4000035, INVALID_DELIVERY_STATUS=4000036,
    INVALID_LIFETIME_DOLLARS_PURCHASED=4000037, INVALID_LIFETIME_DOLLARS_REFUNDED=4000038, INVALID_PLATFORM=4000039,
    INVALID_PLAY_TIME=4000040, INVALID_SAMPLE_CONTENT_PROVIDED=4000041, INVALID_USER_STATUS=4000042,
    INVALID_TRANSACTION_TYPE_NOT_SUPPORTED=4000047, SERVER_NOTIFICATION_URL_NOT_FOUND=4040007,
    TEST_NOTIFICATION_NOT_FOUND=4040008, TRANSACTION_ID_NOT_FOUND=4040010, RATE_LIMIT_EXCEEDED=4290000,
    GENERAL_INTERNAL=5000000, GENERAL_INTERNAL_RETRYABLE=5000001,
    # Renewal-date extensions, Set App Account Token, Get App Transaction Info.
    INVALID_ORIGINAL_TRANSACTION_ID=4000008, INVALID_EXTEND_BY_DAYS=4000009, INVALID_EXTEND_REASON_CODE=4000010,
    INVALID_REQUEST_IDENTIFIER=4000011, INVALID_EMPTY_STOREFRONT_COUNTRY_CODE_LIST=4000027,
    INVALID_STOREFRONT_COUNTRY_CODE=4000028, INVALID_APP_ACCOUNT_TOKEN_UUID_ERROR=4000183,
    FAMILY_TRANSACTION_NOT_SUPPORTED_ERROR=4000185, TRANSACTION_ID_IS_NOT_ORIGINAL_TRANSACTION_ID_ERROR=4000187,
    SUBSCRIPTION_EXTENSION_INELIGIBLE=4030004, SUBSCRIPTION_MAX_EXTENSION=4030005,
    FAMILY_SHARED_SUBSCRIPTION_EXTENSION_INELIGIBLE=4030007, ORIGINAL_TRANSACTION_ID_NOT_FOUND=4040005,
    STATUS_REQUEST_NOT_FOUND=4040009, APP_TRANSACTION_DOES_NOT_EXIST_ERROR=4040019)
# errorMessage: these as Apple words them; the others spelled out from the name (clients go by errorCode).
ERROR_MESSAGES = dict(GENERAL_BAD_REQUEST="Bad request.", TRANSACTION_ID_NOT_FOUND="Transaction id not found.",
                      RATE_LIMIT_EXCEEDED="Rate limit exceeded.", GENERAL_INTERNAL="An unknown error occurred.",
                      GENERAL_INTERNAL_RETRYABLE="An unknown error occurred. Please try again.",
                      INVALID_TRANSACTION_ID="Invalid transaction id.",
                      INVALID_APP_ACCOUNT_TOKEN_UUID_ERROR="Invalid request. The app account token field must be a valid UUID.",
                      FAMILY_TRANSACTION_NOT_SUPPORTED_ERROR=(
                          "Invalid request. Family Sharing transactions aren't supported by this endpoint."),
                      TRANSACTION_ID_IS_NOT_ORIGINAL_TRANSACTION_ID_ERROR=(
                          "Invalid request. The transaction ID provided is not an original transaction ID."),
                      APP_TRANSACTION_DOES_NOT_EXIST_ERROR="No AppTransaction exists for the customer.")
EXTENSIONS_PER_YEAR = 2  # Apple extends one customer's subscription at most twice in 365 days
STOREFRONT_RE = re.compile(r"^[A-Z]{3}$")
FAULT_BODIES = {400: "GENERAL_BAD_REQUEST", 404: "TRANSACTION_ID_NOT_FOUND", 429: "RATE_LIMIT_EXCEEDED",
                500: "GENERAL_INTERNAL", 503: "GENERAL_INTERNAL_RETRYABLE"}


EMPTY_OK = object()  # a handler's answer: 200 with an empty body (Set App Account Token)


def error_body(name):
    """Apple's JSON error body for the error `name` (an APIError enum name)."""
    message = ERROR_MESSAGES.get(name) or name.replace("_", " ").capitalize() + "."
    return {"errorCode": ERROR_CODES[name], "errorMessage": message}


class _Loop(asyncio.SelectorEventLoop):
    """An event loop whose TLS servers give up a close_notify exchange after a moment, so that stop() is quick
    even while a client (a pooled `requests` connection, billingd's h2 connection) keeps its connection open."""

    async def create_server(self, *args, **kwargs):
        if kwargs.get("ssl") is not None:
            kwargs.setdefault("ssl_shutdown_timeout", 0.2)
        return await super().create_server(*args, **kwargs)


class APIError(Exception):
    """An answer other than success: HTTP status plus Apple's error body (or none, as for 401)."""

    def __init__(self, status, error=None):
        super().__init__(status, error)
        self.status = status
        self.error = error


def now_ms():
    return int(time.time() * 1000)


def b64url_decode(part):
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def jws_payload(jws):
    """The payload of a compact JWS, not verified (the fake reads its own signed data back)."""
    return json.loads(b64url_decode(jws.split(".")[1]))


def make_api_key(directory):
    """An App Store Connect API key pair like the one Apple hands out: EC P-256, PKCS#8 PEM (.p8).
    Returns (p8_path, public_key_pem)."""
    key = ec.generate_private_key(ec.SECP256R1())
    p8_path = os.path.join(directory, "AuthKey_FAKE.p8")
    with open(p8_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    public_pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
    return p8_path, public_pem


def _make_tls_files(directory):
    """A throwaway CA and a server certificate for 127.0.0.1 and localhost signed by it; returns (ca, cert, key)."""
    start = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)
    end = start + datetime.timedelta(days=30)

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "billingd fake App Store"),
                          x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("fake App Store CA")).issuer_name(name("fake App Store CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(name("127.0.0.1")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = tuple(os.path.join(directory, n) for n in ("ca.pem", "server.pem", "server.key"))
    for path, data in zip(paths, (ca.public_bytes(serialization.Encoding.PEM),
                                  cert.public_bytes(serialization.Encoding.PEM),
                                  key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()))):
        with open(path, "wb") as f:
            f.write(data)
    return paths


def _token(data):
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode().rstrip("=")


def _untoken(token):
    try:
        data = json.loads(b64url_decode(token))
    except (ValueError, TypeError):
        return None
    return data if isinstance(data, dict) else None


class FakeAppStore:
    """App Store Server API for one app in one environment, served until stop().

    Seed with add_transaction / add_notification; steer with fail_next / delay; inspect requests, consumption."""

    def __init__(self, store_dir, *, environment="Sandbox", bundle_id="com.example.app", app_apple_id=None,
                 issuer_id, key_id, api_public_key_pem, notification_url=None, notification_ca=None, page_size=20,
                 port=0):
        if environment not in ("Sandbox", "Production"):
            raise ValueError("environment is Sandbox or Production")
        self.environment = environment
        self.bundle_id = bundle_id
        self.app_apple_id = app_apple_id
        self.issuer_id = issuer_id
        self.key_id = key_id
        if isinstance(api_public_key_pem, str):
            api_public_key_pem = api_public_key_pem.encode()
        self._api_key = serialization.load_pem_public_key(api_public_key_pem)
        self.notification_url = notification_url
        self.notification_ca = notification_ca  # CA file for an https notification_url, or False not to verify
        self.page_size = page_size
        self.signer = Signer(store_dir)

        self.consumption = {}
        self._lock = threading.Lock()
        self._requests = []
        self._faults = []  # [status, remaining, retry_after, body, path_prefix]
        self._delays = []  # [seconds, remaining, path_prefix]
        self._seq = 0
        self._transactions = {}  # transactionId -> {"payload", "jws", "seq", "customer", "status"}
        self._originals = {}  # originalTransactionId -> customer
        self._renewals = {}  # originalTransactionId -> renewal payload
        self._orders = {}  # orderId -> [transactionId]
        self._notifications = []  # {"payload", "jws", "seq", "attempts"}
        self._tests = {}  # test notification token -> {"jws", "attempts"}
        self._deliveries = []
        self._app_transactions = {}  # customer -> signed app transaction
        self._extensions = {}  # originalTransactionId -> [(time ms, requestIdentifier, answer)]
        self._mass = {}  # (productId, requestIdentifier) -> MassExtendRenewalDateStatusResponse fields
        self._held = []  # mass extensions not carried out yet (hold_mass_extensions)
        self.hold_mass_extensions = False  # True: mass extensions stay incomplete until finish_mass_extensions()
        self.app_account_tokens = {}  # originalTransactionId -> the appAccountToken set through the API

        self._dir = tempfile.mkdtemp(prefix="fake-appstore-")
        self.ca_path, cert_path, key_path = _make_tls_files(self._dir)
        self._start(cert_path, key_path, port)

    # ---- lifecycle -------------------------------------------------------------------------------------------

    def _start(self, cert_path, key_path, port):
        from hypercorn.asyncio import serve
        from hypercorn.config import Config
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        self.port = sock.getsockname()[1]
        self.url = f"https://127.0.0.1:{self.port}"
        config = Config()
        config.bind = [f"fd://{sock.detach()}"]  # hypercorn owns and closes the listening socket
        config.certfile, config.keyfile = cert_path, key_path
        config.alpn_protocols = ["h2", "http/1.1"]
        config.graceful_timeout = 0.2  # for answers in flight at stop()
        config.accesslog = None
        config.loglevel = "WARNING"
        started = threading.Event()
        self._loop = _Loop()

        def quiet(loop, context):
            # A client that drops its connection, or holds it open through stop(), is no fault of the fake.
            if not isinstance(context.get("exception"), (TimeoutError, ConnectionError, ssl.SSLError)):
                loop.default_exception_handler(context)

        self._loop.set_exception_handler(quiet)
        self._stop_event = None
        self._error = None

        async def main():
            self._stop_event = asyncio.Event()
            started.set()
            await serve(self._app, config, shutdown_trigger=self._stop_event.wait)

        def run():
            try:
                self._loop.run_until_complete(main())
            except BaseException as e:  # reported by _start / stop
                self._error = e
                started.set()
            finally:
                self._loop.close()

        self._thread = threading.Thread(target=run, name=f"fake-appstore-{self.port}", daemon=True)
        self._thread.start()
        started.wait(10)
        # serve() starts listening right after the lifespan startup; wait until a connection is accepted.
        deadline = time.time() + 10
        while True:
            if self._error is not None:
                raise RuntimeError(f"fake App Store did not start: {self._error!r}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if time.time() > deadline:
                    self.stop()
                    raise RuntimeError("fake App Store did not start listening within 10 s")
                time.sleep(0.01)

    def stop(self):
        """Stops serving, waits for the server thread and any notification deliveries; idempotent."""
        if self._thread.is_alive() and self._stop_event is not None:
            self._loop.call_soon_threadsafe(self._stop_event.set)
        self._thread.join(10)
        for t in list(self._deliveries):
            t.join(10)
        if os.path.isdir(self._dir):
            for name in os.listdir(self._dir):
                os.unlink(os.path.join(self._dir, name))
            os.rmdir(self._dir)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # ---- seeding ---------------------------------------------------------------------------------------------

    def _next_seq(self):
        self._seq += 1
        return self._seq

    def _sign(self, payload):
        return self.signer.sign(payload)

    def _own_transaction(self, payload):
        payload = dict(payload, environment=self.environment, bundleId=self.bundle_id)
        if payload.get("type") == SUBSCRIPTION:
            payload.setdefault("subscriptionGroupIdentifier", DEFAULT_GROUP)
        return payload

    def add_transaction(self, payload, *, customer=None, order_id=None, renewal=None, status=None):
        """Adds (or replaces, by transactionId) a transaction; returns its JWS as the API will serve it.

        customer: whose history it joins (default: the customer of its originalTransactionId, else that id).
        order_id: makes it found by the order lookup. renewal: the JWSRenewalInfoDecodedPayload dict of its
        subscription. status: 1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked (default: derived
        from revocationDate / expiresDate)."""
        payload = self._own_transaction(payload)
        tid = str(payload["transactionId"])
        original = str(payload.get("originalTransactionId", tid))
        if not tid.isdigit() or not original.isdigit():
            raise ValueError("App Store transaction ids are decimal digits (Apple answers 4000006 otherwise)")
        if status is not None and status not in (1, 2, 3, 4, 5):
            raise ValueError("status is 1..5")
        jws = self._sign(payload)
        with self._lock:
            known = self._transactions.get(tid)
            if customer is not None:
                self._originals[original] = customer
            customer = customer or (known and known["customer"]) or self._originals.get(original) or original
            self._transactions[tid] = {"payload": payload, "jws": jws, "seq": self._next_seq(),
                                       "customer": customer, "status": status}
            self._originals.setdefault(original, customer)
            if renewal is not None:
                self._renewals[original] = dict(renewal, environment=self.environment)
            if order_id is not None:
                ids = self._orders.setdefault(order_id, [])
                if tid not in ids:
                    ids.append(tid)
        return jws

    def add_app_transaction(self, payload, *, customer):
        """The app transaction Get App Transaction Info answers for `customer` (a JWSAppTransactionDecodedPayload
        dict; receiptType and bundleId become the fake's); returns its JWS."""
        payload = dict(payload, receiptType=self.environment, bundleId=self.bundle_id)
        if self.app_apple_id is not None:
            payload["appAppleId"] = self.app_apple_id
        jws = self._sign(payload)
        with self._lock:
            self._app_transactions[customer] = jws
        return jws

    def add_notification(self, payload, *, send_attempts=None):
        """Adds a v2 notification (a ResponseBodyV2DecodedPayload dict) to the notification history; returns
        its signedPayload. data.signedTransactionInfo / signedRenewalInfo may be dicts (signed here) or JWS.
        send_attempts: [{"attemptDate", "sendAttemptResult"}] (default: one SUCCESS at signedDate)."""
        payload = self._own_notification(payload)
        jws = self._sign(payload)
        attempts = send_attempts if send_attempts is not None else [
            {"attemptDate": payload["signedDate"], "sendAttemptResult": "SUCCESS"}]
        with self._lock:
            self._notifications.append({"payload": payload, "jws": jws, "seq": self._next_seq(),
                                        "attempts": [dict(a) for a in attempts]})
        return jws

    def _own_notification(self, payload):
        payload = dict(payload)
        payload.setdefault("notificationUUID", str(uuid.uuid4()))
        payload.setdefault("version", "2.0")
        payload.setdefault("signedDate", now_ms())
        data = dict(payload.get("data") or {}, environment=self.environment, bundleId=self.bundle_id)
        if self.app_apple_id is not None:
            data["appAppleId"] = self.app_apple_id
        if isinstance(data.get("signedTransactionInfo"), dict):
            data["signedTransactionInfo"] = self._sign(self._own_transaction(data["signedTransactionInfo"]))
        if isinstance(data.get("signedRenewalInfo"), dict):
            data["signedRenewalInfo"] = self._sign(dict(data["signedRenewalInfo"], environment=self.environment))
        payload["data"] = data
        return payload

    # ---- fault controls and the request log ------------------------------------------------------------------

    def fail_next(self, status, *, count=1, retry_after=None, body=None, path_prefix=None):
        """The next `count` authenticated requests (under path_prefix, if given) get `status` with Apple's error
        body for it (429 4290000, 500 5000000, 503 5000001, 400 4000000, 404 4040010; else empty), or `body`
        (dict as JSON, bytes as is); retry_after adds a Retry-After header."""
        with self._lock:
            self._faults.append([status, count, retry_after, body, path_prefix])

    def delay(self, seconds, count=1, *, path_prefix=None):
        """Stalls the answers to the next `count` requests (under path_prefix, if given) by `seconds`."""
        with self._lock:
            self._delays.append([seconds, count, path_prefix])

    @property
    def requests(self):
        """A copy of the request log: dicts with method, path, query ({name: [values]}), json, jwt_header,
        jwt_claims, auth_error (None when accepted), status, time, http_version ("1.1" or "2")."""
        with self._lock:
            return list(self._requests)

    def reset_requests(self):
        with self._lock:
            self._requests.clear()

    def clear_faults(self):
        """Forgets the faults and delays not used up yet."""
        with self._lock:
            self._faults.clear()
            self._delays.clear()

    def _take(self, queue, path):
        with self._lock:
            for entry in queue:
                prefix = entry[-1]
                if prefix is None or path.startswith(prefix):
                    entry[1] -= 1
                    if entry[1] <= 0:
                        queue.remove(entry)
                    return entry
        return None

    # ---- HTTP ------------------------------------------------------------------------------------------------

    async def _app(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        status, extra_headers, out = await self._handle(scope, headers, body)
        response_headers = [(b"content-length", str(len(out)).encode())]
        if out:
            response_headers.append((b"content-type", b"application/json"))
        for k, v in extra_headers.items():
            response_headers.append((k.encode(), str(v).encode()))
        await send({"type": "http.response.start", "status": status, "headers": response_headers})
        await send({"type": "http.response.body", "body": out})

    async def _handle(self, scope, headers, body):
        path = scope["path"]
        query = urllib.parse.parse_qs(scope["query_string"].decode("latin-1"), keep_blank_values=True)
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = body.decode("latin-1")
        entry = {"method": scope["method"], "path": path, "query": query, "json": parsed, "jwt_header": None,
                 "jwt_claims": None, "auth_error": None, "status": None, "time": time.time(),
                 "http_version": scope.get("http_version")}
        with self._lock:
            self._requests.append(entry)
        stall = self._take(self._delays, path)
        if stall:
            await asyncio.sleep(stall[0])
        status, extra, out = self._answer(scope["method"], path, query, headers, body, parsed, entry)
        entry["status"] = status
        return status, extra, out

    def _answer(self, method, path, query, headers, body, parsed, entry):
        route = self._route(method, path)
        if route is None:
            return 404, {}, b""
        entry["auth_error"] = self._authenticate(headers.get("authorization"), entry)
        if entry["auth_error"]:
            return 401, {}, b""
        fault = self._take(self._faults, path)
        if fault:
            status, _, retry_after, fault_body, _ = fault
            extra = {"Retry-After": retry_after} if retry_after is not None else {}
            if fault_body is None and status in FAULT_BODIES:
                fault_body = error_body(FAULT_BODIES[status])
            if isinstance(fault_body, dict):
                fault_body = json.dumps(fault_body).encode()
            return status, extra, fault_body or b""
        handler, args = route
        try:
            result = handler(*args, query=query, body=parsed)
        except APIError as e:
            if e.error is None:
                return e.status, {}, b""
            return e.status, {}, json.dumps(error_body(e.error)).encode()
        if result is None:
            return 202, {}, b""
        if result is EMPTY_OK:
            return 200, {}, b""
        return 200, {}, json.dumps(result).encode()

    def _route(self, method, path):
        routes = [
            ("GET", r"/inApps/v1/transactions/([^/]+)", self._transaction_info),
            ("GET", r"/inApps/(?:v1|v2)/history/([^/]+)", self._history),
            ("GET", r"/inApps/v1/subscriptions/([^/]+)", self._statuses),
            ("POST", r"/inApps/v1/notifications/history", self._notification_history),
            ("PUT", r"/inApps/v1/transactions/consumption/([^/]+)", self._consumption_v1),
            ("PUT", r"/inApps/v2/transactions/consumption/([^/]+)", self._consumption_v2),
            ("GET", r"/inApps/v1/lookup/([^/]+)", self._lookup),
            ("POST", r"/inApps/v1/notifications/test", self._request_test),
            ("GET", r"/inApps/v1/notifications/test/([^/]+)", self._test_status),
            ("POST", r"/inApps/v1/subscriptions/extend/mass", self._extend_mass),
            ("GET", r"/inApps/v1/subscriptions/extend/mass/([^/]+)/([^/]+)", self._extend_mass_status),
            ("PUT", r"/inApps/v1/subscriptions/extend/([^/]+)", self._extend_one),
            ("PUT", r"/inApps/v1/transactions/([^/]+)/appAccountToken", self._set_app_account_token),
            ("GET", r"/inApps/v2/refund/lookup/([^/]+)", self._refund_history),
            ("GET", r"/inApps/v1/transactions/appTransactions/([^/]+)", self._app_transaction_info),
        ]
        for m, pattern, handler in routes:
            match = re.fullmatch(pattern, path)
            if match and m == method:
                return handler, [urllib.parse.unquote(g) for g in match.groups()]
        return None

    def _authenticate(self, authorization, entry):
        """None when the bearer token is one Apple accepts, else why not (recorded; the answer is a bare 401)."""
        if not authorization or not authorization.startswith("Bearer "):
            return "no bearer token"
        parts = authorization[len("Bearer "):].strip().split(".")
        if len(parts) != 3:
            return "not a compact JWS"
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            signature = b64url_decode(parts[2])
        except ValueError:
            return "undecodable"
        entry["jwt_header"], entry["jwt_claims"] = header, claims
        if not isinstance(header, dict) or not isinstance(claims, dict):
            return "undecodable"
        if header.get("alg") != "ES256":
            return "alg"
        if header.get("kid") != self.key_id:
            return "kid"
        if header.get("typ") != "JWT":
            return "typ"
        if claims.get("iss") != self.issuer_id:
            return "iss"
        if claims.get("aud") != AUDIENCE:
            return "aud"
        if claims.get("bid") != self.bundle_id:
            return "bid"
        now = time.time()
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(exp, (int, float)) or isinstance(exp, bool):
            return "exp"
        # Apple's own libraries send no iat; Apple takes the token's lifetime from now then.
        if iat is not None and (not isinstance(iat, (int, float)) or isinstance(iat, bool) or iat > now + CLOCK_SKEW):
            return "iat"
        if exp <= now:
            return "expired"
        if exp - (iat if iat is not None else now) > TOKEN_LIFETIME_MAX:
            return "lifetime"
        if len(signature) != 64:
            return "signature"
        der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
        try:
            self._api_key.verify(der, (parts[0] + "." + parts[1]).encode(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            return "signature"
        return None

    # ---- endpoints -------------------------------------------------------------------------------------------

    def _record(self, transaction_id, *, originals=False):
        """The stored transaction (or, with originals, the customer of an original id not stored itself)."""
        if not transaction_id.isdigit():
            raise APIError(400, "INVALID_TRANSACTION_ID")
        with self._lock:
            known = self._transactions.get(transaction_id)
            if known is None and originals and transaction_id in self._originals:
                known = {"customer": self._originals[transaction_id]}
        if known is None:
            raise APIError(404, "TRANSACTION_ID_NOT_FOUND")
        return known

    def _customer_of(self, transaction_id):
        return self._record(transaction_id, originals=True)["customer"]

    def _app_fields(self):
        fields = {"bundleId": self.bundle_id, "environment": self.environment}
        if self.app_apple_id is not None:
            fields["appAppleId"] = self.app_apple_id
        return fields

    def _transaction_info(self, transaction_id, *, query, body):
        return {"signedTransactionInfo": self._record(transaction_id)["jws"]}

    def _history(self, transaction_id, *, query, body):
        """The customer's transactions, in the order they were last changed (added or replaced), paged by revision."""
        customer = self._customer_of(transaction_id)

        def one(name, error):
            values = query.get(name, [])
            if len(values) > 1:
                raise APIError(400, error)
            return values[0] if values else None

        sort = one("sort", "INVALID_SORT") or "ASCENDING"
        if sort not in ("ASCENDING", "DESCENDING"):
            raise APIError(400, "INVALID_SORT")
        dates = []
        for name, error in (("startDate", "INVALID_START_DATE"), ("endDate", "INVALID_END_DATE")):
            value = one(name, error)
            if value is not None and not value.isdigit():
                raise APIError(400, error)
            dates.append(int(value) if value is not None else None)
        start, end = dates
        if start is not None and end is not None and start > end:
            raise APIError(400, "START_DATE_AFTER_END_DATE")
        types = query.get("productType", [])
        if any(t not in PRODUCT_TYPES for t in types):
            raise APIError(400, "INVALID_PRODUCT_TYPE")
        products = query.get("productId", [])
        if any(not p for p in products):
            raise APIError(400, "INVALID_PRODUCT_ID")
        groups = query.get("subscriptionGroupIdentifier", [])
        if any(not g for g in groups):
            raise APIError(400, "INVALID_SUBSCRIPTION_GROUP_IDENTIFIER")
        ownership = one("inAppOwnershipType", "INVALID_IN_APP_OWNERSHIP_TYPE")
        if ownership is not None and ownership not in ("FAMILY_SHARED", "PURCHASED"):
            raise APIError(400, "INVALID_IN_APP_OWNERSHIP_TYPE")
        revoked = one("revoked", "INVALID_REVOKED")
        if revoked is not None:
            if revoked.lower() not in ("true", "false"):
                raise APIError(400, "INVALID_REVOKED")
            revoked = revoked.lower() == "true"
        revision = one("revision", "INVALID_REQUEST_REVISION")
        cursor = None
        if revision is not None:
            cursor = (_untoken(revision) or {}).get("after")
            if not isinstance(cursor, int):
                raise APIError(400, "INVALID_REQUEST_REVISION")

        def keep(t):
            p = t["payload"]
            return (t["customer"] == customer
                    and (start is None or p.get("purchaseDate", 0) >= start)
                    and (end is None or p.get("purchaseDate", 0) < end)
                    and (not products or p.get("productId") in products)
                    and (not types or p.get("type") in [PRODUCT_TYPES[x] for x in types])
                    and (not groups or p.get("subscriptionGroupIdentifier") in groups)
                    and (ownership is None or p.get("inAppOwnershipType") == ownership)
                    and (revoked is None or ("revocationDate" in p) == revoked))

        descending = sort == "DESCENDING"
        with self._lock:
            rows = sorted((t for t in self._transactions.values() if keep(t)), key=lambda t: t["seq"],
                          reverse=descending)
        if cursor is not None:
            rows = [t for t in rows if (t["seq"] < cursor if descending else t["seq"] > cursor)]
        page, rest = rows[:self.page_size], rows[self.page_size:]
        last = page[-1]["seq"] if page else (cursor if cursor is not None else (self._seq + 1 if descending else 0))
        return {"revision": _token({"after": last}), "hasMore": bool(rest), **self._app_fields(),
                "signedTransactions": [t["jws"] for t in page]}

    def _status_of(self, t):
        if t["status"] is not None:
            return t["status"]
        p = t["payload"]
        if "revocationDate" in p:
            return 5
        return 2 if p.get("expiresDate", float("inf")) <= now_ms() else 1

    def _renewal_jws(self, t, status):
        p = t["payload"]
        original = str(p.get("originalTransactionId", p["transactionId"]))
        with self._lock:
            renewal = self._renewals.get(original)
        if renewal is None:
            renewal = {"originalTransactionId": original, "productId": p.get("productId"),
                       "autoRenewProductId": p.get("productId"), "autoRenewStatus": 1 if status in (1, 3, 4) else 0,
                       "signedDate": p.get("signedDate", now_ms()), "environment": self.environment}
            if "expiresDate" in p:
                renewal["renewalDate"] = p["expiresDate"]
            renewal = {k: v for k, v in renewal.items() if v is not None}
        return self._sign(renewal)

    def _statuses(self, transaction_id, *, query, body):
        """Per subscription group, the latest transaction of each of the customer's subscriptions."""
        customer = self._customer_of(transaction_id)
        wanted = set()
        for value in query.get("status", []):
            if value not in ("1", "2", "3", "4", "5"):
                raise APIError(400, "INVALID_STATUS")
            wanted.add(int(value))
        latest = {}
        with self._lock:
            rows = [t for t in self._transactions.values()
                    if t["customer"] == customer and t["payload"].get("type") == SUBSCRIPTION]
        for t in rows:
            p = t["payload"]
            original = str(p.get("originalTransactionId", p["transactionId"]))
            key = (p.get("purchaseDate", 0), t["seq"])
            if original not in latest or key > latest[original][0]:
                latest[original] = (key, t)
        groups = {}
        for original, (_, t) in sorted(latest.items(), key=lambda kv: kv[1][0]):
            status = self._status_of(t)
            if wanted and status not in wanted:
                continue
            group = t["payload"].get("subscriptionGroupIdentifier", DEFAULT_GROUP)
            groups.setdefault(group, []).append({"status": status, "originalTransactionId": original,
                                                 "signedTransactionInfo": t["jws"],
                                                 "signedRenewalInfo": self._renewal_jws(t, status)})
        return {"environment": self.environment, "bundleId": self.bundle_id,
                **({"appAppleId": self.app_apple_id} if self.app_apple_id is not None else {}),
                "data": [{"subscriptionGroupIdentifier": g, "lastTransactions": items} for g, items in groups.items()]}

    def _notification_history(self, *, query, body):
        """Notifications sent in [startDate, endDate), by signedDate, paged by paginationToken."""
        if not isinstance(body, dict):
            raise APIError(400, "GENERAL_BAD_REQUEST")
        start, end = body.get("startDate"), body.get("endDate")
        if not isinstance(start, int) or isinstance(start, bool):
            raise APIError(400, "INVALID_START_DATE")
        if not isinstance(end, int) or isinstance(end, bool):
            raise APIError(400, "INVALID_END_DATE")
        now = now_ms()
        if start < now - HISTORY_DAYS[self.environment] * 86400000:
            raise APIError(400, "START_DATE_TOO_FAR_IN_PAST")
        end = min(end, now)  # Apple reads an endDate in the future as now
        if start >= end:
            raise APIError(400, "START_DATE_AFTER_END_DATE")
        kind, subtype, tid = body.get("notificationType"), body.get("notificationSubtype"), body.get("transactionId")
        if kind is not None and kind not in NOTIFICATION_TYPES:
            raise APIError(400, "INVALID_NOTIFICATION_TYPE")
        if subtype is not None and (kind is None or subtype not in NOTIFICATION_SUBTYPES):
            raise APIError(400, "INVALID_NOTIFICATION_TYPE")
        if kind is not None and tid is not None:
            raise APIError(400, "MULTIPLE_FILTERS_SUPPLIED")
        only_failures = body.get("onlyFailures")
        if only_failures is not None and not isinstance(only_failures, bool):
            raise APIError(400, "GENERAL_BAD_REQUEST")
        customer = None
        if tid is not None:
            if not isinstance(tid, str) or not tid.isdigit():
                raise APIError(400, "INVALID_TRANSACTION_ID")
            try:
                customer = self._customer_of(tid)
            except APIError:
                customer = object()  # an unknown customer has no notifications
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
        cursor = None
        tokens = query.get("paginationToken", [])
        if tokens:
            data = _untoken(tokens[0]) or {}
            cursor = data.get("after")
            if data.get("request") != digest or not (isinstance(cursor, list) and len(cursor) == 2):
                raise APIError(400, "INVALID_PAGINATION_TOKEN")
            cursor = tuple(cursor)

        def keep(n):
            p = n["payload"]
            if not start <= p["signedDate"] < end:
                return False
            if kind is not None and p.get("notificationType") != kind:
                return False
            if subtype is not None and p.get("subtype") != subtype:
                return False
            if only_failures and any(a.get("sendAttemptResult") == "SUCCESS" for a in n["attempts"]):
                return False
            if customer is not None:
                signed = p.get("data", {}).get("signedTransactionInfo")
                if not signed:
                    return False
                t = jws_payload(signed)
                with self._lock:
                    known = self._transactions.get(str(t.get("transactionId")))
                    owner = known["customer"] if known else self._originals.get(str(t.get("originalTransactionId")))
                return owner == customer
            return True

        with self._lock:
            rows = list(self._notifications) + [dict(t, seq=0) for t in self._tests.values() if t.get("payload")]
        rows = sorted((n for n in rows if keep(n)), key=lambda n: (n["payload"]["signedDate"], n["seq"]))
        if cursor is not None:
            rows = [n for n in rows if (n["payload"]["signedDate"], n["seq"]) > cursor]
        page, rest = rows[:self.page_size], rows[self.page_size:]
        answer = {"notificationHistory": [{"signedPayload": n["jws"], "sendAttempts": list(n["attempts"])}
                                          for n in page], "hasMore": bool(rest)}
        if rest:
            answer["paginationToken"] = _token({"after": [page[-1]["payload"]["signedDate"], page[-1]["seq"]],
                                                "request": digest})
        return answer

    def _consumption_subject(self, transaction_id, body):
        """The transaction a consumption request is about, after the checks both versions share."""
        payload = self._record(transaction_id)["payload"]
        if not isinstance(body, dict):
            raise APIError(400, "GENERAL_BAD_REQUEST")
        if body.get("customerConsented") is not True:
            raise APIError(400, "INVALID_CUSTOMER_CONSENTED")
        if not isinstance(body.get("sampleContentProvided"), bool):
            raise APIError(400, "INVALID_SAMPLE_CONTENT_PROVIDED")
        return payload

    def _consumption_v1(self, transaction_id, *, query, body):
        """ConsumptionRequestV1: every field required but refundPreference; consumables and subscriptions only."""
        payload = self._consumption_subject(transaction_id, body)
        for field, (largest, error) in CONSUMPTION_V1_ENUMS.items():
            value = body.get(field)
            if value is None and field == "refundPreference":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= largest:
                raise APIError(400, error)
        token = body.get("appAccountToken")
        if not isinstance(token, str) or (token and not UUID_RE.match(token)):
            raise APIError(400, "INVALID_APP_ACCOUNT_TOKEN")
        if payload.get("type") not in ("Consumable", SUBSCRIPTION):
            raise APIError(400, "INVALID_TRANSACTION_TYPE_NOT_SUPPORTED")
        with self._lock:
            self.consumption[transaction_id] = body
        return None

    def _consumption_v2(self, transaction_id, *, query, body):
        """ConsumptionRequest (v2): customerConsented, sampleContentProvided, deliveryStatus required; any type."""
        payload = self._consumption_subject(transaction_id, body)
        if body.get("deliveryStatus") not in DELIVERY_STATUS_V2:
            raise APIError(400, "INVALID_DELIVERY_STATUS")
        percentage = body.get("consumptionPercentage")
        if percentage is not None:
            if not isinstance(percentage, int) or isinstance(percentage, bool) or not 0 <= percentage <= 100000:
                raise APIError(400, "GENERAL_BAD_REQUEST")
            if body["deliveryStatus"] != "DELIVERED" and percentage != 0:
                raise APIError(400, "GENERAL_BAD_REQUEST")
            if body.get("refundPreference") == "GRANT_PRORATED" and payload.get("type") == SUBSCRIPTION:
                raise APIError(400, "GENERAL_BAD_REQUEST")
        if body.get("refundPreference") is not None and body["refundPreference"] not in REFUND_PREFERENCE_V2:
            raise APIError(400, "GENERAL_BAD_REQUEST")
        with self._lock:
            self.consumption[transaction_id] = body
        return None

    def _lookup(self, order_id, *, query, body):
        with self._lock:
            ids = self._orders.get(order_id, [])
            signed = [self._transactions[t]["jws"] for t in ids]
        if not signed:
            return {"status": 1}
        return {"status": 0, "signedTransactions": signed}

    def _request_test(self, *, query, body):
        """Signs a TEST notification and posts it to notification_url in the background, like Apple."""
        if not self.notification_url:
            raise APIError(404, "SERVER_NOTIFICATION_URL_NOT_FOUND")
        payload = self._own_notification({"notificationType": "TEST"})
        token = f"{uuid.uuid4()}_{payload['signedDate']}"
        record = {"payload": payload, "jws": self._sign(payload), "attempts": []}
        with self._lock:
            self._tests[token] = record
        thread = threading.Thread(target=self._deliver, args=(record,), name="fake-appstore-notify", daemon=True)
        self._deliveries.append(thread)
        thread.start()
        return {"testNotificationToken": token}

    def _deliver(self, record):
        data = json.dumps({"signedPayload": record["jws"]}).encode()
        request = urllib.request.Request(self.notification_url, data=data, method="POST",
                                         headers={"Content-Type": "application/json"})
        context = None
        if self.notification_url.startswith("https:"):
            if self.notification_ca is False:
                context = ssl._create_unverified_context()
            else:
                context = ssl.create_default_context(cafile=self.notification_ca)
        try:
            with urllib.request.urlopen(request, timeout=5, context=context) as response:
                result = "SUCCESS" if response.status == 200 else "UNSUCCESSFUL_HTTP_RESPONSE_CODE"
        except urllib.error.HTTPError:
            result = "UNSUCCESSFUL_HTTP_RESPONSE_CODE"
        except urllib.error.URLError as e:
            reason = e.reason
            if isinstance(reason, ssl.SSLError):
                result = "TLS_ISSUE"
            elif isinstance(reason, (socket.timeout, TimeoutError)):
                result = "TIMED_OUT"
            elif isinstance(reason, ConnectionRefusedError):
                result = "NO_RESPONSE"
            else:
                result = "OTHER"
        except (socket.timeout, TimeoutError):
            result = "TIMED_OUT"
        except (ConnectionError, OSError):
            result = "PREMATURE_CLOSE"
        with self._lock:
            record["attempts"].append({"attemptDate": now_ms(), "sendAttemptResult": result})

    def _test_status(self, token, *, query, body):
        with self._lock:
            record = self._tests.get(token)
            if record is None:
                raise APIError(404, "TEST_NOTIFICATION_NOT_FOUND")
            return {"signedPayload": record["jws"], "sendAttempts": list(record["attempts"])}

    # ---- renewal-date extensions, app account tokens, refunds, app transactions -------------------------------

    def finish_mass_extensions(self):
        """Carries out the mass extensions held back by hold_mass_extensions (Apple works through them later)."""
        with self._lock:
            held, self._held = self._held, []
        for request in held:
            self._run_mass(request)

    def _notify(self, payload):
        """Signs a notification, keeps it in the history and, with notification_url, posts it as Apple does."""
        payload = self._own_notification(payload)
        record = {"payload": payload, "jws": self._sign(payload), "attempts": []}
        with self._lock:
            record["seq"] = self._next_seq()
            self._notifications.append(record)
        if self.notification_url:
            thread = threading.Thread(target=self._deliver, args=(record,), name="fake-appstore-notify", daemon=True)
            self._deliveries.append(thread)
            thread.start()
        return record["jws"]

    @staticmethod
    def _extension_fields(body):
        """extendByDays, extendReasonCode and requestIdentifier of an extension request, checked as Apple does."""
        if not isinstance(body, dict):
            raise APIError(400, "GENERAL_BAD_REQUEST")
        days, reason, request_id = body.get("extendByDays"), body.get("extendReasonCode"), body.get("requestIdentifier")
        if not isinstance(days, int) or isinstance(days, bool) or not 1 <= days <= 90:
            raise APIError(400, "INVALID_EXTEND_BY_DAYS")
        if not isinstance(reason, int) or isinstance(reason, bool) or not 0 <= reason <= 3:
            raise APIError(400, "INVALID_EXTEND_REASON_CODE")
        if not isinstance(request_id, str) or not request_id or len(request_id) > 128:
            raise APIError(400, "INVALID_REQUEST_IDENTIFIER")
        return days, reason, request_id

    def _latest_of(self, original):
        """The latest transaction (by purchaseDate) of an original transaction id, or None."""
        with self._lock:
            family = [t for t in self._transactions.values()
                      if str(t["payload"].get("originalTransactionId", t["payload"]["transactionId"])) == original]
        return max(family, key=lambda t: (t["payload"].get("purchaseDate", 0), t["seq"])) if family else None

    def _extend(self, latest, days, request_id, now):
        """Moves a subscription's expiry `days` later: a newer signed transaction and renewal info, and the
        RENEWAL_EXTENDED notification. Answers ExtendRenewalDateResponse, or raises Apple's 403."""
        p = latest["payload"]
        original = str(p.get("originalTransactionId", p["transactionId"]))
        if p.get("inAppOwnershipType") == "FAMILY_SHARED":
            raise APIError(403, "FAMILY_SHARED_SUBSCRIPTION_EXTENSION_INELIGIBLE")
        status = self._status_of(latest)
        if p.get("type") != SUBSCRIPTION or status not in (1, 4) or p.get("expiresDate", 0) <= now:
            raise APIError(403, "SUBSCRIPTION_EXTENSION_INELIGIBLE")  # expired, revoked, billing retry, lapsed grace
        with self._lock:
            done = self._extensions.setdefault(original, [])
            if len([e for e in done if e[0] > now - 365 * 86400000]) >= EXTENSIONS_PER_YEAR:
                raise APIError(403, "SUBSCRIPTION_MAX_EXTENSION")
        extended = dict(p, expiresDate=p["expiresDate"] + days * 86400000, signedDate=now)
        jws = self._sign(extended)
        with self._lock:
            self._transactions[str(p["transactionId"])] = dict(latest, payload=extended, jws=jws, seq=self._next_seq())
            renewal = self._renewals.get(original)
            if renewal is not None:
                self._renewals[original] = dict(renewal, renewalDate=extended["expiresDate"], signedDate=now)
        answer = {"originalTransactionId": original,
                  "webOrderLineItemId": str(p.get("webOrderLineItemId", p["transactionId"])),
                  "success": True, "effectiveDate": extended["expiresDate"]}
        with self._lock:
            self._extensions[original].append((now, request_id, answer))
        renewal_info = self._renewals.get(original) or {
            "originalTransactionId": original, "productId": p.get("productId"), "autoRenewProductId": p.get("productId"),
            "autoRenewStatus": 1, "renewalDate": extended["expiresDate"], "signedDate": now}
        self._notify({"notificationType": "RENEWAL_EXTENDED", "signedDate": now,
                      "data": {"signedTransactionInfo": jws, "signedRenewalInfo": dict(renewal_info)}})
        return answer

    def _extend_one(self, original, *, query, body):
        """Extend a Subscription Renewal Date: one subscription, by its original transaction id; a request
        identifier sent again for it answers what it answered the first time."""
        days, _, request_id = self._extension_fields(body)
        if not original.isdigit():
            raise APIError(400, "INVALID_ORIGINAL_TRANSACTION_ID")
        latest = self._latest_of(original)
        if latest is None:
            raise APIError(404, "ORIGINAL_TRANSACTION_ID_NOT_FOUND")
        with self._lock:
            for _, seen, answer in self._extensions.get(original, []):
                if seen == request_id:
                    return dict(answer)
        return self._extend(latest, days, request_id, now_ms())

    def _extend_mass(self, *, query, body):
        """Extend Subscription Renewal Dates for All Active Subscribers: every subscription whose latest transaction
        is of productId (in the storefronts given), each as _extend_one would; a request identifier is a UUID."""
        days, reason, request_id = self._extension_fields(body)
        if not UUID_RE.match(request_id):
            raise APIError(400, "INVALID_REQUEST_IDENTIFIER")
        product = body.get("productId")
        if not isinstance(product, str) or not product:
            raise APIError(400, "INVALID_PRODUCT_ID")
        storefronts = body.get("storefrontCountryCodes")
        if storefronts is not None:
            if not isinstance(storefronts, list) or not storefronts:
                raise APIError(400, "INVALID_EMPTY_STOREFRONT_COUNTRY_CODE_LIST")
            if not all(isinstance(c, str) and STOREFRONT_RE.match(c) for c in storefronts):
                raise APIError(400, "INVALID_STOREFRONT_COUNTRY_CODE")
        key = (product, request_id.lower())
        with self._lock:
            if key in self._mass:
                return {"requestIdentifier": request_id}
            self._mass[key] = {"requestIdentifier": request_id, "complete": False, "succeededCount": 0, "failedCount": 0}
            request = {"key": key, "product": product, "days": days, "storefronts": storefronts,
                       "request_id": request_id}
            if self.hold_mass_extensions:
                self._held.append(request)
                return {"requestIdentifier": request_id}
        self._run_mass(request)
        return {"requestIdentifier": request_id}

    def _run_mass(self, request):
        now = now_ms()
        with self._lock:
            originals = {str(t["payload"].get("originalTransactionId", t["payload"]["transactionId"]))
                         for t in self._transactions.values() if t["payload"].get("productId") == request["product"]}
        succeeded = failed = 0
        for original in sorted(originals):
            latest = self._latest_of(original)
            p = latest["payload"]
            if p.get("productId") != request["product"] or self._status_of(latest) not in (1, 4) or \
                    p.get("expiresDate", 0) <= now:
                continue  # not an active subscriber of the product
            if request["storefronts"] is not None and p.get("storefront") not in request["storefronts"]:
                continue
            try:
                self._extend(latest, request["days"], request["request_id"], now)
                succeeded += 1
            except APIError:
                failed += 1
                self._notify({"notificationType": "RENEWAL_EXTENSION", "subtype": "FAILURE", "signedDate": now,
                              "data": {"signedTransactionInfo": latest["jws"]}})
        with self._lock:
            self._mass[request["key"]] = {"requestIdentifier": request["request_id"], "complete": True,
                                          "completeDate": now_ms(), "succeededCount": succeeded, "failedCount": failed}
        self._notify_summary(request, succeeded, failed)

    def _notify_summary(self, request, succeeded, failed):
        """RENEWAL_EXTENSION SUMMARY: a `summary` object where other notifications carry `data`."""
        summary = {"requestIdentifier": request["request_id"], "environment": self.environment,
                   "bundleId": self.bundle_id, "productId": request["product"],
                   "succeededCount": succeeded, "failedCount": failed}
        if self.app_apple_id is not None:
            summary["appAppleId"] = self.app_apple_id
        if request["storefronts"] is not None:
            summary["storefrontCountryCodes"] = list(request["storefronts"])
        payload = {"notificationType": "RENEWAL_EXTENSION", "subtype": "SUMMARY", "notificationUUID": str(uuid.uuid4()),
                   "version": "2.0", "signedDate": now_ms(), "summary": summary}
        record = {"payload": payload, "jws": self._sign(payload), "attempts": []}
        with self._lock:
            record["seq"] = self._next_seq()
            self._notifications.append(record)
        if self.notification_url:
            thread = threading.Thread(target=self._deliver, args=(record,), name="fake-appstore-notify", daemon=True)
            self._deliveries.append(thread)
            thread.start()

    def _extend_mass_status(self, product, request_id, *, query, body):
        """Get Status of Subscription Renewal Date Extensions: by productId and requestIdentifier (a UUID)."""
        if not UUID_RE.match(request_id):
            raise APIError(400, "INVALID_REQUEST_IDENTIFIER")
        with self._lock:
            status = self._mass.get((product, request_id.lower()))
        if status is None:
            raise APIError(404, "STATUS_REQUEST_NOT_FOUND")
        return dict(status)

    def _set_app_account_token(self, original, *, query, body):
        """Set App Account Token: every transaction of the purchase (and its renewal info) carries the token from
        now on, signed anew; the answer is 200 without a body."""
        token = body.get("appAccountToken") if isinstance(body, dict) else None
        if not isinstance(token, str) or not UUID_RE.match(token):
            raise APIError(400, "INVALID_APP_ACCOUNT_TOKEN_UUID_ERROR")
        known = self._record(original)
        p = known["payload"]
        if str(p.get("originalTransactionId", p["transactionId"])) != original:
            raise APIError(400, "TRANSACTION_ID_IS_NOT_ORIGINAL_TRANSACTION_ID_ERROR")
        if p.get("inAppOwnershipType") == "FAMILY_SHARED":
            raise APIError(400, "FAMILY_TRANSACTION_NOT_SUPPORTED_ERROR")
        now = now_ms()
        with self._lock:
            family = [t for t in self._transactions.values()
                      if str(t["payload"].get("originalTransactionId", t["payload"]["transactionId"])) == original]
        for t in family:
            payload = dict(t["payload"], appAccountToken=token, signedDate=now)
            jws = self._sign(payload)
            with self._lock:
                self._transactions[str(payload["transactionId"])] = dict(t, payload=payload, jws=jws, seq=self._next_seq())
        with self._lock:
            if original in self._renewals:
                self._renewals[original] = dict(self._renewals[original], appAccountToken=token, signedDate=now)
            self.app_account_tokens[original] = token
        return EMPTY_OK

    def _refund_history(self, transaction_id, *, query, body):
        """Get Refund History (v2): the customer's revoked transactions, oldest revocationDate first, paged by
        revision (the revision of the last page brings only refunds made after it)."""
        customer = self._customer_of(transaction_id)
        revisions = query.get("revision", [])
        cursor = None
        if revisions:
            cursor = (_untoken(revisions[0]) or {}).get("after")
            if len(revisions) > 1 or not (isinstance(cursor, list) and len(cursor) == 2):
                raise APIError(400, "INVALID_REQUEST_REVISION")
            cursor = tuple(cursor)
        with self._lock:
            rows = sorted(((t["payload"]["revocationDate"], t["seq"], t["jws"]) for t in self._transactions.values()
                           if t["customer"] == customer and "revocationDate" in t["payload"]))
        if cursor is not None:
            rows = [r for r in rows if r[:2] > cursor]
        page, rest = rows[:self.page_size], rows[self.page_size:]
        last = list(page[-1][:2]) if page else (list(cursor) if cursor is not None else [0, 0])
        return {"signedTransactions": [r[2] for r in page], "revision": _token({"after": last}), "hasMore": bool(rest)}

    def _app_transaction_info(self, transaction_id, *, query, body):
        """Get App Transaction Info: the app transaction of the customer the transaction id belongs to."""
        customer = self._customer_of(transaction_id)
        with self._lock:
            jws = self._app_transactions.get(customer)
        if jws is None:
            raise APIError(404, "APP_TRANSACTION_DOES_NOT_EXIST_ERROR")
        return {"signedAppTransactionInfo": jws}


def main():
    import argparse
    import signal
    parser = argparse.ArgumentParser(description="Serve a fake App Store Server API until SIGTERM or SIGINT.")
    parser.add_argument("--store", required=True, help="test store directory (billingctl teststore init DIR)")
    parser.add_argument("--issuer-id", required=True)
    parser.add_argument("--key-id", required=True)
    parser.add_argument("--public-key", required=True, help="PEM public key of the API key (.p8) clients sign with")
    parser.add_argument("--bundle-id", default="com.example.app")
    parser.add_argument("--app-apple-id", type=int)
    parser.add_argument("--environment", default="Sandbox", choices=["Sandbox", "Production"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--notification-url")
    parser.add_argument("--notification-ca", help="CA file for an https --notification-url")
    args = parser.parse_args()
    with open(args.public_key, "rb") as f:
        public_pem = f.read()
    fake = FakeAppStore(args.store, environment=args.environment, bundle_id=args.bundle_id,
                        app_apple_id=args.app_apple_id, issuer_id=args.issuer_id, key_id=args.key_id,
                        api_public_key_pem=public_pem, notification_url=args.notification_url,
                        notification_ca=args.notification_ca, port=args.port)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    print(json.dumps({"url": fake.url, "ca": fake.ca_path, "environment": fake.environment}), flush=True)
    try:
        done.wait()
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
