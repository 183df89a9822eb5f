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


OFFER_TYPES = {"INTRODUCTORY_OFFER": 1, "PROMOTIONAL_OFFER": 2, "OFFER_CODE": 3, "WIN_BACK_OFFER": 4}


def transaction(transaction_id, product_id, *, original=None, product_type=SUBSCRIPTION, purchase_ms, expires_ms=None,
                revocation_ms=None, revocation_reason=None, token=None, signed_ms, quantity=1, bundle_id=BUNDLE,
                environment=ENVIRONMENT, ownership="PURCHASED", upgraded=None, revocation_type=None,
                revocation_percentage=None, price=None, currency=None, storefront=None, offer_type=None, offer_id=None,
                group=None):
    """A JWSTransactionDecodedPayload as a dict (None fields left out).

    ownership: inAppOwnershipType (PURCHASED or FAMILY_SHARED); upgraded: isUpgraded; revocation_type: REFUND_FULL,
    REFUND_PRORATED or FAMILY_REVOKE, with revocation_percentage in thousandths of a percent; price: milliunits of
    currency (Apple's unit: 9990 is 9.99); storefront: ISO 3166-1 alpha-3; offer_type: 1-4 or its name;
    offer_id: offerIdentifier; group: subscriptionGroupIdentifier."""
    t = {"transactionId": transaction_id, "originalTransactionId": original or transaction_id, "productId": product_id,
         "type": product_type, "bundleId": bundle_id, "environment": environment, "purchaseDate": purchase_ms,
         "originalPurchaseDate": purchase_ms, "expiresDate": expires_ms, "revocationDate": revocation_ms,
         "revocationReason": revocation_reason, "appAccountToken": token, "quantity": quantity, "signedDate": signed_ms,
         "inAppOwnershipType": ownership, "isUpgraded": upgraded, "revocationType": revocation_type,
         "revocationPercentage": revocation_percentage, "price": price, "currency": currency, "storefront": storefront,
         "offerType": OFFER_TYPES.get(offer_type, offer_type), "offerIdentifier": offer_id,
         "subscriptionGroupIdentifier": group}
    return {k: v for k, v in t.items() if v is not None}


def renewal(original, product_id, *, auto_renew, signed_ms, environment=ENVIRONMENT, auto_renew_product_id=None,
            billing_retry=None, grace_ms=None, expiration_intent=None):
    """A JWSRenewalInfoDecodedPayload as a dict. auto_renew_product_id: the product of the next renewal (default
    product_id); billing_retry: isInBillingRetryPeriod; grace_ms: gracePeriodExpiresDate."""
    r = {"originalTransactionId": original, "productId": product_id, "autoRenewProductId": auto_renew_product_id or product_id,
         "autoRenewStatus": 1 if auto_renew else 0, "signedDate": signed_ms, "environment": environment,
         "isInBillingRetryPeriod": billing_retry, "gracePeriodExpiresDate": grace_ms, "expirationIntent": expiration_intent}
    return {k: v for k, v in r.items() if v is not None}


def app_transaction(*, created_ms, bundle_id=BUNDLE, environment=ENVIRONMENT, app_apple_id=None):
    """A JWSAppTransaction payload as a dict (its receiptType is the environment)."""
    a = {"bundleId": bundle_id, "receiptType": environment, "appAppleId": app_apple_id, "applicationVersion": "1",
         "originalApplicationVersion": "1", "originalPurchaseDate": created_ms - 86_400_000, "receiptCreationDate": created_ms,
         "originalPlatform": "iOS"}
    return {k: v for k, v in a.items() if v is not None}


def notification(signer, notification_type, *, signed_ms, subtype=None, uuid=None, tx=None, renewal_info=None,
                 bundle_id=BUNDLE, environment=ENVIRONMENT, app_apple_id=None, app_tx=None):
    """The signedPayload (JWS) of a v2 notification; tx / renewal_info / app_tx are dicts, signed here.

    RESCIND_CONSENT is shaped as Apple sends it: `appData` (bundle id, environment, app id and app_tx as
    signedAppTransactionInfo) instead of `data`."""
    scope = {"bundleId": bundle_id, "environment": environment}
    if app_apple_id is not None:
        scope["appAppleId"] = app_apple_id
    payload = {"notificationType": notification_type, "notificationUUID": uuid or str(uuidlib.uuid4()), "version": "2.0",
               "signedDate": signed_ms}
    if notification_type == "RESCIND_CONSENT":
        if app_tx is not None:
            scope["signedAppTransactionInfo"] = signer.sign(app_tx)
        payload["appData"] = scope
    else:
        if tx is not None:
            scope["signedTransactionInfo"] = signer.sign(tx)
        if renewal_info is not None:
            scope["signedRenewalInfo"] = signer.sign(renewal_info)
        payload["data"] = scope
    if subtype:
        payload["subtype"] = subtype
    return signer.sign(payload)


def body(signed_payload):
    """The HTTP body Apple posts."""
    return json.dumps({"signedPayload": signed_payload}).encode()
