#!/usr/bin/env bash
# bench/watch_cost.sh - what --watch of four processes costs the client, measured with squall ab:
# arm A runs `URL -c 16 -t 1`, arm B the same with --watch of four processes (the target and
# three idle sleepers); the verdict's metric is the client's CPU per request. The target is
# pinned to CPU 0 and squall to CPU 1; everything started here is stopped by its PID.
#   bench/watch_cost.sh [SQUALL [ROUNDS [DURATION]]]      defaults: build/squall 8 5s
set -euo pipefail
cd "$(dirname "$0")/.."
squall=$(realpath "${1:-build/squall}")
rounds=${2:-8}
dur=${3:-5s}
exec 3< <(taskset -c 0 "$squall" target --port 0 -t 1)
tpid=$!
read -r line <&3
port=${line##*:}
sleep 600 & s1=$!
sleep 600 & s2=$!
sleep 600 & s3=$!
trap 'kill $tpid $s1 $s2 $s3 2>/dev/null || true' EXIT
url="http://127.0.0.1:$port/fast -c 16 -t 1"
watch="--watch $tpid --watch $s1 --watch $s2 --watch $s3"
echo "# machine: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs," \
  "Linux $(uname -r); load average $(cut -d' ' -f1-3 /proc/loadavg)"
taskset -c 1 "$squall" ab --arm A="$url" --arm B="$url $watch" --rounds "$rounds" \
  --duration "$dur" --cooldown 1s --metric cpu "${@:4}"
