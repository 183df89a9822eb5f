"""docs/CONFIGURATION.md "Rotating a key", done as written: the key file is read at start, so a key rotates by
restarts with the old and the new key side by side; SIGHUP is no reload (it ends the process, undrained)."""
import hashlib
import json
import os
import signal
import subprocess
import tempfile
import time

import grpc

from conftest import ROOT, Billingd, binary, free_port
from helpers import billing
from billing.v1 import billing_pb2 as pb


def write_keys(path, *entries):
    keys = [{"name": name, "sha256": hashlib.sha256(key.encode()).hexdigest(), "methods": ["billing.v1.Billing/*"]}
            for name, key in entries]
    with open(path, "w") as f:
        json.dump({"keys": keys}, f)


def code_with(server, key):
    """The status of one CreateOrder made with this key."""
    with server.channel() as ch:
        try:
            billing(ch).CreateOrder(pb.CreateOrderRequest(account_id="rotation", product_id="p"),
                                    metadata=[("authorization", f"Bearer {key}")], timeout=10)
            return grpc.StatusCode.OK
        except grpc.RpcError as err:
            return err.code()


def test_the_documented_rotation_keeps_both_keys_valid_while_clients_move(tmp_path):
    doc = open(os.path.join(ROOT, "docs/CONFIGURATION.md")).read()
    section = doc[doc.index("### Rotating a key"):doc.index("## Metrics")]
    assert "SIGHUP" in section and "restart" in section
    old, new = "old-" + os.urandom(16).hex(), "new-" + os.urandom(16).hex()
    keys = tmp_path / "keys.json"
    write_keys(keys, ("checkout-backend", old))
    s = Billingd("--api-keys", str(keys))
    try:
        assert code_with(s, old) == grpc.StatusCode.OK
        assert code_with(s, new) == grpc.StatusCode.UNAUTHENTICATED
        # 1. Both entries in the file: nothing changes until the restart (the file is read at start only).
        write_keys(keys, ("checkout-backend", old), ("checkout-backend-2027", new))
        assert code_with(s, new) == grpc.StatusCode.UNAUTHENTICATED
        # 2. Restart: both keys work.
        s.restart()
        assert code_with(s, old) == grpc.StatusCode.OK and code_with(s, new) == grpc.StatusCode.OK
        # 3. The log line names the key each call used.
        s.restart()  # flushes the log
        names = [json.loads(line).get("api_key") for line in s.log().splitlines() if line.startswith('{"') and '"rpc"' in line]
        assert "checkout-backend" in names and "checkout-backend-2027" in names
        # 4. The old entry removed, restart: the old key is refused, the new one works.
        write_keys(keys, ("checkout-backend-2027", new))
        s.restart()
        assert code_with(s, old) == grpc.StatusCode.UNAUTHENTICATED
        assert code_with(s, new) == grpc.StatusCode.OK
    finally:
        s.stop()


def test_sighup_is_no_reload_it_ends_billingd():
    # As the page says: SIGHUP keeps its default action (whatever the test runner's own disposition is).
    port = free_port()
    proc = subprocess.Popen([binary("billingd"), "--listen", f"127.0.0.1:{port}", "--database",
                             f"sqlite:{tempfile.mkdtemp()}/b.db"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    try:
        deadline = time.time() + 15
        while time.time() < deadline:
            try:
                with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
                    grpc.channel_ready_future(ch).result(timeout=0.5)
                break
            except grpc.FutureTimeoutError:
                assert proc.poll() is None
        proc.send_signal(signal.SIGHUP)
        assert proc.wait(timeout=10) == -signal.SIGHUP
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
