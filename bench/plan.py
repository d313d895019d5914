#!/usr/bin/env python3
"""bench/plan.py - what a plan costs next to the quick face, against the same squall target.

Arms, alternated round by round (the machine is noisy: medians and spreads, never one run):
  quick-fast   squall URL/fast            (the quick face, static GET)
  quick-login  squall -m POST URL/login   (the quick face on the login endpoint)
  plan-login   squall run login.yaml      (POST /login with a templated JSON body from a feeder,
                                           JSON extraction of the token, GET /items with a
                                           templated Authorization header, a status check each)
Same connections (VUs), threads and duration for every arm. The server is pinned to one CPU set,
the client to another (taskset). Prints req/s and client CPU per 1,000 requests per arm.

usage: bench/plan.py --squall build/squall [--rounds 3] [--duration 5] [--vus 64]
                     [--server-cpus 0] [--client-cpus 1]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

PLAN = """target: http://127.0.0.1:{port}
data:
  users: {{ csv: {csv}, mode: per-vu }}
scenarios:
  login:
    executor: constant-vus
    vus: {vus}
    duration: {dur}s
    flow:
      - name: login
        request: {{ method: POST, url: /login, json: {{ user: "{{{{users.name}}}}", password: "{{{{users.password}}}}" }} }}
        extract: {{ token: {{ json: "$.token" }} }}
        check: {{ status: 200 }}
      - name: items
        request:
          url: /items
          headers: {{ Authorization: "Bearer {{{{token}}}}" }}
        check: {{ status: 200 }}
"""


def run(cmd):
    """Runs cmd; returns (document, client CPU seconds)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.stdout.close()
    if os.waitstatus_to_exitcode(status) not in (0, 99):
        raise RuntimeError(f"{cmd}: exit {status}")
    return json.loads(out), ru.ru_utime + ru.ru_stime, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--squall", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--vus", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--client-cpus", default="1")
    a = ap.parse_args()
    sq = os.path.abspath(a.squall)
    tgt = subprocess.Popen(["taskset", "-c", a.server_cpus, sq, "target", "--port", "0", "-t", "1"],
                           stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    line = tgt.stdout.readline().decode()
    port = int(re.search(r":(\d+)$", line.strip()).group(1))
    tmp = tempfile.mkdtemp()
    csv = os.path.join(tmp, "users.csv")
    with open(csv, "w") as f:
        f.write("name,password\n" + "".join(f"user{i},pw{i}\n" for i in range(a.vus)))
    plan = os.path.join(tmp, "login.yaml")
    with open(plan, "w") as f:
        f.write(PLAN.format(port=port, csv=csv, vus=a.vus, dur=a.duration))
    base = f"http://127.0.0.1:{port}"
    common = ["-c", str(a.vus), "-t", str(a.threads), "-d", f"{a.duration}s", "--json", "-", "-q"]
    client = ["taskset", "-c", a.client_cpus, sq]
    arms = {
        "quick-fast": client + [base + "/fast"] + common,
        "quick-login": client + ["-m", "POST", base + "/login"] + common,
        "plan-login": client + ["run", plan, "-t", str(a.threads), "--json", "-", "-q"],
    }
    res = {k: [] for k in arms}
    try:
        for r in range(a.rounds):
            order = list(arms)[r % len(arms):] + list(arms)[:r % len(arms)]
            for name in order:
                doc, cpu, _ = run(arms[name])
                done = doc["requests"]["completed"]
                rps = done / doc["duration_s"]
                res[name].append((rps, cpu * 1e6 / done))
                if name == "plan-login":
                    bad = sum(c["failed"] for c in doc["checks"])
                    if bad:
                        print(f"warning: {bad} failed checks in the plan arm", file=sys.stderr)
    finally:
        tgt.terminate()
        tgt.wait()
    print(f"| arm | req/s median (min-max) | client CPU ms/1k median (min-max) |")
    print("|---|---|---|")
    med = {}
    for name, v in res.items():
        r = [x[0] for x in v]
        c = [x[1] for x in v]
        med[name] = statistics.median(r)
        print(f"| {name} | {statistics.median(r):,.0f} ({min(r):,.0f}-{max(r):,.0f}) | "
              f"{statistics.median(c):.2f} ({min(c):.2f}-{max(c):.2f}) |")
    print(f"\nplan-login / quick-fast req/s: {med['plan-login'] / med['quick-fast']:.2f}")
    print(f"plan-login / quick-login req/s: {med['plan-login'] / med['quick-login']:.2f}")


if __name__ == "__main__":
    main()
