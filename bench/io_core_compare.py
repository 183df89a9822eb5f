#!/usr/bin/env python3
"""Same-run before/after comparison of the I/O core (issue 20's performance table).

Two release builds of billingd (BEFORE and AFTER, each a checkout with .build/release/billingd) are measured
alternately in one run, beside the bench kit's anchors, RUNS times; the table gives medians. Every server is
a fresh process (fresh SQLite database) pinned to --server-cpu (1); every load generator runs on --load-cpu (0).
Loopback only (127.0.0.1, source addresses from 127.0.1.0/24 for the many-client parts); every load is bounded
by a count and a timeout; every process started here is stopped by its PID on exit (and gets SIGTERM if this
script dies: PR_SET_PDEATHSIG).

Parts (--parts a,b,c,d,e; default all). a-d run once per run, the servers in a rotating order (a, b: before,
after and the anchor or peer; c, d: before and after, reversed every other run); e runs once.
  a  grpc.health.v1.Health/Check: billingd (--threads 1 --log-level warning) and the kit's C libnghttp2 echo
     anchor, 5,000 warm-up calls, then `h2load -n N -c 32 -m 32 -t 1`; server CPU us per call (utime+stime from
     /proc/PID/stat over the h2load run: 10 ms ticks, so keep N large, 200,000) and, as a cross-check, the same
     from the process CPU clock (ns); calls/s; per-run ratio billingd CPU/call / anchor CPU/call (goal <= 1.25).
     One real call is checked first with nghttp (:status 200 and grpc-status 0: h2load counts gRPC errors as
     successes); "resp B/call" (response DATA bytes per call) shows errors as 0.
  b  Durable CreateOrder (SQLite WAL FULL; body as bench/run.sh builds it), `-c 16 -m 16`, against the kit's
     grpc-go peer (in-memory CreateOrder, GOMAXPROCS=1, body peers/build/body.bin); per-run throughput ratio
     billingd/grpc-go (goal >= 0.9) and CPU us per call of each.
  c  --notifications-listen with --idle-n (10,000) idle HTTP/2 clients (TCP connect, then the h2c preface and
     an empty SETTINGS at once, as the after build closes a connection without first bytes in 5 s; the server's
     SETTINGS acknowledged; then nothing), spread over --sources (100) loopback source addresses because the
     after build caps the port at 128 connections per peer address (1024 in all; the before build at 1024):
     how many the port keeps open 2 s after the last connect, billingd's VmRSS, fds and threads then, and what
     is still open --idle-late (15) s later (both builds close idle clients after about 10 s).
  d  Threads (len(/proc/PID/task), sampled every second) with --slow-n (500) slow clients on the notifications
     port for --slow-seconds (12), from --slow-sources (10) addresses. --slow-modes http1 (the specified case:
     `POST /appstore/notifications HTTP/1.1\\r\\n`, then one header byte a second; the before build serves
     HTTP/1.x on libmicrohttpd's one thread) and h2c (preface + SETTINGS + a HEADERS frame header at once, then
     its header block a byte a second; the before build gives every HTTP/2 connection a thread).
  e  TLS 1.2 offer of the gRPC port (--tls-cert/--tls-key, an RSA-2048 self-signed cert made here): for every
     suite of `openssl ciphers -v 'ALL:COMPLEMENTOFALL'` marked TLSv1.2, `openssl s_client -tls1_2 -cipher
     SUITE:@SECLEVEL=0 -alpn h2` (SECLEVEL=0 so the client offers every suite) and whether it is negotiated.

"other CPU %" in a and b is the machine's busy time over the run less billingd's and h2load's: a noisy run
shows there. --json FILE keeps the raw figures; --keep keeps the work folder (server logs).

    python3 bench/io_core_compare.py --before /work/before --after /work/io --kit /tmp/bench-kit --runs 3 --n 200000

The kit (--kit) is a copy of the shared bench folder with peers/build.sh and anchors/build.sh run in it
(peers/bin/peer-go, peers/build/body.bin, anchors/grpc_echo_server). Needs h2load, nghttp, openssl, taskset.
Python 3 standard library only."""
import argparse
import ctypes
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")
HEALTH_PATH = "/grpc.health.v1.Health/Check"
CREATE_PATH = "/billing.v1.Billing/CreateOrder"
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # + empty SETTINGS
H2_SETTINGS_ACK = b"\x00\x00\x00\x04\x01\x00\x00\x00\x00"
SLOW_LINE = b"POST /appstore/notifications HTTP/1.1\r\n"
SLOW_TAIL = b"X-Slow: " + b"a" * 64


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- processes, by PID

