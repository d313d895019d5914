#!/usr/bin/env python3
"""bench/wrk_scripts.py - `squall wrk` against Debian's wrk with the same Lua scripts.

Arms run alternately (the order rotated each round) against one `squall target` (-t 1, pinned
to --server-cpus), the client pinned to --client-cpus with the same -t/-c/-d. Each run's
requests and duration come from the report both print ("N requests in T"), its CPU from wait4
(user + sys of the client process). Prints per arm the median and min-max of req/s and of client
CPU per 1,000 requests, and each arm against the first.

Arms (--arms, comma-separated):
    wrk:SCRIPT          wrk -s SCRIPT (SCRIPT "-" for none)
    squall:SCRIPT       squall wrk -s SCRIPT
    quick               squall URL (the quick face, --no-phases, the same -t/-c/-d)

--callgrind D1,D2: instead of timing, each arm runs under `valgrind --tool=callgrind` for D1 and
then D2 seconds; its instructions per request are (Ir(D2) - Ir(D1)) / (requests(D2) -
requests(D1)), so start-up (Lua states included) cancels out. User-space instructions only: a
system call costs one instruction there (use it between squall arms, and timing against wrk,
whose extra epoll_ctl per request is kernel time).

usage: bench/wrk_scripts.py --squall build/squall \\
           --arms wrk:tests/scripts/counter.lua,squall:tests/scripts/counter.lua [--rounds 7]
           [--duration 5] [-c 32] [--threads 1] [--path /fast] [--server-cpus 0]
           [--client-cpus 1] [-v]
       bench/wrk_scripts.py --squall build/squall --arms quick,squall:- --callgrind 2,6
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab import build_shim  # noqa: E402  (valgrind 3.19 does not know epoll_pwait2)

UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse(cmd, out):
    """(completed requests, seconds) from a report or a JSON document."""
    if out.lstrip().startswith("{"):
        doc = json.loads(out)
        return doc["requests"]["completed"], doc["duration_s"]
    m = re.search(r"^\s+(\d+) requests in ([\d.]+)(us|ms|s|m|h),", out, re.M)
    if not m:
        raise RuntimeError(f"{cmd}: no report:\n{out}")
    return int(m.group(1)), float(m.group(2)) * UNITS[m.group(3)]


def inclusive(out, fn):
    """The inclusive instructions of the functions named fn in a callgrind file."""
    ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", out],
                         capture_output=True, text=True).stdout
    incl = 0
    for line in ann.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(\S+):(\S+) \[", line)
        if m and m.group(3) == fn and not m.group(2).startswith("???"):
            incl += int(m.group(1).replace(",", ""))
    return incl


def callgrind(cmd, shim, fn=None):
    """(instructions, completed requests, fn's inclusive instructions) of one run of cmd under
    callgrind."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        p = subprocess.run(["valgrind", "--tool=callgrind", "--smc-check=all-non-file",
                            f"--callgrind-out-file={out}", *cmd], capture_output=True, text=True,
                           env=dict(os.environ, LD_PRELOAD=shim))
        if p.returncode != 0:
            raise RuntimeError(f"{cmd}: exit {p.returncode}: {p.stderr[-2000:]}")
        done, _ = parse(cmd, p.stdout)
        total = 0
        for f in os.listdir(d):  # one file per thread with --separate-threads; one here
            with open(os.path.join(d, f)) as fh:
                for line in fh:
                    if line.startswith(("totals:", "summary:")):
                        total = max(total, int(line.split()[1]))
        return total, done, inclusive(out, fn) if fn else 0


