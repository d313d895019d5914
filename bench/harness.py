#!/usr/bin/env python3
"""bench/harness.py - squall side by side with its peers, on the same target, in one run.

Servers: nginx (one worker, a fixed minimal config written here) and `squall target`, pinned to
the server CPUs. Clients pinned to the client CPUs, tools in rotated order each round so drift
lands on every tool. Per tool and case: req/s (median, min-max over rounds), p50/p99 where the
tool reports them, errors, client CPU ms per 1,000 requests (user+sys of the client process from
wait4), peak RSS, and the requests the server counted.

Only loopback addresses; every run is bounded by its duration.
"""
import argparse
import json
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class Nginx:
    name = "nginx"

    def __init__(self, cpus, workdir):
        self.port = free_port()
        self.dir = workdir
        conf = os.path.join(workdir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""worker_processes 1;
worker_rlimit_nofile 65536;
daemon off;
pid {workdir}/nginx.pid;
error_log {workdir}/nginx-error.log crit;
events {{ worker_connections 65536; }}
http {{
  access_log off;
  keepalive_requests 1000000000;
  keepalive_timeout 300s;
  client_body_temp_path {workdir}/body;
  proxy_temp_path {workdir}/proxy;
  fastcgi_temp_path {workdir}/fcgi;
  uwsgi_temp_path {workdir}/uwsgi;
  scgi_temp_path {workdir}/scgi;
  server {{
    listen 127.0.0.1:{self.port} backlog=8192;
    location = /fast {{ default_type text/plain; return 200 "hello world"; }}
    location = /nginx_status {{ stub_status; }}
  }}
}}
""")
        self.proc = subprocess.Popen(["taskset", "-c", cpus, "nginx", "-c", conf],
                                     preexec_fn=raise_nofile)
        wait_port(self.port)

    def count(self):
        body = urllib.request.urlopen(f"http://127.0.0.1:{self.port}/nginx_status").read()
        return int(body.decode().split("\n")[2].split()[2])

    def reset(self):
        self.base = self.count()

    def served(self):
        return self.count() - self.base - 1  # the status request itself

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class Target:
    name = "squall-target"

    def __init__(self, cpus, squall):
        self.proc = subprocess.Popen(["taskset", "-c", cpus, squall, "target", "--port", "0",
                                      "-t", "1"], stdout=subprocess.PIPE, text=True,
                                     preexec_fn=raise_nofile)
        line = self.proc.stdout.readline()
        self.port = int(re.search(r":(\d+)\s*$", line).group(1))

    def reset(self):
        urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{self.port}/stats/reset", method="POST")).read()

    def served(self):
        st = json.load(urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats"))
        return st["requests"] - 1  # the /stats request itself

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def wait_port(port, timeout=5):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def to_us(s):
    m = re.match(r"([\d.]+)(us|ms|s)", s)
    v = float(m.group(1))
    return v * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]


def measure(argv, cpus):
    """fork/exec with wait4 so the rusage is this client's alone (taskset execs into it)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(w, 1)
        os.dup2(w, 2)
        os.close(r)
        raise_nofile()
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status, ru = os.wait4(pid, 0)
    cpu = ru.ru_utime + ru.ru_stime
    return b"".join(chunks).decode(errors="replace"), cpu, ru.ru_maxrss, os.waitstatus_to_exitcode(status)


def tool_argv(tool, url, conns, secs, squall, probe, workdir):
    host, port, path = re.match(r"http://([^:/]+):(\d+)(/.*)", url).groups()
    if tool == "squall":
        return [squall, url, "-t", "1", "-c", str(conns), "-d", f"{secs}s", "-q",
                "--json", os.path.join(workdir, "squall.json")]
    if tool == "wrk":
        return ["wrk", "-t1", f"-c{conns}", f"-d{secs}s", "--latency", url]
    if tool == "probe":
        return [probe, host, port, path, str(conns), str(secs)]
    raise ValueError(tool)


def parse(tool, out, workdir, secs):
    r = {"rps": None, "p50_us": None, "p99_us": None, "errors": None, "requests": None}
    if tool == "squall":
        d = json.load(open(os.path.join(workdir, "squall.json")))
        r.update(rps=d["rate"]["requests_per_s"], p50_us=d["latency"]["p50_us"],
                 p99_us=d["latency"]["p99_us"], requests=d["requests"]["completed"],
                 errors=d["requests"]["failed"] + d["errors"]["connect"])
    elif tool == "wrk":
        r["rps"] = float(re.search(r"Requests/sec:\s*([\d.]+)", out).group(1))
        r["requests"] = int(re.search(r"(\d+) requests in", out).group(1))
        m = re.search(r"50%\s+(\S+)", out)
        r["p50_us"] = to_us(m.group(1)) if m else None
        m = re.search(r"99%\s+(\S+)", out)
        r["p99_us"] = to_us(m.group(1)) if m else None
        m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
        r["errors"] = sum(map(int, m.groups())) if m else 0
    elif tool == "probe":
        m = re.search(r"(\d+) responses in ([\d.]+)s", out)
        r["requests"] = int(m.group(1))
        r["rps"] = r["requests"] / float(m.group(2))
        r["errors"] = 0
    return r


def fmt_range(vals, f="{:.0f}"):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "—"
    med = statistics.median(vals)
    return f"{f.format(med)} ({f.format(min(vals))}–{f.format(max(vals))})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", default="squall,wrk,probe")
    ap.add_argument("--servers", default="nginx,target")
    ap.add_argument("--conns", default="64,256")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--client-cpus", default="1")
    ap.add_argument("--squall", default=os.path.join(ROOT, "build", "squall"))
    ap.add_argument("--probe", default=os.path.join(ROOT, "build", "bench", "probe"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    a = ap.parse_args()

    tools = []
    for t in a.tools.split(","):
        exe = {"squall": a.squall, "wrk": "wrk", "probe": a.probe}[t]
        if shutil.which(exe) or os.access(exe, os.X_OK):
            tools.append(t)
        else:
            print(f"skip {t}: {exe} not found (scripts/deps.sh bench installs the peers)")
    os.makedirs(a.out, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="squall-bench-")
    print(f"# machine: {os.cpu_count()} CPUs, {os.uname().release}; server on CPU "
          f"{a.server_cpus}, clients on CPU {a.client_cpus}; {a.duration}s per run, "
          f"{a.rounds} rounds, tools rotated each round\n")
    for sname in a.servers.split(","):
        if sname == "nginx" and not shutil.which("nginx"):
            print("skip nginx: not installed")
            continue
        srv = Nginx(a.server_cpus, workdir) if sname == "nginx" else Target(a.server_cpus,
                                                                            a.squall)
        try:
            for conns in [int(c) for c in a.conns.split(",")]:
                url = f"http://127.0.0.1:{srv.port}/fast"
                rows = {t: [] for t in tools}
                for rnd in range(a.rounds):
                    order = tools[rnd % len(tools):] + tools[:rnd % len(tools)]
                    for t in order:
                        srv.reset()
                        argv = tool_argv(t, url, conns, a.duration, a.squall, a.probe, workdir)
                        out, cpu, rss, rc = measure(argv, a.client_cpus)
                        served = srv.served()
                        try:
                            r = parse(t, out, workdir, a.duration)
                        except Exception as e:  # a tool that failed shows as a failed run
                            print(f"{t} failed (rc {rc}): {e}\n{out[-500:]}")
                            continue
                        r.update(cpu_s=cpu, rss_kb=rss, served=served, round=rnd,
                                 cpu_ms_per_1k=cpu * 1e3 / max(1, r["requests"]) * 1e3)
                        rows[t].append(r)
                        time.sleep(1)
                print(f"## {sname}, /fast, c={conns}, {a.duration}s, one client thread\n")
                print("| tool | req/s median (min–max) | p50 µs | p99 µs | CPU ms / 1k req "
                      "| peak RSS MB | errors | server counted |")
                print("|---|---|---|---|---|---|---|---|")
                for t in tools:
                    rs = rows[t]
                    if not rs:
                        continue
                    print(f"| {t} | {fmt_range([r['rps'] for r in rs])} "
                          f"| {fmt_range([r['p50_us'] for r in rs])} "
                          f"| {fmt_range([r['p99_us'] for r in rs])} "
                          f"| {fmt_range([r['cpu_ms_per_1k'] for r in rs], '{:.2f}')} "
                          f"| {fmt_range([r['rss_kb'] / 1024 for r in rs], '{:.1f}')} "
                          f"| {sum(r['errors'] or 0 for r in rs)} "
                          f"| {fmt_range([r['served'] for r in rs])} |")
                print()
                with open(os.path.join(a.out, f"{sname}-c{conns}.json"), "w") as f:
                    json.dump({"server": sname, "connections": conns, "duration_s": a.duration,
                               "rounds": rows}, f, indent=1)
        finally:
            srv.stop()
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
