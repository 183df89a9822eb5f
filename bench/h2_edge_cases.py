#!/usr/bin/env python3
"""HTTP/2 edge cases sent by a raw peer (the python `h2` package) to gRPC servers, one table row per input.

usage: bench/h2_edge_cases.py NAME='COMMAND {port}' [NAME='COMMAND {port}' ...]

Each server is started alone on a loopback port (the command's {port}), asked each input on a fresh
connection, and stopped by its PID. Every answer is read for at most 5 s. Prints a Markdown table:
what came back (HTTP status, grpc-status, the size of grpc-message, RST_STREAM or GOAWAY and its
code, or the connection closing or being reset).
"""
import shlex
import socket
import subprocess
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings

PORT = 21420
HEALTH = "/grpc.health.v1.Health/Check"
EMPTY = b"\0\0\0\0\0"
ERRORS = {0: "NO_ERROR", 1: "PROTOCOL_ERROR", 2: "INTERNAL_ERROR", 3: "FLOW_CONTROL_ERROR", 6: "FRAME_SIZE_ERROR",
          7: "REFUSED_STREAM", 8: "CANCEL", 9: "COMPRESSION_ERROR", 11: "ENHANCE_YOUR_CALM"}


def code(c):
    c = int(c)
    return ERRORS.get(c, str(c))


def connect():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, validate_outbound_headers=False,
                                                              normalize_outbound_headers=False,
                                                              validate_inbound_headers=False))
    c.local_settings = h2.settings.Settings(client=True, initial_values={h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 1 << 20})
    c.initiate_connection()
    s.sendall(c.data_to_send())
    return s, c


def read_outcome(s, c, stream_id, deadline=5.0):
    """Reads until the stream ends, the connection ends, or the deadline; describes what came back."""
    got = {}
    end = time.time() + deadline
    notes = []
    while time.time() < end:
        try:
            s.settimeout(max(0.05, end - time.time()))
            data = s.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            notes.append("connection reset (RST)")
            break
        if not data:
            notes.append("connection closed (FIN)")
            break
        try:
            events = c.receive_data(data)
        except h2.exceptions.ProtocolError as e:
            notes.append(f"client-side h2 error {type(e).__name__}")
            break
        for e in events:
            if isinstance(e, (h2.events.ResponseReceived, h2.events.TrailersReceived)) and e.stream_id == stream_id:
                for k, v in e.headers:
                    got[k.decode() if isinstance(k, bytes) else k] = v.decode(errors="replace") if isinstance(v, bytes) else v
            elif isinstance(e, h2.events.StreamReset) and e.stream_id == stream_id:
                notes.append(f"RST_STREAM {code(e.error_code)}")
            elif isinstance(e, h2.events.ConnectionTerminated):
                notes.append(f"GOAWAY {code(e.error_code)}")
        out = c.data_to_send()
        if out:
            try:
                s.sendall(out)
            except OSError:
                pass
        if got.get("grpc-status") is not None or any(n.startswith(("RST_STREAM", "GOAWAY")) for n in notes):
            if any(n.startswith("GOAWAY") for n in notes) or got.get("grpc-status") is not None:
                break
    parts = []
    if ":status" in got:
        parts.append(f"HTTP {got[':status']}")
    if "grpc-status" in got:
        parts.append(f"grpc-status {got['grpc-status']}")
    if got.get("grpc-message"):
        parts.append(f"grpc-message {len(got['grpc-message'])} B")
    parts += notes
    return ", ".join(parts) or "no answer in 5 s"


def call(extra_headers, path=HEALTH):
    s, c = connect()
    try:
        sid = c.get_next_available_stream_id()
        headers = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", f"127.0.0.1:{PORT}"),
                   ("content-type", "application/grpc"), ("te", "trailers")] + extra_headers
        c.send_headers(sid, headers)
        c.send_data(sid, EMPTY, end_stream=True)
        s.sendall(c.data_to_send())
        return read_outcome(s, c, sid)
    finally:
        s.close()


def http1():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    try:
        s.sendall(f"POST {HEALTH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/grpc\r\nContent-Length: 5\r\n\r\n".encode() + EMPTY)
        data = b""
        end = time.time() + 5
        while time.time() < end:
            try:
                chunk = s.recv(4096)
            except socket.timeout:
                break
            except ConnectionResetError:
                if data.startswith(b"\0\0"):
                    return f"HTTP/2 frames ({len(data)} B), then connection reset (RST)"
                first = data.split(b"\r\n")[0].decode(errors="replace")
                return (f"`{first}`, " if data else "") + "connection reset (RST)"
            if not chunk:
                break
            data += chunk
        if not data:
            return "closed without an answer"
        first = data.split(b"\r\n")[0].decode(errors="replace")
        if data.startswith(b"\0\0"):
            return f"HTTP/2 frames ({len(data)} B: SETTINGS/GOAWAY), then closed"
        return f"`{first}`"
    finally:
        s.close()


def flood(kind, count=10_000):
    s, c = connect()
    try:
        # Frames written directly: 10,000 without reading a byte of the answers.
        if kind == "ping":
            frame = b"\0\0\x08\x06\0\0\0\0\0" + b"12345678"
        else:
            frame = b"\0\0\x06\x04\0\0\0\0\0" + b"\0\x03\0\0\0\x64"  # SETTINGS MAX_CONCURRENT_STREAMS=100
        sent = 0
        s.settimeout(5)
        try:
            for i in range(0, count, 100):
                s.sendall(frame * 100)
                sent += 100
        except (BrokenPipeError, ConnectionResetError, socket.timeout) as e:
            return f"sending stopped after {sent} frames ({type(e).__name__})" + "; " + read_outcome(s, c, -1, 2.0)
        return f"all {sent} sent; " + read_outcome(s, c, -1)
    finally:
        s.close()


CASES = [
    ("`authorization: Bearer ` (value with trailing space)", lambda: call([("authorization", "Bearer ")])),
    ("`connection: keep-alive`", lambda: call([("connection", "keep-alive")])),
    ("header list over the limit (20 KiB of metadata)", lambda: call([(f"x-meta-{i}", "v" * 1000) for i in range(20)])),
    ("unknown method, 60 KB name", lambda: call([], path="/" + "x" * 60_000)),
    ("HTTP/1.1 request line on the gRPC port", http1),
    ("PING flood (10,000, not reading)", lambda: flood("ping")),
    ("SETTINGS flood (10,000, not reading)", lambda: flood("settings")),
]


def main():
    global PORT
    targets = [a.split("=", 1) for a in sys.argv[1:]]
    if not targets:
        sys.exit(__doc__)
    results = {}
    for name, cmd in targets:
        PORT += 1
        p = subprocess.Popen(shlex.split(cmd.format(port=PORT)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", PORT), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)
            for label, case in CASES:
                try:
                    results[(name, label)] = case()
                except Exception as e:  # noqa: BLE001 - a row says what went wrong
                    results[(name, label)] = f"error: {type(e).__name__}: {e}"[:120]
        finally:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    names = [n for n, _ in targets]
    print("| input | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    for label, _ in CASES:
        print(f"| {label} | " + " | ".join(results[(n, label)] for n in names) + " |")


if __name__ == "__main__":
    main()
