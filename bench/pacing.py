#!/usr/bin/env python3
"""bench/pacing.py - how precisely squall paces an open loop, seen from the server.

For each rate: squall target (CPU 0) records every request's arrival; squall -r RATE (CPU 1)
runs for the duration; the table gives the server-side inter-arrival gap p50/p90/p99, the
client's CPU use (user+sys from GNU time, as a share of one core over the run) and the
arrivals the client reports (sent + dropped).

usage: bench/pacing.py [--rates 200,400,1500,10000] [--duration 5] [--rounds 3]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="200,400,1500,10000")
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--squall", default=os.path.join(ROOT, "build", "squall"))
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--client-cpus", default="1")
    a = ap.parse_args()
    srv = subprocess.Popen(["taskset", "-c", a.server_cpus, a.squall, "target", "--port", "0",
                            "-t", "1"], stdout=subprocess.PIPE, text=True)
    port = int(re.search(r":(\d+)\s*$", srv.stdout.readline()).group(1))
    base = f"http://127.0.0.1:{port}"
    out = tempfile.mktemp(suffix=".json")
    rows = {}
    try:
        for rnd in range(a.rounds):
            for rate in [int(r) for r in a.rates.split(",")]:
                urllib.request.urlopen(urllib.request.Request(base + "/stats/reset",
                                                              method="POST")).read()
                p = subprocess.run(["/usr/bin/time", "-f", "SQTIME %U %S %e", "taskset", "-c",
                                    a.client_cpus, a.squall, base + "/fast", "-r", str(rate),
                                    "-d", f"{a.duration}s", "-c", str(a.connections), "-t",
                                    "1", "-q", "--json", out], capture_output=True, text=True)
                m = re.search(r"SQTIME ([\d.]+) ([\d.]+) ([\d.]+)", p.stderr)
                doc = json.load(open(out))
                st = json.load(urllib.request.urlopen(base + "/stats"))
                gap = st["arrivals"]["gap_us"]
                cpu = (float(m.group(1)) + float(m.group(2))) / doc["duration_s"]
                r = doc["requests"]
                rows.setdefault(rate, []).append(dict(
                    p50=gap["p50"], p90=gap["p90"], p99=gap["p99"], cpu=cpu * 100,
                    arrivals=r["sent"] + r["dropped"], dropped=r["dropped"],
                    lat_p99=doc["latency"]["p99_us"], spin=doc.get("spin_us")))
    finally:
        srv.terminate()
        srv.wait()
        if os.path.exists(out):
            os.unlink(out)

    def med(rate, k, f="{:.1f}"):
        v = [x[k] for x in rows[rate]]
        return f"{f.format(statistics.median(v))} ({f.format(min(v))}–{f.format(max(v))})"

    print(f"squall -r RATE -d {a.duration}s -c {a.connections} -t 1 against squall target; "
          f"server CPU {a.server_cpus}, client CPU {a.client_cpus}; median (min–max) of "
          f"{a.rounds} rounds\n")
    print("| rate/s | ideal gap µs | gap p50 µs | gap p90 µs | gap p99 µs | client CPU % of a "
          "core | arrivals (sent+dropped) | dropped | latency p99 µs | spin tail µs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for rate in rows:
        print(f"| {rate} | {1e6 / rate:.0f} | {med(rate, 'p50')} | {med(rate, 'p90')} | "
              f"{med(rate, 'p99')} | {med(rate, 'cpu')} | {med(rate, 'arrivals', '{:.0f}')} | "
              f"{med(rate, 'dropped', '{:.0f}')} | {med(rate, 'lat_p99', '{:.0f}')} | "
              f"{med(rate, 'spin')} |")


if __name__ == "__main__":
    sys.exit(main())
