"""docs/CONFIGURATION.md "Rotating a key", done as written: the key file is read at start and on SIGHUP, so a key
rotates by SIGHUP (or restarts) with the old and the new key side by side; a file that does not load changes
nothing."""
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


def test_sighup_reloads_the_keys_and_a_bad_file_changes_nothing(tmp_path):
    old, new = "old-" + os.urandom(16).hex(), "new-" + os.urandom(16).hex()
    keys = tmp_path / "keys.json"
    write_keys(keys, ("checkout-backend", old))
    s = Billingd("--api-keys", str(keys))
    try:
        def hup_and_wait(marker, count):
            s.proc.send_signal(signal.SIGHUP)
            deadline = time.time() + 10
            while time.time() < deadline and s.log().count(marker) < count:
                time.sleep(0.05)
            assert s.log().count(marker) >= count, s.log()[-2000:]
        assert code_with(s, new) == grpc.StatusCode.UNAUTHENTICATED
        # Both keys, SIGHUP: both work, without a restart, and the process is the same one.
        write_keys(keys, ("checkout-backend", old), ("checkout-backend-2027", new))
        pid = s.proc.pid
        hup_and_wait('"api keys reloaded"', 1)
        assert s.proc.poll() is None and s.proc.pid == pid
        assert code_with(s, old) == grpc.StatusCode.OK and code_with(s, new) == grpc.StatusCode.OK
        # A broken file: the keys in use stay, and the log says why.
        with open(keys, "w") as f:
            f.write("{not json")
        hup_and_wait('"api keys not reloaded', 1)
        assert code_with(s, old) == grpc.StatusCode.OK and code_with(s, new) == grpc.StatusCode.OK
        # A key naming a method billingd does not have: refused the same way.
        with open(keys, "w") as f:
            json.dump({"keys": [{"name": "typo", "sha256": hashlib.sha256(new.encode()).hexdigest(),
                                 "methods": ["billing.v1.Billing/CreateOrdr"]}]}, f)
        hup_and_wait('"api keys not reloaded', 2)
        assert code_with(s, old) == grpc.StatusCode.OK
        # The old entry removed, SIGHUP: the old key is refused, the new one works.
        write_keys(keys, ("checkout-backend-2027", new))
        hup_and_wait('"api keys reloaded"', 2)
        assert code_with(s, old) == grpc.StatusCode.UNAUTHENTICATED
        assert code_with(s, new) == grpc.StatusCode.OK
        # SIGTERM still drains and exits 0.
        assert s.stop() == 0
    finally:
        s.stop()
