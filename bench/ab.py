#!/usr/bin/env python3
"""bench/ab.py - interleaved A/B runs of the quick face against one squall target.

Each arm is a set of extra flags; rounds alternate the arms (ABAB..., the order rotated each
round) so slow drifts of a noisy machine hit both alike. Prints req/s and client CPU per 1,000
requests as medians with min-max spreads, and B's change against A.

usage: bench/ab.py --squall build/squall --a="" --b="--no-phases" [--path /fast] [--rounds 5]
                   [--duration 5] [-c 64] [--threads 1] [--server-cpus 0] [--client-cpus 1]
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess


def run(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.stdout.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{cmd}: exit {status}")
    doc = json.loads(out)
    done = doc["requests"]["completed"]
    return done / doc["duration_s"], (ru.ru_utime + ru.ru_stime) * 1e6 / done


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--squall", required=True)
    ap.add_argument("--a", default="")
    ap.add_argument("--b", required=True)
    ap.add_argument("--path", default="/fast")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("-c", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--client-cpus", default="1")
    a = ap.parse_args()
    sq = os.path.abspath(a.squall)
    tgt = subprocess.Popen(["taskset", "-c", a.server_cpus, sq, "target", "--port", "0", "-t", "1"],
                           stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    port = int(re.search(r":(\d+)$", tgt.stdout.readline().decode().strip()).group(1))
    base = ["taskset", "-c", a.client_cpus, sq, f"http://127.0.0.1:{port}{a.path}", "-c", str(a.c),
            "-t", str(a.threads), "-d", f"{a.duration}s", "--json", "-", "-q"]
    arms = {"A": base + shlex.split(a.a), "B": base + shlex.split(a.b)}
    res = {"A": [], "B": []}
    try:
        for r in range(a.rounds):
            for name in (("A", "B") if r % 2 == 0 else ("B", "A")):
                res[name].append(run(arms[name]))
    finally:
        tgt.terminate()
        tgt.wait()
    med = {}
    for name in ("A", "B"):
        rps = [x[0] for x in res[name]]
        cpu = [x[1] for x in res[name]]
        med[name] = (statistics.median(rps), statistics.median(cpu))
        flags = a.a if name == "A" else a.b
        print(f"{name} [{flags or 'default'}]: {med[name][0]:,.0f} req/s ({min(rps):,.0f}-"
              f"{max(rps):,.0f}), {med[name][1]:.2f} ms CPU/1k ({min(cpu):.2f}-{max(cpu):.2f})")
    print(f"B vs A: req/s {100 * (med['B'][0] / med['A'][0] - 1):+.1f}%, "
          f"CPU/1k {100 * (med['B'][1] / med['A'][1] - 1):+.1f}%")


if __name__ == "__main__":
    main()
