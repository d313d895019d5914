#!/usr/bin/env python3
"""bench/harness.py - squall side by side with every peer, on the same target, in one run.

Tools: squall, wrk, ab (-k), h2load (--h1), hey, autocannon, Locust (FastHttpUser, one process),
the floor probe (bench/probe.c) and its io_uring twin (bench/probe_uring.c, built when liburing is
installed). A missing tool is installed (apt-get, or npm into bench/.tools/) or skipped with one
line saying so.

Servers: nginx (one worker, a fixed minimal config written here) and `squall target`, pinned to
the server CPUs. Clients are pinned to the client CPUs; the tools run in rotated order each round
so drift lands on every tool.

Cases (--cases):
  fast     GET /fast at each --conns (default 64, 256, 5000), on both servers
  body16k  GET /bytes/16384 (a 16 KiB body; nginx serves a 16 KiB file there), on both servers
  rate     --rate req/s (default 2,000) to /delay/10 for --rate-duration s (default 20), squall
           target only (nginx has no /delay), for the tools that can pace

Per tool and case: req/s (median, min-max over rounds), p50/p99 where the tool reports them,
errors, client CPU ms per 1,000 requests and peak RSS (GNU time around the tool: user+sys and
ru_maxrss of the tool's process, its threads and any children it waited for), the client's CPU
use in % of the run's wall time, and the requests the server counted. One markdown table per
case on stdout (and in OUT/tables.md), one JSON file per case under OUT.

Only loopback addresses; every run is bounded by its duration and killed past a grace period.
"""
import argparse
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS_DIR = os.path.join(ROOT, "bench", ".tools")
AUTOCANNON_VERSION = "9.0.0"
ALL_TOOLS = ["squall", "wrk", "ab", "h2load", "hey", "autocannon", "locust", "probe",
             "probe_uring"]
BODY_BYTES = 16384
# What the target's /bytes/N sends: byte i is PATTERN[i % 64] (docs/target.md). nginx's file is
# the same bytes, so both servers send the same body.
PATTERN = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

# How precise each tool's percentiles are (the docs and every table footnote say so).
RESOLUTION = {
    "squall": "1 µs (HDR, 3 significant digits)",
    "wrk": "2 decimals of its printed unit (10 µs at ms scale)",
    "ab": "whole ms",
    "h2load": "no percentiles (min, max, mean, sd only)",
    "hey": "0.1 ms (4 decimals of a second)",
    "autocannon": "whole ms (floored)",
    "locust": "whole ms below 100 ms, then 2 significant digits",
    "probe": "no latency",
    "probe_uring": "no latency",
}
WHOLE_MS = ["ab", "autocannon", "locust"]

# What each tool's rate option does (the rate case). None: the tool has no rate option.
PACING = {
    "squall": "open loop (-r): arrivals on a fixed schedule whatever the server does; latency "
              "from each request's intended send time",
    "h2load": "per-connection schedule (--rps per client), but one request in flight per HTTP/1.1 "
              "connection: due requests queue behind it; latency from the actual send; the "
              "clients' timers start nearly together, so they tend to send in step",
    "hey": "closed loop with a cap: each worker (connection) waits for a 1/q ticker before each "
           "request (-q is per worker); latency from the actual send; the tickers start "
           "together, so they tend to tick in step",
    "autocannon": "closed loop with a cap: each connection sends at most R/c requests per "
                  "wall-clock second, then waits for the next second (bursts); latency from the "
                  "actual send, plus coordinated-omission fill-ins at an expected interval of "
                  "ceil(1/(R/c)) = 1 ms: a 10 ms response also records 9, 8, ... 1 ms, so its "
                  "percentiles under -R sit below every real response time",
    "locust": "closed loop with a cap: each user's iteration takes at least c/R s "
              "(constant_throughput); latency from the actual send",
    "wrk": None,
    "ab": None,
    "probe": None,
    "probe_uring": None,
}
NO_RATE = {
    "wrk": "wrk has no rate option (wrk2's -R is another tool)",
    "ab": "ab has no rate option",
    "probe": "the probe is a closed-loop floor; it does not pace",
    "probe_uring": "the probe is a closed-loop floor; it does not pace",
}


