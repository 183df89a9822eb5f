#!/usr/bin/env python3
"""RSS of billingd with N WatchEvents clients that never read (stream window 0) while E events commit.

    python3 bench/stalled_watchers.py [--binary .build/release/billingd] [--watchers 500] [--events 3000] [flags...]

Starts billingd on a fresh SQLite database, opens the stalled watchers (raw HTTP/2, SETTINGS_INITIAL_WINDOW_SIZE 0,
one per connection), creates the events with 8 grpcio writers, and prints RSS before, the peak (VmHWM) and
after, and how many stalled watchers saw RESOURCE_EXHAUSTED in their trailers. Extra arguments go to billingd
(`--max-watchers 1000 --max-watchers-per-key 1000`: every watcher comes from 127.0.0.1)."""
import argparse
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "IntegrationTests"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "IntegrationTests", "gen"))

import grpc  # noqa: E402
import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.events  # noqa: E402
import h2.settings  # noqa: E402
from billing.v1 import billing_pb2 as pb  # noqa: E402
from billing.v1 import billing_pb2_grpc as pb_grpc  # noqa: E402


def rss(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def stalled(port):
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.local_settings = h2.settings.Settings(client=True, initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    conn.initiate_connection()
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", "/billing.v1.Billing/WatchEvents"),
                            (":authority", "billingd"), ("content-type", "application/grpc"), ("te", "trailers")])
    body = pb.WatchEventsRequest(after_cursor=0).SerializeToString()
    conn.send_data(sid, b"\x00" + struct.pack(">I", len(body)) + body, end_stream=True)
    sock.sendall(conn.data_to_send())
    return sock, conn, sid


def status(sock, conn, sid):
    """The grpc-status this stalled watcher has received (None: none yet)."""
    sock.settimeout(0.05)
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            for event in conn.receive_data(chunk):
                if isinstance(event, h2.events.TrailersReceived) and event.stream_id == sid:
                    return dict(event.headers).get("grpc-status")
                if isinstance(event, h2.events.ResponseReceived) and event.stream_id == sid:
                    if "grpc-status" in dict(event.headers):
                        return dict(event.headers)["grpc-status"]
    except (socket.timeout, BlockingIOError):
        return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", default=".build/release/billingd")
    p.add_argument("--watchers", type=int, default=500)
    p.add_argument("--events", type=int, default=3000)
    args, extra = p.parse_known_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    d = tempfile.mkdtemp(prefix="stalled-")
    proc = subprocess.Popen([args.binary, "--listen", f"127.0.0.1:{port}", "--database", f"sqlite:{d}/billing.db",
                             "--log-level", "warning", *extra], stdout=open(f"{d}/log", "wb"), stderr=subprocess.STDOUT)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        time.sleep(0.5)
        start = rss(proc.pid)
        watchers = [stalled(port) for _ in range(args.watchers)]
        time.sleep(1)
        with_watchers = rss(proc.pid)
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = pb_grpc.BillingStub(channel)
        peak = [0.0]

        def write(n, w):
            for i in range(n):
                stub.CreateOrder(pb.CreateOrderRequest(account_id=f"acct-{w}-{i % 50}", product_id="p"), timeout=30)

        sampling = [True]

        def sample():
            while sampling[0]:
                peak[0] = max(peak[0], rss(proc.pid))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample)
        sampler.start()
        t0 = time.time()
        threads = [threading.Thread(target=write, args=(args.events // 8, w)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.time() - t0
        time.sleep(3)
        sampling[0] = False
        sampler.join()
        ended = [status(*w) for w in watchers]
        print(f"binary {args.binary}: {args.watchers} stalled watchers, {args.events} events in {took:.1f} s")
        print(f"RSS MiB: start {start:.0f}, with watchers {with_watchers:.0f}, peak sampled {peak[0]:.0f}, "
              f"VmHWM {rss(proc.pid, 'VmHWM'):.0f}, after {rss(proc.pid):.0f}")
        print(f"stalled watchers that saw a status: {sum(1 for s in ended if s)} "
              f"(RESOURCE_EXHAUSTED: {sum(1 for s in ended if s == '8')})")
        channel.close()
        for sock, _, _ in watchers:
            sock.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
