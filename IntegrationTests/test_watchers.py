"""WatchEvents bounded (issue 22, item 2): the per-key and global caps, a slot given back when its client
goes with nothing committed, a watcher that never reads ended with OVERLOADED (trailers ahead of its
stalled data) while the others keep receiving, and a cursor beyond the newest event on both RPCs, on
SQLite and PostgreSQL."""
import base64
import hashlib
import json
import shutil
import socket
import struct
import threading
import time

import grpc
import h2.config
import h2.connection
import h2.events
import h2.settings
import pytest
from google.rpc import error_details_pb2, status_pb2

from conftest import Billingd, postgres_database
from helpers import billing, error_info, expect_error, pb


@pytest.fixture(params=["sqlite", "postgres"])
def database(request):
    return None if request.param == "sqlite" else postgres_database()


@pytest.fixture
def start(database):
    started = []

    def make(*flags):
        s = Billingd(*flags, database=database)
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()
        shutil.rmtree(s.dir, ignore_errors=True)


def create(stub, n, account="acct-w", metadata=()):
    for i in range(n):
        stub.CreateOrder(pb.CreateOrderRequest(account_id=account, product_id="p"), metadata=metadata, timeout=10)


def newest(stub, metadata=()):
    last = 0
    while True:
        page = stub.ListEvents(pb.ListEventsRequest(after_cursor=last, limit=1000), metadata=metadata, timeout=10)
        if not page.events:
            return last
        last = page.next_cursor


def admitted(stub, metadata=()):
    """A watch from cursor 0 (one event exists): the open call when admitted, the error when refused."""
    call = stub.WatchEvents(pb.WatchEventsRequest(after_cursor=0), metadata=metadata, timeout=60)
    try:
        next(call)
        return call, None
    except grpc.RpcError as err:
        return None, err


def assert_overloaded(err, cap):
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, err
    info = error_info(err)
    assert info.reason == "OVERLOADED" and info.metadata["cap"] == cap, info


def test_per_key_cap_with_api_keys(tmp_path, start):
    keys = {"keys": [{"name": n, "sha256": hashlib.sha256(n.encode()).hexdigest(), "methods": ["*"]} for n in ("k-one", "k-two")]}
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(keys))
    s = start("--api-keys", str(path), "--max-watchers-per-key", "2", "--max-watchers", "10")
    one, two = [("authorization", "Bearer k-one")], [("authorization", "Bearer k-two")]
    with s.channel() as ch:
        stub = billing(ch)
        create(stub, 1, metadata=one)
        calls = []
        for _ in range(2):
            call, err = admitted(stub, one)
            assert err is None, err
            calls.append(call)
        _, err = admitted(stub, one)
        assert_overloaded(err, "max_watchers_per_key")
        # Another key is not affected.
        for _ in range(2):
            call, err = admitted(stub, two)
            assert err is None, err
            calls.append(call)
        for c in calls:
            c.cancel()


def test_global_cap(start):
    s = start("--max-watchers", "3")
    with s.channel() as ch:
        stub = billing(ch)
        create(stub, 1)
        calls = []
        for _ in range(3):
            call, err = admitted(stub)
            assert err is None, err
            calls.append(call)
        _, err = admitted(stub)
        assert_overloaded(err, "max_watchers")
        for c in calls:
            c.cancel()


def test_slot_released_on_cancel_without_any_commit(start):
    s = start("--max-watchers", "1")
    with s.channel() as ch:
        stub = billing(ch)
        create(stub, 1)
        before = newest(stub)
        call, err = admitted(stub)
        assert err is None
        _, err = admitted(stub)
        assert_overloaded(err, "max_watchers")
        call.cancel()  # RST_STREAM CANCEL; nothing commits after this
        deadline = time.time() + 3
        while True:
            again, err = admitted(stub)
            if err is None:
                break
            assert time.time() < deadline, "the slot of a cancelled watcher was not given back"
            time.sleep(0.05)
        again.cancel()
        assert newest(stub) == before
    # A client whose connection closes gives its slot back too.
    ch = s.channel()
    call, err = admitted(billing(ch))
    assert err is None
    ch.close()
    with s.channel() as ch2:
        deadline = time.time() + 3
        while True:
            again, err = admitted(billing(ch2))
            if err is None:
                again.cancel()
                break
            assert time.time() < deadline, "the slot of a closed connection was not given back"
            time.sleep(0.05)