# ---- processes -----------------------------------------------------------------------------

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def wait_port(port, timeout=5):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def measure(argv, cpus, timeout):
    """Runs argv pinned to cpus under GNU time, which forks the tool from its own small process:
    ru_maxrss then describes the tool alone (a child forked from this Python process would carry
    Python's resident size into its high-water mark). time's figures come from wait4() on the
    tool: user+sys of all its threads plus every child it waited for, and the largest resident
    set among them (the maximum, not a sum). The run gets its own process group, killed whole if
    it outlives timeout. Returns a dict: out, err, cpu_s, rss_kb, rc, wall_s, and csw (the
    voluntary and involuntary context switches, added)."""
    t0 = time.monotonic()
    p = subprocess.Popen(["/usr/bin/time", "-f", "SQTIME %U %S %M %w %c", "taskset", "-c", cpus, *argv],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         errors="replace", preexec_fn=raise_nofile, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        err += f"\nharness: killed after {timeout}s"
    wall = time.monotonic() - t0
    m = re.search(r"SQTIME ([\d.]+) ([\d.]+) (\d+) (\d+) (\d+)", err)
    if not m:
        raise RuntimeError(f"no timing from /usr/bin/time: {err[-300:]}")
    return {"out": out, "err": err, "cpu_s": float(m.group(1)) + float(m.group(2)),
            "rss_kb": int(m.group(3)), "csw": int(m.group(4)) + int(m.group(5)),
            "rc": p.returncode, "wall_s": wall}


def proc_cpu_s(pid):
    """User + system CPU seconds of a running process so far (/proc/PID/stat utime + stime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---- servers -------------------------------------------------------------------------------

class Nginx:
    name = "nginx"

    def __init__(self, cpus, workdir):
        self.port = free_port()
        os.chmod(workdir, 0o755)  # nginx's worker runs as nobody: it must reach www/
        root = os.path.join(workdir, "www")
        os.makedirs(os.path.join(root, "bytes"), exist_ok=True)
        with open(os.path.join(root, "bytes", str(BODY_BYTES)), "wb") as f:
            f.write((PATTERN * (BODY_BYTES // len(PATTERN) + 1))[:BODY_BYTES])
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
  sendfile on;
  open_file_cache max=16;
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
    location = /bytes/{BODY_BYTES} {{ root {root}; default_type application/octet-stream; }}
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

    def stats(self):
        # stub_status counts a request when it is read: this one too.
        return {"served": self.count() - self.base - 1}

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class Target:
    name = "target"

    def __init__(self, cpus, squall, threads=1):
        self.proc = subprocess.Popen(["taskset", "-c", cpus, squall, "target", "--port", "0",
                                      "-t", str(threads), "-q"], stdout=subprocess.PIPE,
                                     text=True, preexec_fn=raise_nofile)
        line = self.proc.stdout.readline()
        m = re.search(r":(\d+)\s*$", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"squall target did not start: {line!r}")
        self.port = int(m.group(1))

    def reset(self):
        urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{self.port}/stats/reset", method="POST")).read()

    def stats(self):
        # A /stats read is not in its own figures and a reset not in those after it, so
        # requests - endpoints.stats is exactly what the client sent that an endpoint answered.
        st = json.load(urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats"))
        gap = st.get("arrivals", {}).get("gap_us", {})
        return {"served": st["requests"] - st["endpoints"]["stats"],
                "arrival_gap_us": gap, "conns_accepted": st.get("connections")}

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def start_server(name, cpus, workdir, squall):
    return Nginx(cpus, workdir) if name == "nginx" else Target(cpus, squall)


# ---- tools: finding and installing ---------------------------------------------------------

def have_root():
    return os.geteuid() == 0 or shutil.which("sudo")


_apt_updated = False


def apt_install(pkg):
    """Installs one Debian package; True on success. Updates the lists once if the first try
    fails (a fresh machine has none)."""
    global _apt_updated
    if not shutil.which("apt-get") or not have_root():
        return False
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = sudo + ["apt-get", "install", "-y", "-qq", "--no-install-recommends", pkg]
    print(f"install {pkg}: apt-get install {pkg}", flush=True)
    if subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL).returncode == 0:
        return True
    if not _apt_updated:
        _apt_updated = True
        subprocess.run(sudo + ["apt-get", "update", "-qq"], env=env, stdout=subprocess.DEVNULL)
        return subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL).returncode == 0
    return False


def apt_candidate(pkg):
    try:
        out = subprocess.run(["apt-cache", "policy", pkg], capture_output=True, text=True).stdout
    except OSError:
        return False
    m = re.search(r"Candidate:\s*(\S+)", out)
    return bool(m and m.group(1) != "(none)")


def pkg_version(pkg):
    try:
        return subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True,
                              text=True).stdout.strip() or None
    except OSError:
        return None


APT_TOOLS = {"wrk": ("wrk", "wrk"), "ab": ("ab", "apache2-utils"),
             "h2load": ("h2load", "nghttp2-client"), "hey": ("hey", "hey"),
             "locust": ("locust", "python3-locust")}


def find_tools(names, a):
    """Returns {tool: {"exe": path, "version": str}} for the tools that can run; prints one
    line for each one skipped."""
    if not os.access("/usr/bin/time", os.X_OK) and (a.no_install or not apt_install("time")):
        sys.exit("harness: GNU time (/usr/bin/time, Debian package 'time') is needed to measure "
                 "client CPU and RSS")
    found = {}
    for t in names:
        if t not in ALL_TOOLS:
            sys.exit(f"harness: unknown tool '{t}' ({', '.join(ALL_TOOLS)})")
        if t in ("squall", "probe", "probe_uring"):
            exe = getattr(a, t)
            if os.access(exe, os.X_OK):
                ver = f"bench/{t}.c"
                if t == "squall":
                    ver = subprocess.run([exe, "-V"], capture_output=True,
                                         text=True).stdout.strip().removeprefix("squall ")
                found[t] = {"exe": exe, "version": ver}
            else:
                print(f"skip {t}: {exe} not built (make build, or --{t.replace('_', '-')} PATH"
                      + ("; needs liburing-dev: scripts/deps.sh bench)" if t == "probe_uring"
                         else ")"))
            continue
        if t == "autocannon":
            exe = os.path.join(TOOLS_DIR, "autocannon", "node_modules", ".bin", "autocannon")
            if not os.access(exe, os.X_OK) and not a.no_install:
                if shutil.which("npm") and shutil.which("node"):
                    print(f"install autocannon: npm install --prefix "
                          f"{os.path.relpath(TOOLS_DIR, ROOT)}/autocannon "
                          f"autocannon@{AUTOCANNON_VERSION}", flush=True)
                    subprocess.run(["npm", "install", "--prefix",
                                    os.path.join(TOOLS_DIR, "autocannon"), "--no-audit",
                                    "--no-fund", "--silent",
                                    f"autocannon@{AUTOCANNON_VERSION}"],
                                   stdout=subprocess.DEVNULL)
            if os.access(exe, os.X_OK) and shutil.which("node"):
                pj = os.path.join(TOOLS_DIR, "autocannon", "node_modules", "autocannon",
                                  "package.json")
                ver = json.load(open(pj)).get("version") if os.path.exists(pj) else None
                found[t] = {"exe": exe, "version": ver}
            elif a.no_install:
                print("skip autocannon: not in bench/.tools/ (--no-install given)")
            else:
                print("skip autocannon: needs node and npm (scripts/deps.sh bench) to install "
                      f"into {os.path.relpath(TOOLS_DIR, ROOT)}/")
            continue
        cmd, pkg = APT_TOOLS[t]
        exe = shutil.which(cmd)
        if not exe and not a.no_install:
            apt_install(pkg)
            exe = shutil.which(cmd)
        if t == "locust" and exe and subprocess.run(
                [exe, "--version"], capture_output=True).returncode != 0:
            exe = None
        if exe:
            found[t] = {"exe": exe, "version": pkg_version(pkg)}
        elif a.no_install:
            print(f"skip {t}: {cmd} not found (--no-install given)")
        elif not apt_candidate(pkg):
            print(f"skip {t}: {cmd} not found and no Debian package '{pkg}' here")
        else:
            print(f"skip {t}: {cmd} not found and 'apt-get install {pkg}' failed")
    return found


# ---- tools: command lines ------------------------------------------------------------------

LOCUSTFILE = '''from locust import FastHttpUser, task, {wait}


class Bench(FastHttpUser):
    wait_time = {wait}({arg})

    @task
    def get(self):
        self.client.get({path!r})
'''


def tool_argv(tool, exe, url, conns, secs, workdir, threads, rate=None):
    """The command line for one run; rate (req/s over all connections) makes it the tool's paced
    form. Returns None when the tool cannot pace."""
    host, port, path = re.match(r"http://([^:/]+):(\d+)(/.*)", url).groups()
    per_conn = f"{rate / conns:g}" if rate else None
    if tool == "squall":
        argv = [exe, url, "-t", str(threads), "-c", str(conns), "-d", f"{secs}s", "-q",
                "--json", os.path.join(workdir, "squall.json")]
        if rate:
            argv += ["-r", str(rate), "--max-in-flight", str(conns)]
        return argv
    if tool == "h2load":
        argv = [exe, "--h1", f"-t{threads}", f"-c{conns}", f"-D{secs}", url]
        if rate:
            argv.insert(-1, f"--rps={per_conn}")
        return argv
    if tool == "hey":
        argv = [exe, "-z", f"{secs}s", "-c", str(conns), url]
        if rate:
            argv[1:1] = ["-q", per_conn]
        return argv
    if tool == "autocannon":
        argv = [exe, "-c", str(conns), "-d", str(secs), "-j", url]
        if rate:
            argv[1:1] = ["-R", str(rate)]
        return argv
    if tool == "locust":
        lf = os.path.join(workdir, "locustfile.py")
        with open(lf, "w") as f:
            f.write(LOCUSTFILE.format(wait="constant_throughput" if rate else "constant",
                                      arg=per_conn if rate else 0, path=path))
        return [exe, "-f", lf, "--headless", "-u", str(conns), "-r", str(conns),
                "-t", f"{secs}s", "--only-summary", "--stop-timeout", "0",
                "--csv", os.path.join(workdir, "locust"), "-H", f"http://{host}:{port}"]
    if rate:
        return None
    if tool == "wrk":
        return [exe, f"-t{threads}", f"-c{conns}", f"-d{secs}s", "--latency", url]
    if tool == "ab":
        # -t alone caps ab at 50,000 requests: -n (after -t) lifts that. ab keeps a record per
        # request, so its RSS grows with the requests it completes. -r: go on after a receive
        # error instead of exiting.
        return [exe, "-k", "-r", "-q", "-c", str(conns), "-t", str(secs),
                "-n", str(500000 * secs), url]
    if tool in ("probe", "probe_uring"):
        return [exe, host, port, path, str(conns), str(secs)]
    raise ValueError(tool)


# ---- tools: output -------------------------------------------------------------------------

def to_us(s):
    m = re.match(r"([\d.]+)(us|ms|s)", s)
    return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]


def grab(pattern, text, conv=float, default=None):
    m = re.search(pattern, text, re.M)
    return conv(m.group(1)) if m else default


def parse(tool, run, workdir):
    """Fills req/s, p50/p99 (µs), errors and the requests the tool completed from its output."""
    out, text = run["out"], run["out"] + run["err"]
    r = {"rps": None, "p50_us": None, "p99_us": None, "errors": None, "requests": None}
    # errors: failed requests (connect, timeout, reset, parse) plus 4xx/5xx answers.
    if tool == "squall":
        d = json.load(open(os.path.join(workdir, "squall.json")))
        lat = d["latency"]
        r.update(rps=d["rate"]["requests_per_s"], p50_us=lat["p50_us"], p99_us=lat["p99_us"],
                 requests=d["requests"]["completed"],
                 errors=d["requests"]["failed"] + d["errors"]["connect"] +
                 d["status"]["4xx"] + d["status"]["5xx"],
                 dropped=d["requests"].get("dropped"), latency_from=lat.get("measured_from"),
                 mode=d.get("mode"))
        os.unlink(os.path.join(workdir, "squall.json"))
    elif tool == "wrk":
        r["rps"] = grab(r"Requests/sec:\s*([\d.]+)", out)
        r["requests"] = grab(r"(\d+) requests in", out, int)
        r["p50_us"] = grab(r"^\s+50%\s+(\S+)", out, to_us)
        r["p99_us"] = grab(r"^\s+99%\s+(\S+)", out, to_us)
        m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
        r["errors"] = (sum(map(int, m.groups())) if m else 0) + \
            grab(r"Non-2xx or 3xx responses:\s*(\d+)", out, int, 0)
    elif tool == "ab":
        r["rps"] = grab(r"Requests per second:\s*([\d.]+)", out)
        r["requests"] = grab(r"Complete requests:\s*(\d+)", out, int)
        r["p50_us"] = grab(r"^\s+50%\s+(\d+)", out, lambda v: float(v) * 1e3)
        r["p99_us"] = grab(r"^\s+99%\s+(\d+)", out, lambda v: float(v) * 1e3)
        r["errors"] = grab(r"Failed requests:\s*(\d+)", out, int, 0) + \
            grab(r"Non-2xx responses:\s*(\d+)", out, int, 0)
    elif tool == "h2load":
        r["rps"] = grab(r"finished in [\d.]+\w*, ([\d.]+) req/s", out)
        m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                      r"(\d+) failed, (\d+) errored, (\d+) timeout", out)
        r["requests"] = int(m.group(3))
        r["errors"] = int(m.group(5))
        m = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", out)
        r["mean_us"] = to_us(m.group(3)) if m else None
    elif tool == "hey":
        r["rps"] = grab(r"Requests/sec:\s*([\d.]+)", out)
        r["p50_us"] = grab(r"50% in ([\d.]+) secs", out, lambda v: float(v) * 1e6)
        r["p99_us"] = grab(r"99% in ([\d.]+) secs", out, lambda v: float(v) * 1e6)
        codes = {int(c): int(n) for c, n in re.findall(r"\[(\d{3})\]\s+(\d+) responses", out)}
        errs = sum(int(n) for n in re.findall(r"^\s+\[(\d+)\]\s+\S.*$", out.split(
            "Error distribution:")[1], re.M)) if "Error distribution:" in out else 0
        r["requests"] = sum(codes.values())
        r["errors"] = errs + sum(n for c, n in codes.items() if c >= 400)
    elif tool == "autocannon":
        d = next(json.loads(line) for line in out.splitlines() if line.startswith("{"))
        # requests.total: responses received. latency.totalCount would also count the values
        # its coordinated-omission correction fills in under -R.
        r["requests"] = d["requests"]["total"]
        r["rps"] = r["requests"] / d["duration"] if d["duration"] else None
        r["p50_us"] = d["latency"]["p50"] * 1e3
        r["p99_us"] = d["latency"]["p99"] * 1e3
        r["errors"] = d["errors"] + d["timeouts"] + d["non2xx"]
    elif tool == "locust":
        # Locust 2.12 rewrites its --csv files once a second and not at exit, so they miss the
        # last second: the summary it prints at exit is the complete one.
        rows = [ln for ln in text.splitlines() if re.match(r"^\s+Aggregated\s", ln)]
        stats = next(ln for ln in rows if "|" in ln)
        left, _, right = stats.split("|")
        nums = left.split()
        r["requests"] = int(nums[1])
        r["errors"] = int(nums[2].split("(")[0])
        r["rps"] = float(right.split()[0])
        pct = next((ln for ln in rows if "|" not in ln), None)
        if pct:
            vals = pct.split()[1:]  # 50% 66% 75% 80% 90% 95% 98% 99% 99.9% 99.99% 100% count
            ms = lambda v: None if v == "N/A" else float(v) * 1e3  # noqa: E731
            r["p50_us"], r["p99_us"] = ms(vals[0]), ms(vals[7])
    elif tool in ("probe", "probe_uring"):
        m = re.search(r"(\d+) responses in ([\d.]+)s", out)
        r["requests"] = int(m.group(1))
        r["rps"] = r["requests"] / float(m.group(2))
        r["errors"] = 0 if run["rc"] == 0 else 1
    return r


# ---- the run -------------------------------------------------------------------------------

def machine_line(a):
    model = "unknown CPU"
    try:
        for ln in open("/proc/cpuinfo"):
            if ln.startswith("model name"):
                model = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = grab(r"MemTotal:\s+(\d+)", open("/proc/meminfo").read(), int, 0) / 1048576
    return (f"{model}, {os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), "
            f"{mem:.0f} GiB, Linux {os.uname().release}; server on CPU {a.server_cpus}, "
            f"clients on CPU {a.client_cpus}")


def fmt_range(vals, f="{:.0f}"):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "—"
    med = statistics.median(vals)
    if len(vals) == 1:
        return f.format(med)
    return f"{f.format(med)} ({f.format(min(vals))}–{f.format(max(vals))})"


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def run_case(case, srv, tools, a, workdir, emit):
    """Runs every tool a.rounds times on one case and emits its table; returns the JSON."""
    rate = case.get("rate")
    url = f"http://127.0.0.1:{srv.port}{case['path']}"
    runnable = []
    for t in tools:
        if rate and PACING.get(t) is None:
            print(f"skip {t} in the rate case: {NO_RATE[t]}")
        else:
            runnable.append(t)
    rows = {t: [] for t in runnable}
    for rnd in range(a.rounds):
        k = rnd % len(runnable) if runnable else 0
        for t in runnable[k:] + runnable[:k]:
            argv = tool_argv(t, tools[t]["exe"], url, case["conns"], case["secs"], workdir,
                             a.threads, rate)
            srv.reset()
            run = measure(argv, a.client_cpus, case["secs"] * 2 + 60)
            st = srv.stats()
            try:
                r = parse(t, run, workdir)
                if r["requests"] is None or r["rps"] is None:
                    raise ValueError("no request count in its output")
            except Exception as e:  # a tool that failed shows as a failed run, not a crash
                print(f"{t} failed (rc {run['rc']}): {e!r}\n{(run['out'] + run['err'])[-600:]}")
                continue
            r.update(round=rnd, rc=run["rc"], cpu_s=run["cpu_s"], rss_kb=run["rss_kb"],
                     wall_s=run["wall_s"], cpu_pct=100 * run["cpu_s"] / max(run["wall_s"], 1e-9),
                     cpu_ms_per_1k=run["cpu_s"] * 1e6 / max(1, r["requests"]), argv=argv, **st)
            rows[t].append(r)
            time.sleep(a.pause)

    probe_rps = med([r["rps"] for r in rows.get("probe", [])])
    title = f"{srv.name}, {case['path']}, c={case['conns']}, {case['secs']} s"
    if rate:
        title += f", {rate} req/s"
    emit(f"## {case['name']}: {title}, {a.rounds} round(s), one client thread\n")
    head = "| tool |"
    if rate:
        head += " pacing |"
    head += (" req/s median (min–max) | p50 µs | p99 µs | errors |")
    if rate:
        head += " dropped |"
    head += " client CPU ms / 1k req | client CPU % | peak RSS MB | server counted |"
    if rate:
        head += " server gap p50 / p99 µs |"
    elif probe_rps:
        head += " vs probe |"
    emit(head)
    emit("|" + "---|" * (head.count("|") - 1))
    for t in runnable:
        rs = rows[t]
        if not rs:
            emit(f"| {t} | failed every round |" + " |" * (head.count("|") - 3))
            continue
        line = f"| {t} |"
        if rate:
            line += (" open loop |" if t == "squall" else " capped closed loop |"
                     if t != "h2load" else " schedule, 1 in flight per conn |")
        line += (f" {fmt_range([r['rps'] for r in rs])} "
                 f"| {fmt_range([r['p50_us'] for r in rs])} "
                 f"| {fmt_range([r['p99_us'] for r in rs])} "
                 f"| {sum(r['errors'] or 0 for r in rs)} |")
        if rate:
            dropped = [r.get("dropped") for r in rs if r.get("dropped") is not None]
            line += f" {sum(dropped)} |" if dropped else " — |"
        line += (f" {fmt_range([r['cpu_ms_per_1k'] for r in rs], '{:.2f}')} "
                 f"| {fmt_range([r['cpu_pct'] for r in rs])} "
                 f"| {fmt_range([r['rss_kb'] / 1024 for r in rs], '{:.1f}')} "
                 f"| {fmt_range([r['served'] for r in rs])} |")
        if rate:
            gaps = [r.get("arrival_gap_us") or {} for r in rs]
            line += (f" {fmt_range([g.get('p50') for g in gaps])} / "
                     f"{fmt_range([g.get('p99') for g in gaps])} |")
        elif probe_rps:
            line += f" {100 * med([r['rps'] for r in rs]) / probe_rps:.0f}% |"
        emit(line)
    emit("")
    present = [t for t in runnable if rows[t]]
    notes = [f"{t}: {RESOLUTION[t]}" for t in present if t != "squall"]
    if notes:
        emit("Latency resolution: " + "; ".join(notes) + ".")
    if rate:
        for t in present:
            emit(f"- {t}: {PACING[t]}")
        emit(f"\nEven pacing at {rate} req/s is a gap of {1e6 / rate:.0f} µs between arrivals "
             "at the server.")
    emit("")
    return {"case": case["name"], "server": srv.name, "url": url, "connections": case["conns"],
            "duration_s": case["secs"], "rate_per_s": rate, "rounds": a.rounds,
            "client_cpus": a.client_cpus, "server_cpus": a.server_cpus,
            "tools": {t: dict(tools[t], resolution=RESOLUTION[t], pacing=PACING[t] if rate
                              else None) for t in runnable},
            "runs": rows}


def build_cases(a, server):
    cases = []
    for c in a.cases.split(","):
        if c == "fast":
            cases += [{"name": "fast", "path": "/fast", "conns": n, "secs": a.duration}
                      for n in map(int, a.conns.split(","))]
        elif c == "body16k":
            cases += [{"name": "body16k", "path": f"/bytes/{BODY_BYTES}", "conns": n,
                       "secs": a.duration} for n in map(int, a.body_conns.split(","))]
        elif c == "rate":
            if server == "target":
                cases.append({"name": "rate", "path": f"/delay/{a.rate_delay_ms}",
                              "conns": a.rate_conns, "secs": a.rate_duration, "rate": a.rate})
        else:
            sys.exit(f"harness: unknown case '{c}' (fast, body16k, rate)")
    return cases


def case_file(case, server):
    tail = f"{case['rate']}rps" if case.get("rate") else f"c{case['conns']}"
    return f"{server}-{case['name']}-{tail}.json"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--tools", default=",".join(ALL_TOOLS))
    ap.add_argument("--cases", default="fast,body16k,rate")
    ap.add_argument("--servers", default="nginx,target")
    ap.add_argument("--conns", default="64,256,5000", help="fast case connection counts")
    ap.add_argument("--body-conns", default="64", help="body16k case connection counts")
    ap.add_argument("--duration", type=int, default=10, help="seconds per closed-loop run")
    ap.add_argument("--rate", type=int, default=2000, help="rate case: req/s in all")
    ap.add_argument("--rate-conns", type=int, default=50, help="rate case: connections")
    ap.add_argument("--rate-duration", type=int, default=20, help="rate case: seconds per run")
    ap.add_argument("--rate-delay-ms", type=int, default=10, help="rate case: /delay/MS")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="client threads (squall, wrk, h2load)")
    ap.add_argument("--pause", type=float, default=1.0, help="seconds between runs")
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--client-cpus", default="1")
    ap.add_argument("--squall", default=os.path.join(ROOT, "build", "squall"))
    ap.add_argument("--probe", default=os.path.join(ROOT, "build", "bench", "probe"))
    ap.add_argument("--probe-uring", default=os.path.join(ROOT, "build", "bench", "probe_uring"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--no-install", action="store_true",
                    help="skip a missing tool instead of installing it")
    a = ap.parse_args()
    if a.rounds < 1 or a.duration < 1 or a.rate_duration < 1:
        sys.exit("harness: --rounds, --duration and --rate-duration must be at least 1")

    tools = find_tools(a.tools.split(","), a)
    if not tools:
        sys.exit("harness: no tool to run")
    os.makedirs(a.out, exist_ok=True)
    tables = open(os.path.join(a.out, "tables.md"), "w")

    def emit(line):
        print(line, flush=True)
        tables.write(line + "\n")

    emit(f"# machine: {machine_line(a)}")
    emit(f"# {a.duration} s per closed-loop run, {a.rounds} round(s), tools rotated each round; "
         "versions: " + ", ".join(f"{t} {v['version'] or '?'}" for t, v in tools.items()) + "\n")
    workdir = tempfile.mkdtemp(prefix="squall-bench-")
    try:
        for sname in a.servers.split(","):
            if sname not in ("nginx", "target"):
                sys.exit(f"harness: unknown server '{sname}' (nginx, target)")
            cases = build_cases(a, sname)
            if not cases:
                continue
            if sname == "nginx" and not shutil.which("nginx"):
                if a.no_install or not apt_install("nginx-light"):
                    print("skip nginx: not installed (scripts/deps.sh bench)")
                    continue
            if sname == "target" and not os.access(a.squall, os.X_OK):
                print(f"skip target: {a.squall} not built")
                continue
            srv = start_server(sname, a.server_cpus, workdir, a.squall)
            try:
                for case in cases:
                    doc = run_case(case, srv, tools, a, workdir, emit)
                    doc["machine"] = machine_line(a)
                    with open(os.path.join(a.out, case_file(case, sname)), "w") as f:
                        json.dump(doc, f, indent=1)
            finally:
                srv.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        tables.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