_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    _libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: a server never outlives this script


class Procs:
    """Every process this script starts, stopped by its own PID (SIGTERM, then SIGKILL)."""

    def __init__(self):
        self.live = []

    def start(self, cmd, logpath, env=None):
        f = open(logpath, "ab")
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                             preexec_fn=_die_with_parent)
        f.close()
        p.logpath = logpath
        self.live.append(p)
        return p

    def stop(self, p, grace=30):
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                log(f"  pid {p.pid} did not stop in {grace} s: SIGKILL")
                p.kill()
                p.wait(timeout=10)
        if p in self.live:
            self.live.remove(p)
        for path in getattr(p, "remove_after", ()):  # the server's database: runs do not fill /tmp
            for suffix in ("", "-wal", "-shm", "-journal"):
                try:
                    os.remove(path + suffix)
                except OSError:
                    pass

    def stop_all(self):
        for p in list(self.live):
            try:
                self.stop(p, grace=15)
            except Exception as e:  # keep stopping the others
                log(f"  stopping pid {p.pid}: {e}")


PROCS = Procs()


def _on_signal(signum, _frame):
    raise SystemExit(f"signal {signum}")


# ---------------------------------------------------------------- /proc

def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def proc_clock_s(pid):
    """The process's CPU clock (all its threads, dead ones included) in ns resolution, where /proc/PID/stat
    counts 10 ms ticks: clock_gettime(MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED))."""
    try:
        return time.clock_gettime(((~pid) << 3) | 2)
    except OSError:
        return None


def proc_status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def rss_mib(pid):
    return proc_status(pid, "VmRSS") / 1024


def threads(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def machine_busy_s():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / TICK


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# ---------------------------------------------------------------- ports and servers

class Ports:
    def __init__(self, base):
        self.next = base

    def take(self):
        for _ in range(2000):
            port, self.next = self.next, self.next + 1
            if self.next >= 32000:
                self.next = 20000
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                    return port
                except OSError:
                    continue
        raise RuntimeError("no free port below 32000")


def wait_listen(port, proc, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode} before listening on {port}; log {proc.logpath}:\n"
                               + tail(proc.logpath))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port} after {seconds} s; log {proc.logpath}:\n" + tail(proc.logpath))


def tail(path, n=1500):
    try:
        with open(path, "rb") as f:
            return f.read()[-n:].decode(errors="replace")
    except OSError:
        return ""


class Build:
    def __init__(self, label, root):
        self.label = label
        self.root = os.path.abspath(root)
        self.billingd = os.path.join(self.root, ".build", "release", "billingd")
        if not os.access(self.billingd, os.X_OK):
            sys.exit(f"{label}: no {self.billingd} (swift build -c release --product billingd, under flock)")
        git = lambda *a: subprocess.run(["git", "-C", self.root, *a], capture_output=True, text=True, timeout=30).stdout.strip()
        self.commit = git("rev-parse", "--short", "HEAD") or "?"
        self.dirty = bool(git("status", "--porcelain", "--untracked-files=normal", "--", "Sources", "Package.swift"))
        self.mtime = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(os.path.getmtime(self.billingd)))

    def describe(self):
        return (f"{self.label}: {self.root} @ {self.commit}{' + uncommitted changes in Sources' if self.dirty else ''}, "
                f"billingd built {self.mtime}")