def test_cursor_beyond_the_newest_event(start):
    s = start()
    with s.channel() as ch:
        stub = billing(ch)
        create(stub, 3)
        # Just committed: counted at once (PostgreSQL: the store numbers what committed before it answers).
        n = newest(stub)
        assert n >= 3
        page = stub.ListEvents(pb.ListEventsRequest(after_cursor=n), timeout=10)
        assert not page.events and page.next_cursor == n
        info = expect_error(lambda: stub.ListEvents(pb.ListEventsRequest(after_cursor=n + 5), timeout=10),
                            grpc.StatusCode.OUT_OF_RANGE, "CURSOR_OUT_OF_RANGE")
        assert info.metadata["after_cursor"] == str(n + 5) and info.metadata["newest_cursor"] == str(n)
        info = expect_error(lambda: next(stub.WatchEvents(pb.WatchEventsRequest(after_cursor=n + 1), timeout=10)),
                            grpc.StatusCode.OUT_OF_RANGE, "CURSOR_OUT_OF_RANGE")
        assert info.metadata["newest_cursor"] == str(n)
        # At the newest cursor a watch waits for what commits next.
        call = stub.WatchEvents(pb.WatchEventsRequest(after_cursor=n), timeout=20)
        create(stub, 1)
        assert next(call).cursor == n + 1
        call.cancel()


def frame(message: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", len(message)) + message


class StalledWatcher:
    """A raw HTTP/2 client whose stream window is 0 and never opened: it reads frames, acknowledges no DATA."""

    def __init__(self, address):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.local_settings = h2.settings.Settings(client=True, initial_values={
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())
        self.sid = self.conn.get_next_available_stream_id()
        self.conn.send_headers(self.sid, [
            (":method", "POST"), (":scheme", "http"), (":path", "/billing.v1.Billing/WatchEvents"),
            (":authority", "billingd"), ("content-type", "application/grpc"), ("te", "trailers")])
        self.conn.send_data(self.sid, frame(pb.WatchEventsRequest(after_cursor=0).SerializeToString()), end_stream=True)
        self.sock.sendall(self.conn.data_to_send())
        self.data = 0

    def wait_end(self, timeout):
        """The stream's trailers (or None on timeout); DATA counted, never acknowledged."""
        self.sock.settimeout(timeout)
        while True:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            for event in self.conn.receive_data(chunk):
                if isinstance(event, h2.events.DataReceived) and event.stream_id == self.sid:
                    self.data += len(event.data)
                elif isinstance(event, h2.events.TrailersReceived) and event.stream_id == self.sid:
                    return dict(event.headers)
                elif isinstance(event, h2.events.StreamReset) and event.stream_id == self.sid:
                    raise AssertionError(f"reset {event.error_code}")
            out = self.conn.data_to_send()
            if out:
                self.sock.sendall(out)


def test_stalled_watcher_ended_overloaded_while_others_receive(start):
    s = start()
    with s.channel() as ch:
        stub = billing(ch)
        stalled = StalledWatcher(s.address)
        time.sleep(0.3)  # live before anything commits
        got = []

        def follow():
            for e in stub.WatchEvents(pb.WatchEventsRequest(after_cursor=0), timeout=120):
                got.append(e.cursor)
                if len(got) == 2000:
                    return

        reader = threading.Thread(target=follow)
        reader.start()
        time.sleep(0.3)
        create(stub, 2000)
        trailers = stalled.wait_end(60)
        assert trailers is not None, "the stalled watcher never saw its status"
        assert trailers["grpc-status"] == "8", trailers
        raw = trailers["grpc-status-details-bin"]
        status = status_pb2.Status.FromString(base64.b64decode(raw + "=" * (-len(raw) % 4)))
        info = error_details_pb2.ErrorInfo()
        status.details[0].Unpack(info)
        assert info.reason == "OVERLOADED" and info.metadata["cap"] == "watcher_buffer"
        # It read nothing (window 0): it resumes from where it started.
        assert stalled.data == 0 and info.metadata["after_cursor"] == "0"
        reader.join(60)
        assert got == sorted(got) and len(got) == 2000
        # And it resumes from that cursor with a client that reads.
        call = stub.WatchEvents(pb.WatchEventsRequest(after_cursor=int(info.metadata["after_cursor"])), timeout=20)
        assert next(call).cursor == got[0]
        call.cancel()
