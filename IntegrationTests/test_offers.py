"""SignOffer through grpcio, checked by independent verifiers: the StoreKit 1 style signature with `cryptography`
over the message Apple documents (and that Apple's own PromotionalOfferSignatureCreator signs), the JWS kinds
header by header and claim by claim against what Apple's App Store Server Library (app-store-server-library,
PromotionalOfferV2SignatureCreator and IntroductoryOfferEligibilitySignatureCreator) makes for the same inputs,
every signature verified with the public key. Then the refusals, the flags, API keys, the log line and
`billingctl offer sign`."""
import base64
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid

import grpc
import jwt
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from appstoreserverlibrary.jws_signature_creator import (IntroductoryOfferEligibilitySignatureCreator,
                                                         PromotionalOfferV2SignatureCreator)
from appstoreserverlibrary.promotional_offer import PromotionalOfferSignatureCreator
from conftest import Billingd, binary
from helpers import billing, expect_error, pb

BUNDLE = "com.example.app"
LITE = "com.example.lite"
KEY_ID = "2X9R4HXF34"
ISSUER = "57246542-96fe-1a63-e053-0824d011072a"
SUB = "com.example.pro.monthly"
YEARLY = "com.example.pro.yearly"
COINS = "com.example.coins"
SEP = "\u2063"


def make_key(directory, curve=None):
    """A PKCS#8 PEM private key file (App Store Connect's .p8 form) and the key object."""
    key = ec.generate_private_key(curve or ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    path = os.path.join(directory, f"key-{uuid.uuid4().hex[:8]}.p8")
    with open(path, "wb") as f:
        f.write(pem)
    return path, pem, key


def b64url(part):
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def decode(jws):
    h, c, _ = jws.split(".")
    return json.loads(b64url(h)), json.loads(b64url(c))


def verify_jws(jws, public_key):
    """ES256 checked by hand (r||s to DER, cryptography), not by the library that made Apple's tokens."""
    h, c, s = jws.split(".")
    raw = b64url(s)
    assert len(raw) == 64
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public_key.verify(der, f"{h}.{c}".encode(), ec.ECDSA(hashes.SHA256()))


class World:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="offers-")
        self.p8, self.pem, self.key = make_key(self.dir)
        self.catalog = os.path.join(self.dir, "catalog.json")
        with open(self.catalog, "w") as f:
            json.dump({"products": [{"id": SUB, "type": "auto_renewable_subscription"},
                                    {"id": YEARLY, "type": "auto_renewable_subscription"},
                                    {"id": COINS, "type": "consumable"}]}, f)
        self.server = Billingd("--bundle-id", BUNDLE, "--bundle-id", LITE, "--environments", "sandbox", "--catalog", self.catalog,
                               "--offer-signing-key-id", KEY_ID, "--offer-signing-key", self.p8,
                               "--offer-signing-issuer-id", ISSUER)
        self.channel = self.server.channel()
        self.stub = billing(self.channel)

    def order(self, product=SUB, account="user-42"):
        return self.stub.CreateOrder(pb.CreateOrderRequest(account_id=account, product_id=product), timeout=5).order

    def sign(self, **kw):
        kw.setdefault("bundle_id", BUNDLE)
        return self.stub.SignOffer(pb.SignOfferRequest(**kw), timeout=5)

    def close(self):
        self.channel.close()
        self.server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def world():
    w = World()
    yield w
    w.close()


def test_promotional_verifies_over_apples_message(world):
    order = world.order()
    before = int(time.time() * 1000)
    r = world.sign(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL, product_id=SUB, offer_id="winback-50", order_id=order.order_id.upper())
    after = int(time.time() * 1000)
    assert r.compact_jws == "" and r.key_id == KEY_ID
    assert str(uuid.UUID(r.nonce)) == r.nonce  # a lowercase UUID
    assert before - 1000 <= r.timestamp_ms <= after + 1000
    # Apple's documented message: appBundleID, keyIdentifier, productIdentifier, offerIdentifier, appAccountToken
    # (lowercase), nonce (lowercase), timestamp, joined by U+2063; the signature is base64 DER, ECDSA P-256 SHA-256.
    message = SEP.join([BUNDLE, KEY_ID, SUB, "winback-50", order.order_id.lower(), r.nonce.lower(), str(r.timestamp_ms)])
    der = base64.b64decode(r.signature, validate=True)
    world.key.public_key().verify(der, message.encode(), ec.ECDSA(hashes.SHA256()))
    with pytest.raises(InvalidSignature):
        world.key.public_key().verify(der, message.replace("winback-50", "winback-51").encode(), ec.ECDSA(hashes.SHA256()))
    # The same message is the one Apple's PromotionalOfferSignatureCreator signs for these inputs.
    apple = PromotionalOfferSignatureCreator(world.pem, KEY_ID, BUNDLE).create_signature(
        SUB, "winback-50", order.order_id.upper(), uuid.UUID(r.nonce), r.timestamp_ms)
    world.key.public_key().verify(base64.b64decode(apple), message.encode(), ec.ECDSA(hashes.SHA256()))
    # A fresh nonce each call.
    again = world.sign(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL, product_id=SUB, offer_id="winback-50", order_id=order.order_id)
    assert again.nonce != r.nonce


