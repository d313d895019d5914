#!/usr/bin/env python3
"""bench/uring.py - the floor probe on epoll (bench/probe.c) against its io_uring twin
(bench/probe_uring.c, each of its setup modes) and squall, same server, arms rotated each round.

  python3 bench/uring.py                                 target, /fast, c=64, 5 s, 5 rounds
  python3 bench/uring.py --servers target,nginx --rounds 7 --duration 3
  python3 bench/uring.py --arms probe,uring-defer --strace 2   (+ syscalls per response, 2 s runs)

Per arm: client CPU (user + sys, GNU time around the tool) per 1,000 responses, req/s and what
the server counted; medians and min-max. With --strace S, one more run per arm under
`strace -c -f` for S seconds: system calls per response (strace slows a syscall-heavy client
far more than a ring, so compare the counts, not that run's rate). Figures, not pass/fail;
docs/benchmarks.md "Below the floor: io_uring" has a run.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

ARMS = ["probe", "uring-defer", "uring-coop", "uring-plain", "squall"]


def argv_of(arm, a, port, conns, secs, workdir):
    url = f"http://127.0.0.1:{port}{a.path}"
    if arm == "probe":
        return [a.probe, "127.0.0.1", str(port), a.path, str(conns), str(secs)]
    if arm.startswith("uring-"):
        return [a.probe_uring, "127.0.0.1", str(port), a.path, str(conns), str(secs),
                arm.split("-", 1)[1]]
    return harness.tool_argv("squall", a.squall, url, conns, secs, workdir, 1)


def responses(arm, run, workdir):
    if arm == "squall":
        return harness.parse("squall", run, workdir)["requests"]
    return int(re.search(r"(\d+) responses in", run["out"]).group(1))


def strace_counts(argv, cpus, secs):
    """Runs argv under strace -c -f; returns {syscall: calls}."""
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as f:
        p = subprocess.run(["taskset", "-c", cpus, "strace", "-c", "-f", "-o", f.name, *argv],
                           capture_output=True, text=True, timeout=secs * 3 + 60)
        calls = {}
        for ln in open(f.name):
            m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", ln)
            if m and m.group(2) != "total":
                calls[m.group(2)] = int(m.group(1))
        return calls, p


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--servers", default="target")
    ap.add_argument("--path", default="/fast")
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--strace", type=int, default=0, help="seconds of one strace -c run per arm")
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--client-cpus", default="1")
    ap.add_argument("--squall", default=os.path.join(harness.ROOT, "build", "squall"))
    ap.add_argument("--probe", default=os.path.join(harness.ROOT, "build", "bench", "probe"))
    ap.add_argument("--probe-uring",
                    default=os.path.join(harness.ROOT, "build", "bench", "probe_uring"))
    a = ap.parse_args()
    arms = a.arms.split(",")
    for arm in arms:
        if arm not in ARMS:
            sys.exit(f"uring.py: unknown arm '{arm}' ({', '.join(ARMS)})")
    need = {"probe": a.probe, "squall": a.squall}
    for arm in arms:
        exe = a.probe_uring if arm.startswith("uring-") else need[arm]
        if not os.access(exe, os.X_OK):
            sys.exit(f"uring.py: {exe} not built (make build; probe_uring needs liburing-dev: "
                     "scripts/deps.sh bench)")
    print(f"# {harness.machine_line(a)}")
    workdir = tempfile.mkdtemp(prefix="squall-uring-")
    for sname in a.servers.split(","):
        srv = harness.start_server(sname, a.server_cpus, workdir, a.squall)
        rows = {arm: [] for arm in arms}
        loads = []
        try:
            for rnd in range(a.rounds):
                k = rnd % len(arms)
                for arm in arms[k:] + arms[:k]:
                    loads.append(os.getloadavg()[0])
                    srv.reset()
                    run = harness.measure(argv_of(arm, a, srv.port, a.conns, a.duration, workdir),
                                          a.client_cpus, a.duration * 2 + 60)
                    served = srv.stats()["served"]
                    n = responses(arm, run, workdir)
                    it = re.search(r"([\d.]+) loop iterations per response", run["err"])
                    rows[arm].append({"cpu_ms_1k": run["cpu_s"] * 1e6 / max(n, 1),
                                      "csw": run["csw"] / max(n, 1),
                                      "rps": n / a.duration, "served": served,
                                      "enters": float(it.group(1)) if it else None})
                    print(f"round {rnd + 1} {sname} {arm:12s} {n / a.duration:9.0f} req/s "
                          f"{run['cpu_s'] * 1e6 / max(n, 1):6.2f} ms CPU/1k "
                          f"served {served}" + (f" enters/resp {it.group(1)}" if it else ""),
                          flush=True)
                    time.sleep(0.5)
            calls = {}
            if a.strace:
                for arm in arms:
                    srv.reset()
                    c, p = strace_counts(argv_of(arm, a, srv.port, a.conns, a.strace, workdir),
                                         a.client_cpus, a.strace)
                    calls[arm] = (c, srv.stats()["served"])
        finally:
            srv.stop()
        lo, hi = min(loads), max(loads)
        print(f"\n## {sname}, {a.path}, c={a.conns}, {a.duration} s, {a.rounds} rounds rotated, "
              f"load average {lo:.1f}-{hi:.1f}\n")
        base = statistics.median(r["cpu_ms_1k"] for r in rows["probe"]) if "probe" in rows \
            else None
        print("| arm | client CPU ms / 1k responses | vs probe (medians) | vs probe, paired "
              "by round | context switches / response | req/s | server counted |")
        print("|---|---|---|---|---|---|---|")
        for arm in arms:
            rs = rows[arm]
            cpu = harness.fmt_range([r["cpu_ms_1k"] for r in rs], "{:.2f}")
            rel = f"{statistics.median(r['cpu_ms_1k'] for r in rs) / base:.2f}x" if base else "—"
            # the same round's probe run: the VM's speed level moves between rounds
            pair = harness.fmt_range([r["cpu_ms_1k"] / p["cpu_ms_1k"] for r, p in
                                      zip(rs, rows["probe"])], "{:.2f}x") if base else "—"
            print(f"| {arm} | {cpu} | {rel} | {pair} | "
                  f"{harness.fmt_range([r['csw'] for r in rs], '{:.3f}')} | "
                  f"{harness.fmt_range([r['rps'] for r in rs])} "
                  f"| {harness.fmt_range([r['served'] for r in rs])} |")
        if calls:
            print(f"\nstrace -c -f, {a.strace} s per arm: system calls per response "
                  "(the server's count)\n")
            print("| arm | calls / response | the main ones |")
            print("|---|---|---|")
            for arm, (c, served) in calls.items():
                top = sorted(c.items(), key=lambda kv: -kv[1])[:3]
                print(f"| {arm} | {sum(c.values()) / max(served, 1):.3f} | " +
                      ", ".join(f"{k} {v / max(served, 1):.3f}" for k, v in top) + " |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
