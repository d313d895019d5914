#!/usr/bin/env bash
# bench/h2.sh - squall --http2 vs h2load (and squall HTTP/1.1) on squall target; see bench/h2.py.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 bench/h2.py "$@"
