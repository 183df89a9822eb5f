"""Bounds on what a peer can grow: metric series, request buffers, queued database work, and a
GOAWAY before the connection ends. Each test prints what it measured."""
import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
import urllib.request

import grpc
import h2.config
import h2.connection
import h2.events
import h2.settings

from conftest import Billingd, free_port
from helpers import billing, error_info, pb


def scrape(port):
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()


def call_code(channel, path, metadata=()):
    try:
        channel.unary_unary(path)(b"", timeout=5, metadata=list(metadata))
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()


def test_unknown_methods_share_one_series_and_meet_the_key_check_first(tmp_path):
    keys = {"keys": [{"name": "ops", "sha256": hashlib.sha256(b"k-ops").hexdigest(), "methods": ["*"]},
                     {"name": "shop", "sha256": hashlib.sha256(b"k-shop").hexdigest(), "methods": ["billing.v1.Billing/*"]}]}
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(keys))
    port = free_port()
    s = Billingd("--api-keys", str(path), "--metrics-listen", f"127.0.0.1:{port}", "--log-level", "warning")
    try:
        before = len(scrape(port))
        with s.channel() as ch:
            # Without a key, an unknown method is UNAUTHENTICATED: the key check comes before routing.
            assert call_code(ch, "/made.up.Service/Nope") == grpc.StatusCode.UNAUTHENTICATED
            assert call_code(ch, "/grpc.health.v1.Health/Nope") == grpc.StatusCode.UNAUTHENTICATED
            assert call_code(ch, "/made.up.Service/Nope", [("authorization", "Bearer k-shop")]) == grpc.StatusCode.PERMISSION_DENIED
            assert call_code(ch, "/made.up.Service/Nope", [("authorization", "Bearer k-ops")]) == grpc.StatusCode.UNIMPLEMENTED
            assert call_code(ch, "/billing.v1.Billing/Nope", [("authorization", "Bearer k-shop")]) == grpc.StatusCode.UNIMPLEMENTED
            for i in range(1500):
                assert call_code(ch, f"/made.up.Service{i}/Method{i}") == grpc.StatusCode.UNAUTHENTICATED
            for i in range(1500):
                assert call_code(ch, f"/other.Service{i}/M{i}", [("authorization", "Bearer k-ops")]) == grpc.StatusCode.UNIMPLEMENTED
        text = scrape(port)
        print(f"/metrics: {before} bytes before, {len(text)} bytes after 3,000 made-up method paths")
        assert "made.up" not in text and "other.Service" not in text
        assert "billingd_log_lines_dropped_total 0" in text and "billingd_db_queued_jobs 0" in text
        assert 'billingd_rpc_calls_total{method="unknown",code="UNAUTHENTICATED"} 1502' in text
        assert 'billingd_rpc_calls_total{method="unknown",code="UNIMPLEMENTED"} 1502' in text
        assert 'billingd_rpc_errors_total{method="unknown",reason="UNAUTHENTICATED"} 1502' in text
        assert 'billingd_rpc_calls_total{method="billing.v1.Billing/Nope"' not in text
        assert len(text) < before + 16 * 1024
    finally:
        s.stop()


class Peer:
    """A raw HTTP/2 client (the `h2` package) that sends exactly what a test says."""

    def __init__(self, address):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 24})
        self.flush()
        self.events = []

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def start(self, path):
        sid = self.conn.get_next_available_stream_id()
        self.conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "billingd"),
                                     ("content-type", "application/grpc"), ("te", "trailers")])
        return sid

    def send(self, sid, data, end=False):
        size = self.conn.max_outbound_frame_size
        for i in range(0, len(data), size):
            piece = data[i:i + size]
            assert self.receive(lambda _: self.conn.local_flow_control_window(sid) >= len(piece))
            self.conn.send_data(sid, piece, end_stream=end and i + size >= len(data))
            self.flush()
        if end and not data:
            self.conn.end_stream(sid)
        self.flush()

    def receive(self, until, seconds=10):
        """Reads events until `until(events)` holds; False when the time is up or the connection ended."""
        deadline = time.time() + seconds
        while not until(self.events):
            if time.time() > deadline:
                return False
            chunk = self.sock.recv(65536)
            if not chunk:
                return False
            for event in self.conn.receive_data(chunk):
                self.events.append(event)
                if isinstance(event, h2.events.DataReceived):
                    self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            self.flush()
        return True

    def round_trip(self):
        """A PING and its ACK: the server has read everything sent before it."""
        self.conn.ping(b"bounds!!")
        self.flush()
        assert self.receive(lambda es: any(isinstance(e, h2.events.PingAckReceived) and e.ping_data == b"bounds!!" for e in es))

    def trailers(self, sid):
        for e in self.events:
            if isinstance(e, (h2.events.TrailersReceived, h2.events.ResponseReceived)) and e.stream_id == sid:
                h = dict(e.headers)
                if "grpc-status" in h:
                    return h
        return None

    def close(self):
        self.sock.close()


