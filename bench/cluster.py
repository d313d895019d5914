#!/usr/bin/env python3
"""bench/cluster.py - the cost of a distributed run (docs/benchmarks.md, "Distributed runs").

controller: a nats-server, a squall target and N agents on this machine; the controller runs an
    open-loop quick run on them, --rounds times. The result document's cluster.controller block
    gives the controller's CPU time (user + sys, from the discovery to the merge) and the bytes
    and messages through its NATS connection; printed per agent per second of run, for each N
    of --agents (e.g. 1,8), as medians with min-max spreads.

overhead: the agent path against a local run with the same share, A/B interleaved: arm A is
    `squall URL -c C -d D -t T` here, arm B the same flags with --agents 1 (one agent, the whole
    share). req/s from the documents; CPU per 1,000 requests of the process that ran the load
    (A: the client, from wait4; B: the agent, from /proc/PID/stat around the run).

usage: bench/cluster.py --squall build/squall controller [--agents 1,8] [--rate 800]
                        [--duration 10] [--rounds 3]
       bench/cluster.py --squall build/squall overhead [-c 16] [--duration 5] [--rounds 5]
       bench/cluster.py --squall build/squall persecond [--rate 1000] [--duration 10]
       bench/cluster.py --squall build/squall scale --agents 4 --threads 4 [-c 256]
                        [--target-threads 8]

scale: N agents x T threads on this host against one local run with N x T threads (the
    issue's 4 x 4 against -t 16 on a 16-core machine), req/s and CPU per request.

callgrind: instructions per request of the process running the load, local and on one agent
    (the stable measure on a noisy machine): bench/cluster.py callgrind [--callgrind 20000,60000].

persecond: the agent path's own cost per second, which does not grow with the load: the CPU of
    an open-loop run at a modest rate here (A) and on one agent (B), alternating.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import proc_cpu_s as proc_cpu  # noqa: E402

HOST = "127.0.0.1"


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_port(port):
    for _ in range(500):
        try:
            with socket.create_connection((HOST, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError("nothing on port %d" % port)


def stop(p):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class Env:
    def __init__(self, squall, target_threads=1):
        self.squall = squall
        self.nats_port = free_port()
        self.nats = subprocess.Popen(["nats-server", "-a", HOST, "-p", str(self.nats_port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.nats_port)
        self.url = "nats://%s:%d" % (HOST, self.nats_port)
        self.port = free_port()
        self.target = subprocess.Popen([squall, "target", "--port", str(self.port), "-t",
                                        str(target_threads)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)
        self.agents = []

    def start_agents(self, n, prefix):
        ag = [subprocess.Popen([self.squall, "agent", "--nats", self.url, "--name", "b%02d" % i,
                                "--subject-prefix", prefix, "-q"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
              for i in range(n)]
        self.agents += ag
        time.sleep(0.3)
        return ag

    def close(self):
        for a in self.agents:
            stop(a)
        stop(self.target)
        stop(self.nats)


def run_doc(args):
    t0 = time.monotonic()
    p = subprocess.Popen(args + ["--json", "-", "-q"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out, err = p.communicate()
    if p.returncode not in (0,):
        raise RuntimeError("%s: exit %d: %s" % (" ".join(args), p.returncode, err))
    return json.loads(out), time.monotonic() - t0


def spread(v):
    return "%s (%s-%s)" % (fmt(statistics.median(v)), fmt(min(v)), fmt(max(v)))


def fmt(x):
    return "%.3g" % x if abs(x) < 100 else "%.0f" % x


def controller(a):
    env = Env(a.squall)
    try:
        print("| agents | rate | run | controller CPU per agent per s | of a core | bytes in per agent per s | messages in per agent per s | bytes out per agent per s |")
        print("|---|---|---|---|---|---|---|---|")
        for n in [int(x) for x in a.agents.split(",")]:
            prefix = "bench%d" % n
            env.start_agents(n, prefix)
            cpu, share, bin_, min_, bout = [], [], [], [], []
            for _ in range(a.rounds):
                doc, _ = run_doc([a.squall, "http://%s:%d/fast" % (HOST, env.port),
                                  "-r", str(a.rate), "-d", "%ds" % a.duration, "-c", str(4 * n),
                                  "-t", "1", "--agents", str(n), "--nats", env.url,
                                  "--subject-prefix", prefix])
                c = doc["cluster"]["controller"]
                per = c["run_s"] * n
                cpu.append(c["cpu_s"] / per * 1e3)  # ms of CPU per agent-second
                share.append(c["cpu_s"] / per * 100)  # % of a core per agent
                bin_.append(c["bytes_in"] / per)
                min_.append(c["msgs_in"] / per)
                bout.append(c["bytes_out"] / per)
            print("| %d | %d/s | %ds | %s ms | %s %% | %s | %s | %s |" % (
                n, a.rate, a.duration, spread(cpu), spread(share), spread(bin_), spread(min_),
                spread(bout)))
    finally:
        env.close()


def overhead(a):
    env = Env(a.squall)
    try:
        agent = env.start_agents(1, "ab")[0]
        base = [a.squall, "http://%s:%d/fast" % (HOST, env.port), "-c", str(a.c),
                "-d", "%ds" % a.duration, "-t", str(a.threads)]
        res = {"A": ([], []), "B": ([], [])}
        for r in range(a.rounds):
            for arm in ("AB" if r % 2 == 0 else "BA"):
                if arm == "A":
                    p = subprocess.Popen(base + ["--json", "-", "-q"], stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True)
                    out = p.stdout.read()
                    _, _, ru = os.wait4(p.pid, 0)
                    cpu = ru.ru_utime + ru.ru_stime
                    doc = json.loads(out)
                else:
                    c0 = proc_cpu(agent.pid)
                    doc, _ = run_doc(base + ["--agents", "1", "--nats", env.url,
                                             "--subject-prefix", "ab"])
                    time.sleep(0.2)  # the agent finishes sending its result
                    cpu = proc_cpu(agent.pid) - c0
                n = doc["requests"]["completed"]
                res[arm][0].append(n / doc["duration_s"])
                res[arm][1].append(cpu / n * 1000 * 1000)  # ms per 1,000 requests
                if a.v:
                    print("round %d %s: %.0f req/s, %.3f ms CPU per 1k" % (
                        r, arm, res[arm][0][-1], res[arm][1][-1]), file=sys.stderr)
        ra, rb = statistics.median(res["A"][0]), statistics.median(res["B"][0])
        print("| arm | req/s | CPU ms per 1,000 requests |")
        print("|---|---|---|")
        print("| A local | %s | %s |" % (spread(res["A"][0]), spread(res["A"][1])))
        print("| B --agents 1 | %s | %s |" % (spread(res["B"][0]), spread(res["B"][1])))
        print("B against A: %+.1f%% req/s" % ((rb - ra) / ra * 100))
    finally:
        env.close()


def scale(a):
    """N agents x T threads on this host (B) against one local run with N x T threads (A), the
    same connections in all, A/B alternating: req/s and the CPU per 1,000 requests of the
    processes that ran the load (A: the client; B: the agents, from /proc around the run)."""
    n = int(a.agents.split(",")[-1])
    env = Env(a.squall, a.target_threads)
    try:
        agents = env.start_agents(n, "scale")
        base = [a.squall, "http://%s:%d/fast" % (HOST, env.port), "-c", str(a.c),
                "-d", "%ds" % a.duration]
        res = {"A": ([], []), "B": ([], [])}
        for r in range(a.rounds):
            for arm in ("AB" if r % 2 == 0 else "BA"):
                if arm == "A":
                    p = subprocess.Popen(base + ["-t", str(n * a.threads), "--json", "-", "-q"],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         text=True)
                    out = p.stdout.read()
                    _, _, ru = os.wait4(p.pid, 0)
                    cpu = ru.ru_utime + ru.ru_stime
                    doc = json.loads(out)
                else:
                    c0 = sum(proc_cpu(g.pid) for g in agents)
                    doc, _ = run_doc(base + ["-t", str(a.threads), "--agents", str(n), "--nats",
                                             env.url, "--subject-prefix", "scale"])
                    time.sleep(0.2)
                    cpu = sum(proc_cpu(g.pid) for g in agents) - c0
                done = doc["requests"]["completed"]
                res[arm][0].append(done / doc["duration_s"])
                res[arm][1].append(cpu / done * 1000 * 1000)
                if a.v:
                    print("round %d %s: %.0f req/s, %.3f ms CPU per 1k" % (
                        r, arm, res[arm][0][-1], res[arm][1][-1]), file=sys.stderr)
        ra, rb = statistics.median(res["A"][0]), statistics.median(res["B"][0])
        print("| arm | req/s | CPU ms per 1,000 requests |")
        print("|---|---|---|")
        print("| A local -t %d | %s | %s |" % (n * a.threads, spread(res["A"][0]),
                                             spread(res["A"][1])))
        print("| B %d agents x -t %d | %s | %s |" % (n, a.threads, spread(res["B"][0]),
                                                    spread(res["B"][1])))
        print("B against A: %+.1f%% req/s" % ((rb - ra) / ra * 100))
    finally:
        env.close()


def persecond(a):
    """What the agent path adds per second of run, whatever the load: the CPU of an open-loop run
    at a modest rate, local (A) against one agent (B), alternating; (B - A) / duration."""
    env = Env(a.squall)
    try:
        agent = env.start_agents(1, "ps")[0]
        base = [a.squall, "http://%s:%d/fast" % (HOST, env.port), "-r", str(a.rate),
                "-c", "8", "-d", "%ds" % a.duration, "-t", "1"]
        res = {"A": [], "B": []}
        for r in range(a.rounds):
            for arm in ("AB" if r % 2 == 0 else "BA"):
                if arm == "A":
                    p = subprocess.Popen(base + ["--json", "-", "-q"], stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True)
                    p.stdout.read()
                    _, _, ru = os.wait4(p.pid, 0)
                    cpu = ru.ru_utime + ru.ru_stime
                else:
                    c0 = proc_cpu(agent.pid)
                    run_doc(base + ["--agents", "1", "--nats", env.url, "--subject-prefix", "ps"])
                    time.sleep(0.2)
                    cpu = proc_cpu(agent.pid) - c0
                res[arm].append(cpu / a.duration * 1000)  # ms of CPU per second of run
                if a.v:
                    print("round %d %s: %.1f ms CPU per s" % (r, arm, res[arm][-1]),
                          file=sys.stderr)
        print("| arm | CPU ms per second of run at %d req/s |" % a.rate)
        print("|---|---|")
        print("| A local | %s |" % spread(res["A"]))
        print("| B agent | %s |" % spread(res["B"]))
        print("B - A: %+.2f ms per second" % (statistics.median(res["B"]) -
                                               statistics.median(res["A"])))
    finally:
        env.close()


def callgrind(a):
    """Instructions per request of the process that runs the load, local (A) and on one agent
    (B, `squall agent --once` under callgrind), by the difference of two runs bounded by request
    count (-n N1 and -n N2), so the start and the end cancel out and what is left is per request,
    the agent's per-second work included (under valgrind a request takes longer, so that part is
    overstated, not hidden)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import ab  # the epoll_pwait2 shim valgrind 3.19 needs
    import tempfile
    env = Env(a.squall)
    n1, n2 = [int(x) for x in a.callgrind.split(",")]
    try:
        with tempfile.TemporaryDirectory() as d:
            shim = ab.build_shim(d)
            venv = dict(os.environ, LD_PRELOAD=shim)
            base = [a.squall, "http://%s:%d/fast" % (HOST, env.port), "-c", "4", "-t", "1"]

            def ir_file(path):
                with open(path) as f:
                    for line in f:
                        if line.startswith("totals:") or line.startswith("summary:"):
                            return int(line.split()[1])
                raise RuntimeError("no totals in " + path)

            def ir(path):
                """(every thread, the busiest thread: the worker) from --separate-threads."""
                files = [os.path.join(d, f) for f in os.listdir(d)
                         if f.startswith(os.path.basename(path) + "-")]
                per = [ir_file(f) for f in files]
                return sum(per), max(per)

            res = {"A": [], "B": [], "Aw": [], "Bw": []}
            for r in range(a.rounds):
                for arm in "AB":
                    got = []
                    for n in (n1, n2):
                        out = os.path.join(d, "cg.%s.%d.%d" % (arm, r, n))
                        cg = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
                              "--callgrind-out-file=" + out]
                        if arm == "A":
                            subprocess.run(cg + base + ["-n", str(n), "-q"], env=venv,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                           check=True)
                        else:
                            ag = subprocess.Popen(cg + [a.squall, "agent", "--nats", env.url,
                                                        "--subject-prefix", "cg", "--once", "-q"],
                                                  env=venv, stdout=subprocess.DEVNULL,
                                                  stderr=subprocess.DEVNULL)
                            time.sleep(3)  # valgrind starts slowly
                            run_doc(base + ["-n", str(n), "--agents", "1", "--nats", env.url,
                                            "--subject-prefix", "cg", "--agent-wait", "60s"])
                            ag.wait(timeout=120)
                        got.append(ir(out))
                    res[arm].append((got[1][0] - got[0][0]) / (n2 - n1))
                    res[arm + "w"].append((got[1][1] - got[0][1]) / (n2 - n1))
                    if a.v:
                        print("round %d %s: %.0f instructions per request, %.0f on the worker" %
                              (r, arm, res[arm][-1], res[arm + "w"][-1]), file=sys.stderr)
        print("| arm | instructions per request, every thread | on the worker thread |")
        print("|---|---|---|")
        print("| A local | %s | %s |" % (spread(res["A"]), spread(res["Aw"])))
        print("| B one agent | %s | %s |" % (spread(res["B"]), spread(res["Bw"])))
        for k in ("", "w"):
            ma, mb = statistics.median(res["A" + k]), statistics.median(res["B" + k])
            print("B against A%s: %+.2f%%" % (" (worker)" if k else "", (mb - ma) / ma * 100))
    finally:
        env.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--squall", default="build/squall")
    ap.add_argument("mode", choices=["controller", "overhead", "persecond", "callgrind", "scale"])
    ap.add_argument("--callgrind", default="20000,60000", help="callgrind: N1,N2")
    ap.add_argument("--agents", default="1,8")
    ap.add_argument("--rate", type=int, default=800)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-c", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--target-threads", type=int, default=1, help="the target's -t")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    a.squall = os.path.abspath(a.squall)
    {"controller": controller, "overhead": overhead, "persecond": persecond,
     "callgrind": callgrind, "scale": scale}[a.mode](a)


if __name__ == "__main__":
    main()