def run(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.stdout.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{cmd}: exit {status}")
    done, secs = parse(cmd, out)
    if not done:
        raise RuntimeError(f"{cmd}: no request completed")
    return done / secs, (ru.ru_utime + ru.ru_stime) * 1e6 / done


def spread(v, fmt):
    return f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}-{fmt.format(max(v))})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--squall", required=True)
    ap.add_argument("--wrk", default=shutil.which("wrk") or "wrk")
    ap.add_argument("--arms", required=True)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("-c", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--path", default="/fast")
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--client-cpus", default="1")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--callgrind", metavar="D1,D2",
                    help="instructions per request under callgrind instead of timing")
    ap.add_argument("--callgrind-fn", metavar="NAME",
                    help="with --callgrind: also NAME's inclusive instructions per request "
                         "(on_io: squall's connection event handler)")
    a = ap.parse_args()
    sq = os.path.abspath(a.squall)
    tgt = subprocess.Popen(["taskset", "-c", a.server_cpus, sq, "target", "--port", "0", "-t", "1"],
                           stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    port = int(re.search(r":(\d+)$", tgt.stdout.readline().decode().strip()).group(1))
    url = f"http://127.0.0.1:{port}{a.path}"
    common = ["-t", str(a.threads), "-c", str(a.c), "-d", "DUR"]
    arms = []
    for spec in a.arms.split(","):
        kind, _, script = spec.partition(":")
        s = [] if script in ("", "-") else ["-s", script]
        if kind == "wrk":
            cmd = [a.wrk, *common, *s, url]
        elif kind == "squall":
            cmd = [sq, "wrk", *common, *s, url]
        elif kind == "quick":
            cmd = [sq, url, *common, "--no-phases", "--json", "-", "-q"]
        else:
            raise SystemExit(f"unknown arm {spec}")
        arms.append((spec, cmd if a.callgrind else ["taskset", "-c", a.client_cpus, *cmd]))

    def with_dur(cmd, secs):
        return [f"{secs}s" if x == "DUR" else x for x in cmd]

    res = {spec: [] for spec, _ in arms}
    tmp = tempfile.TemporaryDirectory()
    shim = build_shim(tmp.name) if a.callgrind else None
    try:
        for r in range(a.rounds):
            order = arms[r % len(arms):] + arms[: r % len(arms)]
            for spec, cmd in order:
                if a.callgrind:
                    d1, d2 = a.callgrind.split(",")
                    i1, n1, f1 = callgrind(with_dur(cmd, d1), shim, a.callgrind_fn)
                    i2, n2, f2 = callgrind(with_dur(cmd, d2), shim, a.callgrind_fn)
                    res[spec].append(((i2 - i1) / (n2 - n1), (f2 - f1) / (n2 - n1)))
                else:
                    res[spec].append(run(with_dur(cmd, a.duration)))
                if a.verbose:
                    print(f"round {r + 1} {spec}: {res[spec][-1]}", flush=True)
    finally:
        tgt.terminate()
        tgt.wait()
        tmp.cleanup()
    if a.callgrind:
        base = None
        for spec, _ in arms:
            ir = [x[0] for x in res[spec]]
            line = f"{spec}: {spread(ir, '{:,.0f}')} instructions/request"
            if a.callgrind_fn:
                line += f", {a.callgrind_fn} {spread([x[1] for x in res[spec]], '{:,.0f}')}"
            if base:
                line += f"  [vs {base[0]}: x{statistics.median(ir) / base[1]:.3f}]"
            else:
                base = (spec, statistics.median(ir))
            print(line)
        return
    base = None
    for spec, _ in arms:
        rps = [x[0] for x in res[spec]]
        cpu = [x[1] for x in res[spec]]
        line = f"{spec}: {spread(rps, '{:,.0f}')} req/s, {spread(cpu, '{:.1f}')} ms CPU/1k"
        if base:
            line += (f"  [vs {base[0]}: req/s x{statistics.median(rps) / base[1]:.2f}, "
                     f"CPU/request x{statistics.median(cpu) / base[2]:.2f}]")
        else:
            base = (spec, statistics.median(rps), statistics.median(cpu))
        print(line)


if __name__ == "__main__":
    main()
