"""docs/APPSTORE_API.md "A local trial against the fake", run as written: its shell blocks in order (setup; the fake
and billingd in the background, as shells 1 and 2; then shell 3's calls), with free ports in place of 8443/8444 and
the built binaries as `billingd` and `billingctl`."""
import json
import os
import re
import signal
import socket
import subprocess
import time

from conftest import ROOT, binary, free_port


def trial_blocks():
    doc = open(os.path.join(ROOT, "docs/APPSTORE_API.md")).read()
    section = doc[doc.index("### A local trial against the fake"):doc.index("## From the command line")]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(blocks) == 4, blocks
    return blocks


def wait_for_port(port, proc, log):
    deadline = time.time() + 30
    while time.time() < deadline:
        assert proc.poll() is None, open(log).read()[-3000:]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}: {open(log).read()[-3000:]}")


def test_the_documented_trial_reaches_the_fake(tmp_path):
    setup, fake_block, billingd_block, calls = trial_blocks()
    notify_port, fake_port, grpc_port = free_port(), free_port(), free_port()

    def adapt(block):
        return block.replace("127.0.0.1:8443", f"127.0.0.1:{notify_port}").replace("127.0.0.1:8444", f"127.0.0.1:{fake_port}") \
            .replace("--port 8444", f"--port {fake_port}")

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("billingd", "billingctl"):
        os.symlink(binary(name), bin_dir / name)
    work = tmp_path / "work"
    work.mkdir()
    os.symlink(os.path.join(ROOT, "IntegrationTests"), work / "IntegrationTests")  # run "from the repository root"
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", BILLING_LISTEN=f"127.0.0.1:{grpc_port}",
               BILLING_ADDR=f"127.0.0.1:{grpc_port}", BILLING_DATABASE=f"sqlite:{tmp_path}/billing.db")

    def run(block):
        return subprocess.run(["bash", "-euo", "pipefail", "-c", adapt(block)], cwd=work, env=env, capture_output=True,
                              text=True, timeout=120)

    p = run(setup)
    assert p.returncode == 0, p.stderr
    started = []
    try:
        for block, port, name in ((fake_block, fake_port, "fake"), (billingd_block, grpc_port, "billingd")):
            log = str(tmp_path / f"{name}.log")
            proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", adapt(block)], cwd=work, env=env,
                                    stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
            started.append(proc)
            wait_for_port(port, proc, log)
            if name == "fake":
                deadline = time.time() + 10
                while not (work / "trial" / "fake.json").read_text().strip() and time.time() < deadline:
                    time.sleep(0.05)
        p = run(calls)
        assert p.returncode == 0, p.stdout + p.stderr
        # The test notification went billingd -> fake -> billingd's notifications port, and billingd took it.
        status = json.loads(p.stdout)
        assert status["sendAttemptResults"] == ["SUCCESS"] and status["environment"] == "ENVIRONMENT_SANDBOX", p.stdout
        # The restore by transaction id reached the fake, which does not know the id.
        err = json.loads(p.stderr[p.stderr.index("{"):])
        assert err["code"] == "NOT_FOUND" and err["reason"] == "TRANSACTION_NOT_FOUND", p.stderr
        notes = [json.loads(line) for line in open(tmp_path / "billingd.log") if line.startswith('{"')]
        assert any(n.get("msg") == "notification" and n.get("type") == "TEST" and n.get("status") == 200
                   and n.get("notification_uuid") == status["notificationUuid"] for n in notes), notes[-5:]
    finally:
        for proc in started:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)  # the session this test started: bash and its pipeline
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
