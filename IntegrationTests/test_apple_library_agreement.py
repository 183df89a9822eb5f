"""billingd's verifier and Apple's own App Store Server Library (PyPI app-store-server-library) read the same
JWS with the same roots and settings; both must reach the same verdict and the same decoded fields."""
import json
import os
import subprocess
import tempfile

import pytest
from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier, VerificationException, VerificationStatus

from conftest import ROOT, binary

FIXTURES = os.path.join(os.path.dirname(ROOT), "shared", "fixtures", "appstore")

ENV = {"Sandbox": Environment.SANDBOX, "Production": Environment.PRODUCTION, "Xcode": Environment.XCODE,
       "LocalTesting": Environment.LOCAL_TESTING}
KIND = {"transaction": ("transaction", "verify_and_decode_signed_transaction"),
        "renewalInfo": ("renewal", "verify_and_decode_renewal_info"),
        "notification": ("notification", "verify_and_decode_notification"),
        "appTransaction": ("app-transaction", "verify_and_decode_app_transaction")}


def need_fixtures():
    if not os.path.exists(os.path.join(FIXTURES, "expectations.json")):
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {FIXTURES} is missing")
        pytest.skip(f"{FIXTURES} not found (App Store fixtures live in ../shared)")


def apple_verdict(kind, jws, roots, environment, bundle, app_apple_id):
    verifier = SignedDataVerifier([open(r, "rb").read() for r in roots], False, ENV[environment], bundle, app_apple_id)
    if any("apple-library/certs" in r or "/synthetic/" in r for r in roots):
        # These test PKIs lack key identifiers, which OpenSSL's strict mode (the library's default) refuses;
        # Apple's own tests turn strict mode off for its test PKI, and expectations.json rates them VALID.
        # Real Apple chains and billingd's own test store pass strict mode, so those run strict.
        verifier._chain_verifier.enable_strict_checks = False
    try:
        payload = getattr(verifier, KIND[kind][1])(jws)
    except VerificationException as e:
        status = e.status
        if status == VerificationStatus.INVALID_APP_IDENTIFIER:
            return "wrong_app", None
        if status == VerificationStatus.INVALID_ENVIRONMENT:
            return "environment", None
        return "reject", None
    except Exception:  # the library raises plain errors for some malformed input
        return "reject", None
    return "valid", payload


def billingd_verdict(kind, jws, roots, environment, bundle, app_apple_id):
    with tempfile.NamedTemporaryFile("w", suffix=".jws", delete=False) as f:
        f.write(jws)
    args = [binary("billingctl"), "verify", f.name, "--kind", KIND[kind][0], "--environment", environment]
    for r in roots:
        args += ["--root", r]
    if bundle and kind != "renewalInfo":
        args += ["--bundle-id", bundle]
    if app_apple_id:
        args += ["--app-apple-id", str(app_apple_id)]
    if environment in ("Xcode", "LocalTesting"):
        args += ["--xcode-decode-only", "true"]  # Apple's library skips signature and chain for these
    out = json.loads(subprocess.run(args, capture_output=True, text=True, timeout=30).stdout)
    verdict = out["verdict"]
    if verdict in ("malformed", "untrusted"):
        verdict = "reject"
    return verdict, out.get("decoded")


def apple_fields(payload, keys):
    """The library's model objects, read by the JSON names billingctl prints."""
    out = {}
    for key in keys:
        obj = payload
        for part in key.split("."):
            attr = {"transactionId": "transactionId"}.get(part, part)
            obj = getattr(obj, attr, None) if obj is not None else None
        if obj is None:
            continue
        if hasattr(obj, "value"):  # enums
            obj = obj.value
        out[key] = obj
    return out


def compare(kind, jws, roots, environment, bundle, app_apple_id):
    theirs, payload = apple_verdict(kind, jws, roots, environment, bundle, app_apple_id)
    ours, decoded = billingd_verdict(kind, jws, roots, environment, bundle, app_apple_id)
    assert ours == theirs, f"billingd {ours}, Apple's library {theirs}"
    if theirs == "valid":
        expected = apple_fields(payload, decoded.keys())
        for key, value in decoded.items():
            if key in expected:
                assert value == expected[key] or (isinstance(value, (int, float)) and float(value) == float(expected[key])), \
                    f"{key}: billingd {value!r}, Apple's library {expected[key]!r}"
    return ours


