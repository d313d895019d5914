#!/usr/bin/env python3
"""bench/h2.py - squall --http2 against h2load on squall target (h2c), and squall over HTTP/1.1
at the same concurrency. Client CPU (user + system) comes from /usr/bin/time; rounds alternate
the three clients; medians are printed last. Figures, not pass/fail.

  bench/h2.sh                                  8 connections x 16 streams, 5 s, 3 rounds
  bench/h2.sh --conns 4 --streams 32 --duration 10 --rounds 5
  bench/h2.sh --server-cpu 0 --client-cpu 1    (pin the target and the client apart)
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
import sqtest  # noqa: E402


def timed(cmd, cpu):
    """Runs cmd under /usr/bin/time (pinned to cpu if given); returns (stdout, user+sys s)."""
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    p = subprocess.run(["/usr/bin/time", "-f", "TIME %U %S", *pin, *cmd],
                       capture_output=True, text=True, timeout=600)
    m = re.search(r"TIME ([\d.]+) ([\d.]+)", p.stderr)
    if p.returncode not in (0,) or not m:
        raise RuntimeError("%s failed (%d): %s" % (cmd[0], p.returncode, p.stderr[-500:]))
    return p.stdout, float(m.group(1)) + float(m.group(2))


def run_h2load(a, url):
    out, cpu = timed(["h2load", "-c", str(a.conns), "-m", str(a.streams), "-t", "1",
                      "-D", str(a.duration), url], a.client_cpu)
    m = re.search(r"finished in ([\d.]+)s, ([\d.]+) req/s", out)
    n = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", out)
    done, secs = int(n.group(1)), float(m.group(1))
    return done / secs, cpu / done * 1e6, done  # ms of CPU per 1,000 requests


def run_squall(a, url, h2):
    conc = ["-c", str(a.conns), "--http2", "--streams", str(a.streams)] if h2 else \
        ["-c", str(a.conns * a.streams)]
    out, cpu = timed([a.squall, *conc, "-t", "1", "-d", "%ds" % a.duration, "-q",
                      "--no-phases", "--json", "-", url], a.client_cpu)
    doc = json.loads(out)
    done = doc["requests"]["completed"]
    return done / doc["duration_s"], cpu / done * 1e6, done


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--squall", default=os.path.join(HERE, "..", "build", "squall"))
    ap.add_argument("--conns", type=int, default=8)
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--path", default="/fast")
    ap.add_argument("--server-cpu", type=int)
    ap.add_argument("--client-cpu", type=int)
    a = ap.parse_args()
    os.environ["SQUALL"] = os.path.abspath(a.squall)
    targs = ["-t", "1", "-q"]
    proc, port = sqtest.start_target(*targs)
    if a.server_cpu is not None:
        subprocess.run(["taskset", "-pc", str(a.server_cpu), str(proc.pid)],
                       stdout=subprocess.DEVNULL, check=True)
    url = "http://127.0.0.1:%d%s" % (port, a.path)
    clients = [("h2load (h2c)", lambda: run_h2load(a, url)),
               ("squall --http2", lambda: run_squall(a, url, True)),
               ("squall HTTP/1.1", lambda: run_squall(a, url, False))]
    res = {name: [] for name, _ in clients}
    try:
        for r in range(a.rounds):
            order = clients[r % 3:] + clients[:r % 3]  # alternate who goes first
            for name, fn in order:
                rps, ms_per_k, done = fn()
                res[name].append((rps, ms_per_k))
                print("round %d  %-16s %10.0f req/s  %8.2f ms CPU / 1k req  (%d requests)"
                      % (r + 1, name, rps, ms_per_k, done), flush=True)
    finally:
        sqtest.stop(proc)
    print("\nmedians over %d rounds, %d connections x %d streams (HTTP/1.1: %d connections), %ds"
          % (a.rounds, a.conns, a.streams, a.conns * a.streams, a.duration))
    print("| client | req/s | client CPU per 1,000 requests |")
    print("|---|---|---|")
    for name, _ in clients:
        v = res[name]
        print("| %s | %.0f | %.2f ms |" % (name, statistics.median(x[0] for x in v),
                                           statistics.median(x[1] for x in v)))


if __name__ == "__main__":
    main()
