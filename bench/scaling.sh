#!/usr/bin/env bash
# bench/scaling.sh - client scaling (req/s, CPU per 1,000 requests, RSS against connections and
# threads) and memory per idle connection. bench/scaling.py --help lists every option.
#   bench/scaling.sh                     64, 1,000, 10,000 connections x 1, 2 threads, 10 s,
#                                        3 rounds; then idle memory (10,000 vs 100)
#   bench/scaling.sh --parts idle        only the idle-connection memory
#   bench/scaling.sh --client-cpus 1-2   (a machine with a CPU per client thread)
# Results: markdown on stdout and in bench/results/scaling.md, JSON in bench/results/scaling.json.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 bench/scaling.py "$@"
