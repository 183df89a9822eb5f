#!/usr/bin/env bash
# Instructions per call, counted by callgrind: billingd (release) serves N calls of one method from h2load, once with
# N calls and once with none, and the difference over N is printed, so start-up and shutdown drop out.
#   bench/callgrind_calls.sh BINARY N [PATH BODY C M]
#   bench/callgrind_calls.sh .build/release/billingd 20000                       # Health/Check, -c 4 -m 16
#   bench/callgrind_calls.sh .build/release/billingd 20000 /billing.v1.Billing/CreateOrder createorder.bin 16 16
# BODY is a gRPC-framed request (default: the empty message). Needs valgrind and h2load; loopback only; the
# server it starts is stopped by its PID. Counts repeat within 0.1% for one binary.
set -euo pipefail
BIN=$1
N=$2
PATH_=${3:-/grpc.health.v1.Health/Check}
BODY=${4:-}
C=${5:-4}
M=${6:-16}
WORK=$(mktemp -d /tmp/callgrind-calls.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
if [ -z "$BODY" ]; then
  BODY=$WORK/empty.bin
  printf '\x00\x00\x00\x00\x00' > "$BODY"
fi

count() {  # count CALLS: the program's instruction total
  local calls=$1 port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  rm -f "$WORK"/db*
  valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.out" "$BIN" --listen "127.0.0.1:$port" --threads 1 \
    --log-level warning --database "sqlite:$WORK/db" > "$WORK/server.log" 2>&1 &
  local pid=$! i
  for i in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.2
  done
  sleep 1
  if [ "$calls" -gt 0 ]; then
    timeout 600 h2load -n "$calls" -c "$C" -m "$M" -t 1 -d "$BODY" -H 'content-type: application/grpc' \
      -H 'te: trailers' "http://127.0.0.1:$port$PATH_" | grep -E 'succeeded' >&2
  fi
  kill -TERM "$pid"
  wait "$pid" || true
  callgrind_annotate "$WORK/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}

idle=$(count 0)
loaded=$(count "$N")
echo "$PATH_: $(( (loaded - idle) / N )) instructions a call ($loaded with $N calls, $idle without)"
