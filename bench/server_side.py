#!/usr/bin/env python3
"""bench/server_side.py - what each client costs the server (issue 20 part 1): the server's system
calls, wake-ups and CPU per request under squall and under wrk, same server, arms rotated.

  python3 bench/server_side.py                      target and nginx, /fast, c=64, 5 s, 3 rounds
  python3 bench/server_side.py --servers nginx --rounds 5 --conns 256
  python3 bench/server_side.py --servers target --conns 8 --streams 16   (h2c: against h2load)
  python3 bench/server_side.py --also /tmp/squall-new      (one more squall arm: another build)

A client that answers each response at once keeps the server waking for small batches; one whose
loop is slower hands it fuller ones. When the server is the bottleneck, the smaller batches mean
more server system calls and wake-ups per request and fewer requests served, though the client
itself spends less. This shows it: per run, requests served (the server's own count), the
server's system calls (perf's raw_syscalls:sys_enter on the server's worker), epoll waits and
context switches per request, and its CPU per 1,000 requests (/proc/PID/stat), beside the client's
CPU per 1,000. Needs perf (linux-perf) with tracepoints readable (root here). Figures, not
pass/fail; docs/benchmarks.md "What a client costs the server (part 1)" has a run.
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
import h2_frames  # noqa: E402

EVENTS = ["raw_syscalls:sys_enter", "syscalls:sys_enter_epoll_wait",
          "syscalls:sys_enter_epoll_pwait", "syscalls:sys_enter_epoll_pwait2", "context-switches"]


def worker_pid(srv):
    """The process that serves: squall target itself, nginx's one worker (a child of its master)."""
    if srv.name == "target":
        return srv.proc.pid
    for _ in range(50):
        out = subprocess.run(["pgrep", "-P", str(srv.proc.pid)], capture_output=True, text=True)
        kids = out.stdout.split()
        if kids:
            return int(kids[0])
        time.sleep(0.1)
    raise RuntimeError("no nginx worker")


def client_argv(tool, a, url, workdir):
    if tool == "wrk":
        return [a.wrk, "-t1", f"-c{a.conns}", f"-d{a.duration}s", url]
    if tool == "h2load":
        return ["h2load", "-t1", f"-c{a.conns}", f"-m{a.streams}", f"-D{a.duration}", url]
    exe = a.also[int(tool.split(" B")[1]) - 1] if " B" in tool else a.squall
    if a.streams:
        return [exe, url, "-t", "1", "-c", str(a.conns), "--http2", "--streams", str(a.streams),
                "-d", f"{a.duration}s", "-q", "--no-phases", "--json", os.devnull]
    return harness.tool_argv("squall", exe, url, a.conns, a.duration, workdir, 1)


def one(tool, srv, pid, a, workdir):
    url = f"http://127.0.0.1:{srv.port}{a.path}"
    srv.reset()
    stat_file = os.path.join(workdir, "perf.csv")
    perf = subprocess.Popen(["perf", "stat", "-x,", "-o", stat_file, "-p", str(pid),
                             "-e", ",".join(EVENTS)], stderr=subprocess.DEVNULL)
    time.sleep(0.2)
    c0 = harness.proc_cpu_s(pid)
    run = harness.measure(client_argv(tool, a, url, workdir), a.client_cpus, a.duration + 30)
    c1 = harness.proc_cpu_s(pid)
    perf.send_signal(2)
    perf.wait()
    served = srv.stats()["served"]
    counts = {}
    for ln in open(stat_file):
        f = ln.strip().split(",")
        if len(f) > 2 and re.match(r"^\d+$", f[0]):
            counts[f[2]] = int(f[0])
    epw = sum(v for k, v in counts.items() if "epoll" in k)
    n = max(served, 1)
    return dict(served=served, rps=served / a.duration,
                sys_per_req=counts.get("raw_syscalls:sys_enter", 0) / n,
                epoll_per_req=epw / n, csw_per_req=counts.get("context-switches", 0) / n,
                server_cpu_1k=(c1 - c0) * 1e6 / n, client_cpu_1k=run["cpu_s"] * 1e6 / n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--squall", default=os.path.join(harness.ROOT, "build", "squall"))
    ap.add_argument("--wrk", default="wrk")
    ap.add_argument("--servers", default="target,nginx")
    ap.add_argument("--path", default="/fast")
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--client-cpus", default="1")
    ap.add_argument("--streams", type=int, default=0,
                    help="HTTP/2 (h2c): squall --http2 with this many streams per connection "
                         "against h2load -m (nginx: h2c on its listen line)")
    ap.add_argument("--also", metavar="SQUALL", action="append", default=[],
                    help="another squall build as one more arm (an A/B of a change)")
    a = ap.parse_args()
    tools = ["squall", *("squall B%d" % (i + 1) for i in range(len(a.also))),
             "h2load" if a.streams else "wrk"]
    print(f"# {harness.machine_line(a)}")
    print(f"# {a.path}, c={a.conns}, {a.duration} s per run, {a.rounds} rounds, clients rotated; "
          f"median (min–max)\n")
    for sname in a.servers.split(","):
        workdir = tempfile.mkdtemp(prefix="sq-srvside-")
        srv = h2_frames.NginxH2(a.server_cpus, workdir) if a.streams and sname == "nginx" \
            else harness.start_server(sname, a.server_cpus, workdir, a.squall)
        rows = {t: [] for t in tools}
        try:
            pid = worker_pid(srv)
            for rnd in range(a.rounds):
                k = rnd % len(tools)
                for tool in tools[k:] + tools[:k]:
                    r = one(tool, srv, pid, a, workdir)
                    rows[tool].append(r)
                    print(f"{sname} round {rnd + 1} {tool}: "
                          + ", ".join(f"{k}={v:.3f}" for k, v in r.items()), file=sys.stderr)
        finally:
            srv.stop()
        print(f"### {sname}\n")
        print("| client | served req/s | server syscalls / req | server epoll waits / req | "
              "server context switches / req | server CPU ms / 1k | client CPU ms / 1k |")
        print("|---|---|---|---|---|---|---|")
        for t in tools:
            def col(k, f="{:.3f}"):
                v = [r[k] for r in rows[t]]
                return (f"{f.format(statistics.median(v))} "
                        f"({f.format(min(v))}–{f.format(max(v))})")
            print(f"| {t} | {col('rps', '{:.0f}')} | {col('sys_per_req')} | "
                  f"{col('epoll_per_req')} | {col('csw_per_req')} | "
                  f"{col('server_cpu_1k', '{:.2f}')} | {col('client_cpu_1k', '{:.2f}')} |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