def memory(pid):
    """VmRSS, VmHWM and VmSize of a process, in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "VmSize"):
                out[key] = int(value.split()[0])
    return out


def test_announced_sizes_cost_nothing_until_bytes_arrive():
    s = Billingd("--log-level", "warning", "--threads", "1")
    try:
        with s.channel() as ch:
            billing(ch).CreateOrder(pb.CreateOrderRequest(account_id="warm", product_id="p"), timeout=5)
        peer = Peer(s.address)
        peer.round_trip()
        before = memory(s.proc.pid)
        prefix = b"\x00" + (4 << 20).to_bytes(4, "big")  # 4 MiB announced, never sent
        sids = []
        for _ in range(1024):
            sid = peer.start("/billing.v1.Billing/CreateOrder")
            peer.conn.send_data(sid, prefix)
            sids.append(sid)
        peer.flush()
        peer.round_trip()
        after = memory(s.proc.pid)
        print(f"1,024 streams x 4 MiB announced: VmHWM {before['VmHWM']} -> {after['VmHWM']} KiB, "
              f"VmRSS {before['VmRSS']} -> {after['VmRSS']} KiB, VmSize {before['VmSize']} -> {after['VmSize']} KiB")
        assert after["VmHWM"] - before["VmHWM"] < 50 * 1024
        # Reserving the announced size would map 4 GiB even if untouched.
        assert after["VmSize"] - before["VmSize"] < 512 * 1024
        peer.close()
        with s.channel() as ch:
            assert billing(ch).CreateOrder(pb.CreateOrderRequest(account_id="after", product_id="p"), timeout=5).order.order_id
    finally:
        s.stop()


def test_connection_buffer_budget_refuses_the_stream_that_crosses_it():
    s = Billingd("--log-level", "warning", "--max-connection-buffer-bytes", str(1 << 20))
    try:
        peer = Peer(s.address)
        size = 500_000
        prefix = b"\x00" + size.to_bytes(4, "big")
        sids = [peer.start("/billing.v1.Billing/CreateOrder") for _ in range(3)]
        for sid in sids:
            peer.send(sid, prefix + b"\x00" * 350_000)
        peer.round_trip()
        assert peer.receive(lambda _: peer.trailers(sids[2]) is not None)
        third = peer.trailers(sids[2])
        assert third["grpc-status"] == "8", third  # RESOURCE_EXHAUSTED, OVERLOADED
        assert peer.trailers(sids[0]) is None and peer.trailers(sids[1]) is None
        # The refused stream's bytes are released: the first two complete within the budget.
        for sid in sids[:2]:
            peer.send(sid, b"\x00" * (size - 350_000), end=True)
        assert peer.receive(lambda _: peer.trailers(sids[0]) is not None and peer.trailers(sids[1]) is not None)
        for sid in sids[:2]:
            assert peer.trailers(sid)["grpc-status"] != "8"
        peer.close()
    finally:
        s.stop()


def test_queued_database_work_is_bounded_by_max_in_flight():
    port = free_port()
    s = Billingd("--max-in-flight", "8", "--metrics-listen", f"127.0.0.1:{port}", "--log-level", "warning")
    try:
        with s.channel() as ch:
            billing(ch).CreateOrder(pb.CreateOrderRequest(account_id="warm", product_id="p"), timeout=5)
        # A slow disk: another connection holds SQLite's write lock, so every write waits.
        db = sqlite3.connect(os.path.join(s.dir, "billing.db"), timeout=1, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        results, peak, stop = [], [0], threading.Event()
        lock = threading.Lock()

        def caller(n):
            with s.channel() as ch:
                stub = billing(ch)
                for i in range(40):
                    try:
                        stub.CreateOrder(pb.CreateOrderRequest(account_id=f"q{n}-{i}", product_id="p"), timeout=0.05)
                        r = "OK"
                    except grpc.RpcError as e:
                        r = error_info(e).reason if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED else e.code().name
                    with lock:
                        results.append(r)

        def watch():
            while not stop.is_set():
                for line in scrape(port).splitlines():
                    if line.startswith("billingd_db_queued_jobs "):
                        peak[0] = max(peak[0], float(line.split()[1]))
                time.sleep(0.02)
        try:
            watcher = threading.Thread(target=watch)
            watcher.start()
            threads = [threading.Thread(target=caller, args=(n,)) for n in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            stop.set()
            watcher.join()
        finally:
            db.rollback()
            db.close()
        counts = {r: results.count(r) for r in set(results)}
        print(f"160 CreateOrder with a 50 ms deadline against a locked database: {counts}; peak queued jobs {peak[0]:.0f}")
        assert set(results) <= {"DEADLINE_EXCEEDED", "OVERLOADED"}
        assert counts.get("OVERLOADED", 0) > 0
        assert peak[0] <= 8
        time.sleep(0.5)
        with s.channel() as ch:
            assert billing(ch).CreateOrder(pb.CreateOrderRequest(account_id="after", product_id="p"), timeout=10).order.order_id
    finally:
        s.stop()


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def raw_frame(kind, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def goaway_then_eof(address, flood, seconds=10):
    """Sends the preface, an empty SETTINGS and `flood` without reading; then reads until EOF.
    Returns (GOAWAY error codes seen, how the connection ended: "eof", "reset" or "timeout")."""
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=seconds)
    sock.sendall(PREFACE + raw_frame(4, 0, 0))
    try:
        sock.sendall(flood)
    except (BrokenPipeError, ConnectionResetError):
        pass
    data, ended = b"", "timeout"
    deadline = time.time() + seconds
    try:
        while time.time() < deadline:
            chunk = sock.recv(1 << 20)
            if not chunk:
                ended = "eof"
                break
            data += chunk
    except ConnectionResetError:
        ended = "reset"
    except socket.timeout:
        pass
    sock.close()
    codes, i = [], 0
    while i + 9 <= len(data):
        length, kind = int.from_bytes(data[i:i + 3], "big"), data[i + 3]
        if kind == 7 and i + 9 + length <= len(data):
            codes.append(int.from_bytes(data[i + 13:i + 17], "big"))
        i += 9 + length
    return codes, ended


ENHANCE_YOUR_CALM, PROTOCOL_ERROR = 0xB, 0x1


def test_floods_and_protocol_errors_end_with_goaway_before_eof():
    s = Billingd("--log-level", "warning")
    try:
        cases = {
            "10,000 PINGs": (b"".join(raw_frame(6, 0, 0, i.to_bytes(8, "big")) for i in range(10_000)), ENHANCE_YOUR_CALM),
            "10,000 SETTINGS": (raw_frame(4, 0, 0) * 10_000, ENHANCE_YOUR_CALM),
            # HEADERS on an even (server-initiated) stream id, followed by more input the server leaves unread.
            "HEADERS on stream 2": (raw_frame(1, 0x4, 2, b"\x82") + raw_frame(6, 0, 0, bytes(8)) * 2000, PROTOCOL_ERROR),
        }
        for name, (flood, code) in cases.items():
            codes, ended = goaway_then_eof(s.address, flood)
            print(f"{name}: GOAWAY codes {codes}, then {ended}")
            assert codes and codes[-1] == code, (name, codes)
            assert ended == "eof", (name, ended)
        with s.channel() as ch:
            assert billing(ch).CreateOrder(pb.CreateOrderRequest(account_id="after", product_id="p"), timeout=5).order.order_id
    finally:
        s.stop()
