"""Wall-clock steps: billingd runs under libfaketime (Debian `faketime`) with only the wall clock faked
(FAKETIME_DONT_FAKE_MONOTONIC=1) and an offset read from a file at every call, so the test steps the
wall clock by hours while billingd runs. Deadlines, idle timeouts and order expiry must follow the
monotonic clock: a +1 h step neither ends a 3 s deadline early nor expires a PENDING order that is a
second old; a -1 h step does not make a deadline last an hour. Skipped when libfaketime is missing."""
import glob
import threading
import os
import shutil
import tempfile
import time

import grpc
import pytest

from conftest import Billingd, binary
from helpers import billing, pb

LIBS = glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1")


class FakeWallClock:
    def __init__(self, d):
        self.path = os.path.join(d, "faketime")
        self.set("+0")

    def set(self, offset):
        with open(self.path + ".tmp", "w") as f:
            f.write(offset + "\n")
        os.replace(self.path + ".tmp", self.path)

    def env(self):
        return {"LD_PRELOAD": LIBS[0], "FAKETIME_TIMESTAMP_FILE": self.path, "FAKETIME_NO_CACHE": "1",
                "FAKETIME_DONT_FAKE_MONOTONIC": "1"}


@pytest.fixture
def stepped():
    if not LIBS:
        pytest.skip("libfaketime not installed (apt-get install faketime)")
    d = tempfile.mkdtemp(prefix="billingd-clock-")
    clock = FakeWallClock(d)
    # Through `env`: billingd started by Python's Popen directly with libfaketime preloaded loses its arguments.
    wrapper = os.path.join(d, "billingd-faketime")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\n" + "".join(f"export {k}={v}\n" for k, v in clock.env().items()) +
                f"exec env {binary('billingd')} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    started = []

    def start(*flags):
        saved = os.environ.get("BILLINGD")
        os.environ["BILLINGD"] = wrapper  # conftest.binary() reads it
        try:
            s = Billingd(*flags, db_dir=d)
        finally:
            if saved is None:
                os.environ.pop("BILLINGD", None)
            else:
                os.environ["BILLINGD"] = saved
        started.append(s)
        return s

    yield clock, start
    for s in started:
        s.stop()
    shutil.rmtree(d, ignore_errors=True)


def watch_until_deadline(stub, seconds):
    """A WatchEvents call that only the deadline ends; answers how long it lasted."""
    t0 = time.monotonic()
    try:
        for _ in stub.WatchEvents(pb.WatchEventsRequest(account_id="nobody-watch"), timeout=seconds):
            pass
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e
    return time.monotonic() - t0


def test_wall_clock_steps_do_not_move_deadlines_or_expiry(stepped):
    clock, start = stepped
    clock.set("+86400")  # billingd starts a day ahead: the fake clock shows in create times
    s = start("--order-ttl", "5", "--idle-timeout", "4")
    with s.channel() as ch:
        stub = billing(ch)
        # The fake clock is in effect: an order's create time follows the stepped wall clock.
        probe = stub.CreateOrder(pb.CreateOrderRequest(account_id="clock", product_id="p"), timeout=5).order
        assert probe.create_time_ms / 1000 > time.time() + 23 * 3600, "libfaketime did not take effect"

        # A +1 h step during a 3 s call: the deadline still ends it after ~3 s, not at once.
        order = stub.CreateOrder(pb.CreateOrderRequest(account_id="clock", product_id="p"), timeout=5).order
        created = time.monotonic()
        threading.Timer(0.5, clock.set, args=("+90000",)).start()
        lasted = watch_until_deadline(stub, 3)
        assert 2.5 < lasted < 6, f"a 3 s deadline lasted {lasted:.2f} s across a +1 h wall-clock step"

        # ... and the order created 3.5 s ago (ttl 5 s) is still PENDING although the wall clock says 1 h.
        time.sleep(max(0, 4.0 - (time.monotonic() - created)))
        state = stub.GetOrder(pb.GetOrderRequest(order_id=order.order_id), timeout=5).order.state
        assert state == pb.ORDER_STATE_PENDING, f"expired {time.monotonic() - created:.1f} s after creation (ttl 5 s)"

        # A -1 h step: a 3 s deadline does not turn into an hour.
        threading.Timer(0.5, clock.set, args=("+86400",)).start()
        lasted = watch_until_deadline(stub, 3)
        assert 2.5 < lasted < 6, f"a 3 s deadline lasted {lasted:.2f} s across a -1 h wall-clock step"

        # Expiry still works, measured by the monotonic clock: EXPIRED within ttl + a period or two.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            state = stub.GetOrder(pb.GetOrderRequest(order_id=order.order_id), timeout=5).order.state
            if state == pb.ORDER_STATE_EXPIRED:
                break
            time.sleep(0.2)
        assert state == pb.ORDER_STATE_EXPIRED
        expired_after = time.monotonic() - created
        assert expired_after < 9, expired_after
        print(f"\nclock steps: 3 s deadlines lasted ~3 s across +1 h and -1 h steps; ttl 5 s order expired after "
              f"{expired_after:.1f} s (monotonic)")
