#!/usr/bin/env bash
# scripts/deps.sh - installs the Debian 12 packages squall needs, only those missing.
#   scripts/deps.sh          what the build needs (`make build`, `make demo`)
#   scripts/deps.sh test     + what every test needs (`make test`): headless Chromium for the
#                            browser tests, strace, iproute2 and util-linux for tests/security
#   scripts/deps.sh fuzz     + clang and libFuzzer
#   scripts/deps.sh bench    + the peers and servers bench/ compares against
#   scripts/deps.sh browser  + headless Chromium alone (kept for older callers; `test` has it)
set -euo pipefail

# build: libluajit-5.1-dev is the script/ module's Lua (wrk's API runs on LuaJIT, as in wrk);
# wrk itself is the reference peer the script tests compare `squall wrk` against. netbase
# gives /etc/services, which wrk.lookup(host, "http") needs (a minimal Debian lacks it).

build=(build-essential cmake pkg-config zlib1g-dev libjansson-dev libcmocka-dev python3 python3-jsonschema
       libfyaml-dev libpcre2-dev libssl-dev openssl libnghttp2-dev libbrotli-dev libzstd-dev
       nginx-light nghttp2-client curl libluajit-5.1-dev wrk
       libwslay-dev nats-server mosquitto
       mosquitto-clients               # mosquitto_sub: an independent count in test_pipeline
       libsqlite3-dev sqlite3 netbase  # the run store (sqlite3 opens it in test_store); netbase above
       python3-yaml                    # tests/e2e/test_deploy.py reads the Kubernetes manifests
       libsnappy-dev                   # --out prometheus-rw compresses with snappy (optional at build)
       libngtcp2-dev libngtcp2-crypto-gnutls-dev libnghttp3-dev libgnutls28-dev  # --http3 (optional at build)
       prometheus)                     # promtool checks the daemon's /metrics (test_daemon)
fuzz=(clang libclang-rt-14-dev)
# bench: servers and peers (ab in apache2-utils, h2load in nghttp2-client, Locust from Debian),
# GNU time for client CPU and RSS; node and npm, which install autocannon into bench/.tools/
# (kept as they are when npm is already on PATH: NodeSource's nodejs conflicts with Debian's npm).
bench=(nginx-light wrk apache2-utils nghttp2-client hey python3-locust util-linux procps time)
# bench/nats_*: cnats, so the NATS library-vs-own-codec figure can be measured.
bench+=(libnats-dev)
# bench/probe_uring.c: the floor probe on io_uring (docs/benchmarks.md "Below the floor: io_uring").
bench+=(liburing-dev)
# bench/server_side.py: the server's system calls and wake-ups per request (perf's tracepoints).
bench+=(linux-perf)
command -v npm >/dev/null 2>&1 || bench+=(nodejs npm)
browser=(chromium)
# test: the browser tests drive Debian's Chromium (playwright-core and the MCP SDK come from npm
# into build/npm on first use, with the npm above); tests/security runs each check that a
# destination is refused inside `unshare -n` (util-linux) with `ip link set lo up` (iproute2),
# watched by `strace -f -e trace=connect,bind`. e2e.test_junit validates --junit's XML with
# xmllint --schema (libxml2-utils); junit.consumer reads it with npm's junit2json (build/npm).
# e2e.test_push streams --out prometheus-rw and --out influxdb into Debian's prometheus (above)
# and influxd (InfluxDB 1.x, package influxdb) and reads the series back. e2e.test_proxy goes
# through a real HTTP proxy that logs what it forwards (tinyproxy).
test=("${browser[@]}" strace iproute2 util-linux libxml2-utils influxdb tinyproxy
      ngtcp2-client ngtcp2-server)     # HTTP/3 peers: e2e.test_target_h3 drives gtlsclient
# npm fetches uPlot, which the build embeds into the HTML report. A node that came from elsewhere
# (NodeSource's nodejs ships npm inside it and conflicts with Debian's npm) is kept as it is.
command -v npm >/dev/null 2>&1 || build+=(nodejs npm)

want=("${build[@]}")
for extra in "$@"; do
  case "$extra" in
    fuzz) want+=("${fuzz[@]}") ;;
    bench) want+=("${bench[@]}") ;;
    test) want+=("${test[@]}") ;;
    browser) want+=("${browser[@]}") ;;
    *) echo "deps.sh: unknown set '$extra' (test, fuzz, bench, browser)" >&2; exit 2 ;;
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
