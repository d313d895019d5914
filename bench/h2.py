#!/usr/bin/env python3
"""bench/h2.py - squall --http2 against h2load on squall target (h2c), and squall over HTTP/1.1
at the same concurrency. Client CPU (user + system) comes from /usr/bin/time; rounds alternate
the three clients; medians are printed last. Figures, not pass/fail.

  bench/h2.sh                                  8 connections x 16 streams, 5 s, 3 rounds
  bench/h2.sh --conns 4 --streams 32 --duration 10 --rounds 5
  bench/h2.sh --server-cpu 0 --client-cpu 1    (pin the target and the client apart)
  bench/h2.sh --server nginx --no-h1            (nginx, h2c on its listen line; one worker)
  bench/h2.sh --also /tmp/squall-new           (one more --http2 arm: another build, A/B)
The server's own count of requests served is beside each run (squall target's /stats, nginx's
stub_status), and each client's served count and CPU per request against h2load's in the same
round.
"""
import argparse
import json
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


def run_squall(a, url, h2, squall=None):
    conc = ["-c", str(a.conns), "--http2", "--streams", str(a.streams)] if h2 else \
        ["-c", str(a.conns * a.streams)]
    out, cpu = timed([squall or a.squall, *conc, "-t", "1", "-d", "%ds" % a.duration, "-q",
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
    ap.add_argument("--server", default="target", choices=["target", "nginx"])
    ap.add_argument("--no-h1", action="store_true", help="leave out the HTTP/1.1 arm")
    ap.add_argument("--server-cpu", type=int)
    ap.add_argument("--client-cpu", type=int)
    ap.add_argument("--also", metavar="SQUALL", action="append", default=[],
                    help="another squall build as one more --http2 arm (an A/B of a change)")
    a = ap.parse_args()
    os.environ["SQUALL"] = os.path.abspath(a.squall)
    workdir = tempfile.mkdtemp(prefix="squall-h2-")
    cpus = str(a.server_cpu) if a.server_cpu is not None else \
        ",".join(map(str, sorted(os.sched_getaffinity(0))))
    srv = harness.Target(cpus, os.path.abspath(a.squall)) if a.server == "target" else \
        h2_frames.NginxH2(cpus, workdir)
    url = "http://127.0.0.1:%d%s" % (srv.port, a.path)
    clients = [("h2load (h2c)", lambda: run_h2load(a, url)),
               ("squall --http2", lambda: run_squall(a, url, True))]
    for i, other in enumerate(a.also):
        clients.append(("squall --http2 B%d" % (i + 1),
                        lambda o=os.path.abspath(other): run_squall(a, url, True, o)))
    if not a.no_h1:
        clients.append(("squall HTTP/1.1", lambda: run_squall(a, url, False)))
    res = {name: [] for name, _ in clients}
    loads = []
    try:
        for r in range(a.rounds):
            k = r % len(clients)
            order = clients[k:] + clients[:k]  # alternate who goes first
            for name, fn in order:
                loads.append(os.getloadavg()[0])
                srv.reset()
                rps, ms_per_k, done = fn()
                served = srv.stats()["served"]
                res[name].append((rps, ms_per_k, served))
                print("round %d  %-16s %10.0f req/s  %8.2f ms CPU / 1k req  (%d requests, "
                      "server counted %d)" % (r + 1, name, rps, ms_per_k, done, served),
                      flush=True)
    finally:
        srv.stop()
    print("\n%s, medians over %d rounds, %d connections x %d streams (HTTP/1.1: %d connections), "
          "%ds, load average %.1f-%.1f" % (a.server, a.rounds, a.conns, a.streams,
                                            a.conns * a.streams, a.duration, min(loads),
                                            max(loads)))
    print("| client | req/s | server counted | client CPU per 1,000 requests | served vs h2load, "
          "paired by round | CPU vs h2load, paired by round |")
    print("|---|---|---|---|---|---|")
    base = res["h2load (h2c)"]
    for name, _ in clients:
        v = res[name]
        served = [x[2] / b[2] for x, b in zip(v, base) if b[2]]
        cpu = [x[1] / b[1] for x, b in zip(v, base)]
        print("| %s | %.0f | %s | %s ms | %s | %s |" % (
            name, statistics.median(x[0] for x in v), harness.fmt_range([x[2] for x in v]),
            harness.fmt_range([x[1] for x in v], "{:.2f}"),
            harness.fmt_range(served, "{:.3f}x"), harness.fmt_range(cpu, "{:.3f}x")))


if __name__ == "__main__":
    main()
