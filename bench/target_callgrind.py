#!/usr/bin/env python3
"""bench/target_callgrind.py - instructions `squall target` spends per request, for an A/B of
two builds (callgrind: the machine's load does not move it).

  bench/target_callgrind.py --a OLD/squall --b NEW/squall [--requests 40000] [--rounds 2]

Each round, for A then B: `valgrind --tool=callgrind squall target -t 1`, its counts dumped
(callgrind_control) once it listens, then --requests requests from an unwatched client (squall
URL -n N -c 8 -t 1, GET /fast, keep-alive), dumped again: the second dump is the serving alone.
Prints Ir per request, and B against A.
"""

import argparse
import glob
import os
import re
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


def one(squall, client, n, tmp, tag):
    out = os.path.join(tmp, "%s.out" % tag)
    p = subprocess.Popen(["valgrind", "--tool=callgrind", "--quiet", "--callgrind-out-file=" + out,
                          squall, "target", "--port", "0", "-t", "1", "-q"],
                         stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    line = p.stdout.readline().decode()
    port = int(re.search(r":(\d+)$", line.strip()).group(1))
    time.sleep(1)

    def dump():
        before = set(glob.glob(out + "*"))
        subprocess.run(["callgrind_control", "-d", str(p.pid)], capture_output=True)
        for _ in range(100):
            new = sorted(set(glob.glob(out + "*")) - before)
            if new:
                time.sleep(0.3)
                return new[-1]
            time.sleep(0.1)
        raise RuntimeError("no dump")

    dump()
    r = subprocess.run([client, "http://127.0.0.1:%d/fast" % port, "-n", str(n), "-c", "8",
                        "-t", "1", "-q", "--json", "-"], capture_output=True, timeout=1200)
    import json
    done = json.loads(r.stdout)["requests"]["completed"]
    ir = total_ir(dump())
    sqtest.stop(p, timeout=60)
    return ir / done


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--requests", type=int, default=40000)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    os.environ["SQUALL"] = os.path.abspath(a.b)
    tmp = tempfile.mkdtemp(prefix="squall-cgt-")
    res = {"A": [], "B": []}
    for r in range(a.rounds):
        for tag, bin_ in (("A", a.a), ("B", a.b)):
            res[tag].append(one(os.path.abspath(bin_), os.path.abspath(a.b), a.requests, tmp,
                                "%s%d" % (tag, r)))
            print("round %d %s %.1f Ir/request" % (r + 1, tag, res[tag][-1]), file=sys.stderr)
    for tag in ("A", "B"):
        print("%s: %s Ir per request" % (tag, ", ".join("%.1f" % x for x in res[tag])))
    import statistics
    ma, mb = statistics.median(res["A"]), statistics.median(res["B"])
    print("B vs A: %+.2f%%" % (100 * (mb / ma - 1)))


if __name__ == "__main__":
    main()
