#!/usr/bin/env bash
# scripts/demo.sh SQUALL [DURATION] - starts `squall target` on a free loopback port, runs a
# 10-second (or DURATION) load test against it, prints the summary, and stops the target it
# started (by its PID).
set -euo pipefail
squall=${1:-build/squall}
duration=${2:-10s}
log=$(mktemp)
"$squall" target --port 0 >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 100); do
  grep -q 'listening on' "$log" && break
  sleep 0.05
done
url=$(grep -o 'http://[^ ]*' "$log" | head -n 1)
[ -n "$url" ] || { echo "demo: the target did not start:"; cat "$log"; exit 1; }
echo "demo: squall target at $url (pid $pid)"
echo "demo: $squall $url/fast -c 64 -d $duration"
"$squall" "$url/fast" -c 64 -d "$duration"