class Ctx:
    def __init__(self, args, work):
        self.args = args
        self.work = work
        self.ports = Ports(args.base_port)
        self.seq = 0

    def path(self, name):
        self.seq += 1
        return os.path.join(self.work, f"{self.seq:03d}-{name}")

    def pinned(self, cmd):
        return ["taskset", "-c", str(self.args.server_cpu), *cmd]

    def start_billingd(self, build, extra=(), notifications=False):
        port = self.ports.take()
        nport = self.ports.take() if notifications else None
        tag = f"{build.label}-{port}"
        db = self.path(tag + ".db")
        cmd = [build.billingd, "--listen", f"127.0.0.1:{port}", "--threads", "1", "--log-level", "warning",
               "--database", f"sqlite:{db}", "--shutdown-grace", "5", *extra]
        if nport:
            cmd += ["--notifications-listen", f"127.0.0.1:{nport}"]
        p = PROCS.start(self.pinned(cmd), self.path(tag + ".log"))
        p.remove_after = [] if self.args.keep else [db]
        try:
            wait_listen(port, p)
            if nport:
                wait_listen(nport, p)
        except Exception:
            PROCS.stop(p)
            raise
        return p, port, nport

    def start_anchor(self):
        port = self.ports.take()
        exe = os.path.join(self.args.kit, "anchors", "grpc_echo_server")
        p = PROCS.start(self.pinned([exe, "-p", str(port), "-a", "127.0.0.1", "-T", "900"]), self.path(f"anchor-{port}.log"))
        wait_listen(port, p)
        return p, port

    def start_go(self):
        port = self.ports.take()
        exe = os.path.join(self.args.kit, "peers", "bin", "peer-go")
        env = dict(os.environ, GOMAXPROCS="1")
        p = PROCS.start(self.pinned([exe, "-addr", f"127.0.0.1:{port}"]), self.path(f"grpc-go-{port}.log"), env=env)
        wait_listen(port, p)
        return p, port


# ---------------------------------------------------------------- gRPC bodies and h2load

def frame(m):
    return b"\0" + struct.pack(">I", len(m)) + m


def field(num, s):
    b = s.encode()
    return bytes([num << 3 | 2, len(b)]) + b


def grpc_check(port, path, body):
    """One real call: :status 200 and trailer grpc-status 0 (h2load counts gRPC errors as successes)."""
    out = subprocess.run(["nghttp", "-v", "-d", body, "-H", "content-type: application/grpc", "-H", "te: trailers",
                          f"http://127.0.0.1:{port}{path}"], capture_output=True, text=True, errors="replace", timeout=15).stdout
    if ":status: 200" not in out or "grpc-status: 0" not in out:
        raise RuntimeError(f"functional check of {path} on {port} failed:\n" + out[-1200:])


def h2load(ctx, port, path, body, n, c, m):
    a = ctx.args
    cmd = ["taskset", "-c", str(a.load_cpu), "h2load", "-n", str(n), "-c", str(c), "-m", str(m), "-t", "1", "-d", body,
           "-H", "content-type: application/grpc", "-H", "te: trailers", f"http://127.0.0.1:{port}{path}"]
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=a.h2load_timeout)
    out = r.stdout
    m_rps = re.search(r"finished in ([\d.]+)(\w+), ([\d.]+) req/s", out)
    m_req = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored", out)
    m_data = re.search(r"\((\d+)\) data", out)
    if not (m_rps and m_req):
        raise RuntimeError(f"h2load output not understood (rc {r.returncode}):\n{out[-800:]}{r.stderr[-400:]}")
    ok = int(m_req.group(4))
    return {"rps": float(m_rps.group(3)), "ok": ok, "failed": int(m_req.group(5)), "errored": int(m_req.group(6)),
            "resp_bytes": (int(m_data.group(1)) / ok) if (m_data and ok) else 0.0}


def load_measure(ctx, proc, port, path, body, c, m):
    """Warm-up, then one measured h2load: calls/s, server CPU us per call, server and foreign CPU %."""
    a = ctx.args
    grpc_check(port, path, body)
    if a.warmup:
        h2load(ctx, port, path, body, a.warmup, 8, 8)
    s0, k0, b0, h0, t0 = proc_cpu_s(proc.pid), proc_clock_s(proc.pid), machine_busy_s(), children_cpu_s(), time.monotonic()
    r = h2load(ctx, port, path, body, a.n, c, m)
    s1, k1, b1, h1, t1 = proc_cpu_s(proc.pid), proc_clock_s(proc.pid), machine_busy_s(), children_cpu_s(), time.monotonic()
    wall = t1 - t0
    server, loadgen = s1 - s0, h1 - h0
    r.update(us=server * 1e6 / max(r["ok"], 1), server_pct=100 * server / wall, h2load_pct=100 * loadgen / wall,
             us_ns=(k1 - k0) * 1e6 / max(r["ok"], 1) if k0 is not None and k1 is not None else None,
             other_pct=max(0.0, 100 * ((b1 - b0) - server - loadgen) / wall))
    if r["ok"] != a.n:
        log(f"  warning: {r['ok']}/{a.n} succeeded ({r['failed']} failed, {r['errored']} errored)")
    return r


# ---------------------------------------------------------------- parts a and b

