#!/usr/bin/env python3
"""bench/h3.py - squall's HTTP/3 client against its HTTP/2 and HTTP/1.1 clients over TLS, on the
same endpoint of one `squall target --tls --http3` (issue 30's figures), and its UDP batching
modes against each other. Figures, not pass/fail.

  python3 bench/h3.py                                   4 connections x 16 streams, 3 s, 3 rounds
  python3 bench/h3.py --conns 8 --streams 8 --duration 5 --rounds 5 --path /bytes/1024
  python3 bench/h3.py --server-cpu 0 --client-cpu 1     (the default: target and client apart)
  python3 bench/h3.py --perf                            (one more h3 run under `perf record`,
                                                          its top symbols by DSO printed)
  python3 bench/h3.py --arms h3,h3-nogso,h3-off         (the client's UDP batching compared)
  python3 bench/h3.py --arms h3,h3-nogso,h3-off --path /ok --body-bytes 16384  (uploads: GSO)
  python3 bench/h3.py --arms h3,gtlsclient --streams 100  (Debian's ngtcp2 client as a load, at
                                                          the concurrency it takes: 100 streams)

Each round runs the three arms one after the other (the order rotates each round), each a
closed loop for --duration: h1 over TLS with conns x streams connections (one request in flight
on each), h2 with conns connections x streams streams, h3 the same over QUIC; h3-nogso and
h3-off are h3 with the client's SQUALL_UDP_BATCH=nogso (sendmmsg/recvmmsg, no GSO) and off (one
send/recv per datagram); the target is the same in every arm (GSO on). The client's CPU
(user + system) is the result's own `client` block; the requests the target served are read
from its /stats (over TCP) before and after each arm, so every arm's count is checked against
the server's. Medians, with min..max, are printed last as a markdown table.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def stats(port):
    with urllib.request.urlopen(urllib.request.Request(
            "https://127.0.0.1:%d/stats" % port), timeout=10, context=_ctx()) as r:
        return json.loads(r.read())


def _ctx():
    import ssl
    c = ssl.create_default_context()
    c.check_hostname = False
    c.verify_mode = ssl.CERT_NONE
    return c


def served(port):
    s = stats(port)
    return s["requests"]


def run_gtlsclient(a, port):
    """Debian's ngtcp2 client (gtlsclient) as a load: --conns processes, each one QUIC connection
    opening --gtls-requests request streams of --path (as many at once as the target allows:
    100 per connection), pinned like squall. It times nothing per request: req/s is its requests
    over the wall time of the slowest process, CPU its user + system time (rusage)."""
    url = "https://127.0.0.1:%d%s" % (port, a.path)
    pin = ["taskset", "-c", str(a.client_cpu)] if a.client_cpu is not None else []
    cmd = [*pin, "gtlsclient", "-q", "--no-quic-dump", "--no-http-dump",
           "--exit-on-all-streams-close", "-n", str(a.gtls_requests), "127.0.0.1", str(port), url]
    before = served(port)
    t0 = time.monotonic()
    procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for _ in range(a.conns)]
    cpu = 0.0
    for p in procs:
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        cpu += ru.ru_utime + ru.ru_stime
        if p.returncode != 0:
            raise RuntimeError("gtlsclient: exit %d" % p.returncode)
    secs = time.monotonic() - t0
    after = served(port)
    done = after - before - 1
    return {"calls_per_req": None, "rps": done / secs, "cpu_per_1k_ms": cpu * 1e6 / max(done, 1),
            "p50_ms": float("nan"), "p99_ms": float("nan"), "completed": done,
            "sent": a.gtls_requests * a.conns, "server_saw": done}


def run_arm(a, arm, port):
    if arm == "gtlsclient":
        return run_gtlsclient(a, port)
    url = "https://127.0.0.1:%d%s" % (port, a.path)
    cmd = [a.squall, url, "-k", "-t", "1", "-d", "%gs" % a.duration, "-q"]
    if a.body_file:
        cmd += ["-m", "POST", "-b", "@" + a.body_file]
    if arm == "h1":
        cmd += ["-c", str(a.conns * a.streams)]
    else:
        cmd += ["-c", str(a.conns), "--streams", str(a.streams),
                "--http3" if arm.startswith("h3") else "--http2"]
    env = dict(os.environ)
    env.pop("SQUALL_UDP_BATCH", None)
    if arm in ("h3-nogso", "h3-off"):
        env["SQUALL_UDP_BATCH"] = arm[3:]
    pin = ["taskset", "-c", str(a.client_cpu)] if a.client_cpu is not None else []
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        before = served(port)
        p = subprocess.run([*pin, *cmd, "--json", f.name], capture_output=True, text=True,
                           timeout=a.duration * 10 + 60, env=env)
        after = served(port)
        if p.returncode != 0:
            raise RuntimeError("%s: exit %d: %s" % (arm, p.returncode, p.stderr[-400:]))
        doc = json.load(open(f.name))
    done = doc["requests"]["completed"]
    secs = doc["duration_s"]
    lat = doc["latency"]
    u = doc.get("quic", {}).get("udp")
    return {
        # UDP syscalls per request (exact counts, unlike the times)
        "calls_per_req": (u["send_calls"] + u["recv_calls"]) / max(done, 1) if u else None,
        "rps": done / secs,
        "cpu_per_1k_ms": doc["client"]["cpu_per_request_us"],  # µs per request = ms per 1k
        "p50_ms": lat["p50_us"] / 1000.0,
        "p99_ms": lat["p99_us"] / 1000.0,
        "completed": done, "sent": doc["requests"]["sent"],
        "server_saw": after - before - 1,  # less the /stats read itself
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--squall", default=os.path.join(ROOT, "build", "squall"))
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--duration", type=float, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--path", default="/fast")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--perf", action="store_true")
    ap.add_argument("--body-bytes", type=int, default=0,
                    help="POST a body of this many bytes to --path (uploads: the client's GSO)")
    ap.add_argument("--arms", default="h1,h2,h3",
                    help="comma-separated: h1, h2, h3, h3-nogso, h3-off, gtlsclient")
    ap.add_argument("--gtls-requests", type=int, default=100000,
                    help="gtlsclient arm: request streams per connection (default 100000)")
    a = ap.parse_args()
    a.body_file = None
    if a.body_bytes:
        tmp = tempfile.NamedTemporaryFile(prefix="h3bench-", suffix=".bin", delete=False)
        tmp.write(os.urandom(a.body_bytes))
        tmp.close()
        a.body_file = tmp.name
    port = int(os.environ.get("H3_PORT", "18443"))
    pin = ["taskset", "-c", str(a.server_cpu)] if a.server_cpu is not None else []
    target = subprocess.Popen([*pin, a.squall, "target", "--tls", "--http3", "-t", "1", "-p",
                               str(port), "--max-conns", "100000"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(100):
            try:
                stats(port)
                break
            except OSError:
                time.sleep(0.1)
        arms = a.arms.split(",")
        res = {k: [] for k in arms}
        for r in range(a.rounds):
            order = arms[r % len(arms):] + arms[:r % len(arms)]
            for arm in order:
                x = run_arm(a, arm, port)
                res[arm].append(x)
                print("round %d %s: %.0f req/s, %.1f ms CPU per 1k, p50 %s p99 %s ms, "
                      "sent %d, server saw %d, UDP syscalls per request %s" % (
                          r + 1, arm, x["rps"], x["cpu_per_1k_ms"], x["p50_ms"], x["p99_ms"],
                          x["sent"], x["server_saw"],
                          "-" if x["calls_per_req"] is None else "%.2f" % x["calls_per_req"]),
                      flush=True)
        print()
        print("| client (%d conns x %d streams, %s, %g s, %d rounds) | req/s median (min..max) "
              "| client CPU ms per 1k requests | p50 ms | p99 ms | UDP syscalls per request |" % (
                  a.conns, a.streams, a.path, a.duration, a.rounds))
        print("|---|---:|---:|---:|---:|---:|")

        def fmt(v, f="%.0f"):
            if any(x != x for x in v):  # NaN: a figure the arm does not have (gtlsclient's p50)
                return "-"
            return "%s (%s..%s)" % (f % statistics.median(v), f % min(v), f % max(v))
        names = {"h1": "HTTP/1.1 over TLS", "h2": "HTTP/2 over TLS",
                 "h3": "HTTP/3 (QUIC), batching on (GSO + mmsg)",
                 "h3-nogso": "HTTP/3, sendmmsg/recvmmsg without GSO",
                 "h3-off": "HTTP/3, batching off (one send/recv per datagram)",
                 "gtlsclient": "ngtcp2's gtlsclient (HTTP/3, up to 100 streams a connection)"}
        for arm in arms:
            xs = res[arm]
            calls = [x["calls_per_req"] for x in xs if x["calls_per_req"] is not None]
            print("| %s | %s | %s | %s | %s | %s |" % (
                names[arm], fmt([x["rps"] for x in xs]),
                fmt([x["cpu_per_1k_ms"] for x in xs], "%.1f"),
                fmt([x["p50_ms"] for x in xs], "%.2f"), fmt([x["p99_ms"] for x in xs], "%.2f"),
                fmt(calls, "%.2f") if calls else "-"))
        if a.perf:
            url = "https://127.0.0.1:%d%s" % (port, a.path)
            with tempfile.TemporaryDirectory() as d:
                data = os.path.join(d, "perf.data")
                subprocess.run(["perf", "record", "-q", "-g", "-o", data, "--", "taskset", "-c",
                                str(a.client_cpu), a.squall, url, "-k", "-t", "1", "-q", "-d",
                                "%gs" % a.duration, "-c", str(a.conns), "--streams",
                                str(a.streams), "--http3"], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children",
                                      "--sort", "dso", "-q", "-g", "none"], capture_output=True,
                                     text=True)
                print("\nperf, client CPU by DSO (h3):")
                print("\n".join(rep.stdout.strip().splitlines()[:12]))
                rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children",
                                      "--sort", "sym", "-q", "-g", "none"], capture_output=True,
                                     text=True)
                print("\nperf, top symbols (h3):")
                print("\n".join(rep.stdout.strip().splitlines()[:20]))
    finally:
        if a.body_file:
            os.unlink(a.body_file)
        target.terminate()
        target.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
