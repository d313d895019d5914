#!/usr/bin/env python3
"""bench/daemon.py - what `squall serve` costs (docs/benchmarks.md, "The daemon").

  bench/daemon.py [--squall build/squall] [--rounds 5] [--duration 5] [--connections 64]
                  [--pollers 20] [--followers 5] [--poll-ms 250] [--idle 60]

Three arms against one `squall target -t 1` pinned to CPU 0, the load generator on CPU 1, rounds
alternated (cli, daemon, daemon+clients, cli, ...), each the same closed-loop run (`-c N -d Ds
-t 1` on /fast):
  cli      `squall URL ... --json -`, a fresh process per round
  daemon   the same run through `squall serve` (one daemon for all rounds, pinned to CPU 1):
           POST /runs, then its result
  clients  the daemon arm while --pollers clients GET /runs/{id} every --poll-ms each and
           --followers clients follow /runs/{id}/live (the clients run on CPU 0, beside the
           target); their GET latencies give the API's p50/p99 under a live run
Then the idle daemon: CPU ticks and context switches over --idle seconds, VmRSS idle, during a
run and after it. Prints markdown: medians, spreads, every round.
"""

import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
import sqtest  # noqa: E402

HOST = "127.0.0.1"


def pinned(cpu, argv):
    return ["taskset", "-c", str(cpu)] + argv


def proc_stat(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().split(")")[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime, ticks


def switches(pid):
    total = 0
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, t)) as f:
                for line in f:
                    if "ctxt_switches" in line:
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def api(port, method, path, body=None, conn=None):
    own = conn is None
    c = conn or http.client.HTTPConnection(HOST, port, timeout=60)
    try:
        hdrs = {"Content-Type": "application/json"} if body is not None else {}
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=hdrs)
        r = c.getresponse()
        data = r.read()
        return r.status, json.loads(data) if data else None
    finally:
        if own:
            c.close()


def daemon_run(port, url, a):
    st, doc = api(port, "POST", "/runs", {"quick": {"url": url, "connections": a.connections,
                                                     "duration": "%ds" % a.duration,
                                                     "threads": 1}})
    assert st == 201, (st, doc)
    return doc["id"]


def wait_run(port, rid):
    while True:
        st, run = api(port, "GET", "/runs/%d" % rid)
        if run["status"] not in ("queued", "running"):
            return run
        time.sleep(0.2)


