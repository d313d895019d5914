#!/usr/bin/env python3
"""bench/daemon_callgrind.py - what a run costs through `squall serve` against the CLI, in
instructions (valgrind --tool=callgrind): a measure the machine's load does not move.

  bench/daemon_callgrind.py [--squall build/squall] [--small 5000] [--large 25000]

Two fixed-count runs of each arm (`-n SMALL` and `-n LARGE`, `-c 8 -t 1` on /fast against an
unwatched `squall target -t 1`); the difference between them is the cost of LARGE - SMALL
requests, fixed costs (start, set-up, exit) cancelled:
  cli     `valgrind --tool=callgrind squall URL -n N ...`, one process per run
  daemon  one `valgrind --tool=callgrind squall serve`; callgrind_control dumps the counts
          before, between and after the two runs (POST /runs, then wait for the result)
Both differences include the per-second work (the daemon's: a store append, the event, a post)
for as many seconds as the extra requests took under callgrind (which runs ~50x slower), so
the script also counts the seconds (the series' length) and prints the extra instructions per
second, and what they are at the CLI's real rate, per request.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
import sqtest  # noqa: E402


def total_ir(path):
    with open(path) as f:
        for line in f:
            if line.startswith("totals:") or line.startswith("summary:"):
                return int(line.split()[1])
    raise RuntimeError("no totals in " + path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--squall", default=os.path.join(HERE, "..", "build", "squall"))
    ap.add_argument("--small", type=int, default=5000)
    ap.add_argument("--large", type=int, default=25000)
    ap.add_argument("--real-rps", type=float, default=0,
                    help="the CLI's req/s at full speed (measured here when 0)")
    a = ap.parse_args()
    squall = os.path.abspath(a.squall)
    os.environ["SQUALL"] = squall
    tmp = tempfile.mkdtemp(prefix="squall-cg-")
    target, tport = sqtest.start_target("-t", "1")
    url = "http://127.0.0.1:%d/fast" % tport
    vg = ["valgrind", "--tool=callgrind", "--quiet"]
    res = {}
    try:
        for n in (a.small, a.large):
            out = os.path.join(tmp, "cli-%d.out" % n)
            p = subprocess.run(vg + ["--callgrind-out-file=" + out, squall, url, "-n", str(n),
                                     "-c", "8", "-t", "1", "-q", "--json", "-"],
                               capture_output=True, timeout=1200)
            doc = json.loads(p.stdout)
            res[("cli", n)] = (total_ir(out), len(doc["series"]), doc["requests"]["completed"])
        out = os.path.join(tmp, "serve.out")
        serve = subprocess.Popen(vg + ["--callgrind-out-file=" + out, squall, "serve", "--listen",
                                       "127.0.0.1:0", "--data", os.path.join(tmp, "d"),
                                       "--quiet"],
                                 stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        line = serve.stdout.readline().decode()
        port = int(re.search(r":(\d+)/$", line.strip()).group(1))
        time.sleep(2)
        subprocess.run(["callgrind_control", "-d", str(serve.pid)], capture_output=True)
        c = sqtest.http
        for n in (a.small, a.large):
            st, _, body = c(port, "POST", "/runs",
                            body=json.dumps({"quick": {"url": url, "requests": n,
                                                       "connections": 8, "threads": 1}}),
                            headers={"Content-Type": "application/json"}, timeout=60)
            rid = json.loads(body)["id"]
            while True:
                st, _, body = c(port, "GET", "/runs/%d" % rid, timeout=60)
                run = json.loads(body)
                if run["status"] not in ("queued", "running"):
                    break
                time.sleep(0.5)
            doc = run["result"]
            before = set(glob.glob(out + "*"))
            subprocess.run(["callgrind_control", "-d", str(serve.pid)], capture_output=True)
            time.sleep(1)
            dumps = sorted(set(glob.glob(out + "*")) - before)
            res[("daemon", n)] = (total_ir(dumps[-1]), len(doc["series"]),
                                  doc["requests"]["completed"])
        sqtest.stop(serve, timeout=120)
        rps = a.real_rps
        if not rps:
            p, doc, _ = sqtest.run_json(url, "-n", "200000", "-c", "8", "-t", "1", "-q")
            rps = doc["rate"]["requests_per_s"]
    finally:
        sqtest.stop(target)
        shutil.rmtree(tmp, ignore_errors=True)

    print("| arm | Ir, -n %d | seconds | Ir, -n %d | seconds | Ir per extra request |"
          % (a.small, a.large))
    print("|---|---|---|---|---|---|")
    per = {}
    for arm in ("cli", "daemon"):
        s, l = res[(arm, a.small)], res[(arm, a.large)]
        per[arm] = (l[0] - s[0]) / (l[2] - s[2])
        print("| %s | %.1f M | %d | %.1f M | %d | %.0f |"
              % (arm, s[0] / 1e6, s[1], l[0] / 1e6, l[1], per[arm]))
    ds = (res[("daemon", a.large)][1] - res[("daemon", a.small)][1])
    cs = (res[("cli", a.large)][1] - res[("cli", a.small)][1])
    extra = (per["daemon"] - per["cli"]) * (a.large - a.small)
    print()
    print("daemon - cli: %.0f Ir per request (%+.2f%%) over %d extra seconds under callgrind"
          % (per["daemon"] - per["cli"], 100 * (per["daemon"] / per["cli"] - 1), max(ds, cs)))
    if ds > 0:
        per_s = extra / ds
        print("that is %.0f Ir per second of run; at the CLI's real %.0f req/s: %.3f Ir per "
              "request, %.4f%% of the %.0f a request costs"
              % (per_s, rps, per_s / rps, 100 * per_s / rps / per["cli"], per["cli"]))


if __name__ == "__main__":
    main()