def fixture_rows():
    path = os.path.join(FIXTURES, "expectations.json")
    if not os.path.exists(path):
        return []
    rows = []
    for row in json.load(open(path))["jws"]:
        v = row["verifier"]
        rows.append(pytest.param(row, id=row["file"]))
        # Apple's documented variants: production verifier, another bundle.
        if v["environment"] == "Sandbox":
            rows.append(pytest.param(dict(row, verifier=dict(v, environment="Production", appAppleId=v.get("appAppleId") or 1)),
                                     id=row["file"] + "@production"))
            rows.append(pytest.param(dict(row, verifier=dict(v, bundleId="com.example.other")), id=row["file"] + "@other-bundle"))
    return rows


AGREED = []


@pytest.mark.parametrize("row", fixture_rows())
def test_fixture_agreement(row):
    need_fixtures()
    v = row["verifier"]
    jws = open(os.path.join(FIXTURES, row["file"])).read().strip()
    roots = [os.path.join(FIXTURES, r) for r in row["trustRoots"]]
    if not roots and v["environment"] not in ("Xcode", "LocalTesting"):
        pytest.skip("no roots")
    compare(row["kind"], jws, roots, v["environment"], v["bundleId"], v.get("appAppleId"))
    AGREED.append(row["file"])


@pytest.fixture(scope="module")
def store():
    d = tempfile.mkdtemp(prefix="agreement-store-")
    subprocess.run([binary("billingctl"), "teststore", "init", d], check=True, capture_output=True)
    return d


def mint(store, *args):
    return subprocess.run([binary("billingctl"), "teststore", "transaction", "--store", store, *args],
                          check=True, capture_output=True, text=True).stdout.strip()


STORE_CASES = [
    ("sandbox non-consumable", ["--product", "com.example.premium", "--environment", "sandbox"], {}),
    ("subscription with token", ["--product", "com.example.pro", "--type", "auto_renewable_subscription", "--environment",
                                 "sandbox", "--app-account-token", "7e3fb20b-4cdb-47cc-936d-99d65f608138"], {}),
    ("revoked", ["--product", "p", "--environment", "sandbox", "--revocation-date", "1700000000000"], {}),
    ("production verifier", ["--product", "p", "--environment", "sandbox"], {"environment": "Production"}),
    ("other bundle", ["--product", "p", "--environment", "sandbox", "--bundle-id", "com.other"], {}),
    ("untrusted root", ["--product", "p", "--environment", "sandbox"], {"root": "apple"}),
]


@pytest.mark.parametrize("name,args,override", STORE_CASES, ids=[c[0] for c in STORE_CASES])
def test_test_store_agreement(store, name, args, override):
    jws = mint(store, *args)
    roots = [os.path.join(store, "root.pem")]
    if override.get("root") == "apple":
        need_fixtures()
        roots = [os.path.join(FIXTURES, "roots/AppleRootCA-G3.cer")]
    # Apple's library takes DER roots.
    der_roots = []
    for r in roots:
        if r.endswith(".pem"):
            der = r + ".der"
            subprocess.run(["openssl", "x509", "-in", r, "-outform", "DER", "-out", der], check=True)
            der_roots.append(der)
        else:
            der_roots.append(r)
    compare("transaction", jws, der_roots, override.get("environment", "Sandbox"), "com.example.app", 1)
    AGREED.append(name)


def test_tampered_agreement(store):
    jws = mint(store, "--product", "p", "--environment", "sandbox")
    h, p, s = jws.split(".")
    tampered = h + "." + p[:-4] + ("AAAA" if p[-4:] != "AAAA" else "BBBB") + "." + s
    root = os.path.join(store, "root.pem")
    subprocess.run(["openssl", "x509", "-in", root, "-outform", "DER", "-out", root + ".der"], check=True)
    assert compare("transaction", tampered, [root + ".der"], "Sandbox", "com.example.app", None) == "reject"
    assert compare("transaction", "a.b.c", [root + ".der"], "Sandbox", "com.example.app", None) == "reject"
    AGREED.append("tampered")


def test_report_agreement_count():
    print(f"\nagreement with Apple's app-store-server-library: {len(AGREED)} vectors, same verdict and decoded fields")
