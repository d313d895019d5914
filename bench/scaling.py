#!/usr/bin/env python3
"""bench/scaling.py - how a client scales with connections and threads, and what an idle
connection costs it.

Scaling: GET /fast on one server (squall target by default, or nginx), for each client thread
count (--threads, default 1,2) and connection count (--conns, default 64, 1,000, 10,000): req/s
(median, min-max over rounds), client CPU ms per 1,000 requests, client CPU %, peak RSS, errors
and the requests the server counted. Tools: squall and wrk (the two with a thread flag), in
rotated order each round. Measured as bench/harness.py does (GNU time around the tool).

Idle connections: squall with -c N against squall target's /delay/MS (30 s by default), so every
connection holds one request in flight and nothing moves. Once the target has read all N
requests, the client's VmRSS and VmHWM are read from /proc/PID/status; the same with
--idle-base connections (100); memory per idle connection = (RSS_N - RSS_base) / (N - base).

Only loopback addresses; every run is bounded by its duration and killed past a grace period.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in bench/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

ROOT = harness.ROOT


def proc_status(pid):
    with open(f"/proc/{pid}/status") as f:
        text = f.read()
    return {k: harness.grab(rf"^{k}:\s+(\d+) kB", text, int) for k in ("VmRSS", "VmHWM")}


def idle_run(srv, a, conns, emit_err):
    """One squall run holding conns connections idle-in-flight; returns the /proc figures read
    once the target has read every request."""
    url = f"http://127.0.0.1:{srv.port}/delay/{a.idle_delay_ms}"
    argv = ["taskset", "-c", a.client_cpus, a.squall, url, "-c", str(conns), "-t", "1",
            "-d", f"{a.idle_duration}s", "--timeout", f"{a.idle_delay_ms // 1000 + 30}s", "-q"]
    srv.reset()
    # taskset execs into squall: the child's pid is squall's.
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         preexec_fn=harness.raise_nofile, start_new_session=True)
    t0 = time.monotonic()
    sample, seen = None, 0
    try:
        while time.monotonic() - t0 < a.idle_duration * 0.8:
            time.sleep(0.2)
            if p.poll() is not None:
                break
            seen = srv.stats()["served"]
            if seen >= conns:
                time.sleep(0.5)  # let the last reads settle
                sample = proc_status(p.pid)
                sample["in_flight_at_sample"] = srv.stats()["served"]
                sample["after_s"] = round(time.monotonic() - t0, 2)
                break
        try:
            _, err = p.communicate(timeout=a.idle_duration + 60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            _, err = p.communicate()
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    if sample is None:
        emit_err(f"idle c={conns}: the target read only {seen} of {conns} requests within "
                 f"{a.idle_duration * 0.8:.0f} s; no sample (squall said: {err.strip()[-300:]})")
    return sample


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--tools", default="squall,wrk")
    ap.add_argument("--server", default="target", choices=["target", "nginx"])
    ap.add_argument("--conns", default="64,1000,10000")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pause", type=float, default=1.0)
    ap.add_argument("--idle-conns", type=int, default=10000)
    ap.add_argument("--idle-base", type=int, default=100)
    ap.add_argument("--idle-delay-ms", type=int, default=30000)
    ap.add_argument("--idle-duration", type=int, default=10)
    ap.add_argument("--parts", default="scaling,idle", help="scaling, idle or both")
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--client-cpus", default="1")
    ap.add_argument("--squall", default=os.path.join(ROOT, "build", "squall"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--no-install", action="store_true")
    a = ap.parse_args()
    a.probe = ""  # harness.find_tools reads it; the probe has no thread flag
    parts = a.parts.split(",")
    for t in a.tools.split(","):
        if t not in ("squall", "wrk"):
            sys.exit(f"scaling: --tools takes squall and wrk (the tools with a thread flag): {t}")
    if not os.access(a.squall, os.X_OK):
        sys.exit(f"scaling: {a.squall} not built (make build, or --squall PATH)")
    if a.idle_conns <= a.idle_base:
        sys.exit("scaling: --idle-conns must be larger than --idle-base")

    os.makedirs(a.out, exist_ok=True)
    tables = open(os.path.join(a.out, "scaling.md"), "w")

    def emit(line):
        print(line, flush=True)
        tables.write(line + "\n")

    emit(f"# machine: {harness.machine_line(a)}")
    emit(f"# {a.duration} s per run, {a.rounds} round(s), tools rotated each round\n")
    doc = {"machine": harness.machine_line(a), "server": a.server, "duration_s": a.duration,
           "rounds": a.rounds, "client_cpus": a.client_cpus, "server_cpus": a.server_cpus}
    workdir = tempfile.mkdtemp(prefix="squall-scaling-")
    try:
        if "scaling" in parts:
            tools = harness.find_tools(a.tools.split(","), a)
            if a.server == "nginx" and not shutil.which("nginx"):
                sys.exit("scaling: nginx not installed (scripts/deps.sh bench)")
            srv = harness.start_server(a.server, a.server_cpus, workdir, a.squall)
            names = list(tools)
            rows = []
            try:
                for threads in map(int, a.threads.split(",")):
                    for conns in map(int, a.conns.split(",")):
                        runs = {t: [] for t in names}
                        url = f"http://127.0.0.1:{srv.port}/fast"
                        for rnd in range(a.rounds):
                            k = rnd % len(names)
                            for t in names[k:] + names[:k]:
                                argv = harness.tool_argv(t, tools[t]["exe"], url, conns,
                                                         a.duration, workdir, threads)
                                srv.reset()
                                run = harness.measure(argv, a.client_cpus, a.duration * 2 + 60)
                                st = srv.stats()
                                try:
                                    r = harness.parse(t, run, workdir)
                                except Exception as e:
                                    print(f"{t} t={threads} c={conns} failed (rc {run['rc']}): "
                                          f"{e!r}\n{(run['out'] + run['err'])[-400:]}")
                                    continue
                                r.update(round=rnd, cpu_s=run["cpu_s"], rss_kb=run["rss_kb"],
                                         wall_s=run["wall_s"], served=st["served"],
                                         cpu_pct=100 * run["cpu_s"] / max(run["wall_s"], 1e-9),
                                         cpu_ms_per_1k=run["cpu_s"] * 1e6 /
                                         max(1, r["requests"] or 0), argv=argv)
                                runs[t].append(r)
                                time.sleep(a.pause)
                        rows.append({"threads": threads, "connections": conns, "runs": runs})
            finally:
                srv.stop()
            fr = harness.fmt_range
            emit(f"## scaling: {a.server}, /fast, {a.duration} s, "
                 f"client on CPU {a.client_cpus}\n")
            emit("| tool | threads | connections | req/s median (min–max) | client CPU ms / 1k req "
                 "| client CPU % | peak RSS MB | errors | server counted |")
            emit("|---|---|---|---|---|---|---|---|---|")
            for t in names:
                for row in rows:
                    rs = row["runs"][t]
                    if not rs:
                        emit(f"| {t} | {row['threads']} | {row['connections']} | failed | | | | "
                             "| |")
                        continue
                    emit(f"| {t} | {row['threads']} | {row['connections']} "
                         f"| {fr([r['rps'] for r in rs])} "
                         f"| {fr([r['cpu_ms_per_1k'] for r in rs], '{:.2f}')} "
                         f"| {fr([r['cpu_pct'] for r in rs])} "
                         f"| {fr([r['rss_kb'] / 1024 for r in rs], '{:.1f}')} "
                         f"| {sum(r['errors'] or 0 for r in rs)} "
                         f"| {fr([r['served'] for r in rs])} |")
            emit("")
            doc["scaling"] = rows
            doc["tools"] = tools

        if "idle" in parts:
            srv = harness.Target(a.server_cpus, a.squall)
            samples = {}
            try:
                for n in (a.idle_base, a.idle_conns):
                    samples[n] = idle_run(srv, a, n, emit)
                    time.sleep(a.pause)
            finally:
                srv.stop()
            emit(f"## memory per idle connection: squall against squall target "
                 f"/delay/{a.idle_delay_ms}, one thread, VmRSS read mid-run\n")
            emit("| connections | requests in flight at the sample | sampled after s "
                 "| VmRSS KiB | VmHWM KiB |")
            emit("|---|---|---|---|---|")
            for n, s in samples.items():
                if s:
                    emit(f"| {n} | {s['in_flight_at_sample']} | {s['after_s']} | {s['VmRSS']} "
                         f"| {s['VmHWM']} |")
                else:
                    emit(f"| {n} | no sample | | | |")
            base, big = samples.get(a.idle_base), samples.get(a.idle_conns)
            if base and big:
                per = (big["VmRSS"] - base["VmRSS"]) * 1024 / (a.idle_conns - a.idle_base)
                emit(f"\nMemory per idle connection: ({big['VmRSS']} − {base['VmRSS']}) KiB / "
                     f"({a.idle_conns} − {a.idle_base}) = {per:.0f} bytes")
                doc["idle_bytes_per_connection"] = per
            emit("")
            doc["idle"] = {"delay_ms": a.idle_delay_ms, "samples": samples}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        tables.close()
    with open(os.path.join(a.out, "scaling.json"), "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