def part_a(ctx, builds, run):
    body = os.path.join(ctx.work, "health.bin")
    res = {}
    servers = [b.label for b in builds] + ["anchor"]
    k = run % len(servers)
    for name in servers[k:] + servers[:k]:
        if name == "anchor":
            p, port = ctx.start_anchor()
        else:
            p, port, _ = ctx.start_billingd(next(b for b in builds if b.label == name))
        try:
            r = load_measure(ctx, p, port, HEALTH_PATH, body, 32, 32)
        finally:
            PROCS.stop(p)
        log(f"  a run {run + 1} {name:7s} {r['rps']:>10,.0f} calls/s {r['us']:6.2f} us/call ({fmt(r['us_ns'], '.2f')} by the ns clock) "
            f"(server {r['server_pct']:.0f}%, h2load {r['h2load_pct']:.0f}%, other {r['other_pct']:.0f}%)")
        res[name] = r
    return res


def part_b(ctx, builds, run):
    body = os.path.join(ctx.work, "createorder.bin")
    go_body = os.path.join(ctx.args.kit, "peers", "build", "body.bin")
    res = {}
    servers = [b.label for b in builds] + ["grpc-go"]
    k = run % len(servers)
    for name in servers[k:] + servers[:k]:
        if name == "grpc-go":
            p, port = ctx.start_go()
            bb = go_body
        else:
            p, port, _ = ctx.start_billingd(next(b for b in builds if b.label == name))
            bb = body
        try:
            r = load_measure(ctx, p, port, CREATE_PATH, bb, 16, 16)
        finally:
            PROCS.stop(p)
        log(f"  b run {run + 1} {name:7s} {r['rps']:>10,.0f} calls/s {r['us']:6.2f} us/call ({fmt(r['us_ns'], '.2f')} by the ns clock) "
            f"(server {r['server_pct']:.0f}%, h2load {r['h2load_pct']:.0f}%, other {r['other_pct']:.0f}%)")
        res[name] = r
    return res


# ---------------------------------------------------------------- parts c and d: many clients on the side port

def source_addrs(k):
    k = max(1, min(k, 250))
    return [f"127.0.1.{i}" for i in range(1, k + 1)]


class Client:
    __slots__ = ("sock", "dead", "acked")

    def __init__(self, sock):
        self.sock, self.dead, self.acked = sock, False, False


def open_clients(port, n, sources, first_bytes, deadline):
    """n connections from the given loopback source addresses, each sending first_bytes. Returns (clients, failed)."""
    clients, failed = [], 0
    for i in range(n):
        if time.time() > deadline:
            failed += n - i
            log(f"  opening stopped at {i} connections (time bound)")
            break
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST, no TIME_WAIT
        try:
            s.bind((sources[i % len(sources)], 0))
            s.settimeout(3)
            s.connect(("127.0.0.1", port))
            s.sendall(first_bytes)
            s.setblocking(False)
            clients.append(Client(s))
        except OSError:
            failed += 1
            s.close()
    return clients, failed


def poll_open(clients, ack=None):
    """Drains what each client has; returns how many are still open (no EOF, no error).
    ack: bytes sent once to every client that received something (the SETTINGS ACK of a real HTTP/2 client)."""
    n = 0
    for c in clients:
        if c.dead:
            continue
        got = False
        try:
            for _ in range(16):
                d = c.sock.recv(65536)
                if not d:
                    c.dead = True
                    break
                got = True
        except BlockingIOError:
            pass
        except OSError:
            c.dead = True
        if not c.dead and got and ack and not c.acked:
            try:
                c.sock.send(ack)
                c.acked = True
            except OSError:
                c.dead = True
        n += not c.dead
    return n


def send_each(clients, data):
    for c in clients:
        if not c.dead:
            try:
                c.sock.send(data)
            except OSError:
                c.dead = True


def close_all(clients):
    for c in clients:
        try:
            c.sock.close()
        except OSError:
            pass


