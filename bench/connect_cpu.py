#!/usr/bin/env python3
"""Server CPU per durable CreateOrder over gRPC, Connect proto and Connect JSON (issue 21), in one run.

    python3 bench/connect_cpu.py [--runs 3] [--n 100000] [--binary .build/release/billingd]

For each run, and each protocol in turn (the order rotates run to run): a fresh billingd (release, --threads 1,
--log-level warning, a fresh SQLite database), pinned to CPU 1; h2load pinned to CPU 0 sends N CreateOrder
calls (-c 16 -m 16; HTTP/2 cleartext; --h1 for the HTTP/1.1 rows, -c 64 -m 1); the server's CPU comes from
/proc/PID/stat (user + system ticks) over the load. Reports calls/s and microseconds of server CPU per call, with
the ratio to gRPC in the same run (goals: Connect proto <= 1.1x gRPC, JSON <= 1.5x). Loopback only; every load
is bounded by -n and a timeout; each server is stopped by its PID.
"""
import argparse
import json
import os
import re
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")


def field(number, text):
    b = text.encode()
    return bytes([number << 3 | 2, len(b)]) + b


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return int(parts[11]) + int(parts[12])  # utime, stime


CASES = {
    # name: (content type, body, h2load extra flags)
    "grpc": ("application/grpc", None, []),
    "connect-proto": ("application/proto", None, []),
    "connect-json": ("application/json", None, []),
    "connect-proto-h1": ("application/proto", None, ["--h1"]),
}


def bodies(workdir):
    message = field(1, "acct-bench") + field(2, "com.example.premium")
    paths = {}
    for name, (ctype, _, _) in CASES.items():
        if ctype == "application/grpc":
            data = b"\x00" + struct.pack(">I", len(message)) + message
        elif ctype == "application/json":
            data = json.dumps({"accountId": "acct-bench", "productId": "com.example.premium"}).encode()
        else:
            data = message
        paths[name] = os.path.join(workdir, name + ".bin")
        with open(paths[name], "wb") as f:
            f.write(data)
    return paths


def run_case(binary, name, body, n, workdir):
    ctype, _, extra = CASES[name]
    port = free_port()
    db = os.path.join(workdir, f"{name}-{time.time_ns()}.db")
    proc = subprocess.Popen(["taskset", "-c", "1", binary, "--listen", f"127.0.0.1:{port}", "--threads", "1",
                             "--log-level", "warning", "--database", f"sqlite:{db}", "--dev"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 15
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        conc = ["-c", "64", "-m", "1"] if "--h1" in extra else ["-c", "16", "-m", "16"]
        base = ["taskset", "-c", "0", "h2load", "-t", "1", *conc, *extra, "-d", body, "-H", f"content-type: {ctype}"]
        if ctype == "application/grpc":
            base += ["-H", "te: trailers"]
        url = f"http://127.0.0.1:{port}/billing.v1.Billing/CreateOrder"
        subprocess.run(base[:4] + ["-n", "5000"] + base[4:] + [url], capture_output=True, timeout=120)  # warm-up
        before = cpu_ticks(proc.pid)
        started = time.time()
        out = subprocess.run(base[:4] + ["-n", str(n)] + base[4:] + [url], capture_output=True, text=True, timeout=600).stdout
        elapsed = time.time() - started
        ticks = cpu_ticks(proc.pid) - before
        ok = re.search(r"status codes: (\d+) 2xx", out)
        done = int(ok.group(1)) if ok else 0
        rps = re.search(r"finished in [\d.]+s, ([\d.]+) req/s", out)
        return {"calls_per_s": float(rps.group(1)) if rps else done / elapsed, "cpu_us": ticks / TICK * 1e6 / max(done, 1),
                "ok": done}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--n", type=int, default=100000)
    p.add_argument("--binary", default=os.path.join(ROOT, ".build", "release", "billingd"))
    p.add_argument("--cases", default=",".join(CASES))
    a = p.parse_args()
    cases = a.cases.split(",")
    work = tempfile.mkdtemp(prefix="connect-cpu-")
    paths = bodies(work)
    results = {c: [] for c in cases}
    for r in range(a.runs):
        order = cases[r % len(cases):] + cases[:r % len(cases)]
        for c in order:
            res = run_case(a.binary, c, paths[c], a.n, work)
            results[c].append(res)
            print(f"run {r + 1} {c}: {res['calls_per_s']:.0f} calls/s, {res['cpu_us']:.2f} us CPU/call, {res['ok']} OK", file=sys.stderr)
    grpc = statistics.median(x["cpu_us"] for x in results.get("grpc", [{"cpu_us": float("nan")}]))
    print("| protocol | calls/s (median) | server us CPU/call (median) | CPU ratio to gRPC |")
    print("| --- | --- | --- | --- |")
    for c in cases:
        cps = statistics.median(x["calls_per_s"] for x in results[c])
        cpu = statistics.median(x["cpu_us"] for x in results[c])
        print(f"| {c} | {cps:,.0f} | {cpu:.2f} | {cpu / grpc:.2f}x |")


if __name__ == "__main__":
    main()
