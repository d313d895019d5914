#!/usr/bin/env python3
"""bench/build_ab.py - two squall builds against each other, paired by round: served (the
server's own count) and client CPU per request, B over A, on squall target and nginx, over
HTTP/1.1 (c=64) and h2c (8 connections x 16 streams), `/fast`.

  python3 bench/build_ab.py A B                       8 rounds x 3 s, all four cases
  python3 bench/build_ab.py A B --rounds 5 --duration 5 --cases target-h2,nginx-h1

The server runs on CPU 0 and the client on CPU 1 (--server-cpu, --client-cpu); the arms'
order alternates each round, so the VM's speed level, which moves between rounds here, falls on
both alike. Client CPU (user + system) from /usr/bin/time. Figures, not pass/fail;
docs/benchmarks.md "HTTP/2 against h2load, round 3" has a run.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402
import h2_frames  # noqa: E402


def timed(cmd, cpu):
    p = subprocess.run(["/usr/bin/time", "-f", "TIME %U %S", "taskset", "-c", str(cpu), *cmd],
                       capture_output=True, text=True, timeout=600)
    m = re.search(r"TIME ([\d.]+) ([\d.]+)", p.stderr)
    if p.returncode != 0 or not m:
        raise RuntimeError("%s failed (%d): %s" % (cmd[0], p.returncode, p.stderr[-500:]))
    return float(m.group(1)) + float(m.group(2))


def one_case(a, case):
    sname, proto = case.split("-")
    workdir = tempfile.mkdtemp(prefix="sq-ab-")
    cpus = str(a.server_cpu)
    if sname == "target":
        srv = harness.Target(cpus, a.a)
    elif proto == "h2":
        srv = h2_frames.NginxH2(cpus, workdir)
    else:
        srv = harness.Nginx(cpus, workdir)
    url = "http://127.0.0.1:%d/fast" % srv.port
    conc = ["-c", "8", "--http2", "--streams", "16"] if proto == "h2" else ["-c", "64"]
    res = {"A": [], "B": []}
    try:
        for r in range(a.rounds):
            for arm in (["A", "B"] if r % 2 == 0 else ["B", "A"]):
                srv.reset()
                exe = a.a if arm == "A" else a.b
                cpu = timed([exe, *conc, "-t", "1", "-d", "%ds" % a.duration, "-q", "--no-phases",
                             "--json", os.devnull, url], a.client_cpu)
                served = max(srv.stats()["served"], 1)
                res[arm].append((served, cpu / served * 1e6))
    finally:
        srv.stop()
    served = [b[0] / x[0] for x, b in zip(res["A"], res["B"])]
    cpu = [b[1] / x[1] for x, b in zip(res["A"], res["B"])]
    print("| %s | %.0f | %.0f | %.3fx (%.2f-%.2f) | %.3fx (%.2f-%.2f) |" % (
        case, statistics.median(x[0] for x in res["A"]) / a.duration,
        statistics.median(x[0] for x in res["B"]) / a.duration, statistics.median(served),
        min(served), max(served), statistics.median(cpu), min(cpu), max(cpu)), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("a", help="build A (the baseline)")
    ap.add_argument("b", help="build B")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--duration", type=int, default=3)
    ap.add_argument("--cases", default="target-h2,nginx-h2,target-h1,nginx-h1")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    a = ap.parse_args()
    a.a, a.b = os.path.abspath(a.a), os.path.abspath(a.b)
    a.server_cpus, a.client_cpus = a.server_cpu, a.client_cpu  # harness.machine_line
    print("# %s; %d rounds x %d s, arms alternated\n" % (harness.machine_line(a), a.rounds,
                                                        a.duration))
    print("| case | A served req/s | B served req/s | served B / A, paired | "
          "client CPU per request B / A, paired |")
    print("|---|---|---|---|---|")
    for case in a.cases.split(","):
        one_case(a, case)


if __name__ == "__main__":
    main()
