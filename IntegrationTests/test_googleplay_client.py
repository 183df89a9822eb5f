"""billingd's Google Play client (Swift: GooglePlayHTTP's GooglePlayAPIClient, GooglePlayAPI's GoogleIDTokenVerifier)
against the fake Google Play (googleplay_fake.py, which Google's own Python clients are held to in
test_googleplay_fake.py): this test starts the fake and runs the Swift suite GooglePlayFakeTests with the fake's URL,
CA, service-account key file, push-token key sets and a push token of every variant in its environment.

The Swift suite calls every endpoint billingd uses (products get/acknowledge/consume, subscriptionsv2.get,
subscriptions.acknowledge, voidedpurchases.list with paging) with tokens from the fake's token endpoint (which checks
the RS256 assertion), scripts the fake through its control API (purchases, upgrades, voids, faults, revoked tokens, an
outage) and checks the push tokens with both key-set forms. It needs the test build (`swift build --build-tests`,
which scripts/test does first); about 10 s."""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = ("valid", "wrong_audience", "wrong_email", "unverified_email", "unknown_key", "expired", "bad_signature",
            "wrong_issuer")
AUDIENCE = "https://billingd.example.com/googleplay/rtdn"


def swift():
    return shutil.which("swift", path=os.environ.get("PATH", "") + os.pathsep + "/opt/swift/usr/bin")


@pytest.fixture(scope="module")
def fake():
    googleplay_fake = pytest.importorskip("googleplay_fake", reason="IntegrationTests/googleplay_fake.py is not here")
    with googleplay_fake.FakeGooglePlay(packages=("com.example.app",)) as f:
        yield f


def test_swift_client_against_the_fake(fake):
    exe = swift()
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but swift is not on PATH", pytrace=False)
        pytest.skip("swift is not on PATH")
    with tempfile.TemporaryDirectory(prefix="googleplay-client-") as folder:
        tokens_path = os.path.join(folder, "push-tokens.json")
        with open(tokens_path, "w") as f:
            json.dump({"audience": AUDIENCE, "tokens": {v: fake.push_token(AUDIENCE, variant=v) for v in VARIANTS}}, f)
        env = dict(os.environ, GOOGLEPLAY_FAKE_URL=fake.url, GOOGLEPLAY_FAKE_CA=fake.ca_path,
                   GOOGLEPLAY_FAKE_SERVICE_ACCOUNT=fake.service_account_path, GOOGLEPLAY_FAKE_JWKS=fake.jwks_path,
                   GOOGLEPLAY_FAKE_PEM_CERTS=fake.pem_certs_path, GOOGLEPLAY_FAKE_PUSH_EMAIL=fake.push_email,
                   GOOGLEPLAY_FAKE_PUSH_TOKENS=tokens_path)
        command = [exe, "test", "--skip-build", "--filter", "GooglePlayTests.GooglePlayFakeTests"]
        if shutil.which("flock") and os.environ.get("CI") != "true":
            # Developers share the machine's cores: swift runs one at a time under this lock.
            command = ["flock", "/tmp/swift-build.lock"] + command
        run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-6000:]
    assert "Test run with 5 tests" in output and "passed" in output, output[-6000:]
    assert "skipped" not in output.lower(), output[-6000:]
    # What the fake saw: every endpoint billingd uses, each answered, and tokens only from its token endpoint.
    methods = {call["method"] for call in fake.calls() if call["status"] == 200}
    assert {"oauth2.token", "purchases.products.get", "purchases.products.acknowledge", "purchases.products.consume",
            "purchases.subscriptionsv2.get", "purchases.subscriptions.acknowledge",
            "purchases.voidedpurchases.list"} <= methods
