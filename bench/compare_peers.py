#!/usr/bin/env python3
"""billingd beside the stock gRPC peers of ../shared/bench/peers (grpc-go, grpc C++ callback), one at a
time, each pinned to CPU 1 with h2load pinned to CPU 0: the same h2load command for each, RUNS times.
Health/Check for all; billingd's GetOrder (a SQLite read) against the peers' CreateOrder (a map insert
in memory); billingd's durable CreateOrder for reference. Loopback only; every run bounded by -n.
With ANCHOR=path/to/grpc_echo_server (the C libnghttp2 echo anchor of the bench kit, built with
gcc -O2 ... -lnghttp2) it is measured too, on the Health/Check and the GetOrder bodies, and the
server-CPU ratios billingd/anchor are printed. BILLINGD_ROOT=DIR measures the release build in another
checkout (e.g. a worktree of an older commit); ONLY=health,getorder,create,peers limits what runs.
Usage: bench/compare_peers.py PEERS_DIR [RUNS] [N]   (PEERS_DIR: a built copy of ../shared/bench/peers)"""
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
peers = sys.argv[1]
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
n = int(sys.argv[3]) if len(sys.argv) > 3 else 200_000
work = tempfile.mkdtemp(prefix="compare-peers-")
PORT = 21300


def frame(m):
    return b"\0" + struct.pack(">I", len(m)) + m


def field(num, s):
    b = s.encode()
    return bytes([num << 3 | 2, len(b)]) + b


def cpu_ticks(pid):
    parts = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(parts[11]) + int(parts[12])


def start(cmd):
    p = subprocess.Popen(["taskset", "-c", "1", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            import socket
            socket.create_connection(("127.0.0.1", PORT), timeout=0.2).close()
            return p
        except OSError:
            time.sleep(0.05)
    p.terminate()
    p.wait(timeout=10)
    raise RuntimeError(f"{cmd} did not listen")


def h2load(path, body):
    out = subprocess.run(["taskset", "-c", "0", "h2load", "-n", str(n), "-c", "32", "-m", "32", "-t", "1", "-d", body,
                          "-H", "content-type: application/grpc", "-H", "te: trailers", f"http://127.0.0.1:{PORT}{path}"],
                         capture_output=True, text=True, timeout=300).stdout
    rps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))
    ok = int(re.search(r"(\d+) succeeded", out).group(1))
    return rps, ok


def measure(name, cmd, path, body, setup=None):
    results = []
    for _ in range(runs):
        p = start(cmd)
        try:
            if setup:
                setup()
            subprocess.run(["taskset", "-c", "0", "h2load", "-n", "5000", "-c", "8", "-m", "8", "-t", "1", "-d", body, "-H",
                            "content-type: application/grpc", f"http://127.0.0.1:{PORT}{path}"], capture_output=True, timeout=60)
            t0 = cpu_ticks(p.pid)
            rps, ok = h2load(path, body)
            ticks = cpu_ticks(p.pid) - t0
            results.append((rps, ticks * 1e6 / os.sysconf("SC_CLK_TCK") / max(ok, 1)))
        finally:
            p.terminate()
            p.wait(timeout=30)
    rps = statistics.median(r[0] for r in results)
    us = statistics.median(r[1] for r in results)
    print(f"{name:40s} {rps:>10,.0f} calls/s  {us:6.2f} us CPU/call  (runs: {', '.join(f'{r[0]:,.0f}' for r in results)})", flush=True)
    return rps, us


health = os.path.join(work, "health.bin")
open(health, "wb").write(frame(b""))
create = os.path.join(peers, "build", "body.bin")
BROOT = os.environ.get("BILLINGD_ROOT", ROOT)
billingd = os.path.join(BROOT, ".build", "release", "billingd")
ctl = os.path.join(BROOT, ".build", "release", "billingctl")
anchor = os.environ.get("ANCHOR")
only = set(os.environ.get("ONLY", "health,getorder,create,peers").split(","))
get_body = os.path.join(work, "get.bin")


def billingd_cmd():
    db = os.path.join(work, f"b{time.time_ns()}.db")
    return [billingd, "--listen", f"127.0.0.1:{PORT}", "--threads", "1", "--log-level", "warning", "--database", f"sqlite:{db}"]


def open_order():
    out = subprocess.run([ctl, "--addr", f"127.0.0.1:{PORT}", "create-order", "--account", "bench", "--product", "p"],
                         capture_output=True, text=True, check=True).stdout
    oid = json.loads(out)["order"]["orderId"]
    open(get_body, "wb").write(frame(field(1, oid)))


table = {}
if "health" in only:
    table["billingd Health/Check"] = measure("billingd Health/Check", billingd_cmd(), "/grpc.health.v1.Health/Check", health)
    if anchor:
        table["anchor Health/Check"] = measure("C anchor (echo) Health/Check body", [anchor, "-p", str(PORT), "-a", "127.0.0.1", "-T", "600"],
                                               "/grpc.health.v1.Health/Check", health)
if "peers" in only:
    table["grpc-go Health/Check"] = measure("grpc-go Health/Check", [f"{peers}/bin/peer-go", "-addr", f"127.0.0.1:{PORT}"], "/grpc.health.v1.Health/Check", health)
    table["grpc C++ Health/Check"] = measure("grpc C++ Health/Check", [f"{peers}/bin/peer-cpp", str(PORT), "callback"],
                                             "/grpc.health.v1.Health/Check", health)
if "getorder" in only:
    table["billingd GetOrder (SQLite)"] = measure("billingd GetOrder (SQLite read)", billingd_cmd(), "/billing.v1.Billing/GetOrder", get_body,
                                                  setup=open_order)
    if anchor:
        table["anchor GetOrder"] = measure("C anchor (echo) GetOrder body", [anchor, "-p", str(PORT), "-a", "127.0.0.1", "-T", "600"],
                                           "/billing.v1.Billing/GetOrder", get_body)
if "peers" in only:
    table["grpc-go CreateOrder (memory)"] = measure("grpc-go CreateOrder (in memory)", [f"{peers}/bin/peer-go", "-addr", f"127.0.0.1:{PORT}"],
                                                    "/billing.v1.Billing/CreateOrder", create)
    table["grpc C++ CreateOrder (memory)"] = measure("grpc C++ CreateOrder (in memory)", [f"{peers}/bin/peer-cpp", str(PORT), "callback"],
                                                     "/billing.v1.Billing/CreateOrder", create)
if "create" in only:
    table["billingd CreateOrder (SQLite FULL)"] = measure("billingd CreateOrder (durable, SQLite)", billingd_cmd(),
                                                          "/billing.v1.Billing/CreateOrder", create)
print()
if anchor:
    for call, ref in (("billingd Health/Check", "anchor Health/Check"), ("billingd GetOrder (SQLite)", "anchor GetOrder")):
        if call in table and ref in table:
            print(f"{call} / C anchor: CPU per call {table[call][1] / table[ref][1]:.2f}x, throughput {table[call][0] / table[ref][0]:.2f}x")
for peer in ("grpc-go", "grpc C++"):
    if f"{peer} Health/Check" not in table or "billingd Health/Check" not in table or "billingd GetOrder (SQLite)" not in table:
        continue
    h = table["billingd Health/Check"][0] / table[f"{peer} Health/Check"][0]
    g = table["billingd GetOrder (SQLite)"][0] / table[f"{peer} CreateOrder (memory)"][0]
    print(f"billingd / {peer}: Health/Check throughput {h:.2f}x; GetOrder vs their in-memory CreateOrder {g:.2f}x")
