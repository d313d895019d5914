#!/usr/bin/env python3
"""bench/target_ab.py - A/B of two `squall target` builds under one client (the server side of a
change: bench/ab.py compares clients).

Each round starts arm A's target and arm B's (order rotated each round), pinned to
--server-cpus, and loads each with the same client (--squall, pinned to --client-cpus) for
--duration seconds on --path. Per run: requests/s, and the server's CPU per 1,000 requests (user +
sys of the target process from /proc/PID/stat, before and after the load). Prints medians with
min-max spreads and B's change against A.

usage: bench/target_ab.py --squall build/squall --a /tmp/main/build/squall --b build/squall
                          [--rounds 5] [--duration 5] [-c 64] [--path /fast]
"""
import argparse
import json
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def start_target(binary, cpus):
    p = subprocess.Popen(["taskset", "-c", cpus, binary, "target", "--port", "0", "-t", "1", "-q"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         stdin=subprocess.DEVNULL)
    line = b""
    deadline = time.monotonic() + 10
    while not line.endswith(b"\n") and time.monotonic() < deadline:
        r, _, _ = select.select([p.stdout], [], [], 1)
        if r:
            line += os.read(p.stdout.fileno(), 1)
    m = re.search(rb":(\d+)\s*$", line)
    if not m:
        p.kill()
        raise RuntimeError("target did not start: %r" % line)
    return p, int(m.group(1))


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def one(a, binary):
    p, port = start_target(binary, a.server_cpus)
    try:
        time.sleep(0.2)
        c0 = harness.proc_cpu_s(p.pid)
        out = subprocess.run(["taskset", "-c", a.client_cpus, a.squall,
                              f"http://127.0.0.1:{port}{a.path}", "-c", str(a.c), "-t", "1", "-d",
                              f"{a.duration}s", "--json", "-", "-q"],
                             capture_output=True, check=True).stdout
        c1 = harness.proc_cpu_s(p.pid)
    finally:
        stop(p)
    doc = json.loads(out)
    done = doc["requests"]["completed"]
    return done / doc["duration_s"], (c1 - c0) / done * 1000 * 1e6


def spread(v, fmt):
    return (fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(v), min(v), max(v))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--squall", required=True, help="the client")
    ap.add_argument("--a", required=True, help="arm A's target binary")
    ap.add_argument("--b", required=True, help="arm B's target binary")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("-c", type=int, default=64)
    ap.add_argument("--path", default="/fast")
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--client-cpus", default="1")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    arms = {"A": a.a, "B": a.b}
    res = {k: ([], []) for k in arms}
    for r in range(a.rounds):
        order = ["A", "B"] if r % 2 == 0 else ["B", "A"]
        for k in order:
            rate, cpu = one(a, arms[k])
            res[k][0].append(rate)
            res[k][1].append(cpu)
            if a.verbose:
                print("round %d %s: %.0f req/s, %.0f µs server CPU per 1k requests" %
                      (r + 1, k, rate, cpu))
    for k in arms:
        print("%s [%s]: %s req/s · server CPU per 1k requests %s µs" %
              (k, arms[k], spread(res[k][0], "%.0f"), spread(res[k][1], "%.0f")))
    ma, mb = statistics.median(res["A"][1]), statistics.median(res["B"][1])
    ra, rb = statistics.median(res["A"][0]), statistics.median(res["B"][0])
    print("B vs A: req/s %+.1f%%, server CPU per request %+.1f%%" %
          ((rb / ra - 1) * 100, (mb / ma - 1) * 100))


if __name__ == "__main__":
    main()
