"""Misbehaving peers in bulk: random bytes after the preface, resets at random points, requests left
open, connections dropped mid-call, oversize and malformed frames. Bounded; afterwards billingd must
still answer, and it must never have crashed."""
import random
import socket
import struct
import threading
import time

import h2.config
import h2.connection
import h2.exceptions

from helpers import billing, pb

GRPC = [("content-type", "application/grpc"), ("te", "trailers")]


def frame(m):
    return b"\0" + struct.pack(">I", len(m)) + m


def misbehave(address, seed, rounds):
    rng = random.Random(seed)
    host, port = address.rsplit(":", 1)
    for _ in range(rounds):
        try:
            sock = socket.create_connection((host, int(port)), timeout=2)
            conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
            conn.initiate_connection()
            sock.sendall(conn.data_to_send())
            action = rng.randrange(7)
            sid = conn.get_next_available_stream_id()
            path = rng.choice(["/billing.v1.Billing/CreateOrder", "/billing.v1.Billing/GetOrder", "/grpc.health.v1.Health/Check",
                               "/grpc.health.v1.Health/Watch", "/billing.v1.Billing/SubmitReceipt", "/nope"])
            conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "x"), *GRPC])
            body = frame(pb.CreateOrderRequest(account_id="chaos", product_id="p").SerializeToString())
            if action == 0:    # random bytes after a valid start
                sock.sendall(conn.data_to_send() + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400))))
            elif action == 1:  # half a message, then reset
                conn.send_data(sid, body[: rng.randrange(1, len(body))])
                conn.reset_stream(sid)
                sock.sendall(conn.data_to_send())
            elif action == 2:  # left open, connection dropped
                conn.send_data(sid, body[:3])
                sock.sendall(conn.data_to_send())
            elif action == 3:  # a prefix claiming 2 GiB
                conn.send_data(sid, b"\0\x7f\xff\xff\xff", end_stream=True)
                sock.sendall(conn.data_to_send())
            elif action == 4:  # garbage protobuf
                conn.send_data(sid, frame(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))), end_stream=True)
                sock.sendall(conn.data_to_send())
            elif action == 5:  # a valid call, then the socket closes before the answer is read
                conn.send_data(sid, body, end_stream=True)
                sock.sendall(conn.data_to_send())
            else:              # many streams opened and reset at once
                for k in range(20):
                    s = conn.get_next_available_stream_id()
                    conn.send_headers(s, [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "x"), *GRPC])
                    conn.reset_stream(s)
                sock.sendall(conn.data_to_send())
            if rng.random() < 0.5:
                sock.settimeout(0.2)
                try:
                    sock.recv(65536)
                except OSError:
                    pass
            sock.close()
        except (OSError, h2.exceptions.ProtocolError):
            pass


def test_misbehaving_peers_do_not_hurt_the_server(fresh):
    import urllib.request
    from conftest import free_port
    metrics_port = free_port()
    server = fresh("--metrics-listen", f"127.0.0.1:{metrics_port}")
    threads = [threading.Thread(target=misbehave, args=(server.address, seed, 60)) for seed in range(8)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert time.time() - t0 < 120
    assert server.proc.poll() is None, "billingd exited"
    with server.channel() as ch:
        stub = billing(ch)
        order = stub.CreateOrder(pb.CreateOrderRequest(account_id="after-chaos", product_id="p"), timeout=10).order
        assert stub.GetOrder(pb.GetOrderRequest(order_id=order.order_id), timeout=10).order == order
    # Nothing leaked: no call left in flight, the dropped connections are gone.
    deadline = time.time() + 10
    while time.time() < deadline:
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
        values = dict(line.split(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
        if float(values["billingd_rpc_in_flight"]) == 0 and float(values["billingd_connections"]) <= 1:
            break
        time.sleep(0.2)
    assert float(values["billingd_rpc_in_flight"]) == 0, text
    assert float(values["billingd_connections"]) <= 1