def compare_with_apple(ours, apples, public_key, audience):
    """Header by header and claim by claim: equal, with the same JSON types, except nonce and iat; both verify."""
    (h1, c1), (h2, c2) = decode(ours), decode(apples)
    assert h1 == h2 == {"alg": "ES256", "kid": KEY_ID, "typ": "JWT"}
    assert set(c1) == set(c2)
    for name in c1:
        assert type(c1[name]) is type(c2[name]), name
        if name not in ("nonce", "iat"):
            assert c1[name] == c2[name], name
    assert abs(c1["iat"] - c2["iat"]) <= 5
    assert c1["nonce"] != c2["nonce"] and str(uuid.UUID(c1["nonce"])) == c1["nonce"]
    verify_jws(ours, public_key)
    verify_jws(apples, public_key)
    # And PyJWT, as a third reader: signature, audience.
    jwt.decode(ours, public_key, algorithms=["ES256"], audience=audience)
    return c1


@pytest.mark.parametrize("transaction_id", [None, "2000000000000001"])
def test_promotional_jws_matches_apples_library(world, transaction_id):
    r = world.sign(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL_JWS, product_id=SUB, offer_id="winback-50",
                   transaction_id=transaction_id or "")
    assert r.key_id == "" and r.signature == "" and r.nonce == "" and r.timestamp_ms == 0
    apples = PromotionalOfferV2SignatureCreator(world.pem, KEY_ID, ISSUER, BUNDLE).create_signature(SUB, "winback-50", transaction_id)
    claims = compare_with_apple(r.compact_jws, apples, world.key.public_key(), "promotional-offer")
    assert ("transactionId" in claims) == (transaction_id is not None)
    # With an order named, the order is checked; the JWS is the same shape (StoreKit 2 takes the token separately).
    order = world.order()
    bound = world.sign(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL_JWS, product_id=SUB, offer_id="winback-50",
                       transaction_id=transaction_id or "", order_id=order.order_id)
    compare_with_apple(bound.compact_jws, apples, world.key.public_key(), "promotional-offer")


@pytest.mark.parametrize("allow", [False, True])
def test_introductory_eligibility_matches_apples_library(world, allow):
    r = world.sign(kind=pb.OFFER_SIGNATURE_KIND_INTRODUCTORY_ELIGIBILITY, product_id=SUB, transaction_id="2000000000000001",
                   allow_introductory_offer=allow)
    apples = IntroductoryOfferEligibilitySignatureCreator(world.pem, KEY_ID, ISSUER, BUNDLE).create_signature(
        SUB, allow, "2000000000000001")
    claims = compare_with_apple(r.compact_jws, apples, world.key.public_key(), "introductory-offer-eligibility")
    assert claims["allowIntroductoryOffer"] is allow


