#!/usr/bin/env bash
# The threads of a running billingd, by name, counted: bench/threads.sh BINARY [EXTRA FLAGS...]
# Starts BINARY on loopback with the metrics and notification listeners, a webhook endpoint, order expiry
# and SQLite in a temporary directory; prints each thread name with its count once it answers, then stops it
# (SIGTERM) and prints what its "stopped" log line says was left running. Only processes it started are ended.
set -euo pipefail
binary=${1:?usage: bench/threads.sh BINARY [FLAGS...]}
shift
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
"$binary" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --notifications-listen 127.0.0.1:0 \
    --database "sqlite:$dir/billing.db" --dev --dev-store "$dir/teststore" --order-ttl 600 \
    --webhook-url http://127.0.0.1:9/hook --webhook-secret "whsec_$(head -c 32 /dev/urandom | base64)" "$@" >"$dir/log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do grep -q '"msg":"started"' "$dir/log" 2>/dev/null && break; sleep 0.1; done
grep -q '"msg":"started"' "$dir/log" || { cat "$dir/log"; exit 1; }
sleep 1
echo "threads of a running billingd (pid $pid): $(ls /proc/$pid/task | wc -l)"
for t in /proc/$pid/task/*; do cat "$t/comm"; done | sed -E 's/-?[0-9]+$/-N/' | sort | uniq -c | sort -rn
kill -TERM "$pid"
for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
echo "after stop:"
grep -E '"msg":"(stopped|service stuck|threads left)"' "$dir/log" || echo "(no line)"
