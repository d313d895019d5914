#!/usr/bin/env python3
"""bench/h3.py - squall's HTTP/3 client against its HTTP/2 and HTTP/1.1 clients over TLS, on the
same endpoint of one `squall target --tls --http3` (issue 30's figures). Figures, not pass/fail.

  python3 bench/h3.py                                   4 connections x 16 streams, 3 s, 3 rounds
  python3 bench/h3.py --conns 8 --streams 8 --duration 5 --rounds 5 --path /bytes/1024
  python3 bench/h3.py --server-cpu 0 --client-cpu 1     (the default: target and client apart)
  python3 bench/h3.py --perf                            (one more h3 run under `perf record`,
                                                          its top symbols by DSO printed)

Each round runs the three arms one after the other (the order rotates each round), each a
closed loop for --duration: h1 over TLS with conns x streams connections (one request in flight
on each), h2 with conns connections x streams streams, h3 the same over QUIC. The client's CPU
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


def run_arm(a, arm, port):
    url = "https://127.0.0.1:%d%s" % (port, a.path)
    cmd = [a.squall, url, "-k", "-t", "1", "-d", "%gs" % a.duration, "-q"]
    if arm == "h1":
        cmd += ["-c", str(a.conns * a.streams)]
    else:
        cmd += ["-c", str(a.conns), "--streams", str(a.streams),
                "--http3" if arm == "h3" else "--http2"]
    pin = ["taskset", "-c", str(a.client_cpu)] if a.client_cpu is not None else []
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        before = served(port)
        p = subprocess.run([*pin, *cmd, "--json", f.name], capture_output=True, text=True,
                           timeout=a.duration * 10 + 60)
        after = served(port)
        if p.returncode != 0:
            raise RuntimeError("%s: exit %d: %s" % (arm, p.returncode, p.stderr[-400:]))
        doc = json.load(open(f.name))
    done = doc["requests"]["completed"]
    secs = doc["duration_s"]
    lat = doc["latency"]
    return {
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
    a = ap.parse_args()
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
        arms = ["h1", "h2", "h3"]
        res = {k: [] for k in arms}
        for r in range(a.rounds):
            order = arms[r % 3:] + arms[:r % 3]
            for arm in order:
                x = run_arm(a, arm, port)
                res[arm].append(x)
                print("round %d %s: %.0f req/s, %.1f ms CPU per 1k, p50 %s p99 %s ms, "
                      "sent %d, server saw %d" % (r + 1, arm, x["rps"], x["cpu_per_1k_ms"],
                                                      x["p50_ms"], x["p99_ms"], x["sent"],
                                                      x["server_saw"]), flush=True)
        print()
        print("| client (%d conns x %d streams, %s, %g s, %d rounds) | req/s median (min..max) "
              "| client CPU ms per 1k requests | p50 ms | p99 ms |" % (
                  a.conns, a.streams, a.path, a.duration, a.rounds))
        print("|---|---:|---:|---:|---:|")

        def fmt(v, f="%.0f"):
            return "%s (%s..%s)" % (f % statistics.median(v), f % min(v), f % max(v))
        for arm in arms:
            xs = res[arm]
            print("| %s | %s | %s | %s | %s |" % (
                {"h1": "HTTP/1.1 over TLS", "h2": "HTTP/2 over TLS", "h3": "HTTP/3 (QUIC)"}[arm],
                fmt([x["rps"] for x in xs]), fmt([x["cpu_per_1k_ms"] for x in xs], "%.1f"),
                fmt([x["p50_ms"] for x in xs], "%.2f"), fmt([x["p99_ms"] for x in xs], "%.2f")))
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
        target.terminate()
        target.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
