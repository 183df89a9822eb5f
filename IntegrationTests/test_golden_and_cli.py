"""The committed golden vectors still match Python protobuf, and billingctl / billingd behave as documented."""
import json
import os
import subprocess
import tempfile
import time

from conftest import ROOT, Billingd, binary


def test_golden_vectors_are_current():
    out = os.path.join(tempfile.mkdtemp(), "golden.json")
    subprocess.run(["python3", os.path.join(ROOT, "scripts/golden/make_vectors.py"), out], check=True)
    fresh = json.load(open(out))["vectors"]
    committed = json.load(open(os.path.join(ROOT, "Tests/ProtoWireTests/golden.json")))["vectors"]
    assert fresh == committed


def ctl(server, *args, check=True):
    p = subprocess.run([binary("billingctl"), "--addr", server.address, *args], capture_output=True, text=True, timeout=30)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def test_billingctl_round_trip(server):
    assert json.loads(ctl(server, "health").stdout) == {"status": "SERVING"}
    created = json.loads(ctl(server, "create-order", "--account", "cli", "--product", "com.example.premium",
                             "--idempotency-key", "cli-1", "--quantity", "2").stdout)["order"]
    assert created["state"] == "ORDER_STATE_PENDING" and created["quantity"] == 2
    got = json.loads(ctl(server, "get-order", created["orderId"]).stdout)["order"]
    assert got == created


def test_billingctl_errors(server):
    p = ctl(server, "get-order", "00000000-0000-4000-8000-000000000000", check=False)
    assert p.returncode == 1
    err = json.loads(p.stderr)
    assert err["code"] == "NOT_FOUND" and err["reason"] == "ORDER_NOT_FOUND"
    p = ctl(server, "create-order", "--account", "x", check=False)
    assert p.returncode == 2


def test_billingctl_env_address(server):
    env = dict(os.environ, BILLING_ADDR=server.address)
    p = subprocess.run([binary("billingctl"), "health"], capture_output=True, text=True, env=env, timeout=30)
    assert p.returncode == 0 and "SERVING" in p.stdout


def run_billingd(*args, env=None):
    return subprocess.run([binary("billingd"), *args], capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, **(env or {})), cwd=tempfile.mkdtemp())


def test_bad_flags_fail_with_one_line_naming_the_flag():
    cases = [
        (["--threads", "zero"], "--threads"),
        (["--listen", "nowhere"], "--listen"),
        (["--bogus"], "--bogus"),
        (["--max-message-bytes", "-1"], "--max-message-bytes"),
        (["--database", "mysql://x"], "--database"),
        (["--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"], "--tls-cert"),
        (["--log-level", "loud"], "--log-level"),
        (["--environments", "prod"], "--environments"),
    ]
    for args, flag in cases:
        p = run_billingd(*args)
        assert p.returncode == 2, (args, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and flag in lines[0], (args, p.stderr)


def test_environment_twin_and_flag_precedence():
    p = run_billingd(env={"BILLING_THREADS": "nope"})
    assert p.returncode == 2 and "--threads" in p.stderr
    # A flag beats its twin: the bad twin is replaced by a good flag, so start-up gets past parsing.
    p = run_billingd("--threads", "1", "--listen", "256.0.0.1:1", env={"BILLING_THREADS": "nope"})
    assert p.returncode == 2 and "--listen" in p.stderr


def test_port_in_use_fails_clearly(server):
    p = run_billingd("--listen", server.address)
    assert p.returncode == 2 and "--listen" in p.stderr


def test_sigterm_exits_zero_and_logs_json():
    s = Billingd()
    code = s.stop()
    assert code == 0
    lines = [json.loads(line) for line in s.log().splitlines() if line.startswith("{")]
    assert any(line["msg"] == "started" for line in lines) and lines[-1]["msg"] == "stopped"


def test_billingctl_api_key(tmp_path):
    import hashlib
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"keys": [{"name": "cli", "sha256": hashlib.sha256(b"cli-key").hexdigest(), "methods": ["*"]}]}))
    s = Billingd("--api-keys", str(keys))
    try:
        args = ["create-order", "--account", "keyed", "--product", "p"]
        p = ctl(s, *args, check=False)
        assert p.returncode == 1 and json.loads(p.stderr)["code"] == "UNAUTHENTICATED"
        assert json.loads(ctl(s, "--api-key", "cli-key", *args).stdout)["order"]["accountId"] == "keyed"
        env = dict(os.environ, BILLING_API_KEY="cli-key")
        p = subprocess.run([binary("billingctl"), "--addr", s.address, *args], capture_output=True, text=True, env=env, timeout=30)
        assert p.returncode == 0, p.stderr
        # Every call of a load run carries the key too.
        p = subprocess.run([binary("billingctl"), "--addr", s.address, "--api-key", "cli-key", "load", "--mix", "create=1",
                            "--requests", "20", "--connections", "1", "--json"], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["by_code"] == {"OK": 20}
    finally:
        s.stop()


def test_billingctl_checks_the_server_host_name(tmp_path):
    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)
    d = str(tmp_path)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", "/CN=cli-ca", "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.pem")
    for name, san in (("right", "DNS:localhost,IP:127.0.0.1"), ("wrong", "DNS:billing.elsewhere.test")):
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", f"/CN={name}",
                "-keyout", f"{d}/{name}.key", "-out", f"{d}/{name}.csr")
        with open(f"{d}/{name}.ext", "w") as f:
            f.write(f"subjectAltName={san}\n")
        openssl("x509", "-req", "-in", f"{d}/{name}.csr", "-CA", f"{d}/ca.pem", "-CAkey", f"{d}/ca.key", "-CAcreateserial",
                "-days", "2", "-extfile", f"{d}/{name}.ext", "-out", f"{d}/{name}.pem")
    for name, ok in (("right", True), ("wrong", False)):
        s = Billingd("--tls-cert", f"{d}/{name}.pem", "--tls-key", f"{d}/{name}.key")
        try:
            p = ctl(s, "--ca", f"{d}/ca.pem", "health", check=False)
            assert (p.returncode == 0) == ok, p.stderr
            if not ok:
                assert "handshake" in p.stderr or "verify" in p.stderr.lower()
                # --insecure still skips every check, the name included.
                assert ctl(s, "--insecure", "health").returncode == 0
        finally:
            s.stop()


def test_billingctl_names_a_mistyped_flag(server):
    p = ctl(server, "create-order", "--acount", "x", "--product", "p", check=False)
    assert p.returncode == 2 and "unknown flag --acount" in p.stderr
    p = ctl(server, "health", "--bogus", check=False)
    assert p.returncode == 2 and "unknown flag --bogus" in p.stderr
    p = ctl(server, "get-order", "--product", "p", check=False)  # a flag of another command
    assert p.returncode == 2 and "unknown flag --product" in p.stderr


def test_billingctl_load_backs_off_when_it_cannot_connect():
    from conftest import free_port
    started = time.time()
    p = subprocess.run([binary("billingctl"), "--addr", f"127.0.0.1:{free_port()}", "load", "--mix", "health=1",
                        "--duration", "3", "--connections", "2", "--json"], capture_output=True, text=True, timeout=60)
    elapsed = time.time() - started
    attempts = json.loads(p.stdout)["by_code"]["TRANSPORT"]
    # It keeps trying for the run (not one failure and out), with backoff (not thousands of attempts).
    assert elapsed >= 2.5
    assert 4 <= attempts <= 30, attempts
