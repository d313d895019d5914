#!/usr/bin/env bash
# scripts/deps.sh - installs the Debian 12 packages squall needs, only those missing.
#   scripts/deps.sh          build + test dependencies
#   scripts/deps.sh fuzz     + clang and libFuzzer
#   scripts/deps.sh bench    + the peers and servers bench/ compares against
set -euo pipefail

build=(build-essential cmake pkg-config zlib1g-dev libjansson-dev libcmocka-dev python3)
fuzz=(clang libclang-rt-14-dev)
bench=(nginx-light wrk apache2-utils nghttp2-client util-linux procps)

want=("${build[@]}")
for extra in "$@"; do
  case "$extra" in
    fuzz) want+=("${fuzz[@]}") ;;
    bench) want+=("${bench[@]}") ;;
    *) echo "deps.sh: unknown set '$extra' (fuzz, bench)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps.sh: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps.sh: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
