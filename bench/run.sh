#!/usr/bin/env bash
# Benchmarks billingd side by side with the anchors in ../shared/bench (read its README).
#
#   bench/run.sh [health|getorder|createorder|all]   (default: all)
#
# billingd (release, --threads 1, pinned to SERVER_CPU) and the C libnghttp2 anchor are
# loaded in turn by the same h2load command (bench_compare.sh), RUNS times; the medians
# and the run-by-run ratio billingd/anchor land in bench/results/. Loopback only; every
# load is bounded by -n. billingd's own count of non-OK grpc-status is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
what=${1:-all}
SHARED=${SHARED:-$ROOT/../shared}
[ -d "$SHARED/bench/anchors" ] || { echo "bench/run.sh: needs ../shared/bench" >&2; exit 1; }
scripts/deps bench
export PATH="$PATH:/opt/swift/usr/bin"
swift build -c release --product billingd >&2
swift build -c release --product billingctl >&2

WORK=$(mktemp -d /tmp/billingd-bench.XXXXXX)
cp -r "$SHARED/bench" "$WORK/bench"
ANCHORS=$WORK/bench/anchors
mkdir -p "$ROOT/bench/results"
export RESULTS_DIR=$ROOT/bench/results RUNS=${RUNS:-3} PY=${PY:-python3}
N=${N:-200000}
PORT=${PORT:-20250}
SERVER_CPU=${SERVER_CPU:-1}

taskset -c "$SERVER_CPU" timeout 1800 "$ROOT/.build/release/billingd" --listen "127.0.0.1:$PORT" --threads 1 \
  --log-level "${LOG_LEVEL:-warning}" --database "sqlite:$WORK/bench.db" > "$WORK/billingd.log" 2>&1 &
LAUNCHER=$!
sleep 0.3
PID=$(pgrep -P "$LAUNCHER" -f billingd || echo "$LAUNCHER")  # timeout forks billingd as its child
trap 'kill -TERM $PID 2>/dev/null || true; for _ in $(seq 300); do kill -0 $PID 2>/dev/null || break; sleep 0.1; done; cat "$WORK/billingd.log" | tail -2' EXIT
for _ in $(seq 100); do "$ROOT/.build/release/billingctl" --addr "127.0.0.1:$PORT" health >/dev/null 2>&1 && break; sleep 0.05; done

ORDER=$("$ROOT/.build/release/billingctl" --addr "127.0.0.1:$PORT" create-order --account bench --product com.example.premium \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["order"]["orderId"])')
python3 - "$WORK" "$ORDER" <<'PY'
import struct, sys
work, order = sys.argv[1], sys.argv[2]
def frame(m): return b"\x00" + struct.pack(">I", len(m)) + m
def field(n, s): b = s.encode(); return bytes([n << 3 | 2, len(b)]) + b
open(f"{work}/health.bin", "wb").write(frame(b""))
open(f"{work}/getorder.bin", "wb").write(frame(field(1, order)))
open(f"{work}/createorder.bin", "wb").write(frame(field(1, "acct-bench") + field(2, "com.example.premium")))
PY

compare() { # NAME PATH BODY
  echo "=== $1 ==="
  (cd "$ANCHORS" && ./bench_compare.sh --url "http://127.0.0.1:$PORT$2" --pid "$PID" --body "$3" --n "$N")
}
case $what in
  health|all) compare health /grpc.health.v1.Health/Check "$WORK/health.bin" ;;&
  getorder|all) compare getorder /billing.v1.Billing/GetOrder "$WORK/getorder.bin" ;;&
  createorder) compare createorder /billing.v1.Billing/CreateOrder "$WORK/createorder.bin" ;;
esac
