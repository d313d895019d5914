#!/usr/bin/env python3
"""bench/openloop.py - the open loop at scale (issue 20 part 3): one long arrival-rate run against
`squall target`, then its accounting and its per-second series from the result document.

  python3 bench/openloop.py [--squall build/squall] [--rate 200000] [--duration 60]
                            [--connections 256] [--threads 2] [--target-threads 1]
                            [--precision normal]

Prints a markdown table: arrivals due against sent + dropped (exact equality is the claim),
each second's sent + dropped against the rate (within ±1% where the server keeps up), the client's
RSS at each second's end (flat after the first seconds is the claim) and its CPU. The server is
squall target on the same machine: where it cannot serve the rate, the run checks the
accounting and the memory under a schedule beyond the server, not the served rate.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--squall", default="build/squall")
    ap.add_argument("--rate", type=int, default=200000)
    ap.add_argument("--duration", type=int, default=60)
    ap.add_argument("--connections", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--target-threads", type=int, default=1)
    ap.add_argument("--path", default="/fast")
    ap.add_argument("--precision", default="normal", help="--pacing-precision")
    a = ap.parse_args()

    srv = subprocess.Popen([a.squall, "target", "--port", "0", "-t", str(a.target_threads)],
                           stdout=subprocess.PIPE, text=True)
    out = tempfile.mktemp(suffix=".json")
    try:
        port = int(re.search(r":(\d+)\s*$", srv.stdout.readline()).group(1))
        url = f"http://127.0.0.1:{port}{a.path}"
        cmd = [a.squall, url, "-r", str(a.rate), "-d", f"{a.duration}s", "-c",
               str(a.connections), "-t", str(a.threads), "--pacing-precision", a.precision, "-q",
               "--json", out]
        load = os.getloadavg()[0]
        p = subprocess.run(["/usr/bin/time", "-f", "SQTIME %U %S %e %M"] + cmd,
                           capture_output=True, text=True, timeout=a.duration + 120)
        m = re.search(r"SQTIME ([\d.]+) ([\d.]+) ([\d.]+) (\d+)", p.stderr)
        doc = json.load(open(out))
    finally:
        srv.terminate()
        srv.wait()
        if os.path.exists(out):
            os.unlink(out)

    r = doc["requests"]
    due = a.rate * a.duration
    series = doc["series"]
    per_s = [s["requests"] + s["dropped"] for s in series]
    served = [s["completed"] for s in series]
    rss = [s["client"]["rss_bytes"] / 2**20 for s in series]
    full = per_s[:-1] if len(per_s) > a.duration else per_s  # a last partial slot, if any
    dev = [abs(x - a.rate) / a.rate * 100 for x in full]
    print(f"`{' '.join(cmd[:1] + ['URL'] + cmd[2:-2])}` against `squall target -t "
          f"{a.target_threads}`, load average {load:.2f} at the start\n")
    print("| figure | value |")
    print("|---|---|")
    print(f"| arrivals due ({a.rate:,} × {a.duration}) | {due:,} |")
    eq = "exactly" if r["sent"] + r["dropped"] == due else "**differs**"
    print(f"| sent + dropped | {r['sent']:,} + {r['dropped']:,} = {r['sent'] + r['dropped']:,} "
          f"({eq}; `arrivals` {r['arrivals']:,}) |")
    print(f"| completed / failed / in flight at the end | {r['completed']:,} / {r['failed']:,} / "
          f"{r['in_flight']:,} |")
    print(f"| seconds in the series | {len(series)} |")
    print(f"| per second, sent + dropped | {min(full):,} – {max(full):,}, deviation from the rate "
          f"median {statistics.median(dev):.2f}% max {max(dev):.2f}%; sum of every slot "
          f"{sum(per_s):,} |")
    print(f"| per second, completed (the server's pace) | {min(served):,} – {max(served):,}, "
          f"median {statistics.median(served):,.0f} |")
    half = len(rss) // 2
    later = (f"seconds 6–{len(rss)}: {min(rss[5:]):.1f} – {max(rss[5:]):.1f}; second half: "
             f"{min(rss[half:]):.1f} – {max(rss[half:]):.1f}; " if len(rss) > 5 else "")
    print(f"| client RSS at each second's end (MiB) | first 5 s: "
          f"{', '.join(f'{x:.1f}' for x in rss[:5])}; {later}peak (GNU time) "
          f"{int(m.group(4)) / 1024:.1f} |")
    print(f"| client CPU | {m.group(1)} s user + {m.group(2)} s sys over {m.group(3)} s wall |")
    print(f"| pacing | {json.dumps(doc.get('pacing'))} |")
    return 0 if r["sent"] + r["dropped"] == due else 1


if __name__ == "__main__":
    sys.exit(main())