def part_c(ctx, builds, run):
    a = ctx.args
    res = {}
    order = builds if run % 2 == 0 else builds[::-1]
    for b in order:
        p, _, nport = ctx.start_billingd(b, notifications=True)
        socks = []
        try:
            time.sleep(0.5)
            r = {"attempted": a.idle_n, "rss0": rss_mib(p.pid), "fd0": fds(p.pid), "thr0": threads(p.pid)}
            t0 = time.time()
            socks, r["failed"] = open_clients(nport, a.idle_n, source_addrs(a.sources), H2_PREFACE, t0 + a.open_timeout)
            t_last = time.time()
            r["open_s"] = t_last - t0
            time.sleep(max(0.0, t_last + 2 - time.time()))
            r["open2"] = poll_open(socks, ack=H2_SETTINGS_ACK)  # the server's SETTINGS acknowledged, as a client does
            t_ack = time.time()
            r["rss2"], r["fd2"], r["thr2"] = rss_mib(p.pid), fds(p.pid), threads(p.pid)
            time.sleep(max(0.0, t_ack + a.idle_late - time.time()))
            r["open_late"] = poll_open(socks)
            r["rss_late"], r["fd_late"] = rss_mib(p.pid), fds(p.pid)
            r["kib_per_conn"] = (r["rss2"] - r["rss0"]) * 1024 / r["open2"] if r["open2"] else 0.0
        finally:
            close_all(socks)
            PROCS.stop(p)
        log(f"  c run {run + 1} {b.label:7s} opened {a.idle_n - r['failed']}/{a.idle_n} in {r['open_s']:.1f} s; open at +2 s "
            f"{r['open2']}, RSS {r['rss0']:.1f} -> {r['rss2']:.1f} MiB, threads {r['thr2']}; open {a.idle_late:g} s "
            f"later {r['open_late']}")
        res[b.label] = r
    return res


def slow_h2c_bytes():
    """A real HTTP/2 client's start (preface, empty SETTINGS) and a HEADERS frame for POST /appstore/notifications
    whose 9-byte header goes out at once and whose HPACK block (plain literals) is then sent a byte a second."""
    def lit(idx, v):  # literal without indexing, indexed name (4-bit prefix), raw value
        idx_b = bytes([idx]) if idx < 15 else bytes([15, idx - 15])
        return idx_b + bytes([len(v)]) + v
    block = (b"\x83\x86" + lit(4, b"/appstore/notifications") + lit(1, b"127.0.0.1") + lit(31, b"application/json")
             + b"\x00" + bytes([6]) + b"x-slow" + bytes([100]) + b"a" * 100)
    head = struct.pack(">I", len(block))[1:] + b"\x01\x04" + struct.pack(">I", 1)  # HEADERS, END_HEADERS, stream 1
    return H2_PREFACE + head, block


