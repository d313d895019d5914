#!/usr/bin/env python3
"""bench/ws.py - WebSocket figures for docs/benchmarks.md (issue 15).

echo (the default): `squall ws://...` echo runs against two servers, alternated round by round:
squall target's /ws and the npm `ws` package (bench/ws_server.mjs, node). Each run is closed-loop,
-c connections on one client thread for --duration seconds; the server is pinned to
--server-cpus, the client to --client-cpus. Per run: messages/s (completed requests: one message
out, its echo back) and the client's CPU per 1,000 messages (user + sys from wait4), as medians
with min-max spreads over the rounds.

idle: --idle N opens N WebSocket connections to squall target (the file limit raised as the quick
face does) and sends --idle-rate messages a second across them for --duration seconds (an open
loop: almost every connection idle at any moment); prints the client's peak RSS (wait4's
ru_maxrss) and how many connections were open, against the 64 MB the issue allows for 10,000.

usage: bench/ws.py --squall build/squall [--rounds 5] [--duration 5] [-c 64] [--size 64]
       bench/ws.py --squall build/squall --idle 10000 [--idle-rate 200] [--duration 10]
"""
import argparse
import json
import os
import re
import select
import signal
import statistics
import subprocess
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def start(cmd, pattern, cpus=None, env=None, timeout=120):
    """Starts cmd (pinned with taskset when cpus is set); returns (Popen, port) once a line of
    its stdout matches pattern (group 1: the port)."""
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         stdin=subprocess.DEVNULL, env=env)
    buf = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([p.stdout], [], [], 1)
        if not r:
            continue
        c = os.read(p.stdout.fileno(), 1)
        if not c:
            break
        buf += c
        if c != b"\n":
            continue
        m = re.search(pattern, buf.decode(errors="replace"))
        if m:
            return p, int(m.group(1))
    p.kill()
    raise RuntimeError("server did not start: %r" % buf)


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def rusage_run(cmd):
    """Runs cmd to its end; returns (stdout bytes, stderr bytes, rusage)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    outs, errs = [], []
    fds = {p.stdout.fileno(): outs, p.stderr.fileno(): errs}
    while fds:
        r, _, _ = select.select(list(fds), [], [])
        for fd in r:
            chunk = os.read(fd, 65536)
            if chunk:
                fds[fd].append(chunk)
            else:
                del fds[fd]
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return b"".join(outs), b"".join(errs), ru, p.returncode


def squall_run(squall, url, extra, cpus):
    cmd = [squall, url, *extra, "--json", "-", "-q"]
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    out, err, ru, rc = rusage_run(cmd)
    if rc not in (0,):
        raise RuntimeError("squall exited %d: %s" % (rc, err.decode(errors="replace")[-400:]))
    return json.loads(out), ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def spread(v, fmt="%.1f"):
    return (fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(v), min(v), max(v))


def echo(a):
    msg = "x" * a.size
    servers = {}
    tp, tport = start([a.squall, "target", "--port", "0", "-t", "1", "-q"],
                      r"listening on http://127\.0\.0\.1:(\d+)", a.server_cpus)
    servers["squall target /ws"] = (tp, f"ws://127.0.0.1:{tport}/ws")
    env = dict(os.environ, SQ_NPM_DIR=os.path.join(os.path.dirname(os.path.abspath(a.squall)), "npm"))
    np_, nport = start(["node", os.path.join(ROOT, "bench", "ws_server.mjs"), "0"],
                       r"listening on 127\.0\.0\.1:(\d+)", a.server_cpus, env=env)
    servers["npm ws 8 (node)"] = (np_, f"ws://127.0.0.1:{nport}/")
    figs = {k: {"rate": [], "cpu": [], "p50": [], "p99": []} for k in servers}
    try:
        names = list(servers)
        for rnd in range(a.rounds):
            order = names if rnd % 2 == 0 else names[::-1]
            for name in order:
                url = servers[name][1]
                doc, cpu, _ = squall_run(a.squall, url, ["-c", str(a.c), "-t", "1", "-d",
                                                         f"{a.duration}s", "--message", msg],
                                         a.client_cpus)
                done = doc["requests"]["completed"]
                f = figs[name]
                f["rate"].append(done / doc["duration_s"])
                f["cpu"].append(cpu / done * 1000 * 1e6)  # µs of client CPU per 1,000 messages
                f["p50"].append(doc["latency"]["p50_us"])
                f["p99"].append(doc["latency"]["p99_us"])
                if a.verbose:
                    print("  round %d %-18s %9.0f msg/s  %7.0f µs CPU/1k  p50 %d µs  p99 %d µs" %
                          (rnd + 1, name, f["rate"][-1], f["cpu"][-1], f["p50"][-1], f["p99"][-1]))
    finally:
        for p, _ in servers.values():
            stop(p)
    print("| server | messages/s | client CPU per 1k messages (µs) | p50 (µs) | p99 (µs) |")
    print("|---|---|---|---|---|")
    for name, f in figs.items():
        print("| %s | %s | %s | %s | %s |" % (name, spread(f["rate"], "%.0f"),
                                             spread(f["cpu"], "%.0f"), spread(f["p50"], "%.0f"),
                                             spread(f["p99"], "%.0f")))


def idle(a):
    tp, tport = start([a.squall, "target", "--port", "0", "-t", "1", "-q"],
                      r"listening on http://127\.0\.0\.1:(\d+)", a.server_cpus)
    try:
        doc, cpu, rss = squall_run(a.squall, f"ws://127.0.0.1:{tport}/ws",
                                   ["-c", str(a.idle), "-t", "1", "-r", str(a.idle_rate),
                                    "-d", f"{a.duration}s", "--message", "x" * a.size,
                                    "--connect-timeout", "30s"], a.client_cpus)
    finally:
        stop(tp)
    ws = doc["ws"]
    print("connections %d · upgrades %d · upgrade failures %s · messages %d of %d arrivals · "
          "errors %s" % (a.idle, ws["upgrades"], ws["upgrade_failed"],
                         doc["requests"]["completed"], doc["requests"]["arrivals"],
                         {k: v for k, v in doc["errors"].items() if v}))
    print("client peak RSS %.1f MiB (%.0f bytes per connection) · setup %.2f s · client CPU %.2f s"
          % (rss / 1024, rss * 1024 / a.idle, doc["setup_s"], cpu))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--squall", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("-c", type=int, default=64)
    ap.add_argument("--size", type=int, default=64, help="message bytes")
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--client-cpus", default="1")
    ap.add_argument("--idle", type=int, default=0, help="idle connections (the idle figure)")
    ap.add_argument("--idle-rate", type=int, default=200)
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    if a.idle:
        idle(a)
    else:
        echo(a)


if __name__ == "__main__":
    main()
