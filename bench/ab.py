#!/usr/bin/env python3
"""bench/ab.py - interleaved A/B runs of the quick face against one squall target.

An arm is a squall binary and a set of extra flags (--a/--b: flags; --a-squall/--b-squall: the
binary, default --squall), so one script compares two flags of one build or two builds (this
branch against main, built elsewhere). Both arms load the same target: the --squall binary's,
or --target-squall's.

Timing (the default): rounds alternate the arms (ABAB..., the order rotated each round) so slow
drifts of a noisy machine hit both alike. Prints req/s and client CPU per 1,000 requests (user +
sys of the client process, from wait4) as medians with min-max spreads, and B's change against A.

--callgrind N1,N2: instead of timing, runs each arm under `valgrind --tool=callgrind` twice,
bounded by request count (-n N1, then -n N2), alternating arms, --rounds times; the instructions
per request are (Ir(N2) - Ir(N1)) / (N2 - N1), so start-up, pool setup and the end of the run
cancel out. Prints the median and the spread per arm. Instruction counts do not depend on the
machine's noise: they move only when the code does (and a little with how many events one
epoll_wait returns, which the rounds show).

usage: bench/ab.py --squall build/squall --a="" --b="--no-phases" [--path /fast] [--rounds 5]
                   [--duration 5] [-c 64] [--threads 1] [--server-cpus 0] [--client-cpus 1]
                   [--tls] [-v: every round's figures]
       bench/ab.py --squall build/squall --a-squall /tmp/main/build/squall --b="" \\
                   --callgrind 20000,60000 [--rounds 3]
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import tempfile

# valgrind 3.19 (Debian 12) does not know epoll_pwait2, which the event loop waits in: under
# --callgrind both arms run with this shim preloaded (the same instructions in each), which waits
# in epoll_pwait with the timeout rounded up to whole milliseconds.
SHIM_C = r"""
#define _GNU_SOURCE
#include <signal.h>
#include <sys/epoll.h>
#include <time.h>
int epoll_pwait2(int ep, struct epoll_event *ev, int max, const struct timespec *t,
                 const sigset_t *ss)
{
    int ms = -1;
    if (t) {
        long long ns = (long long)t->tv_sec * 1000000000LL + t->tv_nsec;
        ms = (int)((ns + 999999) / 1000000);
    }
    return epoll_pwait(ep, ev, max, ms, ss);
}
"""


def build_shim(d):
    src, so = os.path.join(d, "shim.c"), os.path.join(d, "epoll_pwait2_shim.so")
    with open(src, "w") as f:
        f.write(SHIM_C)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", so, src], check=True)
    return so


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


def callgrind_ir(cmd, n, shim, fn=None):
    """Total instructions (Ir) of one run of cmd under callgrind, with -n n requests; with fn,
    also the inclusive instructions of the functions named fn (summed over files)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        env = dict(os.environ, LD_PRELOAD=shim)
        p = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd,
                            "-n", str(n)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           env=env)
        if p.returncode != 0:
            raise RuntimeError(f"{cmd} -n {n}: exit {p.returncode}")
        doc = json.loads(p.stdout)
        if doc["requests"]["completed"] != n:
            raise RuntimeError(f"{cmd} -n {n}: {doc['requests']}")
        total = None
        with open(out) as f:
            for line in f:
                if line.startswith("totals:") or line.startswith("summary:"):
                    total = int(line.split()[1])
        if total is None:
            raise RuntimeError("callgrind wrote no totals")
        if not fn:
            return total, 0
        ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", out],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
        # "91,252,511 (84.60%)  /path/file.c:on_io [/path/binary]": the lines with the binary
        incl = 0
        for line in ann.splitlines():
            m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(\S+):(\S+) \[", line)
            if m and m.group(3) == fn and not m.group(2).startswith("???"):
                incl += int(m.group(1).replace(",", ""))
        return total, incl


def spread(v, fmt):
    return f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}-{fmt.format(max(v))})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--squall", required=True, help="the default binary of both arms")
    ap.add_argument("--a-squall", help="arm A's binary (default --squall)")
    ap.add_argument("--b-squall", help="arm B's binary (default --squall)")
    ap.add_argument("--target-squall", help="the binary that runs the target (default --squall)")
    ap.add_argument("--a", default="")
    ap.add_argument("--b", default="")
    ap.add_argument("--path", default="/fast")
    ap.add_argument("--tls", action="store_true", help="https: the target with --tls, -k")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("-c", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--client-cpus", default="1")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every round")
    ap.add_argument("--callgrind", metavar="N1,N2",
                    help="instructions per request under callgrind instead of timing")
    ap.add_argument("--callgrind-fn", metavar="NAME",
                    help="with --callgrind: also the inclusive instructions per request of the "
                         "function NAME (e.g. on_io, the connection's event handler)")
    a = ap.parse_args()
    sq = os.path.abspath(a.squall)
    bins = {"A": os.path.abspath(a.a_squall or sq), "B": os.path.abspath(a.b_squall or sq)}
    tsq = os.path.abspath(a.target_squall or sq)
    tgt = subprocess.Popen(["taskset", "-c", a.server_cpus, tsq, "target", "--port", "0", "-t", "1"]
                           + (["--tls"] if a.tls else []),
                           stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    port = int(re.search(r":(\d+)$", tgt.stdout.readline().decode().strip()).group(1))
    url = f"{'https' if a.tls else 'http'}://127.0.0.1:{port}{a.path}"
    arms = {}
    for name, flags in (("A", a.a), ("B", a.b)):
        base = [bins[name], url, "-c", str(a.c), "-t", str(a.threads), "--json", "-", "-q"]
        if a.tls:
            base.append("-k")
        if not a.callgrind:
            base = ["taskset", "-c", a.client_cpus] + base + ["-d", f"{a.duration}s"]
        arms[name] = base + shlex.split(flags)
    res = {"A": [], "B": []}
    tmp = tempfile.TemporaryDirectory()
    shim = build_shim(tmp.name) if a.callgrind else None
    try:
        for r in range(a.rounds):
            for name in (("A", "B") if r % 2 == 0 else ("B", "A")):
                if a.callgrind:
                    n1, n2 = (int(x) for x in a.callgrind.split(","))
                    lo = callgrind_ir(arms[name], n1, shim, a.callgrind_fn)
                    hi = callgrind_ir(arms[name], n2, shim, a.callgrind_fn)
                    res[name].append(((hi[0] - lo[0]) / (n2 - n1), (hi[1] - lo[1]) / (n2 - n1)))
                else:
                    res[name].append(run(arms[name]))
                if a.verbose:
                    print(f"round {r + 1} {name}: {res[name][-1]}", flush=True)
    finally:
        tgt.terminate()
        tgt.wait()
        tmp.cleanup()
    for name in ("A", "B"):
        label = f"{name} [{bins[name]} {a.a if name == 'A' else a.b}]".replace(" ]", "]")
        if a.callgrind:
            tot = [x[0] for x in res[name]]
            line = f"{label}: {spread(tot, '{:,.0f}')} instructions/request"
            if a.callgrind_fn:
                fn = [x[1] for x in res[name]]
                line += f", {a.callgrind_fn} {spread(fn, '{:,.1f}')}"
            print(line)
        else:
            rps = [x[0] for x in res[name]]
            cpu = [x[1] for x in res[name]]
            print(f"{label}: {spread(rps, '{:,.0f}')} req/s, {spread(cpu, '{:.2f}')} ms CPU/1k")
    if a.callgrind:
        for k, what in ((0, "instructions/request"), (1, a.callgrind_fn)):
            if k == 1 and not a.callgrind_fn:
                break
            ma = statistics.median([x[k] for x in res["A"]])
            mb = statistics.median([x[k] for x in res["B"]])
            print(f"B vs A: {what} {100 * (mb / ma - 1):+.2f}%")
    else:
        med = {k: (statistics.median([x[0] for x in v]), statistics.median([x[1] for x in v]))
               for k, v in res.items()}
        print(f"B vs A: req/s {100 * (med['B'][0] / med['A'][0] - 1):+.1f}%, "
              f"CPU/1k {100 * (med['B'][1] / med['A'][1] - 1):+.1f}%")


if __name__ == "__main__":
    main()
