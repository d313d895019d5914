#!/usr/bin/env bash
# bench/compare.sh - squall side by side with wrk, ab, h2load, hey, autocannon, Locust and the
# floor probe (and its io_uring twin when built), on nginx and squall target, in one run.
# bench/harness.py --help lists every option.
#   bench/compare.sh                          every case: /fast at c=64, 256, 5000; a 16 KiB body
#                                             at c=64; 2,000 req/s to /delay/10 (target only);
#                                             10 s runs (rate: 20 s), 3 rounds, tools rotated
#   bench/compare.sh --cases fast --conns 5000
#   bench/compare.sh --cases rate --tools squall,h2load,hey,autocannon,locust
#   bench/compare.sh --server-cpus 0-3 --client-cpus 4-7   (bigger machines)
#   bench/compare.sh --duration 1 --rounds 1 --conns 8      (a smoke run: seconds, not figures)
# A missing peer is installed (apt-get; npm into bench/.tools/) or skipped with one line;
# --no-install only skips. Results: a markdown table per case on stdout and in
# bench/results/tables.md, a JSON file per case under bench/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 bench/harness.py "$@"
