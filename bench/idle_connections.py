#!/usr/bin/env python3
"""Opens N idle HTTP/2 connections to billingd (preface + SETTINGS, then nothing), reports the server's
RSS, and checks that a fresh connection still gets an answer. Loopback only; bounded by N.
Usage: idle_connections.py HOST:PORT SERVER_PID [N]"""
import resource
import socket
import subprocess
import sys
import time

import h2.config
import h2.connection

addr, pid = sys.argv[1], int(sys.argv[2])
n = int(sys.argv[3]) if len(sys.argv) > 3 else 10_000
host, port = addr.rsplit(":", 1)
assert host.startswith("127.") or host == "localhost", "loopback only"


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
before = rss_kib(pid)
conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
conn.initiate_connection()
preface = conn.data_to_send()
socks = []
t0 = time.time()
for i in range(n):
    try:
        s = socket.create_connection((host, int(port)), timeout=10)
    except OSError as e:
        sys.exit(f"connection {i}: {e} (file limit {resource.getrlimit(resource.RLIMIT_NOFILE)})")
    s.sendall(preface)
    socks.append(s)
time.sleep(2.0)
after = rss_kib(pid)
import os
ok = subprocess.run([os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[0]))), ".build/release/billingctl"), "--addr", addr, "health"],
                    capture_output=True, text=True, timeout=30)
print(f"{n} idle connections opened in {time.time() - t0:.1f} s; server RSS {before / 1024:.1f} MiB before, "
      f"{after / 1024:.1f} MiB with them ({(after - before) / n:.2f} KiB per connection); "
      f"fresh connection health: {'SERVING' if 'SERVING' in ok.stdout else ok.stdout + ok.stderr}")
for s in socks:
    s.close()
