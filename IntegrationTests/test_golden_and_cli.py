"""The committed golden vectors still match Python protobuf, and billingctl / billingd behave as documented."""
import json
import os
import subprocess
import tempfile
import time

from conftest import ROOT, Billingd, binary, free_port


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


def test_billingctl_says_which_port_it_reached(tmp_path):
    d = str(tmp_path)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", f"{d}/s.key", "-out", f"{d}/s.pem"], check=True, capture_output=True)
    # A plaintext client against the TLS port: the reset comes with the advice to use --tls.
    s = Billingd("--tls-cert", f"{d}/s.pem", "--tls-key", f"{d}/s.key")
    try:
        p = ctl(s, "health", check=False)
        assert p.returncode == 1 and "is this a TLS port? try --tls" in p.stderr, p.stderr
        assert ctl(s, "--insecure", "health").returncode == 0
    finally:
        s.stop()
    # The notifications port is HTTP/2 but not gRPC: say so instead of {"code":"UNKNOWN","message":""}.
    notify = f"127.0.0.1:{free_port()}"
    s = Billingd("--notifications-listen", notify)
    try:
        p = subprocess.run([binary("billingctl"), "--addr", notify, "health"], capture_output=True, text=True, timeout=30)
        assert p.returncode == 1 and "did not answer gRPC" in p.stderr and "wrong port?" in p.stderr, p.stderr
        assert "UNKNOWN" not in p.stderr
        assert ctl(s, "health").returncode == 0
    finally:
        s.stop()


def test_help_and_docs_say_the_truth(tmp_path):
    helptext = subprocess.run([binary("billingd"), "--help"], capture_output=True, text=True, timeout=30)
    text = helptext.stdout + helptext.stderr
    # The reference page it names exists; no page by another name.
    assert "docs/CONFIGURATION.md" in text and os.path.exists(os.path.join(ROOT, "docs/CONFIGURATION.md"))
    assert "CONFIG.md" not in text.replace("docs/CONFIGURATION.md", "")
    assert "--dev-store DIR" in text
    metrics_line = next(line for line in text.splitlines() if "--metrics-listen" in line)
    assert "h2c" in metrics_line
    # The metrics port does serve h2c as well as HTTP/1.1, as the help now says.
    metrics = f"127.0.0.1:{free_port()}"
    s = Billingd("--metrics-listen", metrics)
    try:
        for flag, version in (("--http1.1", "1.1"), ("--http2-prior-knowledge", "2")):
            r = subprocess.run(["curl", "-s", flag, "-o", "/dev/null", "-w", "%{http_version} %{http_code}", f"http://{metrics}/healthz"],
                               capture_output=True, text=True, timeout=30)
            assert r.stdout == f"{version} 200", r.stdout
        # ERRORS.md: application/grpc and application/grpc+proto are accepted, application/grpc+json is 415.
        codes = {}
        for ctype in ("application/grpc", "application/grpc+proto", "application/grpc+json"):
            r = subprocess.run(["curl", "-s", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
                                "-H", f"content-type: {ctype}", "-H", "te: trailers", "--data-binary", "@/dev/null",
                                f"http://{s.address}/grpc.health.v1.Health/Check"], capture_output=True, text=True, timeout=30)
            codes[ctype] = r.stdout
        assert codes == {"application/grpc": "200", "application/grpc+proto": "200", "application/grpc+json": "415"}, codes
    finally:
        s.stop()
    errors = open(os.path.join(ROOT, "docs/ERRORS.md")).read()
    row = next(line for line in errors.splitlines() if "HTTP 415" in line and "content-type" in line)
    assert "`application/grpc+proto`" in row and "application/grpc+..." not in row and "application/grpc+json" in row
    # CONFIGURATION.md: without --trust-root billingd starts without --apple-app-id; with one it refuses.
    config = open(os.path.join(ROOT, "docs/CONFIGURATION.md")).read()
    row = next(line for line in config.splitlines() if line.startswith("| `--apple-app-id"))
    assert "--trust-root" in row
    s = Billingd("--bundle-id", "com.example.app")
    s.stop()
    root = tmp_path / "root.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                    "-subj", "/CN=root", "-keyout", str(tmp_path / "root.key"), "-out", str(root)], check=True, capture_output=True)
    p = subprocess.run([binary("billingd"), "--listen", f"127.0.0.1:{free_port()}", "--database", f"sqlite:{tmp_path}/b.db",
                        "--bundle-id", "com.example.app", "--trust-root", str(root)], capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "--apple-app-id" in p.stderr, p.stderr


def test_billingctl_usage_errors_are_one_line_naming_the_help_to_read(server):
    cases = [
        (["create-order", "--account", "x"], "create-order needs --account and --product", "billingctl help create-order"),
        (["get-order", "--product", "p"], "unknown flag --product", "billingctl help get-order"),
        (["restore"], "restore needs --account", "billingctl help restore"),
        (["frob"], "unknown command 'frob'", "billingctl help'"),
        ([], "no command", "billingctl help'"),
        (["help", "frob"], "frob", "billingctl help'"),
    ]
    for args, what, where in cases:
        p = ctl(server, *args, check=False)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1, (args, p.stderr)
        assert what in lines[0] and where in lines[0], (args, lines[0])
        assert p.stdout == ""


def test_billingctl_help_per_command():
    def run(*args):
        p = subprocess.run([binary("billingctl"), *args], capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, (args, p.stderr)
        return p.stdout
    everything = run("help")
    assert run("--help") == everything and run("-h") == everything
    for command in ("health", "create-order", "get-order", "submit-receipt", "restore", "teststore", "entitlements", "events",
                    "history", "transaction", "notify", "offer", "proto-json", "demo", "load", "reconcile", "lookup-order",
                    "admin", "appstore", "verify"):
        own = run("help", command)
        # Its own lines only (the usage line names it), far shorter than the whole help, which holds it.
        assert own.startswith(f"usage: billingctl [global options] {command}") or command == "lookup-order", own
        assert command in own.splitlines()[0] and len(own.splitlines()) < len(everything.splitlines()) // 2, command
        assert run(command, "--help") == own and run("--addr", "127.0.0.1:1", command, "-h") == own, command
        assert own.splitlines()[0].removeprefix("usage: billingctl [global options] ") in everything, command
    assert "--transaction-id ID ..." in run("help", "restore")
    assert "teststore init" not in run("help", "create-order")


def test_billingctl_restore_sends_transaction_ids(server):
    # Without App Store Server API credentials, a restore by transaction id is refused as such: the ids reached billingd.
    p = ctl(server, "restore", "--account", "cli-restore", "--transaction-id", "2000000000000001",
            "--transaction-id", "2000000000000002", check=False)
    assert p.returncode == 1, p.stderr
    err = json.loads(p.stderr)
    assert err["code"] == "FAILED_PRECONDITION" and err["reason"] == "APPSTORE_API_NOT_CONFIGURED", err
    # Without them the same restore carries no proof at all.
    p = ctl(server, "restore", "--account", "cli-restore", check=False)
    assert p.returncode == 1 and json.loads(p.stderr)["metadata"] == {"field": "proof"}, p.stderr