def test_bundle_id(world):
    r = world.sign(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL_JWS, product_id=SUB, offer_id="o", bundle_id=LITE)
    assert decode(r.compact_jws)[1]["bid"] == LITE
    info = expect_error(lambda: world.sign(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL_JWS, product_id=SUB, offer_id="o", bundle_id=""),
                        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
    assert info.metadata["field"] == "bundle_id"  # two apps served: which one?
    expect_error(lambda: world.sign(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL_JWS, product_id=SUB, offer_id="o", bundle_id="com.other"),
                 grpc.StatusCode.INVALID_ARGUMENT, "WRONG_APP")


def test_order_and_catalog_refusals(world):
    sign = world.sign
    info = expect_error(lambda: sign(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL, product_id=SUB, offer_id="o", order_id=str(uuid.uuid4())),
                        grpc.StatusCode.NOT_FOUND, "ORDER_NOT_FOUND")
    assert "order_id" in info.metadata
    yearly = world.order(product=YEARLY)
    info = expect_error(lambda: sign(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL, product_id=SUB, offer_id="o", order_id=yearly.order_id),
                        grpc.StatusCode.FAILED_PRECONDITION, "PRODUCT_MISMATCH")
    assert info.metadata["order_product_id"] == YEARLY and info.metadata["product_id"] == SUB
    info = expect_error(lambda: sign(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL_JWS, product_id="com.example.unlisted", offer_id="o"),
                        grpc.StatusCode.NOT_FOUND, "PRODUCT_NOT_FOUND")
    info = expect_error(lambda: sign(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL_JWS, product_id=COINS, offer_id="o"),
                        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
    assert info.metadata["field"] == "product_id"


@pytest.mark.parametrize("fields,field", [
    (dict(kind=pb.OFFER_SIGNATURE_KIND_UNSPECIFIED, product_id=SUB, offer_id="o"), "kind"),
    (dict(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL_JWS, offer_id="o"), "product_id"),
    (dict(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL, product_id=SUB, order_id="0190a5b8-7c00-7000-8000-000000000001"), "offer_id"),
    (dict(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL_JWS, product_id=SUB), "offer_id"),
    (dict(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL, product_id=SUB, offer_id="o"), "order_id"),
    (dict(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL, product_id=SUB, offer_id="o", order_id="order-7"), "order_id"),
    (dict(kind=pb.OFFER_SIGNATURE_KIND_INTRODUCTORY_ELIGIBILITY, product_id=SUB), "transaction_id"),
    (dict(kind=pb.OFFER_SIGNATURE_KIND_INTRODUCTORY_ELIGIBILITY, product_id=SUB, transaction_id="abc"), "transaction_id"),
    (dict(kind=pb.OFFER_SIGNATURE_KIND_INTRODUCTORY_ELIGIBILITY, product_id=SUB, transaction_id="1", offer_id="o"), "offer_id"),
    (dict(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL_JWS, product_id=SUB, offer_id="o", allow_introductory_offer=True),
     "allow_introductory_offer"),
    (dict(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL, product_id=SUB, offer_id="o" + SEP,
          order_id="0190a5b8-7c00-7000-8000-000000000001"), "offer_id"),
])
def test_invalid_fields(world, fields, field):
    info = expect_error(lambda: world.sign(**fields), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
    assert info.metadata["field"] == field


def test_order_not_pending_and_issuer_defaults(fresh, tmp_path):
    """An expired order cannot get an offer. The issuer id falls back to --appstore-api-issuer-id; without any, the
    JWS kinds are OFFER_SIGNING_NOT_CONFIGURED and PROMOTIONAL still signs."""
    p8, pem, key = make_key(str(tmp_path))
    api_issuer = str(uuid.uuid4())
    s = fresh("--bundle-id", BUNDLE, "--environments", "sandbox", "--order-ttl", "1",
              "--offer-signing-key-id", KEY_ID, "--offer-signing-key", p8,
              "--appstore-api-key-id", "APIKEY1", "--appstore-api-issuer-id", api_issuer, "--appstore-api-private-key", p8,
              "--appstore-api-url", "http://127.0.0.1:9", "--reconcile-interval", "0")
    with s.channel() as ch:
        stub = billing(ch)
        r = stub.SignOffer(pb.SignOfferRequest(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL_JWS, product_id=SUB, offer_id="o"), timeout=5)
        assert decode(r.compact_jws)[1]["iss"] == api_issuer
        verify_jws(r.compact_jws, key.public_key())
        order = stub.CreateOrder(pb.CreateOrderRequest(account_id="late", product_id=SUB), timeout=5).order
        deadline = time.time() + 15
        while stub.GetOrder(pb.GetOrderRequest(order_id=order.order_id), timeout=5).order.state != pb.ORDER_STATE_EXPIRED:
            assert time.time() < deadline, "the order did not expire"
            time.sleep(0.1)
        info = expect_error(lambda: stub.SignOffer(pb.SignOfferRequest(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL, product_id=SUB,
                                                                       offer_id="o", order_id=order.order_id), timeout=5),
                            grpc.StatusCode.FAILED_PRECONDITION, "ORDER_NOT_PENDING")
        assert info.metadata["order_id"] == order.order_id

    bare = fresh("--bundle-id", BUNDLE, "--environments", "sandbox", "--offer-signing-key-id", KEY_ID, "--offer-signing-key", p8)
    with bare.channel() as ch:
        stub = billing(ch)
        for kind, extra in [(pb.OFFER_SIGNATURE_KIND_PROMOTIONAL_JWS, dict(offer_id="o")),
                            (pb.OFFER_SIGNATURE_KIND_INTRODUCTORY_ELIGIBILITY, dict(transaction_id="1"))]:
            expect_error(lambda: stub.SignOffer(pb.SignOfferRequest(kind=kind, product_id=SUB, **extra), timeout=5),
                         grpc.StatusCode.FAILED_PRECONDITION, "OFFER_SIGNING_NOT_CONFIGURED")
        order = stub.CreateOrder(pb.CreateOrderRequest(account_id="a", product_id=SUB), timeout=5).order
        r = stub.SignOffer(pb.SignOfferRequest(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL, product_id=SUB, offer_id="o",
                                               order_id=order.order_id), timeout=5)
        message = SEP.join([BUNDLE, KEY_ID, SUB, "o", order.order_id, r.nonce, str(r.timestamp_ms)])
        key.public_key().verify(base64.b64decode(r.signature), message.encode(), ec.ECDSA(hashes.SHA256()))


def test_flag_errors(tmp_path):
    def run(*flags):
        return subprocess.run([binary("billingd"), "--bundle-id", BUNDLE, "--listen", "127.0.0.1:0",
                               "--database", f"sqlite:{tmp_path}/b.db", *flags], capture_output=True, text=True, timeout=30)
    p8, pem, _ = make_key(str(tmp_path))
    p384, pem384, _ = make_key(str(tmp_path), ec.SECP384R1())
    k1, pemk1, _ = make_key(str(tmp_path), ec.SECP256K1())
    garbage = tmp_path / "garbage.p8"
    garbage.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    r = run("--offer-signing-key-id", KEY_ID)
    assert r.returncode == 2 and r.stderr.startswith("billingd: --offer-signing-key: ") and "go together" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = run("--offer-signing-key", p8)
    assert r.returncode == 2 and r.stderr.startswith("billingd: --offer-signing-key-id:")
    r = run("--offer-signing-key-id", "not a key id", "--offer-signing-key", p8)
    assert r.returncode == 2 and r.stderr.startswith("billingd: --offer-signing-key-id:")
    r = run("--offer-signing-key-id", KEY_ID, "--offer-signing-key", str(tmp_path / "missing.p8"))
    assert r.returncode == 2 and r.stderr.startswith("billingd: --offer-signing-key: cannot read")
    r = run("--offer-signing-issuer-id", ISSUER)
    assert r.returncode == 2 and r.stderr.startswith("billingd: --offer-signing-issuer-id:") and "needs" in r.stderr
    r = run("--offer-signing-key-id", KEY_ID, "--offer-signing-key", p8, "--offer-signing-issuer-id", "not-a-uuid")
    assert r.returncode == 2 and r.stderr.startswith("billingd: --offer-signing-issuer-id:")
    for bad, text in [(p384, pem384), (k1, pemk1), (str(garbage), garbage.read_bytes())]:
        r = run("--offer-signing-key-id", KEY_ID, "--offer-signing-key", bad)
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith("billingd: --offer-signing-key:") and "not an ES256 (P-256) private key" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        for line in text.decode().splitlines():
            if line and not line.startswith("-----"):
                assert line not in r.stderr
    # The environment twins work like the flags.
    env = dict(os.environ, BILLING_OFFER_SIGNING_KEY_ID=KEY_ID, BILLING_OFFER_SIGNING_KEY=p384)
    r = subprocess.run([binary("billingd"), "--bundle-id", BUNDLE, "--listen", "127.0.0.1:0", "--database", f"sqlite:{tmp_path}/c.db"],
                       capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 2 and r.stderr.startswith("billingd: --offer-signing-key:")


def test_api_keys_and_log_line(tmp_path):
    """An app backend's key lists SignOffer with the calls of a purchase; a key without it is PERMISSION_DENIED. The
    rpc log line carries order_id and offer_kind, never the signature, the JWS or the key."""
    p8, pem, key = make_key(str(tmp_path))
    keys = {"keys": [
        {"name": "app-backend", "sha256": hashlib.sha256(b"k-app").hexdigest(),
         "methods": ["billing.v1.Billing/CreateOrder", "billing.v1.Billing/SignOffer", "billing.v1.Billing/SubmitReceipt",
                     "billing.v1.Billing/RestorePurchases", "billing.v1.Billing/GetEntitlements"]},
        {"name": "support-console", "sha256": hashlib.sha256(b"k-support").hexdigest(),
         "methods": ["billing.v1.Billing/GetOrder", "billing.v1.Billing/ListTransactions"]},
    ]}
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(keys))
    s = Billingd("--api-keys", str(path), "--bundle-id", BUNDLE, "--environments", "sandbox",
                 "--offer-signing-key-id", KEY_ID, "--offer-signing-key", p8, "--offer-signing-issuer-id", ISSUER)
    app = [("authorization", "Bearer k-app")]
    try:
        with s.channel() as ch:
            stub = billing(ch)
            order = stub.CreateOrder(pb.CreateOrderRequest(account_id="keyed", product_id=SUB), timeout=5, metadata=app).order
            req = pb.SignOfferRequest(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL, product_id=SUB, offer_id="o", order_id=order.order_id)
            expect_error(lambda: stub.SignOffer(req, timeout=5), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
            expect_error(lambda: stub.SignOffer(req, timeout=5, metadata=[("authorization", "Bearer k-support")]),
                         grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
            promo = stub.SignOffer(req, timeout=5, metadata=app)
            jws = stub.SignOffer(pb.SignOfferRequest(kind=pb.OFFER_SIGNATURE_KIND_PROMOTIONAL_JWS, product_id=SUB, offer_id="o"),
                                 timeout=5, metadata=app).compact_jws
    finally:
        s.stop()
    lines = [json.loads(l) for l in s.log().splitlines() if l.startswith("{")]
    signed = [l for l in lines if l.get("msg") == "rpc" and l.get("method") == "billing.v1.Billing/SignOffer" and l.get("code") == "OK"]
    assert len(signed) == 2
    assert signed[0]["order_id"] == order.order_id and signed[0]["offer_kind"] == "promotional"
    assert signed[0]["account_id"] == "keyed" and signed[0]["api_key"] == "app-backend"
    assert signed[1]["offer_kind"] == "promotional_jws" and "order_id" not in signed[1]
    log = s.log()
    assert promo.signature not in log and jws.split(".")[2] not in log and promo.nonce not in log
    for line in pem.decode().splitlines():
        if line and not line.startswith("-----"):
            assert line not in log
    assert any(l.get("msg") == "offer signing configured" and l.get("key_id") == KEY_ID for l in lines)


def test_billingctl_offer_sign(world):
    order = world.order()

    def ctl(*args, check=True):
        p = subprocess.run([binary("billingctl"), "--addr", world.server.address, "offer", "sign", *args],
                           capture_output=True, text=True, timeout=30)
        if check:
            assert p.returncode == 0, p.stderr
        return p

    out = json.loads(ctl("--kind", "promotional", "--product", SUB, "--offer", "winback-50", "--order", order.order_id,
                         "--bundle-id", BUNDLE).stdout)
    assert set(out) == {"keyId", "nonce", "timestampMs", "signature"} and out["keyId"] == KEY_ID
    message = SEP.join([BUNDLE, KEY_ID, SUB, "winback-50", order.order_id, out["nonce"], out["timestampMs"]])
    world.key.public_key().verify(base64.b64decode(out["signature"]), message.encode(), ec.ECDSA(hashes.SHA256()))
    out = json.loads(ctl("--kind", "promotional-jws", "--product", SUB, "--offer", "winback-50", "--transaction-id", "2000000000000001",
                         "--bundle-id", LITE).stdout)
    assert set(out) == {"compactJws"}
    assert decode(out["compactJws"])[1]["bid"] == LITE and decode(out["compactJws"])[1]["transactionId"] == "2000000000000001"
    out = json.loads(ctl("--kind", "introductory-eligibility", "--product", SUB, "--transaction-id", "2000000000000001",
                         "--allow-introductory-offer", "--bundle-id", BUNDLE).stdout)
    claims = decode(out["compactJws"])[1]
    assert claims["allowIntroductoryOffer"] is True and claims["aud"] == "introductory-offer-eligibility"
    verify_jws(out["compactJws"], world.key.public_key())
    # A refusal: JSON on stderr, exit 1; a usage error: exit 2.
    p = ctl("--kind", "promotional", "--product", SUB, "--offer", "o", "--bundle-id", BUNDLE, check=False)
    assert p.returncode == 1 and json.loads(p.stderr)["reason"] == "INVALID_FIELD"
    p = ctl("--kind", "bogus", "--product", SUB, check=False)
    assert p.returncode == 2
