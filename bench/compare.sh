#!/usr/bin/env bash
# bench/compare.sh - squall against wrk and the floor probe on nginx and squall target.
#   bench/compare.sh                       c=64 and c=256, 10 s, 3 rounds (A B A B A B)
#   bench/compare.sh --conns 5000 --rounds 3
#   bench/compare.sh --server-cpus 0-3 --client-cpus 4-7   (bigger machines)
# Results: a markdown table per case on stdout, JSON per case under bench/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 bench/harness.py "$@"
