"""App Store Server Notifications v2 end to end: `POST /appstore/notifications` over HTTP/1.1, h2c and TLS, with
notifications minted here in Python (ES256 JWS with the `cryptography` package and the key files of a test-store
directory), so the client shares no code with billingd. The full purchase/refund flow, the bad-delivery table
(nothing recorded), ignored environments, unknown types, real Apple sandbox notifications, metrics, logs, draining."""
import base64
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
import uuid

import grpc
import h2.config
import h2.connection
import h2.events
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from conftest import ROOT, Billingd, binary, free_port
from helpers import billing, expect_error, pb

FIXTURES = os.path.join(os.path.dirname(ROOT), "shared", "fixtures", "appstore")
REAL = os.path.join(FIXTURES, "real-jws")
PATH = "/appstore/notifications"
BUNDLE = "com.example.app"
PRODUCT = "com.example.premium"
SUB = "com.example.pro.monthly"


def now_ms():
    return int(time.time() * 1000)


def b64url(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


# --- minting -------------------------------------------------------------------------------------------------------

class Mint:
    """Signs JWS the way the App Store does, with the leaf key and chain of a test-store directory."""

    def __init__(self, store):
        def der(name):
            cert = x509.load_pem_x509_certificate(open(os.path.join(store, name), "rb").read())
            return base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()
        self.x5c = [der("leaf.pem"), der("intermediate.pem"), der("root.pem")]
        self.key = serialization.load_pem_private_key(open(os.path.join(store, "leaf.key"), "rb").read(), password=None)

    def jws(self, payload):
        header = b64url(json.dumps({"alg": "ES256", "x5c": self.x5c}).encode())
        body = b64url(json.dumps(payload, separators=(",", ":")).encode())
        r, s = decode_dss_signature(self.key.sign(f"{header}.{body}".encode(), ec.ECDSA(hashes.SHA256())))
        return f"{header}.{body}.{b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    def transaction(self, tid, product=PRODUCT, *, original=None, kind="Non-Consumable", bundle=BUNDLE, environment="Xcode",
                    token=None, purchase=None, expires=None, revoked=None, signed=None, **extra):
        t = {"transactionId": tid, "originalTransactionId": original or tid, "productId": product, "type": kind,
             "bundleId": bundle, "environment": environment, "purchaseDate": purchase or now_ms() - 60_000, "quantity": 1,
             "signedDate": signed or now_ms() - 50_000, "inAppOwnershipType": "PURCHASED"}
        if token:
            t["appAccountToken"] = token
        if expires:
            t["expiresDate"] = expires
        if revoked:
            t["revocationDate"] = revoked
            t["revocationReason"] = 0
        t.update(extra)
        return self.jws(t)

    def renewal(self, original, product=SUB, *, auto_renew=1, signed=None, environment="Xcode", grace=None, **extra):
        """Signed renewal info; extra fields by Apple's names (autoRenewProductId, isInBillingRetryPeriod, ...)."""
        r = {"originalTransactionId": original, "productId": product, "autoRenewProductId": product, "autoRenewStatus": auto_renew,
             "signedDate": signed or now_ms() - 50_000, "environment": environment}
        if grace:
            r["gracePeriodExpiresDate"] = grace
        r.update(extra)
        return self.jws(r)

    def app_transaction(self, *, bundle=BUNDLE, environment="Xcode", created=None, **extra):
        """A signed app transaction (JWSAppTransaction); its receiptType is the environment."""
        created = created or now_ms() - 50_000
        a = {"bundleId": bundle, "receiptType": environment, "appAppleId": 1234567890, "applicationVersion": "1",
             "originalApplicationVersion": "1", "originalPurchaseDate": created - 86_400_000, "receiptCreationDate": created}
        a.update(extra)
        return self.jws(a)

    def notification(self, ntype, *, subtype=None, nid=None, signed=None, bundle=BUNDLE, environment="Xcode",
                     transaction=None, renewal=None, status=None, extra=None, data_extra=None, app_transaction=None):
        """A signed notification; RESCIND_CONSENT carries `appData` (with app_transaction, when given) instead of `data`."""
        data = {"bundleId": bundle, "environment": environment, "appAppleId": 1234567890}
        if transaction:
            data["signedTransactionInfo"] = transaction
        if renewal:
            data["signedRenewalInfo"] = renewal
        if app_transaction:
            data["signedAppTransactionInfo"] = app_transaction
        if status is not None:
            data["status"] = status
        data.update(data_extra or {})
        n = {"notificationType": ntype, "notificationUUID": nid or str(uuid.uuid4()), "version": "2.0",
             "signedDate": signed or now_ms() - 50_000, "appData" if ntype == "RESCIND_CONSENT" else "data": data}
        if subtype:
            n["subtype"] = subtype
        n.update(extra or {})
        return self.jws(n)


