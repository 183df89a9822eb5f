#!/usr/bin/env python3
"""SignOffer calls per second per core against `openssl speed ecdsap256` ECDSA P-256 signs per second, measured in
the same run on the same core.

usage: bench/sign_offer.py [--runs 3] [--calls 100000] [--connections 8] [--streams 16]
                           [--server-cpu 1] [--client-cpu 0] [--json]

billingd (.build/release, or $BILLINGD) starts on a fresh SQLite database with --threads 1 --log-level warning,
pinned to --server-cpu with taskset, with an In-App Purchase key made here (P-256, PKCS#8) and a metrics port.
One PENDING order is opened (billingctl create-order). Then, --runs times, in turn:
  openssl speed -seconds 3 ecdsap256, pinned to --server-cpu: its sign/s is the anchor;
  h2load -n --calls -c --connections -m --streams -t 1, pinned to --client-cpu, of one fixed SignOffer request per
  kind: PROMOTIONAL (with the order: its id is signed as appAccountToken, the order read from the cache and
  checked), PROMOTIONAL_JWS (no order, a transaction id), INTRODUCTORY_ELIGIBILITY; and Health/Check for the
  transport's own cost.
Server CPU per call is billingd's utime + stime (/proc/PID/stat) over the calls; calls per second per core is its
inverse; the ratio is that over openssl's sign/s of the same run. Every SignOffer must answer OK: the metrics
counter billingd_rpc_calls_total{method=SignOffer,code="OK"} is compared with the calls h2load completed.
Loopback only; every load is bounded by -n; the only process stopped is the billingd this script started.
Prints a Markdown table (medians) and the commands; --json prints one JSON object instead.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLE = "com.example.app"
PRODUCT = "com.example.pro.monthly"
KEY_ID = "BENCHKEY01"
ISSUER = "57246542-96fe-1a63-e053-0824d011072a"


def frame(message):
    return b"\0" + struct.pack(">I", len(message)) + message


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def string(field, s):
    b = s.encode()
    return varint(field << 3 | 2) + varint(len(b)) + b if b else b""


def sign_offer_request(kind, product, offer="", order="", transaction="", bundle="", allow=False):
    """billing.v1.SignOfferRequest, encoded by hand (fields 1-7, proto3 defaults left out)."""
    out = varint(1 << 3) + varint(kind)
    out += string(2, bundle) + string(3, product) + string(4, offer) + string(5, order) + string(6, transaction)
    if allow:
        out += varint(7 << 3) + varint(1)
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def wait_port(port, proc, seconds=30):
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"billingd exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def ok_calls(metrics_port, method):
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith("billingd_rpc_calls_total{") and f'method="{method}"' in line and 'code="OK"' in line:
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def openssl_sign_per_second(cpu):
    out = subprocess.run(["taskset", "-c", str(cpu), "openssl", "speed", "-seconds", "3", "ecdsap256"],
                         capture_output=True, text=True, timeout=120).stdout
    # " 256 bits ecdsa (nistp256)   0.0000s   0.0001s  41234.5  12345.6": sign, verify, sign/s, verify/s
    m = re.search(r"256 bits ecdsa \(nistp256\)\s+\S+s\s+\S+s\s+([\d.]+)\s+([\d.]+)", out)
    if not m:
        raise RuntimeError("cannot read openssl speed's output:\n" + out)
    return float(m.group(1))


def h2load(args, port, path, body_path, calls):
    cmd = ["taskset", "-c", str(args.client_cpu), "h2load", "-n", str(calls), "-c", str(args.connections), "-m", str(args.streams),
           "-t", "1", "-d", body_path, "-H", "content-type: application/grpc", "-H", "te: trailers", f"http://127.0.0.1:{port}{path}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    m = re.search(r"finished in ([\d.]+)(\w+), ([\d.]+) req/s", out)
    done = re.search(r"(\d+) succeeded", out)
    if not m or not done:
        raise RuntimeError("cannot read h2load's output:\n" + out)
    return float(m.group(3)), int(done.group(1)), shlex.join(cmd)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--calls", type=int, default=100_000)
    p.add_argument("--connections", type=int, default=8)
    p.add_argument("--streams", type=int, default=16)
    p.add_argument("--server-cpu", type=int, default=1)
    p.add_argument("--client-cpu", type=int, default=0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    for tool in ("taskset", "h2load", "openssl"):
        if not shutil.which(tool):
            sys.exit(f"bench/sign_offer.py: {tool} is missing (scripts/deps bench)")
    billingd = os.environ.get("BILLINGD") or os.path.join(ROOT, ".build", "release", "billingd")
    billingctl = os.environ.get("BILLINGCTL") or os.path.join(ROOT, ".build", "release", "billingctl")
    for b in (billingd, billingctl):
        if not os.path.exists(b):
            sys.exit(f"{b} not found: swift build -c release first")

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    work = tempfile.mkdtemp(prefix="sign-offer-bench-")
    key = ec.generate_private_key(ec.SECP256R1())
    p8 = os.path.join(work, "key.p8")
    with open(p8, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    port, metrics = free_port(), free_port()
    server_cmd = [billingd, "--listen", f"127.0.0.1:{port}", "--database", f"sqlite:{work}/billing.db", "--threads", "1",
                  "--log-level", "warning", "--metrics-listen", f"127.0.0.1:{metrics}", "--bundle-id", BUNDLE,
                  "--environments", "sandbox", "--offer-signing-key-id", KEY_ID, "--offer-signing-key", p8,
                  "--offer-signing-issuer-id", ISSUER]
    server = subprocess.Popen(["taskset", "-c", str(args.server_cpu), *server_cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = {"promotional": [], "promotional_jws": [], "introductory_eligibility": [], "health": [], "openssl_sign_per_s": []}
    commands = {}
    try:
        wait_port(port, server)
        made = subprocess.run([billingctl, "--addr", f"127.0.0.1:{port}", "create-order", "--account", "bench", "--product", PRODUCT],
                              capture_output=True, text=True, timeout=30, check=True).stdout
        order = json.loads(made)["order"]["orderId"]
        bodies = {
            "promotional": sign_offer_request(1, PRODUCT, offer="winback-50", order=order),
            "promotional_jws": sign_offer_request(2, PRODUCT, offer="winback-50", transaction="2000000000000001"),
            "introductory_eligibility": sign_offer_request(3, PRODUCT, transaction="2000000000000001", allow=True),
            "health": b"",
        }
        paths = {}
        for name, body in bodies.items():
            paths[name] = os.path.join(work, f"{name}.bin")
            with open(paths[name], "wb") as f:
                f.write(frame(body))
        method = {"health": "/grpc.health.v1.Health/Check"}
        for run in range(args.runs):
            results["openssl_sign_per_s"].append(openssl_sign_per_second(args.server_cpu))
            for name in bodies:
                path = method.get(name, "/billing.v1.Billing/SignOffer")
                h2load(args, port, path, paths[name], 2000)  # warm-up
                ok_before = ok_calls(metrics, path[1:])
                t0 = cpu_seconds(server.pid)
                rps, done, cmd = h2load(args, port, path, paths[name], args.calls)
                cpu = cpu_seconds(server.pid) - t0
                ok = ok_calls(metrics, path[1:]) - ok_before
                if ok != done or done != args.calls:
                    raise RuntimeError(f"{name}: {done} calls completed, {ok} answered OK (of {args.calls})")
                commands[name] = cmd
                results[name].append({"calls_per_s": rps, "us_cpu_per_call": cpu * 1e6 / done})
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(work, ignore_errors=True)

    anchor = statistics.median(results["openssl_sign_per_s"])
    summary = {"runs": args.runs, "calls": args.calls, "openssl_sign_per_s": results["openssl_sign_per_s"],
               "openssl_sign_per_s_median": anchor, "kinds": {}}
    for name in ("promotional", "promotional_jws", "introductory_eligibility", "health"):
        us = statistics.median(r["us_cpu_per_call"] for r in results[name])
        per_core = 1e6 / us
        summary["kinds"][name] = {
            "runs": results[name], "us_cpu_per_call_median": us, "calls_per_s_median": statistics.median(r["calls_per_s"] for r in results[name]),
            "calls_per_s_per_core": per_core,
            "ratio_to_openssl_sign": per_core / anchor,
            "ratios_per_run": [1e6 / r["us_cpu_per_call"] / a for r, a in zip(results[name], results["openssl_sign_per_s"])],
        }
    summary["server_command"] = shlex.join(["taskset", "-c", str(args.server_cpu), os.path.relpath(billingd, ROOT), *server_cmd[1:]])
    summary["h2load_command"] = commands.get("promotional", "")
    if args.json:
        print(json.dumps(summary, indent=1))
        return
    print(f"openssl speed ecdsap256 on CPU {args.server_cpu}: sign/s per run {', '.join(f'{x:,.0f}' for x in results['openssl_sign_per_s'])}"
          f" (median {anchor:,.0f})\n")
    print("| request | calls/s (h2load) | billingd µs CPU/call | calls/s per core | ratio to openssl sign/s | ratio per run |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, k in summary["kinds"].items():
        print(f"| {name} | {k['calls_per_s_median']:,.0f} | {k['us_cpu_per_call_median']:.1f} | {k['calls_per_s_per_core']:,.0f} | "
              f"{k['ratio_to_openssl_sign']:.2f} | {', '.join(f'{r:.2f}' for r in k['ratios_per_run'])} |")
    print(f"\nserver: {summary['server_command']}\nload:   {summary['h2load_command']}")


if __name__ == "__main__":
    main()