class Clients:
    """--pollers GET /runs/{id} loops and --followers /live readers, all in this process."""

    def __init__(self, port, rid, a):
        self.port, self.rid, self.a = port, rid, a
        self.lat = []
        self.events = 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.poll) for _ in range(a.pollers)]
        self.threads += [threading.Thread(target=self.follow) for _ in range(a.followers)]
        for t in self.threads:
            t.start()

    def poll(self):
        c = http.client.HTTPConnection(HOST, self.port, timeout=30)
        lat = []
        while not self.stop.is_set():
            t0 = time.perf_counter()
            c.request("GET", "/runs/%d" % self.rid)
            r = c.getresponse()
            r.read()
            lat.append((time.perf_counter() - t0) * 1e3)
            self.stop.wait(self.a.poll_ms / 1e3)
        c.close()
        self.lat.extend(lat)

    def follow(self):
        c = http.client.HTTPConnection(HOST, self.port, timeout=60)
        c.request("GET", "/runs/%d/live" % self.rid)
        r = c.getresponse()
        n = 0
        while True:
            line = r.readline()
            if not line:
                break
            if line.startswith(b"event: "):
                n += 1
            if line.startswith(b"event: end"):
                break
        c.close()
        self.events += n

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join()


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] if v else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--squall", default=os.path.join(HERE, "..", "build", "squall"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--pollers", type=int, default=20)
    ap.add_argument("--followers", type=int, default=5)
    ap.add_argument("--poll-ms", type=int, default=250)
    ap.add_argument("--idle", type=int, default=60)
    a = ap.parse_args()
    squall = os.path.abspath(a.squall)
    os.environ["SQUALL"] = squall
    tmp = tempfile.mkdtemp(prefix="squall-bench-daemon-")
    target = subprocess.Popen(pinned(0, [squall, "target", "--port", "0", "-t", "1", "-q"]),
                              stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    line = target.stdout.readline().decode()
    tport = int(re.search(r":(\d+)$", line.strip()).group(1))
    url = "http://%s:%d/fast" % (HOST, tport)
    daemon = subprocess.Popen(pinned(1, [squall, "serve", "--listen", "127.0.0.1:0", "--data",
                                         os.path.join(tmp, "d"), "--quiet"]),
                              stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    line = daemon.stdout.readline().decode()
    port = int(re.search(r":(\d+)/$", line.strip()).group(1))
    res = {"cli": [], "daemon": [], "clients": []}
    cpu = {"cli": [], "daemon": [], "clients": []}  # µs of CPU per completed request
    lat, events = [], []
    rss_run = []
    try:
        for r in range(a.rounds):
            for arm in ("cli", "daemon", "clients"):
                if arm == "cli":
                    p = subprocess.Popen(pinned(1, [squall, url, "-c", str(a.connections), "-d",
                                                    "%ds" % a.duration, "-t", "1", "-q",
                                                    "--json", "-"]), stdout=subprocess.PIPE)
                    out = p.stdout.read()
                    _, _, ru = os.wait4(p.pid, 0)
                    p.stdout.close()
                    doc = json.loads(out)
                    used = ru.ru_utime + ru.ru_stime
                else:
                    t0 = proc_stat(daemon.pid)
                    rid = daemon_run(port, url, a)
                    cl = Clients(port, rid, a) if arm == "clients" else None
                    time.sleep(a.duration / 2)
                    rss_run.append(rss_kb(daemon.pid))
                    run = wait_run(port, rid)
                    if cl:
                        cl.join()
                        lat.extend(cl.lat)
                        events.append(cl.events)
                    doc = run["result"]
                    used = (proc_stat(daemon.pid) - t0) / os.sysconf("SC_CLK_TCK")
                res[arm].append(doc["rate"]["requests_per_s"])
                cpu[arm].append(used * 1e6 / max(1, doc["requests"]["completed"]))
                print("round %d %-8s %10.0f req/s" % (r + 1, arm, res[arm][-1]), file=sys.stderr)
        rss_after = rss_kb(daemon.pid)
        c0, s0 = proc_stat(daemon.pid), switches(daemon.pid)
        time.sleep(a.idle)
        c1, s1 = proc_stat(daemon.pid), switches(daemon.pid)
        rss_idle = rss_kb(daemon.pid)
        # a fresh daemon: RSS before any run
        fresh = subprocess.Popen([squall, "serve", "--listen", "127.0.0.1:0", "--data",
                                  os.path.join(tmp, "fresh"), "--quiet"],
                                 stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        fresh.stdout.readline()
        time.sleep(1)
        rss_fresh = rss_kb(fresh.pid)
        f0, fs0 = proc_stat(fresh.pid), switches(fresh.pid)
        time.sleep(a.idle)
        f1, fs1 = proc_stat(fresh.pid), switches(fresh.pid)
        sqtest.stop(fresh)
    finally:
        sqtest.stop(daemon)
        sqtest.stop(target)
        shutil.rmtree(tmp, ignore_errors=True)

    hz = os.sysconf("SC_CLK_TCK")
    med = {k: statistics.median(v) for k, v in res.items()}
    mc = {k: statistics.median(v) for k, v in cpu.items()}
    print("| arm | median req/s | vs cli | rounds | CPU per request (median) | rounds |")
    print("|---|---|---|---|---|---|")
    for k in ("cli", "daemon", "clients"):
        print("| %s | %.0f | %+.1f%% | %s | %.2f µs (%+.1f%%) | %s |"
              % (k, med[k], 100 * (med[k] / med["cli"] - 1),
                 ", ".join("%.0f" % x for x in res[k]), mc[k], 100 * (mc[k] / mc["cli"] - 1),
                 ", ".join("%.2f" % x for x in cpu[k])))
    print()
    print("GET /runs/{id} under a live run (%d pollers every %d ms, %d followers): "
          "%d answers, p50 %.2f ms, p99 %.2f ms, max %.2f ms; followers got %s events"
          % (a.pollers, a.poll_ms, a.followers, len(lat), pct(lat, 50), pct(lat, 99),
             max(lat) if lat else float("nan"), events))
    print()
    print("idle, fresh daemon: VmRSS %d KiB; over %d s: %.2f s CPU (%.3f%%), %d context switches"
          % (rss_fresh, a.idle, (f1 - f0) / hz, 100 * (f1 - f0) / hz / a.idle, fs1 - fs0))
    print("during runs: VmRSS %s KiB; right after: %d KiB; %d s later: %d KiB; over those %d s: "
          "%.2f s CPU, %d context switches"
          % (", ".join(map(str, rss_run)), rss_after, a.idle, rss_idle, a.idle, (c1 - c0) / hz,
             s1 - s0))


if __name__ == "__main__":
    main()
