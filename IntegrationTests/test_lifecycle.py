"""The threads of a running billingd and what is left of them after SIGTERM (Lifecycle's service group).

Every background loop is a named Lifecycle worker, so the kernel's thread names (/proc/PID/task/*/comm, what
`ps -L` and `top -H` show) say what runs; after SIGTERM the service group stops them in reverse order and joins
them, and the "stopped" line lists the threads still there besides the exiting main thread: none. On SQLite and
on PostgreSQL (its prober and LISTEN connection are workers too).
"""
import base64
import json
import os
import time

import pytest

from conftest import Billingd, postgres_database


def thread_names(pid):
    names = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except FileNotFoundError:
            pass  # ended meanwhile
    return sorted(names)


def log_lines(s):
    return [json.loads(line) for line in s.log().splitlines() if line.startswith("{")]


def start(tmp_path, database=None):
    secret = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    return Billingd(
        "--dev", "--dev-store", str(tmp_path / "teststore"), "--order-ttl", "600",
        "--metrics-listen", "127.0.0.1:0", "--notifications-listen", "127.0.0.1:0",
        "--webhook-url", "http://127.0.0.1:9/hook", "--webhook-secret", secret, "--log-level", "debug",
        db_dir=str(tmp_path), database=database)


def check(s, expected):
    deadline = time.time() + 10
    while time.time() < deadline:
        names = thread_names(s.proc.pid)
        if expected <= set(names):
            break
        time.sleep(0.05)
    assert expected <= set(names), f"missing {sorted(expected - set(names))}; running: {names}"
    # Only the process's first thread keeps the binary's name: every other thread is named by its owner.
    assert names.count("billingd") == 1, names
    assert s.stop() == 0
    lines = log_lines(s)
    stopped = [line for line in lines if line["msg"] == "stopped"]
    assert stopped and stopped[-1]["threads_left"] == "", stopped
    assert not [line for line in lines if line["msg"] == "service stuck"]
    order = [line["service"] for line in lines if line["msg"] == "service stopped"]
    started = [line["service"] for line in lines if line["msg"] == "service started"]
    # Stopped in the reverse order of start: the port first, the store last.
    assert order == list(reversed(started)), (started, order)
    assert started[0] == "store" and started[-1] == "listen"
    return names


def test_sqlite_threads_named_and_none_left_after_stop(tmp_path):
    names = check(start(tmp_path), {
        "loop-0", "sqlite-writer", "sqlite-reader-0", "sqlite-checkpoi", "log-writer", "order-expiry",
        "grant-expiry", "revenue-gauges", "webhook-sender"})
    print("\nthreads of a running billingd (SQLite):", ", ".join(names))


def test_postgres_threads_named_and_none_left_after_stop(tmp_path):
    names = check(start(tmp_path, database=postgres_database()), {
        "loop-0", "postgres-0", "postgres-probe", "postgres-listen", "log-writer", "order-expiry", "webhook-sender"})
    print("\nthreads of a running billingd (PostgreSQL):", ", ".join(names))
