"""docs/AFTER_SALE.md "A worked example", run as written, twice on the same database: shell 1's billingd (with a free
port in place of 8443), then shell 2's block with the built billingctl, once and again. Each run completes and refunds
its own order and shows its account's five events."""
import json
import os
import re
import signal
import socket
import subprocess
import time

from conftest import ROOT, binary, free_port

EXPECTED_EVENTS = ["EVENT_TYPE_ORDER_CREATED", "EVENT_TYPE_ORDER_COMPLETED", "EVENT_TYPE_ENTITLEMENT_GRANTED",
                   "EVENT_TYPE_ORDER_REFUNDED", "EVENT_TYPE_ENTITLEMENT_REVOKED"]


def example_blocks(doc):
    section = doc[doc.index("## A worked example"):]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(blocks) == 2, blocks
    return blocks


def run_example(doc, tmp_path, runs=2):
    """Runs the example `runs` times against one billingd and database; returns each run's stdout."""
    server_block, client_block = example_blocks(doc)
    notify_port, grpc_port = free_port(), free_port()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("billingd", "billingctl"):
        if not (bin_dir / name).exists():
            os.symlink(binary(name), bin_dir / name)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", BILLING_LISTEN=f"127.0.0.1:{grpc_port}",
               BILLING_ADDR=f"127.0.0.1:{grpc_port}")

    def adapt(block):
        return block.replace("127.0.0.1:8443", f"127.0.0.1:{notify_port}")

    log = tmp_path / "billingd.log"
    server = subprocess.Popen(["bash", "-c", "exec " + adapt(server_block).strip()], cwd=work, env=env,
                              stdout=open(log, "w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 30
        while True:
            assert server.poll() is None, log.read_text()[-3000:]
            try:
                with socket.create_connection(("127.0.0.1", notify_port), timeout=0.2):
                    break
            except OSError:
                assert time.time() < deadline, log.read_text()[-3000:]
                time.sleep(0.05)
        outputs = []
        for _ in range(runs):
            p = subprocess.run(["bash", "-eo", "pipefail", "-c", adapt(client_block)], cwd=work, env=env,
                               capture_output=True, text=True, timeout=120)
            assert p.returncode == 0, p.stdout + p.stderr
            outputs.append(p.stdout)
        return outputs
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_the_worked_example_runs_again_on_the_same_database(tmp_path):
    doc = open(os.path.join(ROOT, "docs/AFTER_SALE.md")).read()
    outputs = run_example(doc, tmp_path, runs=2)
    orders = set()
    for out in outputs:
        # billingctl notify prints the body as a JSON string: {"result":"applied"} escaped.
        assert re.findall(r'result\\":\\"(\w+)', out) == ["applied", "applied", "duplicate"], out
        assert re.findall(r'^\s+"state": "(ORDER_STATE_\w+)"', out, re.M) == ["ORDER_STATE_COMPLETED", "ORDER_STATE_REFUNDED"], out
        events = [json.loads(line) for line in out.splitlines() if line.startswith("{") and '"cursor"' in line]
        assert [e["type"] for e in events] == EXPECTED_EVENTS, out
        orders.add(out.split("\n", 1)[0])
    assert len(orders) == 2  # each run made its own order
