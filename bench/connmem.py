#!/usr/bin/env python3
"""bench/connmem.py - the client's memory per connection: squall (and wrk, when installed).

Starts `squall target` on loopback, then runs the client at each --conns (default 1, 5000,
10000) for --duration against GET /fast and reads its peak RSS (GNU time's %M: ru_maxrss of the
client's process). Bytes per connection = (RSS(c) - RSS(base)) / (c - base), base being the
smallest --conns. One markdown table on stdout; --json writes the figures too.

So the next feature that adds state to every connection shows up here: run it before and after
(docs/benchmarks.md keeps the last figures).

Connections to the limit (issue 31 section 2): --pacing 1s makes every connection send one
request a second (closed loop, squall's --pacing), or --rate R an open loop of R per second over
the pool; --connect-rate paces the setup; --path picks the endpoint. The target's own peak RSS
(VmHWM, read before it stops) and what the client reported (setup time, source addresses,
connections opened, requests completed) are printed beside the client's figures:

  bench/connmem.py --conns 1,19000 --pacing 1s --connect-rate 5000 --duration 20s --wrk-conns ''

Only loopback; the open-file soft limit is raised to the hard limit (each connection is an fd,
and the target holds one too); every run is bounded by its duration and killed past a grace.
"""
import argparse
import json
import os
import resource
import signal
import socket
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TIME = "/usr/bin/time"  # GNU time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from harness import free_port  # noqa: E402


def wait_port(port, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("connmem: the target did not listen on port %d" % port)


def run_peak(argv, grace):
    """Runs argv under GNU time; returns (exit status, peak RSS in bytes, stdout). Not wait4's
    ru_maxrss here: Linux keeps the high-water mark across exec, so a child of this Python would
    never read below the interpreter's own RSS. GNU time is a small C program."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as tf:
        try:
            p = subprocess.run([TIME, "-f", "%M", "-o", tf.name] + argv, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, timeout=grace)
        except subprocess.TimeoutExpired:
            return -1, 0, ""
        kb = tf.read().strip().splitlines()
    return p.returncode, int(kb[-1]) * 1024 if kb else 0, p.stdout.decode(errors="replace")


def target_hwm(pid):
    """The target's peak RSS so far (VmHWM, bytes), or None."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--squall", default=os.path.join(ROOT, "build", "squall"))
    ap.add_argument("--conns", default="1,5000,10000")
    ap.add_argument("--duration", default="3s")
    ap.add_argument("--rounds", type=int, default=1, help="runs per point (the median is kept)")
    ap.add_argument("--wrk", default=shutil.which("wrk"), help="wrk binary (default: on PATH)")
    ap.add_argument("--wrk-conns", default="1,5000", help="wrk's points (empty: none)")
    ap.add_argument("--threads", default="1", help="client threads (squall -t, wrk -t)")
    ap.add_argument("--target-threads", default="1")
    ap.add_argument("--pacing", help="squall --pacing D: each connection one request per D")
    ap.add_argument("--rate", help="squall -r N: an open loop of N requests per second")
    ap.add_argument("--connect-rate", help="squall --connect-rate N: paced connection setup")
    ap.add_argument("--path", default="/fast", help="the target's endpoint (default /fast)")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    conns = [int(x) for x in a.conns.split(",") if x]
    wconns = [int(x) for x in a.wrk_conns.split(",") if x] if a.wrk else []
    need = max(conns + wconns) + 64
    if need > hard:
        raise SystemExit("connmem: %d connections need %d fds; the hard limit is %d" %
                         (max(conns + wconns), need, hard))
    secs = float(a.duration.rstrip("s"))

    port = free_port()
    target = subprocess.Popen([a.squall, "target", "-q", "-p", str(port), "-t",
                               a.target_threads], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    rows = []
    try:
        wait_port(port)
        url = "http://127.0.0.1:%d%s" % (port, a.path)
        extra = []
        if a.pacing:
            extra += ["--pacing", a.pacing]
        if a.rate:
            extra += ["-r", a.rate]
        if a.connect_rate:
            extra += ["--connect-rate", a.connect_rate]
        tools = [("squall", conns)] + ([("wrk", wconns)] if wconns else [])
        for tool, points in tools:
            base = None
            for c in points:
                rss, reqs, info = [], [], {}
                for _ in range(a.rounds):
                    if tool == "squall":
                        argv = [a.squall, url, "-c", str(c), "-t", a.threads, "-d", a.duration,
                                "--json", "-"] + extra
                    else:
                        argv = [a.wrk, "-t", a.threads, "-c", str(c), "-d", a.duration, url]
                    rc, peak, out = run_peak(argv, secs + 60)
                    rss.append(peak)
                    if tool == "squall" and rc == 0:
                        try:
                            doc = json.loads(out)
                            reqs.append(doc["requests"]["completed"])
                            info = {"setup_s": doc["setup_s"],
                                    "opened": doc["connections"]["opened"],
                                    "connect_errors": doc["errors"]["connect"],
                                    "source_addrs": doc["config"].get("source_addrs")}
                        except (ValueError, KeyError, TypeError):
                            pass
                peak = int(statistics.median(rss))
                if base is None:
                    base = (c, peak)
                per = (peak - base[1]) / (c - base[0]) if c != base[0] else None
                rows.append({"tool": tool, "conns": c, "rss": peak, "per_conn": per,
                             "completed": int(statistics.median(reqs)) if reqs else None,
                             "target_hwm": target_hwm(target.pid), **info})
    finally:
        target.terminate()  # our own child
        try:
            target.wait(10)
        except subprocess.TimeoutExpired:
            target.kill()
            target.wait()

    print("| tool | connections | peak RSS | bytes per connection | opened | completed | setup | "
          "source addresses | target peak RSS |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|")
    for r in rows:
        per = "%.0f" % r["per_conn"] if r["per_conn"] is not None else "(base)"
        hwm = "%.1f MB" % (r["target_hwm"] / 1e6) if r.get("target_hwm") else ""
        setup = "%.2f s" % r["setup_s"] if r.get("setup_s") is not None else ""
        srcs = ",".join(r.get("source_addrs") or []) or "(kernel)"
        print("| %s | %d | %.1f MB | %s | %s | %s | %s | %s | %s |" %
              (r["tool"], r["conns"], r["rss"] / 1e6, per, r.get("opened", ""),
               r.get("completed") if r.get("completed") is not None else "", setup,
               srcs if r["tool"] == "squall" else "", hwm))
    by = {(r["tool"], r["conns"]): r["rss"] for r in rows}
    for c in conns:
        if ("wrk", c) in by and c > 1:
            print("\nat c=%d squall's RSS is %.2fx wrk's" % (c, by[("squall", c)] / by[("wrk", c)]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
