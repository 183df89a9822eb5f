"""deploy/make-secrets.sh makes scoped API keys (an app backend that cannot call Admin, an operator that can only
call Admin) and a place for the App Store Server API key; a billingd started with what it makes enforces both."""
import os
import re
import subprocess

import grpc

from conftest import ROOT, Billingd
from helpers import billing, error_info
from billing.admin.v1 import admin_pb2, admin_pb2_grpc
from billing.v1 import billing_pb2 as pb
from billing.v1 import billing_pb2_grpc as pb_grpc


def make_secrets(directory):
    p = subprocess.run(["bash", os.path.join(ROOT, "deploy/make-secrets.sh"), str(directory)], capture_output=True,
                       text=True, timeout=60, check=True)
    keys = dict(re.findall(r"^(app-backend|operator|support|finance) API key [^:]*: ([0-9a-f]{64})$", p.stdout, re.M))
    assert set(keys) == {"app-backend", "operator", "support", "finance"}, p.stdout
    return keys, p


def status(call):
    try:
        call()
        return "OK", None
    except grpc.RpcError as err:
        return err.code().name, error_info(err).reason


def test_make_secrets_scopes_the_keys_and_billingd_enforces_them(tmp_path):
    keys, _ = make_secrets(tmp_path)
    text = (tmp_path / "api-keys.json").read_text()
    assert '"*"' not in text and keys["app-backend"] not in text  # digests only
    s = Billingd("--api-keys", str(tmp_path / "api-keys.json"))
    try:
        with s.channel() as ch:
            stub, admin = billing(ch), admin_pb2_grpc.AdminStub(ch)

            def create(key):
                return lambda: stub.CreateOrder(pb.CreateOrderRequest(account_id="deploy", product_id="p"),
                                                metadata=[("authorization", f"Bearer {key}")], timeout=10)

            def reconcile(key):
                return lambda: admin.Reconcile(admin_pb2.ReconcileRequest(), metadata=[("authorization", f"Bearer {key}")],
                                               timeout=10)

            assert status(create(keys["app-backend"])) == ("OK", None)
            assert status(reconcile(keys["app-backend"])) == ("PERMISSION_DENIED", "PERMISSION_DENIED")
            # The operator reaches Admin (which has no App Store credentials here), and nothing else.
            assert status(reconcile(keys["operator"])) == ("FAILED_PRECONDITION", "APPSTORE_API_NOT_CONFIGURED")
            assert status(create(keys["operator"])) == ("PERMISSION_DENIED", "PERMISSION_DENIED")
            # Support reaches Support (and is audited under its key's name), not Admin nor CreateOrder.
            support = pb_grpc.SupportStub(ch)
            find = lambda key: lambda: support.FindCustomers(pb.FindCustomersRequest(query="deploy"),
                                                             metadata=[("authorization", f"Bearer {key}")], timeout=10)
            assert status(find(keys["support"])) == ("OK", None)
            assert status(find(keys["app-backend"])) == ("PERMISSION_DENIED", "PERMISSION_DENIED")
            assert status(reconcile(keys["support"])) == ("PERMISSION_DENIED", "PERMISSION_DENIED")
            assert status(create(keys["support"])) == ("PERMISSION_DENIED", "PERMISSION_DENIED")
            trail = support.ListAuditEntries(pb.ListAuditEntriesRequest(method="billing.v1.Support/FindCustomers"),
                                             metadata=[("authorization", f"Bearer {keys['support']}")], timeout=10).entries
            assert [(e.operator, e.outcome) for e in trail] == [("app-backend", "PERMISSION_DENIED"), ("support", "OK")]
            # Finance reaches Revenue only: no customer lookups, no orders.
            revenue = pb_grpc.RevenueStub(ch)
            summary = lambda key: lambda: revenue.GetRevenueSummary(pb.GetRevenueSummaryRequest(),
                                                                    metadata=[("authorization", f"Bearer {key}")], timeout=10)
            assert status(summary(keys["finance"])) == ("OK", None)
            for other in ("app-backend", "support", "operator"):
                assert status(summary(keys[other])) == ("PERMISSION_DENIED", "PERMISSION_DENIED"), other
            assert status(find(keys["finance"])) == ("PERMISSION_DENIED", "PERMISSION_DENIED")
            assert status(create(keys["finance"])) == ("PERMISSION_DENIED", "PERMISSION_DENIED")
    finally:
        s.stop()


def test_make_secrets_keeps_a_place_for_the_app_store_key(tmp_path):
    _, first = make_secrets(tmp_path)
    assert (tmp_path / "appstore").is_dir()
    env = (tmp_path / "billingd.env").read_text()
    # The three App Store Server API settings are there, commented out, naming the path compose mounts.
    settings = dict(re.findall(r"^# (BILLING_APPSTORE_API_[A-Z_]+)=(.*)$", env, re.M))
    assert settings["BILLING_APPSTORE_API_PRIVATE_KEY"] == "/etc/billingd/appstore/AuthKey.p8"
    assert {"BILLING_APPSTORE_API_KEY_ID", "BILLING_APPSTORE_API_ISSUER_ID"} <= set(settings)
    compose = open(os.path.join(ROOT, "deploy/docker-compose.yml")).read()
    assert "./secrets/appstore:/etc/billingd/appstore:ro" in compose
    for manifest in ("deploy/k8s/deployment.yaml", "deploy/k8s/configmap.yaml"):
        assert "/etc/billingd/appstore" in open(os.path.join(ROOT, manifest)).read(), manifest
    # With a key in that place and the lines uncommented, billingd starts with the App Store Server API on.
    p8 = tmp_path / "appstore" / "AuthKey.p8"
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(p8)],
                   check=True, capture_output=True)
    s = Billingd("--bundle-id", "com.example.app", "--appstore-api-key-id", settings["BILLING_APPSTORE_API_KEY_ID"],
                 "--appstore-api-issuer-id", settings["BILLING_APPSTORE_API_ISSUER_ID"], "--appstore-api-private-key", str(p8),
                 "--reconcile-interval", "0")
    try:
        assert s.proc.poll() is None
    finally:
        s.stop()
    # Run again: every file is kept, no key is printed.
    again = subprocess.run(["bash", os.path.join(ROOT, "deploy/make-secrets.sh"), str(tmp_path)], capture_output=True,
                           text=True, timeout=60, check=True)
    assert "API key" not in again.stdout and (tmp_path / "billingd.env").read_text() == env


def test_make_secrets_warns_about_an_old_key_for_every_method(tmp_path):
    (tmp_path / "api-keys.json").write_text('{ "keys": [ { "name": "local", "sha256": "%s", "methods": ["*"] } ] }' % ("0" * 64))
    p = subprocess.run(["bash", os.path.join(ROOT, "deploy/make-secrets.sh"), str(tmp_path)], capture_output=True,
                       text=True, timeout=60, check=True)
    assert "every method" in p.stderr and "Admin" in p.stderr
