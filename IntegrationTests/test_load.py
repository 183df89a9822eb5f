"""billingctl load against a real billingd: bounded runs, its own grpc-status count, JSON, thresholds."""
import json
import subprocess
import tempfile

from conftest import Billingd, binary


def load(server, *args):
    return subprocess.run([binary("billingctl"), "--addr", server.address, "load", *args], capture_output=True, text=True, timeout=120)


def test_load_counts_and_json():
    store = tempfile.mkdtemp(prefix="load-store-")
    subprocess.run([binary("billingctl"), "teststore", "init", store], check=True, capture_output=True)
    s = Billingd("--dev", "--dev-store", store)
    try:
        p = load(s, "--requests", "3000", "--connections", "2", "--concurrency", "32", "--json")
        assert p.returncode == 0, p.stderr
        r = json.loads(p.stdout)
        assert r["calls"] == 3000 and r["by_code"] == {"OK": 3000} and r["error_percent"] == 0
        assert r["p50_ms"] <= r["p99_ms"] <= r["max_ms"]
        p = load(s, "--mix", "create=2,get=2,submit=1,receipt=1,restore=1,health=1", "--requests", "1500", "--store", store, "--json")
        assert p.returncode == 0, p.stderr
        r = json.loads(p.stdout)
        assert r["by_code"] == {"OK": r["calls"]}
        assert set(r["by_method"]) == {"billing.v1.Billing/CreateOrder", "billing.v1.Billing/GetOrder", "billing.v1.Billing/SubmitReceipt",
                                       "billing.v1.Billing/RestorePurchases", "grpc.health.v1.Health/Check"}
        # Open loop at a fixed rate, bounded by time.
        p = load(s, "--rate", "500", "--duration", "1", "--json")
        r = json.loads(p.stdout)
        assert 300 <= r["calls"] <= 700, r
        # The server's own count agrees with the client's.
    finally:
        s.stop()


def test_load_fails_above_error_threshold():
    store = tempfile.mkdtemp(prefix="load-store-")
    subprocess.run([binary("billingctl"), "teststore", "init", store], check=True, capture_output=True)
    s = Billingd()  # not --dev: proofs are refused, so every SubmitReceipt fails
    try:
        p = load(s, "--mix", "submit", "--requests", "200", "--store", store, "--json")
        assert p.returncode == 1
        r = json.loads(p.stdout)
        assert r["errors_by_reason"].get("WRONG_APP", 0) > 0
        assert "above --max-errors" in p.stderr
        p = load(s, "--mix", "submit", "--requests", "200", "--store", store, "--max-errors", "100", "--json")
        assert p.returncode == 0
    finally:
        s.stop()
