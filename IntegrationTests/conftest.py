"""Fixtures for the interop suite: billingd as a real process on a free loopback port,
and grpcio stubs generated from schemas/ with grpcio-tools."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import grpc
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.path.join(ROOT, "IntegrationTests", "gen")


def _generate_stubs():
    from grpc_tools import protoc
    os.makedirs(GEN, exist_ok=True)
    rc = protoc.main(["protoc", f"-I{ROOT}/schemas", f"--python_out={GEN}", f"--grpc_python_out={GEN}",
                      "billing/v1/billing.proto", "billing/admin/v1/admin.proto"])
    assert rc == 0, "protoc failed"


_generate_stubs()
sys.path.insert(0, GEN)

# Every folder the suite makes with tempfile.mkdtemp (databases, keys, catalogs) is removed when the whole run
# passes; after a failure they stay for a look (BILLING_KEEP_TMP=1 keeps them always). Before, each run left a few
# hundred in /tmp.
_made_dirs = []
_mkdtemp = tempfile.mkdtemp


def _tracked_mkdtemp(*args, **kwargs):
    path = _mkdtemp(*args, **kwargs)
    _made_dirs.append(path)
    return path


tempfile.mkdtemp = _tracked_mkdtemp


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 0 and os.environ.get("BILLING_KEEP_TMP") != "1":
        for path in _made_dirs:
            shutil.rmtree(path, ignore_errors=True)


def pytest_collection_modifyitems(items):
    """The short nemesis run goes last: it is the longest test and should not slow the others' feedback."""
    items.sort(key=lambda item: os.path.basename(str(item.fspath)) == "test_nemesis_short.py")


def binary(name):
    path = os.environ.get(name.upper()) or os.path.join(ROOT, ".build", "debug", name)
    if not os.path.exists(path):
        pytest.fail(f"{path} not found: build with `swift build` first (scripts/test does)")
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Billingd:
    """One billingd process; `restart()` keeps its database, `kill()` is SIGKILL."""

    def __init__(self, *flags, db_dir=None, database=None):
        self.dir = db_dir or tempfile.mkdtemp(prefix="billingd-interop-")
        self.flags = list(flags)
        self.database = database or f"sqlite:{self.dir}/billing.db"
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.proc = None
        self.log_path = os.path.join(self.dir, "billingd.log")
        self.start()

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [binary("billingd"), "--listen", self.address, "--database", self.database, *self.flags],
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 15
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"billingd exited with {self.proc.returncode}: {open(self.log_path).read()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)
        # Never leave a process behind: the caller gets no object to stop.
        self.proc.kill()
        self.proc.wait()
        raise RuntimeError("billingd did not start listening within 15 s")

    def channel(self):
        return grpc.insecure_channel(self.address)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def restart(self):
        self.stop()
        self.start()

    def log(self):
        with open(self.log_path) as f:
            return f.read()


@pytest.fixture(scope="module")
def server():
    s = Billingd()
    yield s
    s.stop()
    shutil.rmtree(s.dir, ignore_errors=True)


@pytest.fixture
def fresh():
    """A billingd of the test's own, with flags: fresh('--max-message-bytes', '1024')."""
    started = []

    def make(*flags):
        s = Billingd(*flags)
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()
        shutil.rmtree(s.dir, ignore_errors=True)


def postgres_database():
    """A fresh database on the test PostgreSQL (BILLING_TEST_POSTGRES), or skip (fail under CI=true)."""
    import uuid
    base = os.environ.get("BILLING_TEST_POSTGRES")
    if not base:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but BILLING_TEST_POSTGRES is not set (scripts/test starts PostgreSQL)")
        pytest.skip("no PostgreSQL: set BILLING_TEST_POSTGRES or run scripts/test")
    name = "billing_i_" + uuid.uuid4().hex[:12]
    subprocess.run(["psql", base, "-q", "-c", f"CREATE DATABASE {name}"], check=True, capture_output=True)
    return base.rsplit("/", 1)[0] + "/" + name