def part_d(ctx, builds, run):
    """Per build and mode: http1 sends the request line at once, then a header byte a second; h2c sends the preface,
    SETTINGS and a HEADERS frame's header at once, then its header block a byte a second."""
    a = ctx.args
    res = {}
    order = builds if run % 2 == 0 else builds[::-1]
    h2_first, h2_block = slow_h2c_bytes()
    for b in order:
        for mode in a.slow_modes:
            first, rest, ack = (SLOW_LINE, SLOW_TAIL, None) if mode == "http1" else (h2_first, h2_block, H2_SETTINGS_ACK)
            p, _, nport = ctx.start_billingd(b, notifications=True)
            socks = []
            try:
                time.sleep(0.5)
                r = {"clients": a.slow_n, "thr0": threads(p.pid), "rss0": rss_mib(p.pid)}
                socks, r["failed"] = open_clients(nport, a.slow_n, source_addrs(a.slow_sources), first,
                                                  time.time() + a.open_timeout)
                thr, rss, open_by_s = [threads(p.pid)], [rss_mib(p.pid)], []
                start = time.time()
                for sec in range(1, a.slow_seconds + 1):
                    time.sleep(max(0.0, start + sec - time.time()))
                    send_each(socks, rest[(sec - 1) % len(rest):][:1])
                    open_by_s.append(poll_open(socks, ack=ack))
                    thr.append(threads(p.pid))
                    rss.append(rss_mib(p.pid))
                half = min(len(open_by_s), max(1, a.slow_seconds // 2)) - 1
                r.update(thr_max=max(thr), thr_end=thr[-1], rss_max=max(rss), open_mid=open_by_s[half],
                         open_end=open_by_s[-1], open_by_s=open_by_s, thr_by_s=thr)
            finally:
                close_all(socks)
                PROCS.stop(p)
            log(f"  d run {run + 1} {b.label:7s} {mode:5s} {a.slow_n - r['failed']}/{a.slow_n} connected; threads "
                f"{r['thr0']} idle, max {r['thr_max']}, end {r['thr_end']}; open each second {r['open_by_s']}")
            res.setdefault(b.label, {})[mode] = r
    return res


# ---------------------------------------------------------------- part e: TLS 1.2 suites

def tls12_suites():
    out = subprocess.run(["openssl", "ciphers", "-v", "ALL:COMPLEMENTOFALL"], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    return [line.split()[0] for line in out.splitlines() if "TLSv1.2" in line.split()[1:2]]


def make_cert(work):
    cert, key = os.path.join(work, "tls-cert.pem"), os.path.join(work, "tls-key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "2",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   capture_output=True, check=True, timeout=60)
    return cert, key


def try_suite(port, suite):
    try:
        r = subprocess.run(["openssl", "s_client", "-tls1_2", "-cipher", f"{suite}:@SECLEVEL=0", "-alpn", "h2",
                            "-servername", "localhost", "-connect", f"127.0.0.1:{port}"],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=15)
    except subprocess.TimeoutExpired:
        return False
    out = r.stdout.decode(errors="replace")
    m = re.search(r"Cipher is (\S+)", out) or re.search(r"Cipher\s*:\s*(\S+)", out)
    return bool(m) and m.group(1) == suite


def part_e(ctx, builds):
    cert, key = make_cert(ctx.work)
    suites = tls12_suites()
    res = {"suites": suites}
    for b in builds:
        p, port, _ = ctx.start_billingd(b, extra=("--tls-cert", cert, "--tls-key", key))
        try:
            ok = [s for s in suites if try_suite(port, s)]
            if p.poll() is not None:
                raise RuntimeError(f"{b.label} exited during the TLS probes; log {p.logpath}")
        finally:
            PROCS.stop(p)
        log(f"  e {b.label:7s} {len(ok)}/{len(suites)} TLS 1.2 suites negotiate: {' '.join(ok)}")
        res[b.label] = ok
    return res


# ---------------------------------------------------------------- report

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec=",.0f"):
    return "n/a" if x is None else format(x, spec)


def report_load(title, rows, ratio_title, ratio_fn, goal, goal_ok, builds, ref, ns_ratio=False):
    print(f"\n### {title}\n")
    print("| server | calls/s (median) | µs CPU/call (median) | µs CPU/call, ns clock | calls/s per run | µs CPU/call per run | server CPU % | other CPU % | resp B/call |")
    print("| --- | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: |")
    names = [b.label for b in builds] + [ref]
    for name in names:
        rs = [r[name] for r in rows if name in r]
        if not rs:
            continue
        label = next((f"billingd {b.label} ({b.commit}{'+' if b.dirty else ''})" for b in builds if b.label == name), name)
        print(f"| {label} | {fmt(med(r['rps'] for r in rs))} | {fmt(med(r['us'] for r in rs), '.2f')} | "
              f"{fmt(med(r.get('us_ns') for r in rs), '.2f')} | "
              f"{' / '.join(fmt(r['rps']) for r in rs)} | {' / '.join(fmt(r['us'], '.2f') for r in rs)} | "
              f"{fmt(med(r['server_pct'] for r in rs))} | {fmt(med(r['other_pct'] for r in rs))} | "
              f"{fmt(med(r['resp_bytes'] for r in rs), '.1f')} |")
    extra = " | the same by the ns clock (median) | per run" if ns_ratio else ""
    print(f"\n| build | {ratio_title} (median of per-run ratios) | per run | goal {goal}{extra} |")
    print("| --- | ---: | --- | ---" + (" | ---: | ---" if ns_ratio else "") + " |")
    for b in builds:
        ratios = [ratio_fn(r[b.label], r[ref]) for r in rows if b.label in r and ref in r]
        m = med(ratios)
        line = (f"| {b.label} | {fmt(m, '.3f')} | {' / '.join(fmt(x, '.3f') for x in ratios)} | "
                f"{'n/a' if m is None else ('met' if goal_ok(m) else 'not met')}")
        if ns_ratio:
            nr = [r[b.label]["us_ns"] / r[ref]["us_ns"] for r in rows if b.label in r and ref in r
                  and r[b.label].get("us_ns") and r[ref].get("us_ns")]
            line += f" | {fmt(med(nr), '.3f')} | {' / '.join(fmt(x, '.3f') for x in nr)}"
        print(line + " |")


def report(args, builds, results):
    print("\n## io_core_compare results\n")
    print(f"- {time.strftime('%Y-%m-%d %H:%M:%SZ', time.gmtime())}, {os.cpu_count()} CPUs, load average at start "
          f"{results['loadavg']}; runs {args.runs}, h2load -n {args.n} (warm-up {args.warmup}), servers on CPU "
          f"{args.server_cpu}, load on CPU {args.load_cpu}")
    for b in builds:
        print(f"- {b.describe()}")
    print(f"- kit: {args.kit}")
    if "a" in results:
        report_load("a. Health/Check: billingd vs the C libnghttp2 echo anchor (h2load -c 32 -m 32 -t 1)", results["a"],
                    "billingd CPU/call ÷ anchor CPU/call", lambda x, y: x["us"] / y["us"], "<= 1.25",
                    lambda m: m <= 1.25, builds, "anchor", ns_ratio=True)
    if "b" in results:
        report_load("b. Durable CreateOrder (SQLite) vs grpc-go's in-memory CreateOrder (h2load -c 16 -m 16 -t 1)",
                    results["b"], "billingd calls/s ÷ grpc-go calls/s", lambda x, y: x["rps"] / y["rps"], ">= 0.9",
                    lambda m: m >= 0.9, builds, "grpc-go")
    if "c" in results:
        print(f"\n### c. {args.idle_n:,} idle HTTP/2 clients on the notifications port (preface + SETTINGS, from "
              f"{len(source_addrs(args.sources))} loopback source addresses; medians over runs)\n")
        print(f"| build | connected (client side) | open at +2 s | server fds added | threads | RSS idle MiB | RSS with them MiB | KiB per open conn | open {args.idle_late:g} s later | RSS then MiB | open at +2 s per run |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for b in builds:
            rs = [r[b.label] for r in results["c"] if b.label in r]
            if rs:
                print(f"| {b.label} | {fmt(med(r['attempted'] - r['failed'] for r in rs))} | {fmt(med(r['open2'] for r in rs))} | "
                      f"{fmt(med(r['fd2'] - r['fd0'] for r in rs))} | {fmt(med(r['thr2'] for r in rs))} | "
                      f"{fmt(med(r['rss0'] for r in rs), '.1f')} | {fmt(med(r['rss2'] for r in rs), '.1f')} | "
                      f"{fmt(med(r['kib_per_conn'] for r in rs), '.1f')} | {fmt(med(r['open_late'] for r in rs))} | "
                      f"{fmt(med(r['rss_late'] for r in rs), '.1f')} | {' / '.join(str(r['open2']) for r in rs)} |")
    if "d" in results:
        print(f"\n### d. Threads with {args.slow_n} slow clients on the notifications port (a byte a second for "
              f"{args.slow_seconds} s, from {len(source_addrs(args.slow_sources))} source addresses; medians). http1: "
              f"`POST /appstore/notifications HTTP/1.1` then a header byte a second; h2c: preface + SETTINGS + a HEADERS "
              f"frame header, then its header block a byte a second\n")
        print("| build | clients | connected | threads idle | threads max | threads at end | open mid-way | open at end | RSS max MiB | threads max per run |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for b in builds:
            for mode in args.slow_modes:
                rs = [r[b.label][mode] for r in results["d"] if mode in r.get(b.label, {})]
                if rs:
                    print(f"| {b.label} | {mode} | {fmt(med(r['clients'] - r['failed'] for r in rs))} | {fmt(med(r['thr0'] for r in rs))} | "
                          f"{fmt(med(r['thr_max'] for r in rs))} | {fmt(med(r['thr_end'] for r in rs))} | "
                          f"{fmt(med(r['open_mid'] for r in rs))} | {fmt(med(r['open_end'] for r in rs))} | "
                          f"{fmt(med(r['rss_max'] for r in rs), '.1f')} | {' / '.join(str(r['thr_max']) for r in rs)} |")
    if "e" in results:
        e = results["e"]
        print(f"\n### e. TLS 1.2 suites the gRPC port negotiates (RSA certificate; {len(e['suites'])} suites tried with "
              f"openssl s_client -tls1_2 -cipher SUITE:@SECLEVEL=0)\n")
        print("| build | suites negotiated | which |")
        print("| --- | ---: | --- |")
        for b in builds:
            if b.label in e:
                print(f"| {b.label} | {len(e[b.label])} | {' '.join(e[b.label]) or 'none'} |")
        only = {b.label: sorted(set(e.get(b.label, [])) - set().union(*(e.get(o.label, []) for o in builds if o is not b)))
                for b in builds}
        for label, lst in only.items():
            if lst:
                print(f"\nOnly {label}: {' '.join(lst)}")
    for part, errs in results.get("errors", {}).items():
        for err in errs:
            print(f"\n**part {part} error:** {err}")


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="checkout with .build/release/billingd (the old build)")
    ap.add_argument("--after", required=True, help="checkout with .build/release/billingd (the new build)")
    ap.add_argument("--kit", default="/tmp/bench-kit", help="built copy of the shared bench folder")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--n", type=int, default=200_000, help="h2load requests per measured run (parts a, b)")
    ap.add_argument("--warmup", type=int, default=5000, help="warm-up requests before each measured run")
    ap.add_argument("--parts", default="a,b,c,d,e")
    ap.add_argument("--idle-n", type=int, default=10_000, help="idle clients (part c)")
    ap.add_argument("--sources", type=int, default=100, help="loopback source addresses for part c (127.0.1.1..)")
    ap.add_argument("--slow-n", type=int, default=500, help="slow clients (part d)")
    ap.add_argument("--slow-sources", type=int, default=10, help="loopback source addresses for part d")
    ap.add_argument("--slow-seconds", type=int, default=12, help="how long the slow clients trickle (part d)")
    ap.add_argument("--slow-modes", default="http1,h2c", help="part d: http1 (as specified), h2c, or both")
    ap.add_argument("--idle-late", type=float, default=15, help="part c: second look this long after the first (s)")
    ap.add_argument("--open-timeout", type=float, default=120, help="bound on opening the clients of c and d (s)")
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--load-cpu", type=int, default=0)
    ap.add_argument("--base-port", type=int, default=21700)
    ap.add_argument("--h2load-timeout", type=float, default=300)
    ap.add_argument("--json", help="also write the raw results here")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs, databases)")
    args = ap.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if set(parts) - set("abcde"):
        ap.error("--parts: a,b,c,d,e")
    args.runs = max(1, min(args.runs, 50))
    args.slow_seconds = max(1, min(args.slow_seconds, 120))
    args.idle_late = max(0.0, min(args.idle_late, 120))
    args.slow_modes = [m.strip() for m in args.slow_modes.split(",") if m.strip()]
    if not args.slow_modes or set(args.slow_modes) - {"http1", "h2c"}:
        ap.error("--slow-modes: http1, h2c or http1,h2c")
    for tool in ("h2load", "nghttp", "openssl", "taskset"):
        if not shutil.which(tool):
            sys.exit(f"needs {tool} on PATH")
    need = {"a": ["anchors/grpc_echo_server"], "b": ["peers/bin/peer-go", "peers/build/body.bin"]}
    for p in parts:
        for f in need.get(p, []):
            if not os.path.exists(os.path.join(args.kit, f)):
                sys.exit(f"part {p} needs {args.kit}/{f} (copy the bench kit, run peers/build.sh and anchors/build.sh)")
    builds = [Build("before", args.before), Build("after", args.after)]
    # File limit for the clients of c and d (the servers inherit the raised hard limit too).
    want = max(args.idle_n, args.slow_n) + 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(want, hard), max(want, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        if hard < want:
            log(f"warning: file limit {hard} < {want}; part c may fail to open every client (ulimit -Hn)")
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGHUP, _on_signal)
    work = tempfile.mkdtemp(prefix="io-core-compare-")
    ctx = Ctx(args, work)
    with open(os.path.join(work, "health.bin"), "wb") as f:
        f.write(frame(b""))
    with open(os.path.join(work, "createorder.bin"), "wb") as f:  # as bench/run.sh builds it
        f.write(frame(field(1, "acct-bench") + field(2, "com.example.premium")))
    results = {"loadavg": " ".join(open("/proc/loadavg").read().split()[:3]), "errors": {}}
    for b in builds:
        log(b.describe())
    log(f"work folder {work}")
    try:
        for run in range(args.runs):
            for part, fn in (("a", part_a), ("b", part_b), ("c", part_c), ("d", part_d)):
                if part not in parts:
                    continue
                log(f"== part {part}, run {run + 1}/{args.runs}")
                try:
                    results.setdefault(part, []).append(fn(ctx, builds, run))
                except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                    log(f"  part {part} run {run + 1} failed: {e}")
                    results["errors"].setdefault(part, []).append(f"run {run + 1}: {e}")
                    PROCS.stop_all()
        if "e" in parts:
            log("== part e")
            try:
                results["e"] = part_e(ctx, builds)
            except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                log(f"  part e failed: {e}")
                results["errors"].setdefault("e", []).append(str(e))
    finally:
        PROCS.stop_all()
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"builds": [vars(b) for b in builds], "results": results}, f, indent=1, default=str)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    report(args, builds, results)
    if results["errors"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