def body(signed_payload):
    return json.dumps({"signedPayload": signed_payload}).encode()


def init_store(directory):
    subprocess.run([binary("billingctl"), "teststore", "init", directory], check=True, capture_output=True)
    return directory


# --- HTTP clients ----------------------------------------------------------------------------------------------------

def answer(status, raw):
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def post_http1(port, data, path=PATH, method="POST", content_type="application/json", context=None, host="127.0.0.1"):
    """One request over HTTP/1.1 (HTTPS when `context` is given): (status, JSON body or text)."""
    conn = (http.client.HTTPSConnection(host, port, timeout=10, context=context) if context
            else http.client.HTTPConnection(host, port, timeout=10))
    try:
        headers = {"content-type": content_type} if content_type else {}
        conn.request(method, path, body=data if method != "GET" else None, headers=headers)
        r = conn.getresponse()
        return answer(r.status, r.read())
    finally:
        conn.close()


def post_h2c(port, data, path=PATH, method="POST", content_type="application/json"):
    """One request over HTTP/2 with prior knowledge (h2c), with the `h2` package: (status, JSON body or text)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    sid = conn.get_next_available_stream_id()
    headers = [(":method", method), (":scheme", "http"), (":authority", f"127.0.0.1:{port}"), (":path", path)]
    if content_type:
        headers.append(("content-type", content_type))
    headers.append(("content-length", str(len(data))))
    conn.send_headers(sid, headers, end_stream=not data)
    pending = data
    status, out, done = None, bytearray(), False
    try:
        while not done:
            while pending and conn.local_flow_control_window(sid) > 0:
                n = min(len(pending), conn.max_outbound_frame_size, conn.local_flow_control_window(sid))
                conn.send_data(sid, pending[:n], end_stream=n == len(pending))
                pending = pending[n:]
            sock.sendall(conn.data_to_send())
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed before the answer ended")
            for ev in conn.receive_data(chunk):
                if isinstance(ev, h2.events.ResponseReceived):
                    status = int(dict(ev.headers)[":status"])
                elif isinstance(ev, h2.events.DataReceived):
                    out += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, sid)
                elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)) and ev.stream_id == sid:
                    done = True
            sock.sendall(conn.data_to_send())
    finally:
        sock.close()
    return answer(status, bytes(out))


POST = {"http1": post_http1, "h2c": post_h2c}


# --- the server ------------------------------------------------------------------------------------------------------

class Desk:
    """billingd --dev trusting a test store of our own, with its notifications (and metrics) endpoint."""

    def __init__(self, *flags, tls=None):
        self.dir = tempfile.mkdtemp(prefix="notifications-")
        self.store = init_store(os.path.join(self.dir, "teststore"))
        self.mint = Mint(self.store)
        self.port, self.metrics_port = free_port(), free_port()
        tls_flags = ["--notifications-tls-cert", tls[0], "--notifications-tls-key", tls[1]] if tls else []
        self.server = Billingd("--dev", "--dev-store", self.store, "--bundle-id", BUNDLE, "--environments", "sandbox",
                               "--notifications-listen", f"127.0.0.1:{self.port}", "--metrics-listen", f"127.0.0.1:{self.metrics_port}",
                               *tls_flags, *flags)
        wait_port(self.port)
        self.channel = self.server.channel()
        self.stub = billing(self.channel)

    def post(self, data, transport="http1", **kw):
        return POST[transport](self.port, data, **kw)

    def order(self, account, product=PRODUCT):
        return self.stub.CreateOrder(pb.CreateOrderRequest(account_id=account, product_id=product), timeout=5).order

    def get_order(self, order_id):
        return self.stub.GetOrder(pb.GetOrderRequest(order_id=order_id), timeout=5).order

    def entitlements(self, account, inactive=False):
        return list(self.stub.GetEntitlements(pb.GetEntitlementsRequest(account_id=account, include_inactive=inactive),
                                              timeout=5).entitlements)

    def events(self, account=None, after=0):
        got, cursor = [], after
        while True:
            r = self.stub.ListEvents(pb.ListEventsRequest(after_cursor=cursor, limit=1000, account_id=account or ""), timeout=5)
            got += r.events
            if not r.events:
                return got
            cursor = r.next_cursor

    def cursor(self):
        events = self.events()
        return events[-1].cursor if events else 0

    def metrics(self):
        return urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).read().decode()

    def close(self):
        self.channel.close()
        self.server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_port(port, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on {port}")


@pytest.fixture(scope="module")
def desk():
    d = Desk()
    yield d
    d.close()


def purchase(desk, account, tid, **kw):
    """A pending order and the ONE_TIME_CHARGE notification (signed transaction, notification JWS) that pays it."""
    order = desk.order(account)
    txn = desk.mint.transaction(tid, token=order.order_id)
    return order, txn, desk.mint.notification("ONE_TIME_CHARGE", transaction=txn, **kw)


# --- 1. the full flow --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["http1", "h2c"])
def test_purchase_refund_flow(desk, transport):
    account, tid = f"flow-{transport}", str(400000 + len(transport))
    order, txn, charge = purchase(desk, account, tid)
    charge_uuid = json.loads(base64.urlsafe_b64decode(charge.split(".")[1] + "=="))["notificationUUID"]
    assert desk.post(body(charge), transport) == (200, {"result": "applied"})
    got = desk.get_order(order.order_id)
    assert got.state == pb.ORDER_STATE_COMPLETED and got.transaction_id == tid and got.environment == pb.ENVIRONMENT_XCODE
    [ent] = desk.entitlements(account)
    assert ent.active and ent.product_id == PRODUCT and ent.original_transaction_id == tid and ent.order_id == order.order_id
    assert ent.product_type == pb.PRODUCT_TYPE_NON_CONSUMABLE and ent.revocation_time_ms == 0

    revoked_at = now_ms() - 10_000
    refund_uuid = str(uuid.uuid4())
    refunded_txn = desk.mint.transaction(tid, token=order.order_id, revoked=revoked_at, signed=now_ms() - 5_000)
    refund = desk.mint.notification("REFUND", nid=refund_uuid, signed=now_ms() - 5_000, transaction=refunded_txn)
    assert desk.post(body(refund), transport) == (200, {"result": "applied"})
    assert desk.get_order(order.order_id).state == pb.ORDER_STATE_REFUNDED
    assert desk.entitlements(account) == []
    [ent] = desk.entitlements(account, inactive=True)
    assert not ent.active and ent.revocation_time_ms == revoked_at and ent.original_transaction_id == tid

    events = desk.events(account)
    seen = [(pb.EventType.Name(e.type), e.cause, e.notification_uuid) for e in events]
    assert sorted(seen) == sorted([
        ("EVENT_TYPE_ORDER_CREATED", "create_order", ""),
        ("EVENT_TYPE_ORDER_COMPLETED", "notification:ONE_TIME_CHARGE", charge_uuid),
        ("EVENT_TYPE_ENTITLEMENT_GRANTED", "notification:ONE_TIME_CHARGE", charge_uuid),
        ("EVENT_TYPE_ORDER_REFUNDED", "notification:REFUND", refund_uuid),
        ("EVENT_TYPE_ENTITLEMENT_REVOKED", "notification:REFUND", refund_uuid),
    ]), seen
    assert [e.cursor for e in events] == sorted(e.cursor for e in events)
    assert all(e.account_id == account for e in events)
    assert all(e.transaction_id == tid for e in events if e.cause.startswith("notification:"))

    # Apple re-delivers: answered, changes nothing.
    assert desk.post(body(refund), transport) == (200, {"result": "duplicate"})
    assert desk.post(body(charge), transport) == (200, {"result": "duplicate"})
    assert len(desk.events(account)) == len(events)
    assert desk.get_order(order.order_id).state == pb.ORDER_STATE_REFUNDED

    # The app reports the purchase late, with the signed transaction it had: it was refunded.
    expect_error(lambda: desk.stub.SubmitReceipt(pb.SubmitReceiptRequest(order_id=order.order_id, signed_transaction=txn), timeout=10),
                 grpc.StatusCode.FAILED_PRECONDITION, "TRANSACTION_REVOKED")


# --- 2. bad deliveries -----------------------------------------------------------------------------------------------

TABLE = []


@pytest.fixture(scope="module")
def table():
    yield TABLE
    if TABLE:
        w = max(len(r[0]) for r in TABLE)
        print("\n\nBad deliveries to POST /appstore/notifications (nothing recorded in any case):")
        print(f"  {'input':<{w}}  status  body{'':<40} recorded")
        for name, status, answer_body, recorded in TABLE:
            shown = json.dumps(answer_body) if not isinstance(answer_body, str) else repr(answer_body)
            print(f"  {name:<{w}}  {status:<6}  {shown:<44} {recorded}")


def forge(jws):
    head, payload, sig = jws.split(".")
    raw = bytearray(base64.urlsafe_b64decode(sig + "=="))
    raw[5] ^= 0xFF
    raw[40] ^= 0x01
    return f"{head}.{payload}.{b64url(bytes(raw))}"


def bad_cases():
    """name -> function(desk, order, nid, stranger) -> (request kwargs, expected status, expected body)."""
    def charge(d, o, nid, **kw):
        return d.mint.notification("ONE_TIME_CHARGE", nid=nid, transaction=d.mint.transaction(kw.pop("tid", None) or nid[:8],
                                   token=o.order_id, **kw.pop("txn", {})), **kw)
    malformed, untrusted, wrong_app = {"error": "RECEIPT_MALFORMED"}, {"error": "RECEIPT_UNTRUSTED"}, {"error": "WRONG_APP"}
    return {
        "malformed JSON": lambda d, o, n, s: (dict(data=b'{"signedPayload": "' + charge(d, o, n).encode()), 400, malformed),
        '{"signedPayload": 5}': lambda d, o, n, s: (dict(data=b'{"signedPayload": 5}'), 400, malformed),
        "empty body": lambda d, o, n, s: (dict(data=b""), 400, malformed),
        "not a JWS": lambda d, o, n, s: (dict(data=body("not-a-jws")), 400, malformed),
        "JWS of 2 parts": lambda d, o, n, s: (dict(data=body(".".join(charge(d, o, n).split(".")[:2]))), 400, malformed),
        "forged outer signature": lambda d, o, n, s: (dict(data=body(forge(charge(d, o, n)))), 400, untrusted),
        "outer payload swapped": lambda d, o, n, s: (dict(data=body(
            ".".join([charge(d, o, n).split(".")[0], d.mint.jws({"notificationType": "ONE_TIME_CHARGE"}).split(".")[1],
                      charge(d, o, n).split(".")[2]]))), 400, untrusted),
        "whole notification by untrusted CA": lambda d, o, n, s: (dict(data=body(s.notification(
            "ONE_TIME_CHARGE", nid=n, transaction=s.transaction(n[:8], token=o.order_id)))), 400, untrusted),
        "nested transaction by untrusted CA": lambda d, o, n, s: (dict(data=body(d.mint.notification(
            "ONE_TIME_CHARGE", nid=n, transaction=s.transaction(n[:8], token=o.order_id)))), 400, untrusted),
        "nested renewal by untrusted CA": lambda d, o, n, s: (dict(data=body(d.mint.notification(
            "ONE_TIME_CHARGE", nid=n, transaction=d.mint.transaction(n[:8], token=o.order_id), renewal=s.renewal(n[:8])))),
            400, untrusted),
        "nested transaction forged": lambda d, o, n, s: (dict(data=body(d.mint.notification(
            "ONE_TIME_CHARGE", nid=n, transaction=forge(d.mint.transaction(n[:8], token=o.order_id))))), 400, untrusted),
        "nested transaction not a JWS": lambda d, o, n, s: (dict(data=body(d.mint.notification(
            "ONE_TIME_CHARGE", nid=n, transaction="garbage"))), 400, malformed),
        "nested transaction for another bundle": lambda d, o, n, s: (dict(data=body(charge(d, o, n, txn={"bundle": "com.other.app"}))),
                                                                     400, wrong_app),
        "outer for another bundle": lambda d, o, n, s: (dict(data=body(charge(d, o, n, bundle="com.other.app"))), 400, wrong_app),
        "nested transaction for another environment": lambda d, o, n, s: (dict(data=body(charge(d, o, n, txn={"environment": "Sandbox"}))),
                                                                          400, malformed),
        "nested renewal for another environment": lambda d, o, n, s: (dict(data=body(charge(
            d, o, n, renewal=d.mint.renewal(n[:8], environment="Sandbox")))), 400, malformed),
        "nested transaction signed 10 min ahead": lambda d, o, n, s: (dict(data=body(charge(d, o, n, txn={"signed": now_ms() + 600_000}))),
                                                                      400, malformed),
        "notificationUUID without dashes": lambda d, o, n, s: (dict(data=body(charge(d, o, n.replace("-", ""), tid=n[:8]))), 400, malformed),
        "notificationUUID with a NUL byte": lambda d, o, n, s: (dict(data=body(charge(d, o, n[:35] + "\u0000", tid=n[:8]))), 400, malformed),
        "notificationUUID not a UUID": lambda d, o, n, s: (dict(data=body(charge(d, o, "not-a-uuid", tid=n[:8]))), 400, malformed),
        "signedDate 10 min ahead": lambda d, o, n, s: (dict(data=body(charge(d, o, n, signed=now_ms() + 600_000))), 400, malformed),
        "signedDate 1e300": lambda d, o, n, s: (dict(data=body(charge(d, o, n, extra={"signedDate": 1e300}))), 400, malformed),
        "signedDate missing": lambda d, o, n, s: (dict(data=body(d.mint.jws({
            "notificationType": "TEST", "notificationUUID": n, "version": "2.0",
            "data": {"bundleId": BUNDLE, "environment": "Xcode"}}))), 400, malformed),
        "RESCIND_CONSENT for another bundle": lambda d, o, n, s: (dict(data=body(d.mint.notification(
            "RESCIND_CONSENT", nid=n, bundle="com.other.app"))), 400, wrong_app),
        "RESCIND_CONSENT with an app transaction of another environment": lambda d, o, n, s: (dict(data=body(d.mint.notification(
            "RESCIND_CONSENT", nid=n, app_transaction=d.mint.app_transaction(environment="Sandbox")))), 400, malformed),
        "no notificationUUID": lambda d, o, n, s: (dict(data=body(d.mint.jws({
            "notificationType": "ONE_TIME_CHARGE", "version": "2.0", "signedDate": now_ms(),
            "data": {"bundleId": BUNDLE, "environment": "Xcode"}}))), 400, malformed),
        "65 KiB body": lambda d, o, n, s: (dict(data=json.dumps({"signedPayload": charge(d, o, n), "pad": "x" * (65 << 10)}).encode()),
                                           413, "request body too large\n"),
        "wrong path": lambda d, o, n, s: (dict(data=body(charge(d, o, n)), path="/appstore/notification"), 404, {"error": "NOT_FOUND"}),
        "GET": lambda d, o, n, s: (dict(data=b"", method="GET"), 405, {"error": "METHOD_NOT_ALLOWED"}),
        "PUT": lambda d, o, n, s: (dict(data=body(charge(d, o, n)), method="PUT"), 405, {"error": "METHOD_NOT_ALLOWED"}),
        "content-type text/plain": lambda d, o, n, s: (dict(data=body(charge(d, o, n)), content_type="text/plain"), 415,
                                                       {"error": "UNSUPPORTED_MEDIA_TYPE"}),
    }


BAD = bad_cases()


@pytest.fixture(scope="module")
def stranger(desk):
    return Mint(init_store(os.path.join(desk.dir, "other")))


@pytest.mark.parametrize("transport", ["http1", "h2c"])
@pytest.mark.parametrize("case", list(BAD))
def test_bad_delivery_records_nothing(desk, stranger, table, case, transport):
    nid = str(uuid.uuid4())
    account = "bad-" + nid[:8]
    order = desk.order(account)
    request, status, expected = BAD[case](desk, order, nid, stranger)
    before = desk.cursor()
    got_status, got_body = desk.post(request.pop("data"), transport, **request)
    assert got_status == status, (case, got_status, got_body)
    assert got_body == expected, (case, got_body)
    new = desk.events(after=before)
    recorded = [pb.EventType.Name(e.type) for e in new]
    assert desk.get_order(order.order_id).state == pb.ORDER_STATE_PENDING
    assert desk.entitlements(account, inactive=True) == []
    if transport == "http1":
        TABLE.append((case, got_status, got_body, ", ".join(recorded) or "nothing"))
    assert recorded == [], (case, recorded)
    # The refused delivery left no trace of its notificationUUID either: the valid one is applied, not a duplicate.
    valid = desk.mint.notification("ONE_TIME_CHARGE", nid=nid, transaction=desk.mint.transaction(nid[:8], token=order.order_id))
    assert desk.post(body(valid), transport) == (200, {"result": "applied"})
    assert desk.get_order(order.order_id).state == pb.ORDER_STATE_COMPLETED


# --- 3. environments not accepted ------------------------------------------------------------------------------------

def test_environment_not_accepted_is_ignored(desk):
    """billingd accepts sandbox and (--dev) xcode; a notification validly signed for Production is recorded as ignored."""
    account = "production-notification"
    order = desk.order(account)
    before = desk.cursor()
    txn = desk.mint.transaction("500001", token=order.order_id, environment="Production")
    n = body(desk.mint.notification("ONE_TIME_CHARGE", environment="Production", transaction=txn))
    assert desk.post(n) == (200, {"result": "ignored"})
    assert desk.post(n, "h2c") == (200, {"result": "duplicate"})
    assert desk.events(after=before) == []
    assert desk.get_order(order.order_id).state == pb.ORDER_STATE_PENDING
    # An environment Apple does not have, on a validly signed notification: ignored as well.
    odd = body(desk.mint.notification("TEST", environment="Staging"))
    assert desk.post(odd) == (200, {"result": "ignored"})
    assert desk.post(odd) == (200, {"result": "duplicate"})
    # Sandbox is accepted: the same purchase, signed for Sandbox, completes the order.
    sandbox = desk.mint.transaction("500002", token=order.order_id, environment="Sandbox")
    assert desk.post(body(desk.mint.notification("ONE_TIME_CHARGE", environment="Sandbox", transaction=sandbox))) \
        == (200, {"result": "applied"})
    got = desk.get_order(order.order_id)
    assert got.state == pb.ORDER_STATE_COMPLETED and got.environment == pb.ENVIRONMENT_SANDBOX


# --- 4. unknown fields and types -------------------------------------------------------------------------------------

def test_unknown_fields_and_types(desk):
    account = "unknown-things"
    order = desk.order(account)
    before = desk.cursor()
    txn = desk.mint.transaction("600001", token=order.order_id, futureField={"nested": [1, 2]}, offerType=9)
    made_up = body(desk.mint.notification("SOMETHING_NEW_2031", subtype="WHATEVER", transaction=txn,
                                          extra={"futureTopLevel": True}, data_extra={"consumptionRequestReason": "NEW"}))
    assert desk.post(made_up) == (200, {"result": "applied"})
    # Any type with signed data records its transaction (here under the account of the order its token names) and
    # grants what it shows; only a purchase type pays an order.
    assert [pb.EventType.Name(e.type) for e in desk.events(after=before)] == ["EVENT_TYPE_ENTITLEMENT_GRANTED"]
    assert desk.get_order(order.order_id).state == pb.ORDER_STATE_PENDING
    assert desk.post(made_up, "h2c") == (200, {"result": "duplicate"})
    granted = desk.cursor()
    # Known types without signed data: recorded, no event.
    for ntype, sub in (("TEST", None), ("CONSUMPTION_REQUEST", None), ("PRICE_INCREASE", "PENDING"), ("METADATA_UPDATE", None)):
        assert desk.post(body(desk.mint.notification(ntype, subtype=sub))) == (200, {"result": "applied"}), ntype
    assert desk.events(after=granted) == []
    # Unknown fields everywhere do not stop a known type from taking effect; the entitlement was granted already.
    charge = desk.mint.notification("ONE_TIME_CHARGE", transaction=txn, extra={"futureTopLevel": "x"}, data_extra={"newThing": 1})
    assert desk.post(body(charge)) == (200, {"result": "applied"})
    assert desk.get_order(order.order_id).state == pb.ORDER_STATE_COMPLETED
    assert [pb.EventType.Name(e.type) for e in desk.events(after=granted)] == ["EVENT_TYPE_ORDER_COMPLETED"]


def test_rescind_consent_with_app_data(desk):
    """RESCIND_CONSENT as Apple sends it (appData, not data) is verified and recorded: 200, then duplicate; no events."""
    before = desk.cursor()
    for app_transaction in (desk.mint.app_transaction(), None):
        rescind = body(desk.mint.notification("RESCIND_CONSENT", app_transaction=app_transaction))
        assert desk.post(rescind) == (200, {"result": "applied"})
        assert desk.post(rescind, "h2c") == (200, {"result": "duplicate"})
    # For an environment billingd does not accept: ignored, as any other type.
    production = body(desk.mint.notification("RESCIND_CONSENT", environment="Production"))
    assert desk.post(production) == (200, {"result": "ignored"})
    assert desk.events(after=before) == []


def test_apple_shaped_transaction_fields(desk):
    """A purchase notification carrying every field Apple signs (price, currency, storefront, offer, group,
    ownership, renewal info with the auto-renew product and billing retry) is verified and applied."""
    account = "apple-shaped"
    order = desk.order(account)
    txn = desk.mint.transaction("610001", token=order.order_id, price=9_990, currency="EUR", storefront="FRA", offerType=3,
                                offerIdentifier="SPRING", subscriptionGroupIdentifier="21345678", isUpgraded=False,
                                inAppOwnershipType="PURCHASED", transactionReason="PURCHASE")
    assert desk.post(body(desk.mint.notification("ONE_TIME_CHARGE", transaction=txn))) == (200, {"result": "applied"})
    assert desk.get_order(order.order_id).state == pb.ORDER_STATE_COMPLETED
    renewal = desk.mint.renewal("610002", autoRenewProductId="com.example.basic.monthly", isInBillingRetryPeriod=True)
    sub = desk.mint.transaction("610002", SUB, kind="Auto-Renewable Subscription", expires=now_ms() + 86_400_000)
    n = body(desk.mint.notification("DID_FAIL_TO_RENEW", transaction=sub, renewal=renewal))
    assert desk.post(n) == (200, {"result": "applied"})


# --- 5. real Apple sandbox notifications -----------------------------------------------------------------------------

def need_fixtures():
    if not os.path.isdir(os.path.join(REAL, "sandbox-session-pro", "notifications")):
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {REAL} is missing")
        pytest.skip(f"{REAL} not found (App Store fixtures live in ../shared)")


def test_real_apple_sandbox_notifications():
    need_fixtures()
    port = free_port()
    s = Billingd("--trust-root", os.path.join(FIXTURES, "roots", "AppleRootCA-G3.cer"), "--bundle-id", "com.loki-project.loki-messenger",
                 "--environments", "sandbox", "--notifications-listen", f"127.0.0.1:{port}")
    try:
        wait_port(port)
        folder = os.path.join(REAL, "sandbox-session-pro", "notifications")
        files = [os.path.join(folder, f) for f in sorted(os.listdir(folder))] + [os.path.join(REAL, "sandbox-test-notification-leaf2023.jws")]
        print("\n\nReal Apple sandbox notifications:")
        for i, path in enumerate(files):
            status, got = POST["h2c" if i % 2 else "http1"](port, body(open(path).read().strip()))
            print(f"  {os.path.basename(path):<58} {status} {json.dumps(got)}")
            assert status == 200 and got.get("result") == "applied", (path, status, got)
        # Every one again: duplicates.
        for path in files[:3]:
            assert post_http1(port, body(open(path).read().strip())) == (200, {"result": "duplicate"})
        with s.channel() as ch:
            stub = billing(ch)
            standalone = os.path.join(REAL, "sandbox-session-pro", "standalone")
            renewal = open(os.path.join(standalone, "txn-2000001024998954-RENEWAL.jws")).read().strip()
            refunded = open(os.path.join(standalone, "txn-2000001032604840-REFUNDED-revocationReason0.jws")).read().strip()
            # The renewal alone proves the subscription; the newer REFUND notification, known before anyone owned it, wins.
            [ent] = stub.RestorePurchases(pb.RestorePurchasesRequest(account_id="loki", signed_transactions=[renewal]),
                                          timeout=10).entitlements
            print(f"  RestorePurchases(renewal): {ent}".replace("\n", " "))
            assert ent.product_id == "com.getsession.org.pro_sub" and ent.original_transaction_id == "2000001024993299"
            assert ent.product_type == pb.PRODUCT_TYPE_AUTO_RENEWABLE_SUBSCRIPTION and ent.environment == pb.ENVIRONMENT_SANDBOX
            assert not ent.active and ent.revocation_time_ms == 1760591999000
            assert ent.latest_transaction_id == "2000001032604840" and ent.expires_time_ms == 1760335309000
            [again] = stub.RestorePurchases(pb.RestorePurchasesRequest(account_id="loki", signed_transactions=[refunded]),
                                            timeout=10).entitlements
            assert again == ent
            assert stub.GetEntitlements(pb.GetEntitlementsRequest(account_id="loki"), timeout=5).entitlements == []
            [kept] = stub.GetEntitlements(pb.GetEntitlementsRequest(account_id="loki", include_inactive=True), timeout=5).entitlements
            assert kept == ent
    finally:
        s.stop()
        shutil.rmtree(s.dir, ignore_errors=True)


# --- 6. TLS ----------------------------------------------------------------------------------------------------------

def test_tls_http1_and_alpn(tmp_path):
    cert, key = str(tmp_path / "cert.pem"), str(tmp_path / "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", key, "-out", cert],
                   check=True, capture_output=True)
    d = Desk(tls=(cert, key))
    try:
        context = ssl.create_default_context(cafile=cert)
        order, _, charge = purchase(d, "tls", "700001")
        assert post_http1(d.port, body(charge), context=context) == (200, {"result": "applied"})
        assert post_http1(d.port, body(charge), context=context, host="localhost") == (200, {"result": "duplicate"})
        assert d.get_order(order.order_id).state == pb.ORDER_STATE_COMPLETED
        for offered, chosen in ((["h2", "http/1.1"], "h2"), (["http/1.1"], "http/1.1")):
            ctx = ssl.create_default_context(cafile=cert)
            ctx.set_alpn_protocols(offered)
            with socket.create_connection(("127.0.0.1", d.port), timeout=5) as raw, ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                assert tls.selected_alpn_protocol() == chosen
        # Plain text on the TLS port gets nowhere.
        try:
            status, _ = post_http1(d.port, body(charge))
        except (ConnectionError, http.client.HTTPException, OSError):
            status = None
        assert status != 200
    finally:
        d.close()


# --- 7. metrics and logs ---------------------------------------------------------------------------------------------

def test_metrics_and_log_lines():
    d = Desk()
    try:
        order, txn, charge = purchase(d, "metrics", "800001")
        refund = d.mint.notification("REFUND", signed=now_ms() - 1_000,
                                     transaction=d.mint.transaction("800001", token=order.order_id, revoked=now_ms() - 2_000,
                                                                    signed=now_ms() - 1_000))
        made_up = d.mint.notification("BRAND_NEW_TYPE_" + uuid.uuid4().hex[:6])
        deliveries = [(charge, 200), (refund, 200), (refund, 200), (forge(refund), 400), (made_up, 200), ("nonsense", 400)]
        for jws, status in deliveries:
            assert d.post(body(jws))[0] == status
        text = d.metrics()
        lines = {line for line in text.splitlines() if line.startswith("billingd_notifications_total")}
        for expected in ('billingd_notifications_total{type="ONE_TIME_CHARGE",result="applied"} 1',
                         'billingd_notifications_total{type="REFUND",result="applied"} 1',
                         'billingd_notifications_total{type="REFUND",result="duplicate"} 1',
                         'billingd_notifications_total{type="OTHER",result="applied"} 1'):
            assert expected in lines, (expected, lines)
        rejected = sum(float(line.rsplit(" ", 1)[1]) for line in lines if 'result="rejected"' in line)
        assert rejected == 2, lines
        assert "BRAND_NEW_TYPE" not in text
        d.server.stop()  # flushes the log
        log = d.server.log()
        records = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
        notes = [r for r in records if r.get("msg") == "notification"]
        assert len(notes) == len(deliveries), notes
        assert [n["result"] for n in notes] == ["applied", "applied", "duplicate", "rejected", "applied", "rejected"]
        assert [n.get("type") for n in notes[:3]] == ["ONE_TIME_CHARGE", "REFUND", "REFUND"]
        uuids = [json.loads(base64.urlsafe_b64decode(j.split(".")[1] + "=="))["notificationUUID"] for j, _ in deliveries[:3]]
        assert [n.get("notification_uuid") for n in notes[:3]] == uuids
        assert notes[4].get("notification_uuid") and notes[4].get("type", "").startswith("BRAND_NEW_TYPE")
        # A refused delivery's contents are not trusted, so its line names no notification; it says why.
        assert notes[3].get("reason") == "RECEIPT_UNTRUSTED" and "notification_uuid" not in notes[3]
        assert notes[5].get("reason") == "RECEIPT_MALFORMED"
        # Support follows an Apple transaction through the logs: the notification lines name it.
        assert [n.get("transaction_id") for n in notes[:3]] == ["800001"] * 3
        assert "transaction_id" not in notes[3]
        for jws, _ in deliveries[:5]:
            for part in jws.split("."):
                assert part[:40] not in log
        for part in txn.split(".")[1:]:
            assert part[:40] not in log
    finally:
        d.close()


# --- 8. draining -----------------------------------------------------------------------------------------------------

def test_delivery_while_draining_is_refused():
    """A gRPC request that never finishes keeps billingd draining for --shutdown-grace; meanwhile deliveries get 503
    (or find the port closed), and none is recorded."""
    d = Desk("--shutdown-grace", "3")
    try:
        order, _, charge = purchase(d, "drain", "900001")
        # A unary call whose body never comes: in flight until the grace period ends.
        sock = socket.create_connection(("127.0.0.1", d.server.port), timeout=5)
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        conn.initiate_connection()
        conn.send_headers(1, [(":method", "POST"), (":scheme", "http"), (":authority", d.server.address),
                              (":path", "/billing.v1.Billing/GetOrder"), ("content-type", "application/grpc"), ("te", "trailers")])
        sock.sendall(conn.data_to_send())
        time.sleep(0.2)
        d.server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        try:
            status, got = d.post(body(charge))
            print(f"\n  delivery while draining: {status} {got}")
            assert status == 503 and got == {"error": "SHUTTING_DOWN"}
        except ConnectionError as e:
            print(f"\n  delivery while draining: {type(e).__name__}")
        sock.close()
        d.server.proc.wait(timeout=15)
        d.server.start()
        wait_port(d.port)
        assert d.get_order(order.order_id).state == pb.ORDER_STATE_PENDING
        assert d.post(body(charge)) == (200, {"result": "applied"})
    finally:
        d.close()
