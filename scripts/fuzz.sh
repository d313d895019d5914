#!/usr/bin/env bash
# scripts/fuzz.sh DIR SECONDS - runs every libFuzzer target in DIR for SECONDS (the response
# parser, the one hit hardest, gets the full time; the others half) from its seed corpus.
set -euo pipefail
dir=$1 secs=$2
root=$(cd "$(dirname "$0")/.." && pwd)
fail=0 n=0
for bin in "$dir"/fuzz_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin"); name=${name#fuzz_}
  t=$secs; [ "$name" = h1_response ] || t=$(( (secs + 1) / 2 ))
  work=$(mktemp -d)
  [ -d "$root/fuzz/corpus/$name" ] && cp -r "$root/fuzz/corpus/$name/." "$work/"
  echo "fuzz: $name for ${t}s"
  if ! "$bin" -max_total_time="$t" -max_len=8192 -timeout=10 -print_final_stats=0 \
        -artifact_prefix="$work/" "$work" >"$work.log" 2>&1; then
    echo "fuzz: $name FAILED"; tail -n 40 "$work.log"; fail=$((fail+1))
  else
    grep -E '^#[0-9]+.*DONE' "$work.log" | tail -n 1 || true
  fi
  n=$((n+1))
  rm -rf "$work" "$work.log"
done
echo "fuzz: $((n-fail)) passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$n" -gt 0 ]
