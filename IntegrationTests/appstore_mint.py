"""Minting App Store Server Notifications v2 (and signed transactions) in Python, signed by the
test store that `billingd --dev --dev-store DIR` (or `billingctl teststore init DIR`) keeps in DIR.

ES256 JWS: header {"alg": "ES256", "x5c": [leaf, intermediate, root]} (DER, base64), signature r||s
(base64url). Module-level helpers only, so that any test can use them."""
import base64
import json
import os
import uuid as uuidlib

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

BUNDLE = "com.example.app"
ENVIRONMENT = "Xcode"
SUBSCRIPTION = "Auto-Renewable Subscription"
NON_CONSUMABLE = "Non-Consumable"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Signer:
    """The leaf key and x5c chain of a dev store directory."""

    def __init__(self, store_dir):
        def cert(name):
            with open(os.path.join(store_dir, name + ".pem"), "rb") as f:
                return x509.load_pem_x509_certificate(f.read())
        with open(os.path.join(store_dir, "leaf.key"), "rb") as f:
            self.key = serialization.load_pem_private_key(f.read(), password=None)
        self.x5c = [base64.b64encode(cert(n).public_bytes(serialization.Encoding.DER)).decode()
                    for n in ("leaf", "intermediate", "root")]
        self.header = b64url(json.dumps({"alg": "ES256", "x5c": self.x5c}, separators=(",", ":")).encode())

    def sign(self, payload):
        body = self.header + "." + b64url(json.dumps(payload, separators=(",", ":")).encode())
        r, s = decode_dss_signature(self.key.sign(body.encode(), ec.ECDSA(hashes.SHA256())))
        return body + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def transaction(transaction_id, product_id, *, original=None, product_type=SUBSCRIPTION, purchase_ms, expires_ms=None,
                revocation_ms=None, revocation_reason=None, token=None, signed_ms, quantity=1, bundle_id=BUNDLE,
                environment=ENVIRONMENT):
    """A JWSTransactionDecodedPayload as a dict (None fields left out)."""
    t = {"transactionId": transaction_id, "originalTransactionId": original or transaction_id, "productId": product_id,
         "type": product_type, "bundleId": bundle_id, "environment": environment, "purchaseDate": purchase_ms,
         "originalPurchaseDate": purchase_ms, "expiresDate": expires_ms, "revocationDate": revocation_ms,
         "revocationReason": revocation_reason, "appAccountToken": token, "quantity": quantity, "signedDate": signed_ms,
         "inAppOwnershipType": "PURCHASED"}
    return {k: v for k, v in t.items() if v is not None}


def renewal(original, product_id, *, auto_renew, signed_ms, environment=ENVIRONMENT):
    """A JWSRenewalInfoDecodedPayload as a dict."""
    return {"originalTransactionId": original, "productId": product_id, "autoRenewProductId": product_id,
            "autoRenewStatus": 1 if auto_renew else 0, "signedDate": signed_ms, "environment": environment}


def notification(signer, notification_type, *, signed_ms, subtype=None, uuid=None, tx=None, renewal_info=None,
                 bundle_id=BUNDLE, environment=ENVIRONMENT):
    """The signedPayload (JWS) of a v2 notification; tx / renewal_info are dicts, signed here."""
    data = {"bundleId": bundle_id, "environment": environment}
    if tx is not None:
        data["signedTransactionInfo"] = signer.sign(tx)
    if renewal_info is not None:
        data["signedRenewalInfo"] = signer.sign(renewal_info)
    payload = {"notificationType": notification_type, "notificationUUID": uuid or str(uuidlib.uuid4()), "version": "2.0",
               "signedDate": signed_ms, "data": data}
    if subtype:
        payload["subtype"] = subtype
    return signer.sign(payload)


def body(signed_payload):
    """The HTTP body Apple posts."""
    return json.dumps({"signedPayload": signed_payload}).encode()
